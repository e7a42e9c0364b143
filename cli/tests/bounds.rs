//! What the server holds stays bounded, and what it records stays consistent, against the
//! real binary: viewers that never read (RSS read from `/proc` before and after), a flood
//! of breakpoints, runs finished twice or out of order, a connection opening runs without
//! end, a run list past one page, duplicate `Host` / `Origin` headers. Each case failed
//! before its fix (docs/server.md, "Limits" and "Run state"). Run with `--nocapture` to
//! see the figures.

mod common;
use common::*;
use graphmind_core::json::{parse_str, Value};
use std::time::{Duration, Instant};

/// The scenarios run one at a time, so the RSS figures are each one's own.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn rss_mb(srv: &Server) -> f64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", srv.child.id())).unwrap_or_default();
    let kb: u64 = status
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")
                .map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0))
        })
        .unwrap_or(0);
    kb as f64 / 1024.0
}

fn envelope(seq: u64, ts: u64, run: &str, kind: &str, payload: &str) -> String {
    format!("{{\"gm\":1,\"seq\":{seq},\"ts\":{ts},\"runId\":\"{run}\",\"type\":\"{kind}\",\"payload\":{payload}}}")
}

const STARTED: &str = r#"{"app":"bounds","sdk":{"name":"test","version":"1"}}"#;

fn stored_types(srv: &Server, run: &str) -> Vec<String> {
    let page = srv.get_json(&format!("/api/runs/{run}/events?limit=1000"));
    page.get("events")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|e| s(e, &["type"]).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until the server stored `n` events of `run`.
fn wait_events(srv: &Server, run: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let (status, body) = srv.get(&format!("/api/runs/{run}/events?limit=1"));
        if status == 200
            && parse_str(&body)
                .ok()
                .and_then(|v| v.get("total").and_then(Value::as_i64))
                .unwrap_or(0) as usize
                >= n
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("run {run} never had {n} events");
}

#[test]
fn duplicate_host_or_origin_headers_are_refused_with_400() {
    let _g = serial();
    let srv = Server::start(&[], &[]);
    let p = srv.port;
    let one = format!("GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nConnection: close\r\n\r\n");
    assert_eq!(http_request(p, &one).0, 200);
    for extra in [
        "Host: evil.example\r\n".to_string(),
        format!("Host: 127.0.0.1:{p}\r\n"),
        format!("Origin: http://127.0.0.1:{p}\r\nOrigin: http://evil.example\r\n"),
    ] {
        let raw = format!(
            "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\n{extra}Connection: close\r\n\r\n"
        );
        let (status, body) = http_request(p, &raw);
        assert_eq!(status, 400, "{extra:?}: {body}");
        assert!(body.contains("more than one"), "{body}");
    }
    // The upgrade path is judged the same way.
    let raw = format!(
        "GET /ws/ui HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nHost: evil.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    assert!(http_raw(p, &raw).starts_with("HTTP/1.1 400"));
}

#[test]
fn the_first_run_finished_wins_and_later_events_are_refused() {
    let _g = serial();
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut app = srv.ingest();
    app.hello("bounds", None);
    // Finished (ts 1000) before it started (ts 5000), then a node and a second finish.
    app.send(&envelope(
        0,
        1000,
        "run_a",
        "run.finished",
        r#"{"status":"ok"}"#,
    ));
    app.send(&envelope(1, 5000, "run_a", "run.started", STARTED));
    app.send(&envelope(
        2,
        5001,
        "run_a",
        "node.started",
        r#"{"nodeId":"tool:x","kind":"tool","name":"x","instanceId":"i1"}"#,
    ));
    app.send(&envelope(
        3,
        5002,
        "run_a",
        "run.finished",
        r#"{"status":"error"}"#,
    ));
    // A run whose replayed events (lower seq) arrive after its finish: those are kept.
    app.send(&envelope(10, 6000, "run_b", "run.started", STARTED));
    app.send(&envelope(
        12,
        6002,
        "run_b",
        "run.finished",
        r#"{"status":"ok"}"#,
    ));
    app.send(&envelope(
        11,
        6001,
        "run_b",
        "node.started",
        r#"{"nodeId":"tool:y","kind":"tool","name":"y","instanceId":"i2"}"#,
    ));
    app.send(&envelope(
        13,
        6003,
        "run_b",
        "node.started",
        r#"{"nodeId":"tool:z","kind":"tool","name":"z","instanceId":"i3"}"#,
    ));
    app.send(&envelope(
        14,
        6004,
        "run_b",
        "run.finished",
        r#"{"status":"aborted"}"#,
    ));
    // A marker run: once it is stored, everything sent before it was handled.
    app.send(&envelope(15, 7000, "run_m", "run.started", STARTED));
    srv.wait_run("run_m", |_| true);

    assert_eq!(
        stored_types(&srv, "run_a"),
        ["run.finished"],
        "nothing after the terminal event"
    );
    let a = srv.wait_run("run_a", |_| true);
    assert_eq!(
        s(&a, &["status"]),
        Some("ok"),
        "the first finish wins: {}",
        to_json(&a)
    );
    let (started, finished) = (
        a.get("startedAt").and_then(Value::as_f64),
        a.get("finishedAt").and_then(Value::as_f64),
    );
    assert!(
        started <= finished,
        "startedAt <= finishedAt: {}",
        to_json(&a)
    );

    assert_eq!(
        stored_types(&srv, "run_b"),
        ["run.started", "node.started", "run.finished"]
    );
    assert_eq!(s(&srv.wait_run("run_b", |_| true), &["status"]), Some("ok"));
}

#[test]
fn breakpoints_are_capped_and_viewers_get_changes_not_the_list() {
    let _g = serial();
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    let mut watcher = srv.ui();
    watcher.recv_type("welcome");
    let pad = "p".repeat(200);
    let sets = 300;
    for i in 0..sets {
        let payload = format!(r#"{{"matcher":{{"kind":"tool","name":"t{i}-{pad}"}}}}"#);
        ui.send(&format!(
            r#"{{"type":"control","envelope":{}}}"#,
            frame(i, "*", "breakpoint.set", &payload)
        ));
    }
    // The watcher hears one change per accepted set, each the size of one matcher.
    let (mut changes, mut bytes, mut largest) = (0usize, 0usize, 0usize);
    let deadline = Instant::now() + Duration::from_secs(30);
    while changes < 256 && Instant::now() < deadline {
        if let Some(m) = watcher.recv_within(Duration::from_millis(200)) {
            if s(&m, &["type"]) == Some("state") {
                let n = to_json(&m).len();
                changes += 1;
                bytes += n;
                largest = largest.max(n);
            }
        }
    }
    assert_eq!(changes, 256, "256 breakpoints armed (the cap)");
    assert!(
        watcher.recv_within(Duration::from_millis(500)).is_none(),
        "the refused sets change nothing"
    );
    println!("breakpoint flood: {changes} changes, {bytes} bytes to one viewer, largest frame {largest} bytes");
    assert!(
        largest < 1024,
        "a change carries one matcher, not the list ({largest} bytes)"
    );
    assert!(bytes < 256 * 1024, "{bytes} bytes for {changes} changes");
    // The setter is told why the rest were refused.
    let refusal = ui.recv_type("error");
    assert_eq!(
        s(&refusal, &["code"]),
        Some("breakpoint-limit"),
        "{}",
        to_json(&refusal)
    );
    // A new viewer's welcome carries the capped list.
    let mut fresh = srv.ui();
    let welcome = fresh.recv_type("welcome");
    assert_eq!(
        welcome
            .get("breakpoints")
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(256)
    );
    assert!(
        to_json(&welcome).len() < 256 * 300,
        "welcome {} bytes",
        to_json(&welcome).len()
    );
    // An oversized matcher is refused too.
    let huge = format!(r#"{{"matcher":{{"name":"{}"}}}}"#, "x".repeat(5000));
    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(999, "*", "breakpoint.set", &huge)
    ));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let e = ui.recv_type("error");
        if s(&e, &["message"]).unwrap_or("").contains("byte limit") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no refusal of the oversized matcher"
        );
    }
}

