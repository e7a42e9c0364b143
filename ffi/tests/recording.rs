//! The C ABI's exit paths and rates (`ffi/tests/c/recording.c`) against the real
//! `graphmind serve`: a short program (no `gm_session_ready`) stores its run whole and
//! `gm_session_flush` says so; a warning pending when the program ends is printed and the
//! status is the program's; a flood of 1 KB inputs is stored event for event.
//! `GM_EXIT_RUNS` / `GM_FLOOD_CALLS` lengthen them (`make soak`).

#[path = "../../cli/tests/common/mod.rs"]
mod common;
use common::*;
use std::path::{Path, PathBuf};
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

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `recording.c`, built against libgraphmind.so.
fn program(dir: &Path) -> PathBuf {
    let out = dir.join("recording");
    let status = Command::new("cc")
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-g",
            "-I",
        ])
        .arg(root().join("include"))
        .arg(root().join("ffi/tests/c/recording.c"))
        .arg("-o")
        .arg(&out)
        .arg("-L")
        .arg(lib_dir())
        .arg("-lgraphmind")
        .status()
        .expect("a C compiler");
    assert!(status.success(), "compiling recording.c failed");
    out
}

fn run(exe: &Path, url: &str, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("GRAPHMIND_URL", url);
    for (k, _) in
        std::env::vars().filter(|(k, _)| k.starts_with("GRAPHMIND_") && k != "GRAPHMIND_URL")
    {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("run recording")
}

fn run_id(out: &std::process::Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RUN "))
        .unwrap_or_else(|| panic!("no RUN line: {stdout}"));
    let mut parts = line.splitn(2, ' ');
    (
        parts.next().unwrap().to_string(),
        parts.next().unwrap_or("").to_string(),
    )
}

#[test]
fn a_short_c_program_without_ready_stores_its_run_and_flush_says_so() {
    let dir = temp_dir();
    let exe = program(&dir);
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let url = format!("ws://127.0.0.1:{}/ingest", srv.port);
    for _ in 0..5 {
        let out = run(&exe, &url, &["short"], &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (id, rest) = run_id(&out);
        assert_eq!(rest, "flushed=1");
        let run = srv.wait_run(&id, |r| s(r, &["status"]) != Some("running"));
        assert_eq!(
            (s(&run, &["status"]), i(&run, &["eventCount"])),
            (Some("ok"), Some(22)),
            "{}",
            to_json(&run)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_warning_pending_when_a_c_program_ends_is_printed_and_the_status_is_its_own() {
    let dir = temp_dir();
    let exe = program(&dir);
    let runs = env_count("GM_EXIT_RUNS", 60);
    let env = [
        ("GRAPHMIND_ON_LOOP", "warn"),
        ("GRAPHMIND_LOOP_THRESHOLD", "3"),
    ];
    for _ in 0..runs {
        let out = run(&exe, "ws://127.0.0.1:9/ingest", &["warn"], &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains("possible loop"),
            "the warning was lost: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_c_flood_of_1kb_inputs_is_stored_event_for_event() {
    let dir = temp_dir();
    let exe = program(&dir);
    let calls = env_count("GM_FLOOD_CALLS", 30_000);
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let url = format!("ws://127.0.0.1:{}/ingest", srv.port);
    let out = run(&exe, &url, &["flood", &calls.to_string()], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (id, rest) = run_id(&out);
    let emitted = 2 * calls + 2;
    assert!(
        rest.starts_with(&format!("emitted={emitted} lost=0 ")),
        "{rest}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let run = loop {
        let run = srv.wait_run(&id, |r| s(r, &["status"]) != Some("running"));
        if i(&run, &["eventCount"]) >= Some(emitted as i64) || std::time::Instant::now() > deadline
        {
            break run;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(
        (s(&run, &["status"]), i(&run, &["eventCount"])),
        (Some("ok"), Some(emitted as i64)),
        "{rest}"
    );
    eprintln!("c flood: {calls} calls, {rest}");
    let _ = std::fs::remove_dir_all(&dir);
}
