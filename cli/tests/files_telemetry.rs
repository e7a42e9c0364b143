//! Crash safety, file permissions and telemetry against the real binary.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn stored_seqs(db: &Path, run: &str) -> Vec<i64> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c
        .prepare("SELECT seq FROM events WHERE run_id = ?1 ORDER BY seq")
        .unwrap();
    let rows = st.query_map([run], |r| r.get(0)).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

#[test]
fn sigkill_mid_ingest_loses_at_most_the_tail_and_the_replay_fills_it_in() {
    const N: u64 = 20_000;
    let dir = temp_dir();
    let mut srv = Server::start_in(dir.clone(), &[], &[("GRAPHMIND_RETENTION", "off")]);
    let mut app = srv.ingest();
    let token = s(&app.hello("crashy", None), &["sessionToken"])
        .unwrap()
        .to_owned();
    let frames: Vec<String> = (0..N)
        .map(|n| {
            frame(
                n + 1,
                "run_k",
                "node.token",
                &format!(r#"{{"nodeId":"llm:step","deltas":[{{"t":"text","v":"{n}"}}]}}"#),
            )
        })
        .collect();
    // Stream a first burst and wait until part of it is committed; then send a second
    // burst and SIGKILL the server at once, mid-ingest.
    let send = |app: &mut Ws, range: std::ops::Range<usize>| {
        for f in &frames[range] {
            let _ = app.ws.write(tungstenite::Message::text(f.clone()));
        }
        let _ = app.ws.flush();
    };
    send(&mut app, 0..3_000);
    let deadline = Instant::now() + Duration::from_secs(30);
    while stored_seqs(&srv.db, "run_k").is_empty() {
        assert!(Instant::now() < deadline, "nothing stored");
        std::thread::sleep(Duration::from_millis(5));
    }
    let committed_before = stored_seqs(&srv.db, "run_k").len();
    send(&mut app, 3_000..9_000);
    srv.child.kill().unwrap(); // SIGKILL
    let killed_at = 9_000;
    let _ = srv.child.wait();
    let after_kill = stored_seqs(&srv.db, "run_k");
    let k = after_kill.len();
    assert!(k >= committed_before && k <= killed_at, "stored {k} of {killed_at} sent before the kill (at least the {committed_before} committed earlier)");
    eprintln!("[crash] SIGKILL after {killed_at} frames sent: {k} stored, {} not stored (still unread in socket buffers, or in the batch being written), then replayed", killed_at - k);
    assert_eq!(
        after_kill,
        (1..=k as i64).collect::<Vec<_>>(),
        "what survived is a gap-free prefix: only the uncommitted tail was lost"
    );
    let c = rusqlite::Connection::open(&srv.db).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    drop(c);

    // The app reconnects with its token and replays its whole buffer: idempotent on (run, seq).
    let srv2 = Server::start_in(dir, &[], &[("GRAPHMIND_RETENTION", "off")]);
    let mut again = srv2.ingest();
    again.hello("crashy", Some(&token));
    for f in &frames {
        again
            .ws
            .send(tungstenite::Message::text(f.clone()))
            .unwrap();
    }
    srv2.wait_run("run_k", |r| i(r, &["eventCount"]) == Some(N as i64));
    assert_eq!(
        stored_seqs(&srv2.db, "run_k"),
        (1..=N as i64).collect::<Vec<_>>()
    );
    drop(srv);
}

#[test]
fn database_files_are_0600_and_a_created_folder_0700() {
    let dir = temp_dir();
    let db = dir.join("fresh").join("sub").join("graphmind.db");
    let mut cmd = Command::new(BIN);
    isolate(&mut cmd, &dir);
    let mut child = cmd
        .args(["--port", "0", "--json", "--db"])
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = graphmind_core::json::parse_str(line.trim())
        .unwrap()
        .get("port")
        .and_then(|p| p.as_i64())
        .unwrap() as u16;
    let mut app = Ws::connect(port, "/ingest");
    app.hello("perm", None);
    app.event(
        "run_p",
        "run.started",
        r#"{"app":"perm","sdk":{"name":"t","version":"0"}}"#,
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !http_get(port, "/api/runs").1.contains("run_p") {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(mode(&dir.join("fresh")), 0o700);
    assert_eq!(mode(&dir.join("fresh").join("sub")), 0o700);
    for f in ["graphmind.db", "graphmind.db-wal", "graphmind.db-shm"] {
        assert_eq!(mode(&dir.join("fresh").join("sub").join(f)), 0o600, "{f}");
    }
    let _ = child.kill();
    let _ = child.wait();
    // A folder GraphMind did not create is left alone.
    let shared = dir.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = {
        let mut cmd = Command::new(BIN);
        isolate(&mut cmd, &dir);
        cmd.args(["import", "/nonexistent", "--db"])
            .arg(shared.join("x.db"))
            .output()
            .unwrap()
    };
    assert_eq!(o.status.code(), Some(1));
    let c = graphmind_cli::storage::open(&shared.join("x.db")).unwrap();
    drop(c);
    assert_eq!(mode(&shared), 0o755);
    assert_eq!(mode(&shared.join("x.db")), 0o600);
    let _ = std::fs::remove_dir_all(dir);
}

/// A local telemetry endpoint: records every request body.
fn endpoint() -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/api/telemetry",
        l.local_addr().unwrap().port()
    );
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        g.lock()
                            .unwrap()
                            .push(format!("{}\n{body}", head.lines().next().unwrap_or("")));
                        break;
                    }
                }
            }
            let _ = s.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
        }
    });
    (url, got)
}

