//! Abuse, bounded in count and time, against the real binary: 300 and 1,000 simultaneous
//! ingest connections, floods of 20,000 and 100,000 frames, malformed JSON, unknown types,
//! wrong `gm`, half-open sockets, oversized frames on both sockets, hostile frames from a
//! small fuzzer. Each test reports the server's peak RSS (VmHWM); the 1,000-connection
//! test also reports ingest throughput and the p99 store latency.
//! Run with `--nocapture` to see the figures.

mod common;
use common::*;
use graphmind_core::json::Value;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tungstenite::Message;

/// The scenarios run one at a time, so each one's figures are its own.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn vm(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)
                .map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

/// Every run, following `GET /api/runs`' pages.
fn every_run(srv: &Server) -> Vec<Value> {
    let mut all = Vec::new();
    let mut path = "/api/runs".to_string();
    loop {
        let page = srv.get_json(&path);
        all.extend(
            page.get("runs")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        );
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(c) => path = format!("/api/runs?cursor={}", c.replace('~', "%7E")),
            None => return all,
        }
    }
}

fn peak_rss_mb(srv: &Server) -> f64 {
    vm(srv.child.id(), "VmHWM:") as f64 / 1024.0
}

fn count_events(srv: &Server) -> i64 {
    let c = rusqlite::Connection::open(&srv.db).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap()
}

