//! The first five minutes, through the real binary: `graphmind demo` in a fresh HOME,
//! `open`, the browser opener (a `$BROWSER` script that records what it was given), `init`
//! against golden files, `skill`.

mod common;

use common::{http_get, isolate, temp_dir, Server, BIN};
use graphmind_core::json::{parse_str, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A command with only `HOME` set (no GRAPHMIND_HOME, no GRAPHMIND_DB): the defaults a
/// newcomer gets.
fn fresh(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    isolate(&mut cmd, home);
    cmd.env_remove("GRAPHMIND_HOME")
        .env("HOME", home)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("BROWSER")
        .args(args);
    cmd
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn demo_without_a_terminal_records_into_the_default_database_and_exits() {
    let home = temp_dir();
    let port = free_port().to_string();
    let started = Instant::now();
    let o = fresh(&home, &["demo", "--no-open", "--port", &port])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stderr));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the replay keeps its recorded timing, a few seconds"
    );
    assert!(
        out.contains(
            "held tool:searchFlights at before (the same call a third time: a loop) -> inject"
        ),
        "{out}"
    );
    assert!(
        out.contains("held tool:bookFlight at error (it failed) -> retry"),
        "{out}"
    );
    let link = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("viewer   "))
        .expect("the viewer link")
        .to_owned();
    assert!(
        link.starts_with(&format!("http://127.0.0.1:{port}/#token=gmv_"))
            && link.contains("&/run/run_"),
        "{link}"
    );
    assert!(out.contains("finished: ok"), "{out}");
    let db = home.join(".graphmind").join("graphmind.db");
    assert!(db.is_file(), "recorded into ~/.graphmind/graphmind.db");
    // the run files are gone with the server, and `runs` lists the run afterwards
    assert!(!home
        .join(".graphmind/run")
        .join(format!("serve-{port}.json"))
        .exists());
    let runs = fresh(&home, &["runs"]).output().unwrap();
    let listed = text(&runs.stdout);
    assert!(
        listed.contains("trip-planner") && listed.contains(" ok "),
        "{listed}"
    );
    let run = link.rsplit('/').next().unwrap();
    assert!(listed.contains(run), "{listed}");
    let _ = std::fs::remove_dir_all(home);
}

#[test]
fn demo_live_runs_the_agent_in_process() {
    let home = temp_dir();
    let port = free_port().to_string();
    let o = fresh(&home, &["demo", "--live", "--no-open", "--port", &port])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stderr));
    assert!(
        out.contains("live (its own tools, in this process)") && out.contains("finished: ok"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(home);
}

#[test]
fn demo_uses_the_server_already_running_and_refuses_a_foreign_port() {
    let s = Server::start(&[], &[]);
    let port = s.port.to_string();
    let o = s.cli(&["demo", "--no-open", "--port", &port], &[]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stderr));
    assert!(
        out.contains("(already running; recording into its database)"),
        "{out}"
    );
    let run = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("run      "))
        .unwrap()
        .trim()
        .to_owned();
    s.wait_run(&run, |r| {
        r.get("status").and_then(Value::as_str) == Some("ok")
    });
    // the server is still up afterwards
    assert_eq!(s.get("/health").0, 200);

    // something that is not GraphMind on the port: say so, exit 1
    let foreign = TcpListener::bind("127.0.0.1:0").unwrap();
    let fport = foreign.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        for mut c in foreign.incoming().flatten().take(1) {
            let mut b = [0u8; 1024];
            let _ = c.read(&mut b);
            let _ =
                c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi");
        }
    });
    let o = s.cli(&["demo", "--no-open", "--port", &fport.to_string()], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains(&format!(
            "port {fport} is taken by something that is not GraphMind"
        )),
        "{}",
        text(&o.stderr)
    );
    t.join().unwrap();
}