#[test]
fn telemetry_sends_one_record_per_command_to_the_configured_endpoint() {
    let (url, got) = endpoint();
    let srv = Server::start(
        &[],
        &[
            ("GRAPHMIND_TELEMETRY", "1"),
            ("GRAPHMIND_TELEMETRY_URL", &url),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no telemetry arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let reqs = got.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1, "one record per command: {reqs:?}");
    let (line, body) = reqs[0].split_once('\n').unwrap();
    assert_eq!(line, "POST /api/telemetry HTTP/1.1");
    let v = graphmind_core::json::parse_str(body).unwrap();
    let keys: Vec<String> = v
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        keys,
        ["event", "installId", "version", "ts"],
        "exactly the four fields"
    );
    assert_eq!(s(&v, &["event"]), Some("serve"));
    assert_eq!(s(&v, &["version"]), Some(env!("CARGO_PKG_VERSION")));
    let id_file = srv.home.join("telemetry-id");
    assert_eq!(
        std::fs::read_to_string(&id_file).unwrap().trim(),
        s(&v, &["installId"]).unwrap()
    );
    assert_eq!(mode(&id_file), 0o600);
    let ts = s(&v, &["ts"]).unwrap();
    assert!(
        ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
        "{ts}"
    );
    assert!(!body.contains(srv.db.to_str().unwrap()), "never a path");
}

#[test]
fn telemetry_log_prints_and_sends_nothing_and_off_creates_nothing() {
    let (url, got) = endpoint();
    let dir = temp_dir();
    let home = dir.join("gmhome");
    let run = |envs: &[(&str, &str)]| {
        let mut cmd = Command::new(BIN);
        isolate(&mut cmd, &dir);
        cmd.env("GRAPHMIND_TELEMETRY_URL", &url);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        cmd.args(["runs", "--db"])
            .arg(dir.join("none.db"))
            .output()
            .unwrap()
    };
    // Off in every spelling: no record, no id file.
    for envs in [
        vec![("GRAPHMIND_TELEMETRY", "0")],
        vec![("GRAPHMIND_TELEMETRY", "false")],
        vec![("GRAPHMIND_TELEMETRY", "1"), ("DO_NOT_TRACK", " TRUE ")],
        vec![("GRAPHMIND_TELEMETRY", "log"), ("DO_NOT_TRACK", "1")],
        vec![("GRAPHMIND_TELEMETRY", "1"), ("CI", "")],
    ] {
        let o = run(&envs);
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("[graphmind telemetry]"),
            "{envs:?}"
        );
        assert!(
            !home.join("telemetry-id").exists(),
            "{envs:?} created the id file"
        );
    }
    // log: the exact record on stderr, nothing sent, even under CI; DO_NOT_TRACK=yes is ignored.
    for envs in [
        vec![("GRAPHMIND_TELEMETRY", "log")],
        vec![
            ("GRAPHMIND_TELEMETRY", "LOG"),
            ("CI", "true"),
            ("DO_NOT_TRACK", "yes"),
        ],
    ] {
        let o = run(&envs);
        let err = String::from_utf8_lossy(&o.stderr);
        let line = err
            .lines()
            .find(|l| l.starts_with("[graphmind telemetry] "))
            .unwrap_or_else(|| panic!("{envs:?}: {err}"));
        let v = graphmind_core::json::parse_str(line.trim_start_matches("[graphmind telemetry] "))
            .unwrap();
        assert_eq!(s(&v, &["event"]), Some("runs"));
        assert_eq!(
            err.matches("[graphmind telemetry]").count(),
            1,
            "one record per command"
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(got.lock().unwrap().is_empty(), "log sends nothing");
    let _ = std::fs::remove_dir_all(dir);
}

/// This build has no TLS client (docs/server.md, *Telemetry*): an `https://` endpoint, the
/// default one included, gets no connection at all, and no install id is made for it.
#[test]
fn telemetry_to_an_https_endpoint_connects_nowhere_and_makes_no_id() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    l.set_nonblocking(true).unwrap();
    let dir = temp_dir();
    let home = dir.join("gmhome");
    for url in [
        None,
        Some(format!("https://127.0.0.1:{port}/api/telemetry")),
        Some(format!("HTTPS://127.0.0.1:{port}/")),
    ] {
        let mut cmd = Command::new(BIN);
        isolate(&mut cmd, &dir); // no GRAPHMIND_TELEMETRY_URL: the default https endpoint
        cmd.env("GRAPHMIND_TELEMETRY", "1");
        if let Some(u) = &url {
            cmd.env("GRAPHMIND_TELEMETRY_URL", u);
        }
        let started = Instant::now();
        let o = cmd
            .args(["runs", "--db"])
            .arg(dir.join("none.db"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{url:?}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{url:?}: the command is never held"
        );
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("telemetry"),
            "{url:?}: silent"
        );
        assert!(
            !home.join("telemetry-id").exists(),
            "{url:?}: no install id for a record that is not sent"
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        l.accept().is_err(),
        "no connection was attempted to the https endpoint"
    );
    let _ = std::fs::remove_dir_all(dir);
}
