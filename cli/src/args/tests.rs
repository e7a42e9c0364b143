use super::*;
use crate::tokens::ControlLevel;

fn p(args: &[&str]) -> Result<Command, UsageError> {
    parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

fn message(args: &[&str]) -> String {
    p(args).unwrap_err().message
}

fn serve_defaults() -> ServeArgs {
    ServeArgs {
        open: true,
        ..Default::default()
    }
}

#[test]
fn the_declarations_are_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn default_is_serve() {
    assert_eq!(p(&[]).unwrap(), Command::Serve(serve_defaults()));
    assert_eq!(p(&["serve"]).unwrap(), Command::Serve(serve_defaults()));
    let Command::Serve(s) = p(&[
        "--port=4848",
        "--db",
        "x.db",
        "--json",
        "--no-open",
        "--pause-on-error",
        "tool",
        "--allow-control",
        "inject",
        "--no-edit-input",
    ])
    .unwrap() else {
        panic!()
    };
    assert_eq!(
        s,
        ServeArgs {
            port: Some(4848),
            db: Some("x.db".into()),
            pause_on_error: Some("tool".into()),
            json: true,
            open: false,
            allow_control: Some(ControlLevel::Inject),
            no_edit_input: true,
            ..Default::default()
        }
    );
}

#[test]
fn a_flag_given_twice_takes_the_last_value() {
    // The test harnesses start `graphmind --port 0 --db A ...` and append their own flags.
    let Command::Serve(s) = p(&["--port", "0", "--db", "a", "--port", "5", "--db=b"]).unwrap()
    else {
        panic!()
    };
    assert_eq!((s.port, s.db.as_deref()), (Some(5), Some("b")));
    let Command::Runs(r) = p(&["runs", "--keep", "1", "--keep", "2"]).unwrap() else {
        panic!()
    };
    assert_eq!(r.keep, Some(2));
}

#[test]
fn open_and_no_open_the_last_one_wins() {
    let serve = |a: &[&str]| match p(a).unwrap() {
        Command::Serve(s) => (s.open, s.open_explicit),
        c => panic!("{c:?}"),
    };
    assert_eq!(serve(&["--json"]), (true, false));
    assert_eq!(serve(&["--json", "--open"]), (true, true));
    assert_eq!(serve(&["--open", "--no-open"]), (false, false));
    assert_eq!(serve(&["--no-open", "--open"]), (true, true));
    let open = |a: &[&str]| match p(a).unwrap() {
        Command::Open { open, .. } => open,
        Command::Demo(d) => d.open,
        c => panic!("{c:?}"),
    };
    assert!(!open(&["open", "--no-open"]));
    assert!(open(&["open", "--no-open", "--open"]));
    assert!(!open(&["demo", "--open", "--no-open"]));
}

#[test]
fn log_level() {
    let Command::Serve(s) = p(&["--log-level", "warn"]).unwrap() else {
        panic!()
    };
    assert_eq!(s.log_level, Some(tracing::level_filters::LevelFilter::WARN));
    let Command::Serve(s) = p(&["serve", "--log-level=TRACE"]).unwrap() else {
        panic!()
    };
    assert_eq!(
        s.log_level,
        Some(tracing::level_filters::LevelFilter::TRACE)
    );
    assert_eq!(
        message(&["--log-level", "loud"]),
        "--log-level must be one of off, error, warn, info, debug, trace (got \"loud\")"
    );
    assert_eq!(
        message(&["runs", "--log-level", "warn"]),
        "option \"--log-level\" does not apply to \"graphmind runs\""
    );
}

#[test]
fn errors_say_what_was_wrong_in_our_words() {
    assert_eq!(message(&["--bogus"]), "unknown option \"--bogus\"");
    assert_eq!(
        message(&["--port", "x"]),
        "--port must be an integer between 0 and 65535 (got \"x\")"
    );
    assert_eq!(
        message(&["--port", "-1"]),
        "--port must be an integer between 0 and 65535 (got \"-1\")"
    );
    assert_eq!(message(&["--port"]), "--port requires a value");
    assert_eq!(message(&["runs", "--db"]), "--db requires a value");
    assert!(message(&["--pause-on-error", "nope"]).starts_with("--pause-on-error must be one of"));
    assert_eq!(
        message(&["--allow-control", "all"]),
        "--allow-control must be one of off, resume, inject, edit (got \"all\")"
    );
    assert_eq!(
        message(&["--keep", "x"]),
        "--keep must be a whole number >= 0 (got \"x\")"
    );
    assert_eq!(
        message(&["--days", "-1"]),
        "--days must be a number >= 0 (got \"-1\")"
    );
    assert_eq!(
        message(&["wait", "--timeout", "-1"]),
        "--timeout must be a number >= 0 (got \"-1\")"
    );
    assert_eq!(message(&["frobnicate"]), "unknown command \"frobnicate\"");
    assert!(message(&["run"]).starts_with("unknown command \"run\" (did you mean"));
    assert_eq!(
        message(&["runs", "--out", "f"]),
        "option \"--out\" does not apply to \"graphmind runs\""
    );
    assert_eq!(message(&["runs", "stray"]), "unexpected argument \"stray\"");
    assert_eq!(
        message(&["record"]),
        "record needs a run id: graphmind record <runId>"
    );
    assert_eq!(
        message(&["record", "r", "--html", "--format", "otlp"]),
        "--html and --format otlp cannot be combined"
    );
    assert_eq!(
        message(&["record", "r", "--format", "csv"]),
        "--format must be ndjson or otlp (got \"csv\")"
    );
    assert_eq!(
        message(&["replay"]),
        "replay needs a run id: graphmind replay <runId>"
    );
    assert_eq!(
        message(&["import"]),
        "import needs a file: graphmind import <file.json>"
    );
    let e = p(&["resume", "--bogus"]).unwrap_err();
    assert_eq!(e.command.as_deref(), Some("resume"));
    assert_eq!(
        p(&["--port", "1", "--bogus"]).unwrap_err().command,
        None,
        "a value is not a command"
    );
    assert!(p(&["pauses", "--action", "x"]).is_err());
    assert!(message(&["init", "--lang", "cobol"]).contains("--lang must be one of"));
    assert_eq!(
        message(&["skill", "--force"]),
        "--force only applies with --install"
    );
    assert!(p(&["demo", "--write"]).is_err());
    assert_eq!(message(&["demo", "--live=yes"]), "--live takes no value");
    assert_eq!(
        message(&["--db", "x", "runs"]),
        "option \"--db\" goes after the command: graphmind runs --db ..."
    );
    assert_eq!(
        message(&["--json", "init"]),
        "option \"--json\" does not apply to \"graphmind init\""
    );
    assert!(message(&["completions", "tcsh"]).starts_with("the shell must be one of bash"));
}

#[test]
fn subcommands() {
    assert_eq!(
        p(&["runs", "--db", "a"]).unwrap(),
        Command::Runs(RunsArgs {
            db: Some("a".into()),
            ..Default::default()
        })
    );
    assert_eq!(
        p(&["runs", "--prune", "--keep", "5", "--days", "1.5", "-y"]).unwrap(),
        Command::Runs(RunsArgs {
            prune: true,
            keep: Some(5),
            days: Some(1.5),
            yes: true,
            ..Default::default()
        })
    );
    assert_eq!(
        p(&["record", "r1", "--out", "-", "--no-redact-secrets"]).unwrap(),
        Command::Record(RecordArgs {
            run_id: "r1".into(),
            out: Some("-".into()),
            no_redact_secrets: true,
            ..Default::default()
        })
    );
    assert_eq!(
        p(&[
            "resume",
            "p1",
            "--run",
            "r",
            "--action",
            "inject",
            "--output={\"a\":1}"
        ])
        .unwrap(),
        Command::Resume(ControlArgs {
            pause_id: Some("p1".into()),
            query: PauseQuery {
                run: Some("r".into()),
                ..Default::default()
            },
            action: Some("inject".into()),
            output: Some("{\"a\":1}".into()),
            ..Default::default()
        })
    );
    let Command::Resume(r) = p(&["resume", "p", "--output", "-1"]).unwrap() else {
        panic!()
    };
    assert_eq!(
        r.output.as_deref(),
        Some("-1"),
        "JSON may start with a dash"
    );
    assert_eq!(
        p(&["wait", "--timeout", "3", "--run", "r"]).unwrap(),
        Command::Wait(ControlArgs {
            timeout: Some(3.0),
            query: PauseQuery {
                run: Some("r".into()),
                ..Default::default()
            },
            ..Default::default()
        })
    );
    assert_eq!(
        p(&["pauses", "--json", "--port", "9"]).unwrap(),
        Command::Pauses(ControlArgs {
            query: PauseQuery {
                json: true,
                port: Some(9),
                ..Default::default()
            },
            ..Default::default()
        })
    );
    assert!(p(&["pauses", "--timeout", "1"]).is_err());
    assert_eq!(
        p(&["import", "f.json"]).unwrap(),
        Command::Import {
            file: "f.json".into(),
            db: None
        }
    );
    assert_eq!(
        p(&["import", "--spool", "/s"]).unwrap(),
        Command::ImportSpool {
            dir: "/s".into(),
            db: None
        }
    );
    assert!(
        p(&["import", "--spool", "/s", "f.json"]).is_err(),
        "a spool or a file, not both"
    );
    assert!(p(&["runs", "--spool", "/s"]).is_err());
    let Command::Serve(s) = p(&["serve", "--spool-dir", "/d"]).unwrap() else {
        panic!()
    };
    assert_eq!(s.spool_dir.as_deref(), Some("/d"));
    assert_eq!(p(&["--version"]).unwrap(), Command::Version);
    assert_eq!(p(&["runs", "-v"]).unwrap(), Command::Version);
    let Command::Demo(d) = p(&["demo", "--live", "--no-open", "--port", "0"]).unwrap() else {
        panic!()
    };
    assert_eq!((d.port, d.live, d.open), (Some(0), true, false));
    assert_eq!(
        p(&["init", "app", "--lang", "Ruby", "--write"]).unwrap(),
        Command::Init(InitArgs {
            lang: Some("ruby".into()),
            write: true,
            dir: Some("app".into())
        })
    );
    assert_eq!(
        p(&["skill", "--install", "--force"]).unwrap(),
        Command::Skill {
            install: true,
            force: true
        }
    );
    assert_eq!(
        p(&["open"]).unwrap(),
        Command::Open {
            port: None,
            open: true
        }
    );
    let Command::Replay(r) = p(&["replay", "run1", "--from", "llm:step#3", "--exec", "x"]).unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (r.run_id.as_str(), r.from.as_deref(), r.exec.as_deref()),
        ("run1", Some("llm:step#3"), Some("x"))
    );
    assert_eq!(
        p(&["completions", "zsh"]).unwrap(),
        Command::Completions(clap_complete::Shell::Zsh)
    );
    assert_eq!(
        p(&["mcp", "--db", "a.db", "--port=9"]).unwrap(),
        Command::Mcp(McpArgs {
            db: Some("a.db".into()),
            port: Some(9)
        })
    );
    assert_eq!(
        message(&["mcp", "--port", "0"]),
        "--port must be an integer between 1 and 65535 (got \"0\")"
    );
}

