//! Command-line behaviour of the real binary.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_graphmind");

#[test]
fn unknown_flag_exits_2_with_a_clear_message() {
    let o = Command::new(BIN).arg("--frobnicate").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("graphmind: unknown option \"--frobnicate\""),
        "{err}"
    );
    assert!(err.contains("graphmind --help"), "{err}");
}

#[test]
fn bad_values_and_commands_exit_2() {
    for args in [
        &["--pause-on-error", "sometimes"][..],
        &["--port", "70000"],
        &["--port"],
        &["dance"],
        &["runs", "--json"],
        &["record"],
    ] {
        let o = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
    let o = Command::new(BIN)
        .args(["--pause-on-error", "sometimes"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("--pause-on-error must be one of on, off, agent, llm, tool, chain, retriever, custom (got \"sometimes\")"));
}

#[test]
fn help_and_version() {
    let o = Command::new(BIN).arg("--version").output().unwrap();
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        env!("CARGO_PKG_VERSION")
    );
    let o = Command::new(BIN).arg("--help").output().unwrap();
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "--port",
        "--db",
        "--pause-on-error",
        "--json",
        "--no-open",
        "runs",
        "record",
    ] {
        assert!(out.contains(needle), "help mentions {needle}");
    }
}

#[test]
fn runs_without_a_database_says_so() {
    let db = std::env::temp_dir().join(format!("gm-nodb-{}/x.db", std::process::id()));
    let o = Command::new(BIN)
        .args(["runs", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing recorded yet"));
}
