//! The C and C++ example agents, built with `-Wall -Wextra -Werror -pedantic` and linked
//! once against libgraphmind.so and once against libgraphmind.a, run against the REAL
//! `graphmind serve`: the run is stored, a breakpoint set through /ws/ui holds the C tool,
//! and an `inject` resume returns the injected value to C. The dynamic C agent also runs
//! under valgrind memcheck when valgrind is installed.

#[path = "../../cli/tests/common/mod.rs"]
mod common;
use common::*;
use graphmind_core::json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What `--print native-static-libs` lists for the staticlib on Linux.
const STATIC_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `cmd` set to run a C program against `srv`: its ingest URL, the library's folder, and
/// none of the caller's GraphMind switches.
fn against<'c>(cmd: &'c mut Command, srv: &Server) -> &'c mut Command {
    cmd.env(
        "GRAPHMIND_URL",
        format!("ws://127.0.0.1:{}/ingest", srv.port),
    )
    .env("LD_LIBRARY_PATH", lib_dir())
    .env_remove("GRAPHMIND")
    .env_remove("GRAPHMIND_ENABLED")
}

fn lib_dir() -> PathBuf {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
        .join(profile)
}

fn build(source: &str, cpp: bool, shared: bool, out: &Path) {
    build_with(source, cpp, shared, out, &[]);
}

/// AddressSanitizer (with LeakSanitizer) and UBSan, any report fatal. gcc's runtimes
/// (Debian `libasan8`, `libubsan1`) come with gcc; scripts/setup.sh checks for them.
const SANITIZE: &[&str] = &[
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
];

fn build_with(source: &str, cpp: bool, shared: bool, out: &Path, extra: &[&str]) {
    let mut cmd = Command::new(if cpp { "c++" } else { "cc" });
    cmd.args(extra);
    cmd.arg(if cpp { "-std=c++17" } else { "-std=c99" });
    cmd.args(["-Wall", "-Wextra", "-Werror", "-pedantic", "-g"]);
    cmd.arg("-I")
        .arg(root().join("include"))
        .arg(root().join(source))
        .arg("-o")
        .arg(out);
    cmd.arg("-L").arg(lib_dir());
    if shared {
        cmd.arg("-lgraphmind");
    } else {
        cmd.arg("-l:libgraphmind.a").args(STATIC_LIBS);
    }
    let status = cmd.status().expect("a C compiler");
    assert!(status.success(), "compiling {source} failed");
}

fn control(ui: &mut Ws, run: &str, kind: &str, payload: &str) {
    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(0, run, kind, payload)
    ));
}