#[test]
fn mcp_proxy_takes_the_servers_command_line_as_it_is() {
    let proxy = |a: &[&str]| match p(a) {
        Ok(Command::McpProxy(p)) => p,
        other => panic!("{other:?}"),
    };
    let a = proxy(&[
        "mcp-proxy",
        "--wait-for-attach",
        "--max-frame-bytes=2048",
        "--port",
        "4848",
        "--",
        "node",
        "s.js",
        "--x",
    ]);
    assert!(a.wait_for_attach && !a.inherit_stderr);
    assert_eq!((a.max_frame_bytes, a.port), (2048, Some(4848)));
    assert_eq!(a.command.as_deref(), Some("node"));
    assert_eq!(a.args, ["s.js", "--x"]);
    let a = proxy(&["mcp-proxy"]);
    assert_eq!(a.command, None);
    assert_eq!(a.max_frame_bytes, crate::mcp_proxy::DEFAULT_MAX_FRAME_BYTES);
    let a = proxy(&["mcp-proxy", "--inherit-stderr", "python", "-m", "x", "-h"]);
    assert_eq!(a.command.as_deref(), Some("python"));
    assert_eq!(
        a.args,
        ["-m", "x", "-h"],
        "flags after the command are the server's"
    );
    let e = p(&["mcp-proxy", "--max-frame-bytes", "1023", "--", "x"]).unwrap_err();
    assert!(e.message.contains("at least 1024"), "{}", e.message);
    assert_eq!(e.command.as_deref(), Some("mcp-proxy"));
    assert_eq!(
        message(&["mcp-proxy", "--bogus"]),
        "unknown option \"--bogus\""
    );
    let Command::Help(h) = p(&["mcp-proxy", "--port", "4949", "--trace", "-h"]).unwrap() else {
        panic!()
    };
    assert!(h.to_stderr);
    assert!(h
        .text
        .contains("graphmind mcp-proxy -- npx -y @modelcontextprotocol/server-everything"));
    assert!(h.text.contains("graphmind --port 4949 "), "{}", h.text);
    assert!(h.text.contains("--max-frame-bytes"));
}

