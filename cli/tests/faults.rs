//! Faults at start and on disk, against the real `graphmind serve`: a database file that
//! is garbage or locked by another process gives a clear error and exit 1 (no panic, no
//! hang); a disk that fills while a run streams keeps the server up, says so on stderr
//! and in `/health`, never stalls the app past its deadline, and storing resumes once
//! space is free again.

mod common;
use common::*;
use graphmind_core::config::{self, EnvSnapshot, Options, SdkFlavor};
use graphmind_core::event::NodeKind;
use graphmind_core::host_value::HostValue;
use graphmind_core::json::{parse_str, Value};
use graphmind_core::session::{NodeRef, RunOutcome, Session};
use graphmind_core::warn::WarnSink;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a refused start may take (SQLite's busy wait of 5 s included).
const START_BOUND: Duration = Duration::from_secs(20);

/// `graphmind serve` on `db` with stderr captured in `dir/stderr.log`.
fn spawn_serve(dir: &Path, db: &Path) -> Child {
    let mut cmd = Command::new(BIN);
    cmd.args(["--port", "0", "--json", "--no-open", "--db"])
        .arg(db);
    isolate(&mut cmd, dir);
    cmd.stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .unwrap()
}

/// Waits for `child` to exit within [`START_BOUND`]; returns (exit code, stderr).
fn refused_start(dir: &Path, db: &Path) -> (Option<i32>, String) {
    let mut child = spawn_serve(dir, db);
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > START_BOUND {
            let _ = child.kill();
            panic!("graphmind serve neither started nor refused within {START_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (status.code(), stderr)
}

#[test]
fn a_garbage_database_is_refused_with_a_clear_error_and_left_as_it_was() {
    let dir = temp_dir();
    let db = dir.join("graphmind.db");
    let garbage: Vec<u8> = (0..64 * 1024u32)
        .map(|n| (n.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&db, &garbage).unwrap();
    let (code, stderr) = refused_start(&dir, &db);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot open database {}", db.display())),
        "{stderr}"
    );
    assert!(stderr.contains("not a database"), "{stderr}");
    assert!(
        stderr.contains("move it aside"),
        "the recovery is named: {stderr}"
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        garbage,
        "the file is never overwritten"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_database_from_a_newer_graphmind_is_refused_and_left_as_it_was() {
    let dir = temp_dir();
    let db = dir.join("graphmind.db");
    let st = Command::new("python3")
        .args(["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE runs(id TEXT)'); c.execute('PRAGMA user_version=999'); c.commit()"])
        .arg(&db)
        .status()
        .expect("python3");
    assert!(st.success());
    let before = std::fs::read(&db).unwrap();
    let (code, stderr) = refused_start(&dir, &db);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot open database {}", db.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("schema is version 999, newer than this graphmind knows"),
        "{stderr}"
    );
    assert!(
        std::fs::read(&db).unwrap() == before,
        "the file is never changed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_database_locked_by_another_process_is_refused_with_a_clear_error() {
    let dir = temp_dir();
    let db = dir.join("graphmind.db");
    // Another process holds an exclusive lock on a fresh (rollback-journal) file.
    let mut locker = Command::new("python3")
        .args(["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('CREATE TABLE t(x)'); c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()"])
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(locker.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");
    let t = Instant::now();
    let (code, stderr) = refused_start(&dir, &db);
    let took = t.elapsed();
    drop(locker.stdin.take());
    let _ = locker.wait();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("database is locked"), "{stderr}");
    assert!(
        stderr.contains("another process"),
        "the cause is named: {stderr}"
    );
    eprintln!("locked database refused in {:.1} s", took.as_secs_f64());

    // Once the lock is gone the same file serves.
    let mut child = spawn_serve(&dir, &db);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = parse_str(line.trim())
        .unwrap()
        .get("port")
        .and_then(Value::as_i64)
        .unwrap() as u16;
    assert_eq!(http_get(port, "/health").0, 200);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tmpfs of `size` mounted on `dir` (root only); unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "SKIPPED: cannot mount a tmpfs on {} ({}): the disk-full fault needs root",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(Tmpfs(dir.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A server killed on drop (before its tmpfs is unmounted, even when the test fails).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn session_for(port: u16) -> Session {
    let options = Options {
        url: Some(format!("ws://127.0.0.1:{port}/ingest")),
        app_name: Some("disk-full".into()),
        ..Options::default()
    };
    let config = config::resolve(&options, &EnvSnapshot::new(), SdkFlavor::Native);
    let sink: WarnSink = Arc::new(|_: &str| {});
    Session::new(config, sink)
}

/// A run of `calls` tool calls with `pad` bytes of input each; returns (run id, slowest call).
fn run_of(session: &Session, calls: usize, pad: usize) -> (String, Duration) {
    let run = session.start_run("disk", None);
    let mut slowest = Duration::ZERO;
    for n in 0..calls {
        let t = Instant::now();
        let node = NodeRef::new(NodeKind::Tool, "write");
        let input = format!(r#"{{"n":{n},"pad":"{}"}}"#, "x".repeat(pad));
        session.node_started_host(
            Some(&run.run_id),
            &node,
            None,
            Some(HostValue::Text(input.into_bytes())),
        );
        session.node_finished_host(
            Some(&run.run_id),
            &node,
            Some(HostValue::Text("{}".into())),
            0.0,
            false,
        );
        slowest = slowest.max(t.elapsed());
    }
    session.finish_run(&run, RunOutcome::Ok);
    (run.run_id, slowest)
}

#[test]
fn a_disk_that_fills_while_a_run_streams_keeps_the_server_up_and_says_so() {
    let dir = temp_dir();
    let mnt = dir.join("disk");
    let Some(_disk) = Tmpfs::mount(&mnt, "2m") else {
        return;
    };
    let db = mnt.join("graphmind.db");
    // 1 MB taken by another file, given back later to show the recovery.
    let filler = mnt.join("filler");
    std::fs::write(&filler, vec![0u8; 1024 * 1024]).unwrap();
    let mut child = Killed(spawn_serve(&dir, &db));
    let child = &mut child.0;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = parse_str(line.trim())
        .unwrap()
        .get("port")
        .and_then(Value::as_i64)
        .unwrap() as u16;

    // 400 calls of 10 KB each: ~8 MB of frames for a 2 MB disk.
    let session = session_for(port);
    assert!(session.ready(Duration::from_secs(5)));
    let (full_run, slowest) = run_of(&session, 400, 10_000);
    assert!(
        session.flush(Duration::from_secs(30)),
        "the server kept reading"
    );
    let deadline = session.exit_deadline();
    let t = Instant::now();
    session.dispose(deadline);
    assert!(
        t.elapsed() < deadline + Duration::from_millis(500),
        "dispose took {:?}",
        t.elapsed()
    );
    assert!(
        slowest < Duration::from_secs(1),
        "slowest app call {slowest:?}"
    );

    // The server is up and says what happened, on stderr and in /health; what it stored
    // and what it reports as not stored add up to every event the app sent.
    let emitted = 2 * 400 + 2;
    let t = Instant::now();
    let (health, stored_of_full, unstored) = loop {
        let (status, body) = http_get(port, "/health");
        assert_eq!(status, 200, "{body}");
        let h = parse_str(&body).unwrap();
        let unstored = i(&h, &["storage", "unstoredEvents"]).unwrap_or(0);
        let (_, body) = http_get(port, &format!("/api/runs/{full_run}/events?limit=1"));
        let stored = parse_str(&body)
            .ok()
            .and_then(|v| i(&v, &["total"]))
            .unwrap_or(0);
        if stored + unstored == emitted || t.elapsed() > Duration::from_secs(20) {
            break (h, stored, unstored);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        stored_of_full + unstored,
        emitted,
        "stored {stored_of_full} + reported unstored {unstored}: {}",
        to_json(&health)
    );
    assert!(unstored > 0, "{}", to_json(&health));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the server is still running"
    );
    let stderr = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("the disk is full"), "{stderr}");
    // `storage.ok` may already be true again: a small write can fit where a big one failed.
    assert!(s(&health, &["storage", "lastError"])
        .unwrap()
        .contains("the disk is full"));
    eprintln!("disk full: slowest app call {:.1} ms; {stored_of_full} stored + {unstored} reported not stored of {emitted}", slowest.as_secs_f64() * 1e3);

    // Recovery: space comes back, the next run is stored whole and /health says so.
    std::fs::remove_file(&filler).unwrap();
    let session = session_for(port);
    assert!(session.ready(Duration::from_secs(5)));
    let (next_run, _) = run_of(&session, 5, 100);
    assert!(session.flush(Duration::from_secs(10)));
    session.dispose(session.exit_deadline());
    let t = Instant::now();
    loop {
        let (status, body) = http_get(port, &format!("/api/runs/{next_run}/events?limit=100"));
        if status == 200 && parse_str(&body).ok().and_then(|v| i(&v, &["total"])) == Some(12) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the run after the recovery was not stored: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let health = parse_str(&http_get(port, "/health").1).unwrap();
    assert_eq!(
        health
            .get("storage")
            .and_then(|st| st.get("ok"))
            .and_then(Value::as_bool),
        Some(true),
        "{}",
        to_json(&health)
    );
    assert_eq!(
        i(&health, &["storage", "unstoredEvents"]),
        Some(unstored),
        "the count of what was lost stays"
    );
    let stderr = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(stderr.contains("storage: writing again"), "{stderr}");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// CPU time (user + system) the process `pid` has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // fields after the parenthesised command name: state is field 3, utime 14, stime 15
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn a_full_descriptor_table_does_not_spin_the_server_and_it_recovers() {
    let mut srv = Server::start_quiet(&[], &[]);
    let pid = srv.child.id();
    // 48 descriptors: the database, the listener and a few sockets, then accept fails
    let st = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), "--nofile=48:48"])
        .status()
        .unwrap();
    assert!(st.success(), "prlimit");
    let mut held = Vec::new();
    for _ in 0..80 {
        held.push(std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap());
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(pid) - before;
    // a loop retrying accept at once burns the whole 2 s (about 200 ticks); backing off
    // costs next to nothing
    assert!(
        used < 40,
        "the server used {used} ticks in 2 s while accept was failing"
    );
    drop(held);
    let t = Instant::now();
    loop {
        let (status, _) = http_get(srv.port, "/health");
        if status == 200 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the server did not recover"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(srv.dir.join("server.log")).unwrap();
    // Said once per episode, and each episode ends with its recovery line. A held connection
    // that the server times out frees a descriptor, so one accept can succeed in between and a
    // second episode start: that is two lines, not one per failed accept (hundreds).
    let failing = log.matches("cannot accept connections").count();
    let recovered = log.matches("accepting connections again").count();
    assert!(
        (1..=5).contains(&failing) && recovered == failing,
        "said once per episode ({failing} episodes, {recovered} recoveries): {log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    srv.stop();
}