/// The next envelope of `kind` on any run; watches (subscribes to) each run as it appears.
fn next_event(ui: &mut Ws, kind: &str, timeout: Duration) -> Value {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(m) = ui.recv_within(Duration::from_millis(100)) {
            if s(&m, &["type"]) == Some("run.update")
                && s(&m, &["run", "status"]) == Some("running")
            {
                if let Some(id) = s(&m, &["run", "id"]) {
                    ui.send(&format!(r#"{{"type":"subscribe","runId":"{id}"}}"#));
                }
            }
            if std::env::var_os("GM_DEBUG").is_some() {
                eprintln!("ui <- {}", to_json(&m));
            }
            if s(&m, &["type"]) == Some("event") && s(&m, &["envelope", "type"]) == Some(kind) {
                return m.get("envelope").cloned().unwrap();
            }
        }
    }
    panic!("no {kind} arrived");
}

fn stored(srv: &Server, run_id: &str, last: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = srv.get(&format!("/api/runs/{run_id}/events?limit=1000"));
        let events = match status {
            200 => graphmind_core::json::parse_str(&body)
                .unwrap()
                .get("events")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        if events.iter().any(|e| s(e, &["type"]) == Some(last)) || Instant::now() > deadline {
            return events;
        }
        std::thread::sleep(Duration::from_millis(30));
    }
}

const INJECTED: &str = r#"{"injected":"from the debugger","hits":42}"#;

/// Runs one agent binary against `srv` with a breakpoint before the tool `lookup`: the first
/// call is answered with `inject`, the second with `continue`.
fn drive(srv: &Server, exe: &Path, wrapper: &[&str]) {
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    let matcher = r#"{"kind":"tool","name":"lookup","point":"before"}"#;
    control(
        &mut ui,
        "*",
        "breakpoint.set",
        &format!(r#"{{"matcher":{matcher}}}"#),
    );
    std::thread::sleep(Duration::from_millis(200));

    let (program, args): (&str, Vec<&str>) = match wrapper.split_first() {
        None => (exe.to_str().unwrap(), vec![]),
        Some((first, rest)) => (
            first,
            rest.iter()
                .copied()
                .chain([exe.to_str().unwrap()])
                .collect(),
        ),
    };
    let mut child = against(Command::new(program).args(&args), srv)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the agent");

    // The agent prints `RUN <id>` before its first tool call: watch that run.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first_line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first_line).unwrap();
    let printed_run = first_line
        .trim()
        .strip_prefix("RUN ")
        .unwrap_or_else(|| panic!("agent printed {first_line:?}"))
        .to_string();
    ui.send(&format!(
        r#"{{"type":"subscribe","runId":"{printed_run}"}}"#
    ));
    let slow = if wrapper.is_empty() { 15 } else { 120 };
    let first = next_event(&mut ui, "exec.paused", Duration::from_secs(slow));
    assert_eq!(s(&first, &["payload", "point"]), Some("before"));
    assert_eq!(
        s(&first, &["payload", "nodeId"])
            .or(s(&first, &["payload", "node", "nodeId"]))
            .unwrap_or("tool:lookup"),
        "tool:lookup"
    );
    let run_id = s(&first, &["runId"]).unwrap().to_string();
    assert_eq!(run_id, printed_run);
    let pause = s(&first, &["payload", "pauseId"]).unwrap().to_string();
    control(
        &mut ui,
        &run_id,
        "exec.resume",
        &format!(r#"{{"pauseId":"{pause}","action":"inject","output":{INJECTED}}}"#),
    );
    let second = next_event(&mut ui, "exec.paused", Duration::from_secs(slow));
    let pause = s(&second, &["payload", "pauseId"]).unwrap().to_string();
    control(
        &mut ui,
        &run_id,
        "exec.resume",
        &format!(r#"{{"pauseId":"{pause}","action":"continue"}}"#),
    );

    let status = child.wait().unwrap();
    let mut out = first_line.clone();
    let mut err = String::new();
    stdout.read_to_string(&mut out).unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        status.success(),
        "{} failed: {status}\nstdout:\n{out}\nstderr:\n{err}",
        exe.display()
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(format!("RUN {run_id}").as_str()),
        "{out}"
    );
    assert_eq!(
        lines.get(1).copied(),
        Some(format!("TOOL 0 {INJECTED}").as_str()),
        "the injected value reaches C: {out}"
    );
    assert!(
        lines
            .get(2)
            .is_some_and(|l| l.starts_with("TOOL 1 {\"query\":\"population of Lyon\"")),
        "{out}"
    );
    assert_eq!(lines.get(3).copied(), Some("DONE ok"), "{out}");

    let events = stored(srv, &run_id, "run.finished");
    let types: Vec<&str> = events.iter().filter_map(|e| s(e, &["type"])).collect();
    assert_eq!(types.first().copied(), Some("run.started"), "{types:?}");
    assert_eq!(types.last().copied(), Some("run.finished"), "{types:?}");
    assert_eq!(
        types.iter().filter(|t| **t == "node.started").count(),
        3,
        "{types:?}"
    );
    let injected = events
        .iter()
        .filter(|e| s(e, &["type"]) == Some("node.finished"))
        .find(|e| e.get("payload").and_then(|p| p.get("injected")) == Some(&Value::Bool(true)))
        .expect("a node.finished marked injected");
    assert_eq!(
        to_json(injected.get("payload").unwrap().get("output").unwrap()),
        INJECTED
    );
    assert_eq!(
        s(
            &srv.wait_run(&run_id, |r| s(r, &["status"]) == Some("ok")),
            &["status"]
        ),
        Some("ok")
    );
    control(
        &mut ui,
        "*",
        "breakpoint.clear",
        &format!(r#"{{"matcher":{matcher}}}"#),
    );
    if !wrapper.is_empty() {
        assert!(
            !err.contains("ERROR SUMMARY: ") || err.contains("ERROR SUMMARY: 0 errors"),
            "valgrind:\n{err}"
        );
    }
}

#[test]
fn c_and_cpp_agents_against_a_real_server_shared_and_static() {
    let dir = temp_dir();
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    for (source, cpp) in [
        ("examples/c/agent.c", false),
        ("examples/cpp/agent.cpp", true),
    ] {
        for shared in [true, false] {
            let exe = dir.join(format!(
                "agent-{}-{}",
                if cpp { "cpp" } else { "c" },
                if shared { "so" } else { "a" }
            ));
            build(source, cpp, shared, &exe);
            drive(&srv, &exe, &[]);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn c_agent_under_valgrind_has_no_errors_and_no_leaks() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        panic!("valgrind is required (scripts/setup.sh installs it)");
    }
    let dir = temp_dir();
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let exe = dir.join("agent-c-valgrind");
    build("examples/c/agent.c", false, true, &exe);
    drive(
        &srv,
        &exe,
        &[
            "valgrind",
            "--error-exitcode=1",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
            "-q",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fork hooks through the C ABI (`ffi/tests/c/fork.c`): after `fork()` the child does
/// not believe itself attached, records through a fresh worker and link of its own, and
/// both its run and the parent's (recorded before and after the fork) are stored whole.
#[test]
fn forked_c_child_reconnects_and_both_runs_are_stored() {
    let dir = temp_dir();
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let exe = dir.join("fork-c");
    build("ffi/tests/c/fork.c", false, true, &exe);
    let out = against(&mut Command::new(&exe), &srv)
        .output()
        .expect("run the fork program");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "fork.c failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |label: &str| -> Vec<String> {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label:?} line in {stdout}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let parent = field("PARENT ");
    let child = field("CHILD ");
    assert_eq!(
        child[1..],
        ["attached-after-fork=0".to_string(), "ready=1".to_string()],
        "the child starts detached and reconnects: {stdout}"
    );
    let parent_after = field("PARENT-AFTER ");
    assert_eq!(
        parent_after[1..],
        ["attached=1".to_string()],
        "the parent's link survives: {stdout}"
    );
    assert_ne!(parent[0], child[0], "each side has its own run");
    for run_id in [&parent[0], &child[0], &parent_after[0]] {
        let events = stored(&srv, run_id, "run.finished");
        let types: Vec<&str> = events.iter().filter_map(|e| s(e, &["type"])).collect();
        assert_eq!(
            types,
            [
                "run.started",
                "node.started",
                "node.finished",
                "run.finished"
            ],
            "run {run_id}"
        );
        assert_eq!(
            s(
                &srv.wait_run(run_id, |r| s(r, &["status"]) == Some("ok")),
                &["status"]
            ),
            Some("ok")
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ffi/tests/c/contract.c`: every promise of the header tried the way a careless C caller
/// breaks it (borrowed views NUL-terminated, NULL out pointers refused before any effect,
/// no leak on error paths, `GM_INVALID_STATE` for misuse, enum values out of range,
/// `graph.hint` checked against the wire schema, the integer range), against a real
/// server, once under AddressSanitizer + LeakSanitizer + UBSan and once under valgrind.
/// The server then holds exactly what the valid calls recorded: one `run.finished` (the
/// first, `ok`), one `node.error` and one pause, nothing from the refused calls.
#[test]
fn c_contract_holds_under_sanitizers_and_valgrind() {
    let dir = temp_dir();
    let srv = Server::start(&[], &[]);
    let asan = dir.join("contract-asan");
    build_with("ffi/tests/c/contract.c", false, true, &asan, SANITIZE);
    let plain = dir.join("contract");
    build("ffi/tests/c/contract.c", false, true, &plain);
    let valgrind = [
        "valgrind",
        "--error-exitcode=1",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite,indirect",
        "-q",
    ];
    let runs: [(&Path, &[&str]); 2] = [(&asan, &[]), (&plain, &valgrind)];
    for (exe, wrapper) in runs {
        let mut cmd = match wrapper.split_first() {
            Some((tool, args)) => {
                let mut c = Command::new(tool);
                c.args(args).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let out = against(&mut cmd, &srv)
            .env(
                "ASAN_OPTIONS",
                "detect_leaks=1:abort_on_error=0:exitcode=23",
            )
            .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
            .output()
            .expect("run contract.c");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            out.status.success() && stdout.contains("PASSED 0"),
            "contract.c ({}) failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            exe.display(),
            out.status
        );
        let run_id = stdout
            .lines()
            .find_map(|l| l.strip_prefix("RUN "))
            .expect("a RUN line")
            .to_string();
        let events = stored(&srv, &run_id, "run.finished");
        let count = |t: &str| events.iter().filter(|e| s(e, &["type"]) == Some(t)).count();
        assert_eq!(count("run.started"), 1, "{run_id}");
        assert_eq!(
            count("run.finished"),
            1,
            "the second finish_run recorded nothing"
        );
        assert_eq!(
            count("node.error"),
            1,
            "the late step error recorded nothing"
        );
        assert_eq!(count("exec.paused"), 1, "the NULL-out gate held nothing");
        assert_eq!(count("graph.hint"), 1, "only the valid graph.hint was sent");
        assert_eq!(
            events
                .iter()
                .filter(|e| s(e, &["type"]) == Some("node.started"))
                .count(),
            1,
            "the stepper's start only"
        );
        let seqs: Vec<i64> = events
            .iter()
            .filter_map(|e| e.get("seq").and_then(Value::as_i64))
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "no seq hole: {seqs:?}"
        );
        let run = srv.wait_run(&run_id, |r| s(r, &["status"]) == Some("ok"));
        assert_eq!(s(&run, &["status"]), Some("ok"), "the first finish wins");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