#[test]
fn help_is_the_commands_own() {
    let help = |a: &[&str]| match p(a).unwrap() {
        Command::Help(h) => h,
        c => panic!("{c:?}"),
    };
    let top = help(&["--help"]);
    assert!(!top.to_stderr);
    assert!(top
        .text
        .starts_with(concat!("graphmind v", env!("CARGO_PKG_VERSION"))));
    assert!(top.text.contains("\nCommands:\n  serve "), "{}", top.text);
    assert!(top.text.contains("--pause-on-error"));
    assert!(top.text.contains("7  taken"));
    let runs = help(&["runs", "-h"]);
    assert!(
        runs.text.contains("Usage: graphmind runs [OPTIONS]"),
        "{}",
        runs.text
    );
    assert!(runs.text.contains("--prune") && !runs.text.contains("--allow-control"));
    let resume = help(&["resume", "--help"]);
    assert!(resume.text.contains("--operator"));
    assert!(help(&["record", "--help"]).text.contains("[RUN_ID]"));
    let mcp = help(&["mcp", "--help"]);
    assert!(mcp.to_stderr && mcp.text.contains("list_runs"));
}

#[test]
fn completions_name_every_command() {
    let mut out = Vec::new();
    completions(clap_complete::Shell::Bash, &mut out);
    let script = String::from_utf8(out).unwrap();
    for word in [
        "serve",
        "resume",
        "mcp-proxy",
        "--pause-on-error",
        "--allow-control",
    ] {
        assert!(script.contains(word), "{word}");
    }
}