#[test]
fn viewer_can_start_the_demo_with_its_token_only() {
    let s = Server::start(&[], &[]);
    let post = |auth: &str| {
        common::http_request(s.port, &format!("POST /api/demo/start HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n", s.port))
    };
    assert_eq!(post("").0, 401);
    assert_eq!(
        post(&format!("Authorization: Bearer {}\r\n", s.agent_token)).0,
        403
    );
    let (status, body) = post(&format!("Authorization: Bearer {}\r\n", s.viewer_token));
    assert_eq!(status, 202, "{body}");
    let run = parse_str(&body)
        .unwrap()
        .get("runId")
        .and_then(Value::as_str)
        .unwrap()
        .to_owned();
    // one at a time
    assert_eq!(
        post(&format!("Authorization: Bearer {}\r\n", s.viewer_token)).0,
        409
    );
    // it holds at the loop, then at the error, like the CLI's demo; release both with the
    // viewer token (continue at the loop, retry the failed booking)
    let auth = format!("Authorization: Bearer {}\r\n", s.viewer_token);
    for (reason, action) in [("loop", "continue"), ("error", "retry")] {
        let (st, body) = common::http_request(s.port, &format!("GET /api/pauses?runId={run}&wait=20 HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{auth}Connection: close\r\n\r\n", s.port));
        assert_eq!(st, 200, "{body}");
        let v = parse_str(&body).unwrap();
        let p = v
            .get("pauses")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .cloned()
            .unwrap_or_else(|| panic!("no hold: {body}"));
        assert_eq!(
            p.get("reason").and_then(Value::as_str),
            Some(reason),
            "{body}"
        );
        let pause = p.get("pauseId").and_then(Value::as_str).unwrap();
        let req = format!(r#"{{"action":"{action}"}}"#);
        let (st, body) = common::http_request(s.port, &format!("POST /api/runs/{run}/pauses/{pause}/resume HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{req}", s.port, req.len()));
        assert_eq!(st, 200, "{body}");
    }
    s.wait_run(&run, |r| {
        r.get("status").and_then(Value::as_str) == Some("ok")
    });
}

/// A `$BROWSER` that writes its arguments to `args.txt` beside itself.
fn fake_browser(dir: &Path) -> PathBuf {
    let script = dir.join("browser.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" >> {}\n",
            dir.join("args.txt").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn wait_for(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(t) = std::fs::read_to_string(path) {
            if !t.is_empty() {
                return t;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    String::new()
}

/// Starts `graphmind serve` (human banner) and reads the banner up to "Press Ctrl+C".
fn serve_banner(
    dir: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> (std::process::Child, String) {
    let mut cmd = Command::new(BIN);
    isolate(&mut cmd, dir);
    cmd.args(["serve", "--port", "0", "--db"])
        .arg(dir.join("g.db"))
        .args(extra)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    while !banner.contains("Press Ctrl+C") {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap() == 0 {
            break;
        }
        banner.push_str(&l);
    }
    (child, banner)
}

#[test]
fn serve_opens_the_browser_on_the_private_file_never_the_token() {
    let dir = temp_dir();
    let browser = fake_browser(&dir);
    let (mut child, banner) = serve_banner(&dir, &[], &[("BROWSER", browser.to_str().unwrap())]);
    assert!(
        banner.contains("opened the viewer in your browser"),
        "{banner}"
    );
    let args = wait_for(&dir.join("args.txt"));
    let page = args.trim();
    assert!(
        page.ends_with(".html") && page.contains("/run/open-"),
        "the browser gets the redirect file: {args}"
    );
    assert!(!args.contains("gmv_"), "no token on the command line");
    assert!(std::fs::read_to_string(page)
        .unwrap()
        .contains("#token=gmv_"));
    // `graphmind open` prints the link and opens the same file
    let port: u16 = banner
        .split("http://127.0.0.1:")
        .nth(1)
        .unwrap()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap();
    let mut cmd = Command::new(BIN);
    isolate(&mut cmd, &dir);
    let o = cmd
        .args(["open", "--port", &port.to_string()])
        .env("BROWSER", &browser)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout)
        .trim()
        .starts_with(&format!("http://127.0.0.1:{port}/#token=gmv_")));
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(dir.join("args.txt"))
        .unwrap()
        .lines()
        .count()
        < 2
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("args.txt"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    let _ = child.kill();
    let _ = child.wait();

    // CI, --no-open, no display: nothing is started, and the banner says why
    for (extra, envs, why) in [
        (
            &[][..],
            &[("CI", "true"), ("BROWSER", browser.to_str().unwrap())][..],
            "CI is set",
        ),
        (
            &["--no-open"][..],
            &[("BROWSER", browser.to_str().unwrap())][..],
            "--no-open",
        ),
        (&[][..], &[][..], "no display"),
    ] {
        let _ = std::fs::remove_file(dir.join("args.txt"));
        let (mut child, banner) = serve_banner(&dir, extra, envs);
        assert!(
            banner.contains(&format!("browser not opened ({why})")),
            "{banner}"
        );
        std::thread::sleep(Duration::from_millis(200));
        assert!(!dir.join("args.txt").exists());
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn serve_json_opens_a_browser_only_with_open() {
    for (flags, opens) in [(&["--open"][..], true), (&[][..], false)] {
        let dir = temp_dir();
        let browser = fake_browser(&dir);
        let mut cmd = Command::new(BIN);
        isolate(&mut cmd, &dir);
        let mut child = cmd
            .args(["serve", "--port", "0", "--json", "--db"])
            .arg(dir.join("g.db"))
            .args(flags)
            .env("BROWSER", &browser)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(
            parse_str(line.trim()).is_ok(),
            "only the JSON line on stdout: {line}"
        );
        if opens {
            assert!(wait_for(&dir.join("args.txt")).trim().ends_with(".html"));
        } else {
            std::thread::sleep(Duration::from_millis(300));
            assert!(!dir.join("args.txt").exists(), "--json alone opens nothing");
        }
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn open_without_a_server_says_so() {
    let dir = temp_dir();
    let mut cmd = Command::new(BIN);
    isolate(&mut cmd, &dir);
    let o = cmd
        .args(["open", "--port", &free_port().to_string()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("no credential file"),
        "{}",
        text(&o.stderr)
    );
}

// -- init ---------------------------------------------------------------------------------

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("init")
}

fn run_init(dir: &Path, extra: &[&str]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .display()
        .to_string();
    let o = Command::new(BIN)
        .arg("init")
        .arg(dir)
        .args(extra)
        .output()
        .unwrap();
    let shown = std::fs::canonicalize(dir).unwrap().display().to_string();
    let clean = |b: &[u8]| text(b).replace(&shown, "<DIR>").replace(&root, "<ROOT>");
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        o.status.code().unwrap_or(-1),
        clean(&o.stdout),
        clean(&o.stderr)
    )
}

#[test]
fn init_prints_the_expected_snippet_for_each_language_and_framework() {
    let bless = std::env::var("GM_BLESS").is_ok();
    let mut checked = 0;
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    for case in cases {
        let extra = std::fs::read_to_string(case.join("args")).unwrap_or_default();
        let extra: Vec<&str> = extra.split_whitespace().collect();
        let got = run_init(&case, &extra);
        let golden = case.join("expected.txt");
        if bless {
            std::fs::write(&golden, &got).unwrap();
        }
        let want = std::fs::read_to_string(&golden)
            .unwrap_or_else(|_| panic!("{} (GM_BLESS=1 writes it)", golden.display()));
        assert_eq!(got, want, "{}", case.display());
        checked += 1;
    }
    assert!(checked >= 18, "{checked} cases");
}

#[test]
fn init_write_adds_a_new_marked_file_and_never_overwrites() {
    let dir = temp_dir();
    std::fs::write(dir.join("requirements.txt"), "openai\n").unwrap();
    std::fs::write(dir.join("app.py"), "print('mine')\n").unwrap();
    let o = Command::new(BIN)
        .args(["init", "--write"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("Wrote the snippet to ./graphmind_snippet.py"),
        "{}",
        text(&o.stdout)
    );
    let file = std::fs::read_to_string(dir.join("graphmind_snippet.py")).unwrap();
    assert!(
        file.starts_with("# graphmind init: begin")
            && file.trim_end().ends_with("# graphmind init: end"),
        "{file}"
    );
    assert!(file.contains("gm.instrument_openai(OpenAI())"));
    assert_eq!(
        std::fs::read_to_string(dir.join("app.py")).unwrap(),
        "print('mine')\n",
        "user code untouched"
    );
    let again = Command::new(BIN)
        .args(["init", "--write"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again.stderr).contains("already exists; not overwriting"));
    let _ = std::fs::remove_dir_all(dir);
}

// -- skill --------------------------------------------------------------------------------

/// Every `graphmind ...` command line in the skill's code blocks, placeholders filled in.
fn skill_commands(md: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in md.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let l = line.trim().trim_end_matches('&').trim();
        if in_code && l.starts_with("graphmind ") {
            let words: Vec<String> = l
                .split_whitespace()
                .skip(1)
                .take_while(|w| !w.starts_with('#'))
                .map(|w| match w {
                    "<pauseId>" => "pause_1".into(),
                    "<runId>" => "run_1".into(),
                    w => w.trim_matches('\'').to_owned(),
                })
                .collect();
            out.push(words);
        }
    }
    out
}

#[test]
fn skill_names_only_commands_and_flags_that_exist() {
    let o = Command::new(BIN).arg("skill").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let md = text(&o.stdout);
    assert!(md.starts_with("---\nname: graphmind\n"));
    let cmds = skill_commands(&md);
    let names: Vec<&str> = cmds.iter().map(|c| c[0].as_str()).collect();
    for must in [
        "init",
        "serve",
        "wait",
        "resume",
        "pauses",
        "runs",
        "record",
        "mcp",
        "mcp-proxy",
    ] {
        assert!(
            names.contains(&must) || md.contains(&format!("`graphmind {must}")),
            "{must} missing"
        );
    }
    for words in &cmds {
        match words[0].as_str() {
            // not parsed by `args`: ask them for their help
            "mcp" | "mcp-proxy" => {
                let o = Command::new(BIN)
                    .args([words[0].as_str(), "--help"])
                    .output()
                    .unwrap();
                assert_eq!(o.status.code(), Some(0), "{words:?}");
            }
            _ => {
                let parsed = graphmind_cli::args::parse(words);
                assert!(parsed.is_ok(), "{words:?}: {:?}", parsed.err());
            }
        }
    }
    // every `graphmind <word>` in the prose is a command too
    for w in md.split("`graphmind ").skip(1) {
        let word: String = w
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        let known = [
            "serve",
            "demo",
            "open",
            "init",
            "skill",
            "runs",
            "record",
            "import",
            "pauses",
            "wait",
            "resume",
            "mcp",
            "mcp-proxy",
        ];
        assert!(
            known.contains(&word.as_str()),
            "`graphmind {word}` is not a command"
        );
    }
}

#[test]
fn skill_install_refuses_to_overwrite_and_names_the_failing_path() {
    let dir = temp_dir();
    let run = |args: &[&str]| {
        Command::new(BIN)
            .arg("skill")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let o = run(&["--install"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let target = dir.join(".claude/skills/graphmind/SKILL.md");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        graphmind_cli::skill::SKILL_MD
    );
    std::fs::write(&target, "mine").unwrap();
    let o = run(&["--install"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("already exists; re-run with --force"));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "mine");
    assert_eq!(run(&["--install", "--force"]).status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        graphmind_cli::skill::SKILL_MD
    );

    // a folder that cannot be written: the message names it
    let ro = dir.join("ro");
    std::fs::create_dir(&ro).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let writable = std::fs::write(ro.join("probe"), "x").is_ok(); // root ignores modes
    if !writable {
        let o = Command::new(BIN)
            .args(["skill", "--install"])
            .current_dir(&ro)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        assert!(
            text(&o.stderr).contains("cannot create ./.claude/skills/graphmind"),
            "{}",
            text(&o.stderr)
        );
    }
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    let _ = http_get; // shared harness
}

#[test]
fn ctrl_c_while_the_demo_is_held_stops_it_cleanly_every_time() {
    for _ in 0..3 {
        let home = temp_dir();
        let port = free_port().to_string();
        let mut child = fresh(
            &home,
            &["demo", "--no-open", "--interactive", "--port", &port],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        while !seen.contains("demo: held tool:searchFlights") {
            let mut l = String::new();
            assert!(
                out.read_line(&mut l).unwrap() > 0,
                "the demo ended before its first hold: {seen}"
            );
            seen.push_str(&l);
        }
        let run_dir = home.join(".graphmind/run");
        assert!(
            run_dir.join(format!("serve-{port}.json")).exists()
                && run_dir.join(format!("demo-{port}.html")).exists()
        );
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "the demo did not stop on Ctrl-C");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(0));
        for f in [
            format!("serve-{port}.json"),
            format!("open-{port}.html"),
            format!("demo-{port}.html"),
        ] {
            assert!(!run_dir.join(&f).exists(), "{f} left behind");
        }
        // what was recorded up to the hold is stored
        let listed = text(&fresh(&home, &["runs"]).output().unwrap().stdout);
        assert!(listed.contains("trip-planner"), "{listed}");
        let _ = std::fs::remove_dir_all(home);
    }
}
