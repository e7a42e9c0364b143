//! The on-disk spool (docs/spool.md) against the real `graphmind serve` on 127.0.0.1: a
//! server down for longer than the ring holds at ~2,000 events a second loses nothing with
//! the spool (every event stored once, in order) and, without it, the gap markers count
//! exactly what is missing; an app SIGKILLed mid-write leaves a spool that
//! `graphmind import --spool` and the next `graphmind serve` store, its torn tail skipped;
//! the kill switch writes no file.

mod common;
use common::*;
use graphmind_core::config::{self, EnvSnapshot, Options, SdkFlavor};
use graphmind_core::json::Value;
use graphmind_core::session::{RunOutcome, Session};
use graphmind_core::spool;
use graphmind_core::warn::WarnSink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Events a second the app emits while the server is down.
const RATE: u64 = 2_000;
/// How long the server is down.
const DOWN: Duration = Duration::from_secs(3);
/// The ring: far less than the dark period's events.
const RING: i64 = 200;

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn session(
    port: u16,
    spool_dir: Option<&Path>,
    env: EnvSnapshot,
) -> (Session, Arc<Mutex<Vec<String>>>) {
    let options = Options {
        url: Some(format!("ws://127.0.0.1:{port}/ingest")),
        app_name: Some("spool-test".into()),
        buffer_size: Some(RING),
        retry_interval_ms: Some(200.0),
        spool_dir: spool_dir.map(|d| d.to_string_lossy().into_owned()),
        ..Options::default()
    };
    let config = config::resolve(&options, &env, SdkFlavor::Native);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink_lines = lines.clone();
    let sink: WarnSink = Arc::new(move |l: &str| sink_lines.lock().unwrap().push(l.to_string()));
    (Session::new(config, sink), lines)
}

fn tool_call(session: &Session, run_id: &str, n: u64) {
    let input = format!(r#"{{"n":{n},"pad":"{}"}}"#, "x".repeat(200));
    tool_call_text(session, run_id, &input);
}

/// Tool calls at [`RATE`] events a second (two events a call) for `how_long`, from `*n` on.
fn paced(session: &Session, run_id: &str, n: &mut u64, how_long: Duration) {
    let start = Instant::now();
    while start.elapsed() < how_long {
        tool_call(session, run_id, *n);
        *n += 1;
        let due = start + Duration::from_micros(*n * 2 * 1_000_000 / RATE);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            if *n % 16 == 0 {
                std::thread::sleep(wait);
            }
        }
    }
}

/// The `n` of each stored `node.started`, in seq order.
fn call_numbers(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| s(e, &["type"]) == Some("node.started"))
        .map(|e| i(e, &["payload", "input", "n"]).expect("input.n") as u64)
        .collect()
}

fn marked(events: &[Value]) -> i64 {
    events
        .iter()
        .filter_map(|e| i(e, &["payload", "gap", "droppedCount"]))
        .sum()
}

/// Runs the dark period: the app records for [`DOWN`] with no server, then one comes up on
/// its port; returns the server, the run id, the calls made and the session's stats.
fn dark_period(
    spool_dir: Option<&Path>,
) -> (Server, String, u64, graphmind_core::session::SessionStats) {
    let port = free_port();
    let (session, _) = session(port, spool_dir, EnvSnapshot::new());
    let run = session.start_run("dark", None);
    let mut n = 0;
    paced(&session, &run.run_id, &mut n, DOWN);
    let srv = Server::start(&["--port", &port.to_string()], &[]);
    assert!(
        session.ready(Duration::from_secs(10)),
        "attaches once the server is up"
    );
    tool_call(&session, &run.run_id, n);
    n += 1;
    session.finish_run(&run, RunOutcome::Ok);
    assert!(session.flush(Duration::from_secs(30)));
    let stats = session.stats();
    session.dispose(session.exit_deadline());
    (srv, run.run_id, n, stats)
}