/// The command lines the Makefile, scripts/, the viewer's and the bindings' test harnesses
/// and the benches pass, as they pass them.
#[test]
fn the_command_lines_our_scripts_and_harnesses_pass_still_parse() {
    for line in [
        "--port 0 --json --no-open --db g.db --pause-on-error off",
        "--port 0 --json --no-open --db g.db --allow-control inject --no-edit-input",
        "--port 0 --json --no-open --db g.db --port 4848 --db other.db",
        "serve --port 0 --json --db t.db --allow-control inject",
        "serve --port 0 --db t.db --json --no-open",
        "demo --port 4747",
        "demo --no-open --interactive --port 0",
        "record run_1 --db g.db --no-redact-secrets --out run.ndjson",
        "record run_1 --db g.db --out - --format otlp",
        "record run_1 --db g.db --out - --html",
        "replay run_1 --from llm:step#3 --port 4747 --exec python3_agent.py",
        "replay run_1 --output {} --port 1",
        "init --write --lang python",
        "mcp-proxy --port 4747 -- node example.js",
        "mcp --db g.db --port 4747",
        "runs --db g.db",
    ] {
        let argv: Vec<&str> = line.split(' ').collect();
        let parsed = p(&argv);
        assert!(parsed.is_ok(), "{line}: {parsed:?}");
    }
}