#[test]
fn one_connection_opens_a_bounded_number_of_live_runs_and_the_run_list_pages() {
    let _g = serial();
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut app = srv.ingest();
    app.hello("bounds", None);
    let limit = 1000; // MAX_LIVE_RUNS_PER_CONNECTION
    for r in 0..limit + 5 {
        app.send(&envelope(
            r as u64,
            1_700_000_000_000 + r as u64,
            &format!("run_{r:05}"),
            "run.started",
            STARTED,
        ));
    }
    // Finishing one makes room for one more.
    app.send(&envelope(
        2000,
        1_700_000_100_000,
        "run_00000",
        "run.finished",
        r#"{"status":"ok"}"#,
    ));
    wait_events(&srv, "run_00000", 2);
    std::thread::sleep(Duration::from_millis(300)); // the writer applies the finish after its commit
    app.send(&envelope(
        2001,
        1_700_000_100_001,
        "run_late",
        "run.started",
        STARTED,
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut all = Vec::new();
    loop {
        all.clear();
        let mut path = "/api/runs".to_string();
        let mut pages = 0;
        loop {
            let page = srv.get_json(&path);
            pages += 1;
            let runs = page
                .get("runs")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            assert!(runs.len() <= 500, "a page holds at most 500 runs");
            all.extend(runs.iter().filter_map(|r| s(r, &["id"]).map(str::to_owned)));
            match s(&page, &["nextCursor"]) {
                Some(c) => path = format!("/api/runs?cursor={}", c.replace('~', "%7E")),
                None => break,
            }
            assert!(pages < 10);
        }
        if all.iter().any(|r| r == "run_late") || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        all.len(),
        limit + 1,
        "1,000 live runs, then one more after a finish"
    );
    assert!(all.iter().any(|r| r == "run_late"));
    assert!(
        !all.iter().any(|r| r.starts_with("run_0100")),
        "runs past the limit were refused"
    );
    let mut sorted = all.clone();
    sorted.dedup();
    assert_eq!(sorted.len(), all.len(), "no run on two pages");

    // subscribe "*": the first page as `runs`, the next on request as `runs.page`.
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    ui.send(r#"{"type":"subscribe","runId":"*"}"#);
    let first = ui.recv_type("runs");
    assert_eq!(
        first.get("runs").and_then(Value::as_array).map(Vec::len),
        Some(500)
    );
    let cursor = s(&first, &["nextCursor"]).expect("a next page").to_owned();
    ui.send(&format!(
        r#"{{"type":"subscribe","runId":"*","cursor":"{cursor}"}}"#
    ));
    let second = ui.recv_type("runs.page");
    assert_eq!(
        second.get("runs").and_then(Value::as_array).map(Vec::len),
        Some(500)
    );
    ui.send(r#"{"type":"subscribe","runId":"*","cursor":"nonsense"}"#);
    assert!(s(&ui.recv_type("error"), &["message"])
        .unwrap()
        .contains("cursor"));
    assert_eq!(srv.get("/api/runs?cursor=nonsense").0, 400);
    assert_eq!(srv.get("/api/runs?limit=0").0, 400);
    assert_eq!(
        srv.get_json("/api/runs?limit=3")
            .get("runs")
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(3)
    );
}

#[test]
fn viewers_that_never_read_hold_bounded_memory_in_total() {
    let _g = serial();
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    // Anonymous viewers are capped: four open, the fifth is refused (503).
    let mut idle: Vec<Ws> = (0..4).map(|_| srv.ui_anon()).collect();
    let p = srv.port;
    let upgrade = format!(
        "GET /ws/ui HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    let refused = http_raw(p, &upgrade);
    assert!(
        refused.starts_with("HTTP/1.1 503"),
        "the fifth anonymous viewer: {refused}"
    );
    // Four more with the token: eight viewers that subscribe and never read.
    idle.extend((0..4).map(|_| srv.ui()));
    for v in idle.iter_mut() {
        v.send(r#"{"type":"subscribe","runId":"run_mem"}"#);
        v.send(r#"{"type":"subscribe","runId":"*"}"#);
    }
    std::thread::sleep(Duration::from_millis(300));
    let before = rss_mb(&srv);
    let mut app = srv.ingest();
    app.hello("bounds", None);
    app.event("run_mem", "run.started", STARTED);
    let blob = "x".repeat(400 * 1024);
    let events = 400; // 160 MB through the server, to each of the eight viewers
    for n in 0..events {
        let payload = format!(
            r#"{{"nodeId":"tool:big","kind":"tool","name":"big","instanceId":"i{n}","input":{{"blob":"{blob}"}}}}"#
        );
        app.event("run_mem", "node.started", &payload);
    }
    wait_events(&srv, "run_mem", events + 1);
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_mb(&srv);
    println!(
        "8 idle viewers, {} MB streamed: RSS {before:.0} MB -> {after:.0} MB",
        events * 400 / 1024
    );
    // Before the total bound each viewer could hold 64 MiB: 8 x 64 = 512 MiB. Now the
    // viewers hold at most 128 MiB together (plus one 1 MiB share each), the writer's
    // queue at most 64 MiB.
    assert!(after - before < 300.0, "RSS grew {:.0} MB", after - before);
    drop(idle);
    // A viewer that reads still works.
    let mut ui = srv.ui();
    ui.recv_type("welcome");
}

/// Anonymous viewers that open at once never exceed the cap: a slot is taken when the
/// upgrade is admitted, before its `101` is written (the check and the registration used to
/// be apart, so concurrent upgrades could all pass the check).
#[test]
fn anonymous_viewers_opening_at_once_never_exceed_the_cap() {
    use std::io::{BufRead, BufReader, Write};
    let _g = serial();
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let p = srv.port;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(12));
    let tries: Vec<_> = (0..12)
        .map(|_| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(("127.0.0.1", p)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                barrier.wait();
                write!(s, "GET /ws/ui HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").unwrap();
                let mut line = String::new();
                BufReader::new(s.try_clone().unwrap()).read_line(&mut line).unwrap();
                (line, s) // keep an admitted socket open until every try answered
            })
        })
        .collect();
    let answers: Vec<(String, std::net::TcpStream)> =
        tries.into_iter().map(|t| t.join().unwrap()).collect();
    let admitted = answers
        .iter()
        .filter(|(l, _)| l.starts_with("HTTP/1.1 101"))
        .count();
    let refused = answers
        .iter()
        .filter(|(l, _)| l.starts_with("HTTP/1.1 503"))
        .count();
    assert_eq!(
        (admitted, refused),
        (4, 8),
        "{:?}",
        answers.iter().map(|(l, _)| l).collect::<Vec<_>>()
    );
}