#[test]
fn a_server_down_longer_than_the_ring_holds_loses_nothing_with_the_spool() {
    let dir = temp_dir().join("spool");
    let (srv, run_id, calls, stats) = dark_period(Some(&dir));
    assert!(
        calls * 2 > RING as u64 * 10,
        "the dark period outlasts the ring: {calls} calls"
    );
    let expected = 2 + 2 * calls as usize;
    let events = srv.stored_at_least(&run_id, expected);
    assert_eq!(events.len(), expected, "every event stored, once");
    assert_eq!(marked(&events), 0, "no gap marker");
    assert_eq!(stats.lost, 0, "{stats:?}");
    assert_eq!(
        call_numbers(&events),
        (0..calls).collect::<Vec<_>>(),
        "in order"
    );
    let seqs: Vec<i64> = events.iter().map(|e| i(e, &["seq"]).unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        s(
            &srv.wait_run(&run_id, |r| s(r, &["status"]) != Some("running")),
            &["status"]
        ),
        Some("ok")
    );
    // Replayed, then deleted: no folder is left once the session ends.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    eprintln!(
        "spool: {calls} calls, {} events stored, none lost",
        events.len()
    );
}

#[test]
fn without_the_spool_the_gap_markers_count_exactly_what_is_missing() {
    let (srv, run_id, calls, stats) = dark_period(None);
    let emitted = 2 + 2 * calls as i64;
    srv.stored_at_least(&run_id, RING as usize);
    // Let everything land, then read it.
    std::thread::sleep(Duration::from_millis(300));
    let events = srv.all_events(&run_id);
    let markers = events
        .iter()
        .filter(|e| e.get("payload").and_then(|p| p.get("gap")).is_some())
        .count() as i64;
    let stored = events.len() as i64 - markers;
    let lost = marked(&events);
    assert!(lost > 0, "the ring overflowed");
    assert_eq!(stored + lost, emitted, "stored + marked == emitted");
    assert_eq!(
        lost as u64, stats.lost,
        "the markers carry the session's own count"
    );
    eprintln!("no spool: {emitted} emitted, {stored} stored, {lost} marked lost");
}

// -- a child app killed mid-write ------------------------------------------------------

/// The child's side: records with no server until killed (run only as a child process).
#[test]
fn spool_child_app() {
    let Ok(dir) = std::env::var("GM_SPOOL_CHILD_DIR") else {
        return;
    };
    let port: u16 = std::env::var("GM_SPOOL_CHILD_PORT")
        .unwrap()
        .parse()
        .unwrap();
    let (session, _) = session(port, Some(Path::new(&dir)), EnvSnapshot::new());
    let run = session.start_run("killed", None);
    println!("RUN {}", run.run_id);
    let mut n = 0;
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        tool_call(&session, &run.run_id, n);
        n += 1;
    }
}

/// Starts the child app, waits until its spool holds `bytes`, SIGKILLs it; its run id.
fn killed_child(dir: &Path, bytes: u64) -> String {
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "spool_child_app",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("GM_SPOOL_CHILD_DIR", dir)
        .env("GM_SPOOL_CHILD_PORT", free_port().to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut run_id = String::new();
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        // After the harness's own "test spool_child_app ... " on the same line.
        let line = line.unwrap();
        if let Some(at) = line.find("RUN ") {
            run_id = line[at + 4..].trim().to_owned();
            break;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while spool_bytes(dir) < bytes && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill(); // SIGKILL, mid-write
    let _ = child.wait();
    assert!(spool_bytes(dir) >= bytes, "the child spooled");
    run_id
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(dir).unwrap().flatten() {
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            if f.path().extension().is_some_and(|x| x == "seg") {
                out.push(f.path());
            }
        }
    }
    out.sort();
    out
}

fn spool_bytes(dir: &Path) -> u64 {
    if !dir.exists() {
        return 0;
    }
    segments(dir)
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

/// Tears the last segment's end (half a record), then counts the complete records.
fn tear_and_count(dir: &Path) -> Vec<spool::Record> {
    let segs = segments(dir);
    let last = segs.last().unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(last).unwrap();
    use std::io::Write;
    f.write_all(&[200, 1, 0, 0, 1, 2, 3, 4, 5, 6, 7]).unwrap();
    let mut records = Vec::new();
    for s in &segs {
        spool::read_segment(s, &mut records).unwrap();
    }
    records
}

#[test]
fn an_app_killed_mid_write_leaves_a_spool_that_import_stores_torn_tail_skipped() {
    let base = temp_dir();
    let dir = base.join("spool");
    let run_id = killed_child(&dir, 600 * 1024);
    let records = tear_and_count(&dir);
    assert!(records.len() > 1_000, "{}", records.len());
    let db = base.join("imported.db");
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["import", "--db"])
        .arg(&db)
        .arg("--spool")
        .arg(&dir);
    isolate(&mut cmd, &base);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!(
            "stored {} event(s) from 1 spool(s)",
            records.len()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("torn or corrupt end skipped"), "{stdout}");
    assert!(
        segments(&dir).is_empty(),
        "the spool is deleted once stored"
    );
    // A second import finds nothing.
    let again = cmd.output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("No spool to import"));
    // What a server on that database serves: every complete record, in order, once.
    let srv = Server::start(&["--db", db.to_str().unwrap()], &[]);
    let events = srv.all_events(&run_id);
    let want: Vec<i64> = records
        .iter()
        .filter(|r| r.run_id == run_id)
        .map(|r| r.seq as i64)
        .collect();
    let got: Vec<i64> = events.iter().map(|e| i(e, &["seq"]).unwrap()).collect();
    assert_eq!(got, want);
    let info = srv.wait_run(&run_id, |r| s(r, &["status"]).is_some());
    assert_eq!(
        s(&info, &["status"]),
        Some("abandoned"),
        "the dead app's run did not finish"
    );
    let _ = std::fs::remove_dir_all(base);
}

