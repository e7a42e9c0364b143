//! `graphmind init --lang c` prints a C snippet (cli/src/init/snippets/c-plain.c); built
//! with the strict flags against libgraphmind.so and run against the real server, it
//! records a run.

#[path = "../../cli/tests/common/mod.rs"]
mod common;
use common::*;
use graphmind_core::json::Value;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
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

#[test]
fn the_c_snippet_init_prints_records_a_run() {
    let dir = temp_dir();
    std::fs::write(dir.join("CMakeLists.txt"), "project(app C)\n").unwrap();
    let o = Command::new(BIN)
        .args(["init", "--write"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let src = dir.join("graphmind_snippet.c");
    let exe = dir.join("snippet");
    let status = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(root().join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(lib_dir())
        .arg("-lgraphmind")
        .status()
        .expect("a C compiler");
    assert!(status.success(), "the snippet does not compile");
    let srv = Server::start(&[], &[]);
    let mut cmd = Command::new(&exe);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GRAPHMIND_")) {
        cmd.env_remove(k);
    }
    let ran = cmd
        .env("LD_LIBRARY_PATH", lib_dir())
        .env(
            "GRAPHMIND_URL",
            format!("ws://127.0.0.1:{}/ingest", srv.port),
        )
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    // The server stores what the app sent on its writer thread, a moment after the app has
    // gone: wait for the run to be listed as finished (bounded), rather than read once.
    let started = std::time::Instant::now();
    let run = loop {
        let runs = srv.get_json("/api/runs");
        let run = runs.get("runs").and_then(Value::as_array).and_then(|a| {
            a.iter()
                .find(|r| r.get("app").and_then(Value::as_str) == Some("my-agent"))
                .cloned()
        });
        match run {
            Some(r) if r.get("status").and_then(Value::as_str) != Some("running") => break r,
            _ if started.elapsed() > std::time::Duration::from_secs(10) => {
                panic!("no finished run from the snippet: {runs:?}")
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    };
    assert_eq!(run.get("status").and_then(Value::as_str), Some("ok"));
    let _ = std::fs::remove_dir_all(dir);
}