fn wait_count(srv: &Server, n: i64, limit: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let c = count_events(srv);
        if c >= n {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < limit,
            "only {c} of {n} events stored after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn now_us() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

/// Opens `n` app connections, each attached (hello acknowledged).
fn attach_many(srv: &Server, n: usize) -> Vec<Ws> {
    let mut conns = Vec::with_capacity(n);
    for k in 0..n {
        let mut ws = srv.ingest();
        ws.send(&frame(0, "*", "hello", &format!(r#"{{"versions":{{"protocol":1,"client":"abuse"}},"capabilities":["run-claim"],"app":"a{k}"}}"#)));
        ws.seq = 1;
        conns.push(ws);
    }
    for ws in conns.iter_mut() {
        ws.recv_type("hello.ack");
    }
    conns
}

/// `conns` connections each send `per` events into their own run; returns the send time.
fn stream_all(conns: &mut [Ws], per: u64, tag: &str) -> Duration {
    let t = Instant::now();
    for round in 0..per {
        for (k, ws) in conns.iter_mut().enumerate() {
            let f = format!(
                r#"{{"gm":1,"seq":{},"ts":{},"runId":"{tag}{k}","type":"node.token","payload":{{"nodeId":"llm:step","deltas":[{{"t":"text","v":"tok {round}"}}],"sentUs":{}}}}}"#,
                round + 1,
                1_700_000_000_000u64 + round,
                now_us()
            );
            ws.ws.write(Message::text(f)).unwrap();
            if round % 10 == 9 || round + 1 == per {
                ws.ws.flush().unwrap();
            }
        }
    }
    t.elapsed()
}

#[test]
fn three_hundred_then_a_thousand_simultaneous_ingest_connections() {
    let _serial = serial();
    for (n, per) in [(300usize, 20u64), (1000, 20)] {
        let srv = Server::start(&[], &[]);
        let t = Instant::now();
        let mut conns = attach_many(&srv, n);
        let attach = t.elapsed();
        stream_all(&mut conns, per, "c");
        let took = wait_count(&srv, (n as u64 * per) as i64, Duration::from_secs(120));
        let runs = every_run(&srv);
        assert_eq!(runs.len(), n);
        assert!(runs
            .iter()
            .all(|r| r.get("live").and_then(Value::as_bool) == Some(true)));
        assert_eq!(srv.get("/health").0, 200);
        eprintln!(
            "[abuse] {n} simultaneous ingest connections: attached in {:.2} s, {} events stored {:.2} s after the last send; peak RSS {:.1} MB",
            attach.as_secs_f64(),
            n as u64 * per,
            took.as_secs_f64(),
            peak_rss_mb(&srv)
        );
        drop(conns);
        srv.wait_run("c0", |r| {
            r.get("live").and_then(Value::as_bool) == Some(false)
        });
    }
}

/// `conns` each send `per` events into run `{tag}{k}`, all as fast as possible (`pace`
/// None) or one round every `pace`; a viewer tails 20 of the runs. Returns (events/s,
/// p50, p99, max latency in ms).
fn measure(
    srv: &Server,
    conns: &mut [Ws],
    per: u64,
    tag: &str,
    pace: Option<Duration>,
) -> (f64, f64, f64, f64) {
    let n = conns.len();
    let before = count_events(srv);
    // A viewer tails 20 of the runs; an event reaches it only after its batch committed,
    // so send -> viewer is an upper bound of the store latency.
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    let sample: Vec<usize> = (0..n).step_by(n / 20).collect();
    for k in &sample {
        ui.send(&format!(r#"{{"type":"subscribe","runId":"{tag}{k}"}}"#));
        ui.recv_type("replay.end");
    }
    let expected = sample.len() as u64 * per;
    let reader = std::thread::spawn(move || {
        let mut lat = Vec::with_capacity(expected as usize);
        let deadline = Instant::now() + Duration::from_secs(180);
        while (lat.len() as u64) < expected && Instant::now() < deadline {
            if let Some(m) = ui.recv_within(Duration::from_millis(200)) {
                if let Some(sent) = m
                    .get("envelope")
                    .and_then(|e| e.get("payload"))
                    .and_then(|p| p.get("sentUs"))
                    .and_then(Value::as_f64)
                {
                    lat.push(now_us() as f64 - sent);
                }
            }
        }
        lat
    });
    let t = Instant::now();
    match pace {
        None => {
            stream_all(conns, per, tag);
        }
        Some(every) => {
            for round in 0..per {
                let due = t + every * round as u32;
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                for (k, ws) in conns.iter_mut().enumerate() {
                    let f = format!(
                        r#"{{"gm":1,"seq":{},"ts":{},"runId":"{tag}{k}","type":"node.token","payload":{{"nodeId":"llm:step","deltas":[{{"t":"text","v":"tok {round}"}}],"sentUs":{}}}}}"#,
                        round + 1,
                        1_700_000_000_000u64 + round,
                        now_us()
                    );
                    ws.ws.send(Message::text(f)).unwrap();
                }
            }
        }
    }
    wait_count(
        srv,
        before + (n as u64 * per) as i64,
        Duration::from_secs(180),
    );
    let total = t.elapsed();
    let mut lat = reader.join().unwrap();
    assert_eq!(
        lat.len() as u64,
        expected,
        "every sampled event reached the viewer"
    );
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).min(lat.len()) - 1] / 1000.0;
    (
        (n as u64 * per) as f64 / total.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        lat.last().unwrap() / 1000.0,
    )
}

#[test]
fn ingest_throughput_and_p99_store_latency_with_a_thousand_connections() {
    let _serial = serial();
    const N: usize = 1000;
    let srv = Server::start(&[], &[]);
    let mut conns = attach_many(&srv, N);
    // Saturated: 100,000 events sent as fast as the client can write them.
    let (rate, p50, p99, max) = measure(&srv, &mut conns, 100, "t", None);
    eprintln!(
        "[abuse] throughput, {N} connections x 100 events, unpaced: {rate:.0} events/s; send -> stored -> viewer latency p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms (queueing included); peak RSS {:.1} MB",
        peak_rss_mb(&srv)
    );
    // Paced: every connection sends one event every 100 ms (10,000 events/s in total).
    let (rate, p50, p99, max) =
        measure(&srv, &mut conns, 30, "u", Some(Duration::from_millis(100)));
    eprintln!(
        "[abuse] {N} connections paced at 10,000 events/s for 3 s: {rate:.0} events/s; latency p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms; peak RSS {:.1} MB",
        peak_rss_mb(&srv)
    );
}

#[test]
fn floods_of_20000_and_100000_frames_on_one_socket() {
    let _serial = serial();
    for n in [20_000u64, 100_000] {
        let srv = Server::start(&[], &[]);
        let mut app = srv.ingest();
        app.hello("flood", None);
        let t = Instant::now();
        for seq in 1..=n {
            let f = frame(
                seq,
                "run_flood",
                "node.token",
                &format!(r#"{{"nodeId":"llm:step","deltas":[{{"t":"text","v":"{seq}"}}]}}"#),
            );
            app.ws.write(Message::text(f)).unwrap();
            if seq % 256 == 0 {
                app.ws.flush().unwrap();
            }
        }
        app.ws.flush().unwrap();
        wait_count(&srv, n as i64, Duration::from_secs(300));
        let took = t.elapsed();
        assert_eq!(srv.get("/health").0, 200);
        eprintln!("[abuse] flood of {n} frames on one socket: all stored in {:.2} s ({:.0} events/s); peak RSS {:.1} MB", took.as_secs_f64(), n as f64 / took.as_secs_f64(), peak_rss_mb(&srv));
    }
}

#[test]
fn malformed_json_unknown_types_and_wrong_gm() {
    let _serial = serial();
    let srv = Server::start(&[], &[]);
    let mut app = srv.ingest();
    app.hello("hostile", None);
    let deep = "[".repeat(100_000);
    let junk: Vec<String> = vec![
        "".into(),
        "{".into(),
        "null".into(),
        "[1,2,3]".into(),
        "{\"gm\":1}".into(),
        deep,
        "{\"gm\":1,\"seq\":-1,\"ts\":0,\"runId\":\"r\",\"type\":\"x\",\"payload\":{}}".into(),
        "{\"gm\":1,\"seq\":1e400,\"ts\":0,\"runId\":\"r\",\"type\":\"x\",\"payload\":{}}".into(),
        "{\"gm\":1,\"seq\":0,\"ts\":0,\"runId\":\"\",\"type\":\"node.started\",\"payload\":{\"nodeId\":1}}".into(),
        "\u{0}\u{1}\u{2}".into(),
        "{\"gm\":1,\"seq\":2,\"ts\":0,\"runId\":\"run_m\",\"type\":\"node.started\",\"payload\":{\"nodeId\":\"x\"}}".into(),
    ];
    for j in &junk {
        app.send(j);
    }
    app.ws
        .send(Message::binary(vec![0xff, 0xfe, 0x00, 0x80]))
        .unwrap();
    // Unknown types are stored opaquely; a valid event after all that is stored.
    app.event(
        "run_m",
        "custom.unheard-of",
        r#"{"anything":[1,{"x":null}]}"#,
    );
    app.event(
        "run_m",
        "run.started",
        r#"{"app":"hostile","sdk":{"name":"t","version":"0"}}"#,
    );
    srv.wait_run("run_m", |r| i(r, &["eventCount"]) == Some(2));
    // Wrong gm closes that socket (1002), nothing else.
    app.send(&frame(99, "run_m", "node.token", "{}").replace("\"gm\":1", "\"gm\":2"));
    let mut code = None;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && code.is_none() {
        match app.ws.read() {
            Ok(Message::Close(Some(f))) => code = Some(u16::from(f.code)),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    assert_eq!(code, Some(1002));
    // A viewer sending garbage gets errors, not a crash.
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    for bad in [
        "nope",
        "[]",
        "{\"type\":7}",
        "{\"type\":\"control\",\"envelope\":{\"gm\":1}}",
        "{\"type\":\"dance\"}",
    ] {
        ui.send(bad);
        assert_eq!(s(&ui.recv_type("error"), &["type"]), Some("error"), "{bad}");
    }
    assert_eq!(srv.get("/health").0, 200);
    eprintln!(
        "[abuse] malformed / unknown / wrong gm: survived; peak RSS {:.1} MB",
        peak_rss_mb(&srv)
    );
}

#[test]
fn oversized_frames_are_refused_with_1009_on_both_sockets() {
    let _serial = serial();
    let srv = Server::start(&[], &[]);
    for path in ["/ingest", "/ws/ui"] {
        let mut ws = if path == "/ingest" {
            srv.ingest()
        } else {
            srv.ui()
        };
        let big = "x".repeat(16 * 1024 * 1024 + 1);
        let _ = ws.ws.send(Message::text(big));
        let mut code = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && code.is_none() {
            match ws.ws.read() {
                Ok(Message::Close(Some(f))) => code = Some(u16::from(f.code)),
                Ok(_) => {}
                Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        assert_eq!(code, Some(1009), "{path}");
    }
    assert_eq!(srv.get("/health").0, 200);
    eprintln!(
        "[abuse] 16 MiB + 1 frames on /ingest and /ws/ui: 1009, server fine; peak RSS {:.1} MB",
        peak_rss_mb(&srv)
    );
}

#[test]
fn half_open_sockets_do_not_block_anyone() {
    let _serial = serial();
    let srv = Server::start(&[], &[]);
    let p = srv.port;
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(("127.0.0.1", p)).unwrap()); // says nothing
    }
    for _ in 0..200 {
        let mut s = TcpStream::connect(("127.0.0.1", p)).unwrap();
        s.write_all(format!("GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\n").as_bytes())
            .unwrap(); // head never ends
        idle.push(s);
    }
    let mut mute = Vec::new();
    for _ in 0..100 {
        // Upgraded, then never reads or writes again.
        let mut ws = srv.ingest();
        ws.send(&frame(
            0,
            "*",
            "hello",
            r#"{"versions":{"protocol":1,"client":"mute"},"capabilities":[],"app":"mute"}"#,
        ));
        mute.push(ws);
    }
    let t = Instant::now();
    let mut app = srv.ingest();
    app.hello("alive", None);
    app.event(
        "run_alive",
        "run.started",
        r#"{"app":"alive","sdk":{"name":"t","version":"0"}}"#,
    );
    srv.wait_run("run_alive", |r| i(r, &["eventCount"]) == Some(1));
    assert_eq!(srv.get("/health").0, 200);
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "served in {:?} beside 500 half-open sockets",
        t.elapsed()
    );
    eprintln!(
        "[abuse] 500 half-open sockets: a real app served in {:.0} ms; peak RSS {:.1} MB",
        t.elapsed().as_secs_f64() * 1000.0,
        peak_rss_mb(&srv)
    );
    drop(idle);
    drop(mute);
}

/// xorshift64*: deterministic hostile bytes.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn hostile_frames_from_a_fuzzer() {
    let _serial = serial();
    let srv = Server::start(&[], &[]);
    let seeds = [
        frame(
            1,
            "run_z",
            "node.started",
            r#"{"nodeId":"tool:x","kind":"tool","name":"x","instanceId":"i","input":{"a":[1,2,{"b":"c"}]}}"#,
        ),
        frame(
            2,
            "run_z",
            "exec.paused",
            r#"{"pauseId":"p","nodeId":"tool:x","point":"before","loop":{"repeats":3,"firstSeq":1,"lastSeq":2,"fingerprint":"f"}}"#,
        ),
        frame(
            3,
            "run_z",
            "exec.resumed",
            r#"{"pauseId":"p","action":"inject","output":{"x":1},"principal":"viewer"}"#,
        ),
        frame(4, "run_z", "run.finished", r#"{"status":"ok"}"#),
    ];
    let alphabet: &[u8] = b"{}[]\",:0123456789.eE+-truefalsnul \\u\"gmseqtsrunIdtypepayload\x7f";
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut app = srv.ingest();
    app.hello("fuzz", None);
    let mut sent = 0;
    for _ in 0..3000 {
        let mut b = seeds[rng.below(seeds.len())].clone().into_bytes();
        for _ in 0..1 + rng.below(4) {
            match rng.below(4) {
                0 if !b.is_empty() => {
                    let i = rng.below(b.len());
                    b[i] = alphabet[rng.below(alphabet.len())];
                }
                1 if !b.is_empty() => {
                    let i = rng.below(b.len());
                    b.truncate(i);
                }
                2 => {
                    let i = rng.below(b.len() + 1);
                    b.insert(i, alphabet[rng.below(alphabet.len())]);
                }
                _ if b.len() > 2 => {
                    let i = rng.below(b.len() - 1);
                    let j = i + rng.below(b.len() - i);
                    b.drain(i..j);
                }
                _ => {}
            }
        }
        let text = String::from_utf8_lossy(&b).into_owned();
        if app.ws.send(Message::text(text)).is_err() {
            // A mutant may have said gm:2 (close 1002): reconnect and go on.
            app = srv.ingest();
            app.hello("fuzz", None);
        }
        sent += 1;
    }
    // Still healthy, and a clean event after the storm is stored.
    let mut clean = srv.ingest();
    clean.hello("after", None);
    clean.event(
        "run_after",
        "run.started",
        r#"{"app":"after","sdk":{"name":"t","version":"0"}}"#,
    );
    srv.wait_run("run_after", |r| i(r, &["eventCount"]) == Some(1));
    assert_eq!(srv.get("/health").0, 200);
    // Whatever the fuzzer got stored carries no app-written principal.
    let c = rusqlite::Connection::open(&srv.db).unwrap();
    let forged: i64 = c.query_row("SELECT COUNT(*) FROM events WHERE type = 'exec.resumed' AND frame_json LIKE '%\"principal\":\"viewer\"%'", [], |r| r.get(0)).unwrap();
    assert_eq!(forged, 0, "an app cannot write who resumed");
    eprintln!(
        "[abuse] fuzzer: {sent} mutated frames, server healthy; peak RSS {:.1} MB",
        peak_rss_mb(&srv)
    );
}

#[test]
fn a_viewer_that_stops_reading_does_not_grow_the_server_without_bound() {
    let _serial = serial();
    let srv = Server::start(&[], &[]);
    let mut app = srv.ingest();
    app.hello("firehose", None);
    app.event(
        "run_f",
        "run.started",
        r#"{"app":"firehose","sdk":{"name":"t","version":"0"}}"#,
    );
    srv.wait_run("run_f", |r| i(r, &["eventCount"]) == Some(1));
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    ui.send(r#"{"type":"subscribe","runId":"run_f"}"#);
    ui.recv_type("replay.end");
    // The viewer now stops reading; ~100 MB of live events go by.
    let pad = "z".repeat(50_000);
    for seq in 2..2_002u64 {
        app.ws
            .write(Message::text(frame(
                seq,
                "run_f",
                "node.token",
                &format!(r#"{{"nodeId":"llm:step","deltas":[{{"t":"text","v":"{pad}"}}]}}"#),
            )))
            .unwrap();
        if seq % 16 == 0 {
            app.ws.flush().unwrap();
        }
    }
    app.ws.flush().unwrap();
    wait_count(&srv, 2001, Duration::from_secs(120));
    let rss = peak_rss_mb(&srv);
    assert!(rss < 400.0, "peak RSS {rss:.1} MB with a stalled viewer");
    eprintln!("[abuse] stalled viewer under 100 MB of live events: every event stored, peak RSS {rss:.1} MB");
    assert_eq!(srv.get("/health").0, 200);
}