#[test]
fn the_next_serve_picks_up_a_spool_left_by_a_dead_app() {
    let base = temp_dir();
    let dir = base.join("spool");
    let run_id = killed_child(&dir, 200 * 1024);
    let records = tear_and_count(&dir);
    let srv = Server::start(&[], &[("GRAPHMIND_SPOOL_DIR", dir.to_str().unwrap())]);
    let events = srv.all_events(&run_id);
    assert_eq!(
        events.len(),
        records.len(),
        "every complete record stored at startup"
    );
    assert_eq!(
        call_numbers(&events),
        (0..call_numbers(&events).len() as u64).collect::<Vec<_>>()
    );
    assert!(segments(&dir).is_empty());
    let _ = std::fs::remove_dir_all(base);
}

#[test]
fn a_live_apps_spool_is_left_to_it() {
    let base = temp_dir();
    let dir = base.join("spool");
    let port = free_port();
    let (session, _) = session(port, Some(&dir), EnvSnapshot::new());
    let run = session.start_run("alive", None);
    for n in 0..2_000 {
        tool_call(&session, &run.run_id, n);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while session.stats().spooled == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(session.stats().spooled > 0);
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["import", "--db"])
        .arg(base.join("x.db"))
        .arg("--spool")
        .arg(&dir);
    isolate(&mut cmd, &base);
    let out = cmd.output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("No spool to import"),
        "{out:?}"
    );
    assert!(!segments(&dir).is_empty(), "untouched");
    // Ended with no server: what it never delivered stays for the next serve.
    session.dispose(Duration::from_millis(500));
    let srv = Server::start(&["--spool-dir", dir.to_str().unwrap()], &[]);
    let events = srv.all_events(&run.run_id);
    assert_eq!(events.len(), 1 + 2 * 2_000, "run.started and every call");
    let _ = std::fs::remove_dir_all(base);
}

#[test]
fn the_kill_switch_writes_no_spool() {
    let base = temp_dir();
    let dir = base.join("spool");
    let mut env = EnvSnapshot::new();
    env.set("GRAPHMIND_DISABLED", "1")
        .set("GRAPHMIND_SPOOL_DIR", dir.to_str().unwrap());
    let (session, _) = session(free_port(), Some(&dir), env);
    let run = session.start_run("off", None);
    for n in 0..3_000 {
        tool_call(&session, &run.run_id, n);
    }
    session.finish_run(&run, RunOutcome::Ok);
    session.dispose(Duration::from_millis(500));
    assert!(!dir.exists(), "disabled: no file is ever written");
    let _ = std::fs::remove_dir_all(base);
}
