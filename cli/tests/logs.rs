//! The server's log on stderr (docs/server.md, "Logs"): each line is the bare message, as
//! before the log moved to `tracing`; `serve --log-level` sets the default level and
//! `RUST_LOG` refines it per module or replaces it; other commands print as they did.

mod common;
use common::*;
use std::process::Command;

/// The log of a real `graphmind serve` given `args` and `envs`, after an app sent one
/// invalid frame (a warning, from `graphmind_cli::server`) and then attached as "log-app"
/// (an info line, from `graphmind_cli::hub`). One socket handles both frames in order and
/// logs before it answers, so once `hello.ack` arrived every line they make is written.
fn log_after_an_app(args: &[&str], envs: &[(&str, &str)]) -> Vec<String> {
    let srv = Server::start_quiet(args, envs);
    let mut app = srv.ingest();
    app.send("not json");
    app.hello("log-app", None);
    let log = std::fs::read_to_string(srv.dir.join("server.log")).unwrap();
    log.lines().map(str::to_owned).collect()
}

fn has(lines: &[String], pred: impl Fn(&str) -> bool) -> bool {
    lines.iter().any(|l| pred(l))
}

const ATTACHED: &str = "app attached: log-app";

fn invalid(l: &str) -> bool {
    l.starts_with("ingest: dropping invalid frame (")
}

#[test]
fn by_default_info_and_warnings_read_as_bare_lines() {
    let lines = log_after_an_app(&[], &[]);
    assert!(has(&lines, |l| l == ATTACHED), "{lines:?}");
    assert!(has(&lines, invalid), "{lines:?}");
    // no timestamp, level or target in front of any line
    assert!(
        !has(&lines, |l| l.contains("INFO")
            || l.contains("WARN")
            || l.contains("graphmind_cli::")),
        "{lines:?}"
    );
    // debug lines are off by default
    assert!(
        !has(&lines, |l| l.starts_with("ingest: an app socket connected")),
        "{lines:?}"
    );
}

#[test]
fn log_level_warn_silences_info_but_keeps_warnings() {
    let lines = log_after_an_app(&["--log-level", "warn"], &[]);
    assert!(!has(&lines, |l| l.starts_with("app attached")), "{lines:?}");
    assert!(has(&lines, invalid), "{lines:?}");

    let lines = log_after_an_app(&["--log-level=error"], &[]);
    assert!(lines.is_empty(), "{lines:?}");

    let lines = log_after_an_app(&["--log-level", "debug"], &[]);
    assert!(
        has(&lines, |l| l
            == "ingest: an app socket connected (its hello names it)"),
        "{lines:?}"
    );
    assert!(
        has(&lines, |l| l == ATTACHED) && has(&lines, invalid),
        "{lines:?}"
    );
}

#[test]
fn rust_log_refines_the_level_per_module_or_replaces_it() {
    // a target directive on top of --log-level warn brings back the hub's info lines only
    let lines = log_after_an_app(
        &["--log-level", "warn"],
        &[("RUST_LOG", "graphmind_cli::hub=info")],
    );
    assert!(
        has(&lines, |l| l == ATTACHED) && has(&lines, invalid),
        "{lines:?}"
    );
    // ... or silences one module
    let lines = log_after_an_app(&[], &[("RUST_LOG", "graphmind_cli::server=off")]);
    assert!(has(&lines, |l| l == ATTACHED), "{lines:?}");
    assert!(!has(&lines, invalid), "{lines:?}");
    // a bare level replaces the default
    let lines = log_after_an_app(&[], &[("RUST_LOG", "warn")]);
    assert!(
        !has(&lines, |l| l.starts_with("app attached")) && has(&lines, invalid),
        "{lines:?}"
    );
    // a directive that does not parse is named, the rest still applies, the server serves
    let lines = log_after_an_app(&[], &[("RUST_LOG", "warn,not=a=level")]);
    assert!(
        has(&lines, |l| {
            l == "graphmind: RUST_LOG: ignoring \"not=a=level\" (not a filter directive: a level, or target=level)"
        }),
        "{lines:?}"
    );
    assert!(
        !has(&lines, |l| l.starts_with("app attached")) && has(&lines, invalid),
        "{lines:?}"
    );
}

#[test]
fn other_commands_print_their_errors_whatever_the_filter() {
    let dir = temp_dir();
    let mut cmd = Command::new(BIN);
    isolate(&mut cmd, &dir);
    let o = cmd
        .args(["record", "run_nope", "--db"])
        .arg(dir.join("missing.db"))
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("graphmind record: no database at"),
        "{o:?}"
    );
    let o = Command::new(BIN)
        .args(["runs", "--log-level", "warn"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("option \"--log-level\" does not apply to \"graphmind runs\""),
        "{o:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
