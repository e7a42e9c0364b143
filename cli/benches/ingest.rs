//! Events per second from ONE app into SQLite through the real socket: starts the real
//! `graphmind` binary, streams N envelopes over one `/ingest` WebSocket as fast as the
//! client can write them, and stops the clock when the last one is readable back from
//! storage (`GET /api/runs/:id/events`), so the figure covers parse, claim, the writer
//! thread's batched transactions and the commit.
//!
//! Run: `cargo bench -p graphmind-cli` (env `GM_BENCH_EVENTS` changes N, default 200000).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::Message;

/// The `graphmind` binary under test: this build's, or `GRAPHMIND_BENCH_BIN` (to compare
/// two builds alternately in one sitting).
fn bin() -> String {
    std::env::var("GRAPHMIND_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_graphmind").into())
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

/// One client text frame, FIN, masked with the all-zero key.
fn encode_masked_text(out: &mut Vec<u8>, payload: &[u8]) {
    out.push(0x81);
    let len = payload.len();
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if len <= u16::MAX as usize {
        out.push(0x80 | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(payload);
}

/// user + system CPU of a process, in clock ticks (1/100 s on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

/// (thread name, user + system ticks) of every thread of a process.
fn thread_ticks(pid: u32) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in dir.flatten() {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            let name = stat
                .split_once('(')
                .and_then(|(_, r)| r.rsplit_once(')'))
                .map(|(n, _)| n.to_owned())
                .unwrap_or_default();
            let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let f: Vec<&str> = after.split_whitespace().collect();
            let ticks = f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
                + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            out.push((name, ticks));
        }
    }
    out
}

fn run_case(label: &str, n: u64, payload: &str) {
    let dir = std::env::temp_dir().join(format!("gm-bench-{}-{label}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(bin())
        .args([
            "--port",
            "0",
            "--json",
            "--no-open",
            "--pause-on-error",
            "off",
            "--db",
        ])
        .arg(dir.join("bench.db"))
        // Never the real ~/.graphmind: run files and any telemetry id go to the temp folder.
        .env("HOME", &dir)
        .env("GRAPHMIND_HOME", dir.join("home"))
        .env("GRAPHMIND_TELEMETRY", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .split("\"port\":")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();

    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut ws, _) = tungstenite::client(format!("ws://127.0.0.1:{port}/ingest"), stream).unwrap();
    ws.send(Message::text(r#"{"gm":1,"seq":0,"ts":0,"runId":"*","type":"hello","payload":{"versions":{"protocol":1,"client":"bench"},"capabilities":[],"app":"bench"}}"#)).unwrap();
    let _ack = ws.read().unwrap();

    // The frames are encoded before the clock starts (masked with a zero key, which the
    // protocol allows), so the client costs one big write and the figure is the server's.
    let mut wire = Vec::new();
    let mut bytes = 0usize;
    for seq in 1..=n {
        let f = format!(
            r#"{{"gm":1,"seq":{seq},"ts":{},"runId":"run_bench","type":"node.token","payload":{payload}}}"#,
            1_700_000_000_000u64 + seq
        );
        bytes += f.len();
        encode_masked_text(&mut wire, f.as_bytes());
    }
    let cpu0 = cpu_ticks(child.id());
    let t0 = Instant::now();
    ws.get_mut().write_all(&wire).unwrap();
    let sent = t0.elapsed();
    // Done when the last event is readable from the database file (a reader in this
    // process: the check costs the server nothing). One app's events are stored in order.
    let reader = rusqlite::Connection::open(dir.join("bench.db")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let found: Option<i64> = reader
            .query_row(
                "SELECT seq FROM events WHERE run_id = 'run_bench' AND seq = ?1",
                [n as i64],
                |r| r.get(0),
            )
            .ok();
        if found.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "events never all stored");
        std::thread::sleep(Duration::from_millis(2));
    }
    let stored = t0.elapsed();
    let cpu = (cpu_ticks(child.id()) - cpu0) as f64 / 100.0;
    let threads = thread_ticks(child.id());
    let total = http_get(port, "/api/runs/run_bench/events?limit=1");
    assert!(total.contains(&format!("\"total\":{n}")), "{total}");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let busiest = threads
        .iter()
        .max_by_key(|t| t.1)
        .cloned()
        .unwrap_or_default();
    let split: Vec<String> = threads
        .iter()
        .filter(|t| t.1 > 0)
        .map(|(name, t)| format!("{name} {:.2}s", *t as f64 / 100.0))
        .collect();
    println!(
        "ingest/{label}: per thread (whole process life): {}; busiest {} -> {:.0} events/s when each pipeline thread has a core",
        split.join(", "),
        busiest.0,
        n as f64 / (busiest.1 as f64 / 100.0).max(0.01)
    );
    println!(
        "ingest/{label}: {n} events ({:.1} MB) from one app: written in {:.3}s, all stored after {:.3}s -> {:.0} events/s into SQLite ({:.1} MB/s); server CPU {:.2}s -> {:.0} events per server CPU-second",
        bytes as f64 / 1e6,
        sent.as_secs_f64(),
        stored.as_secs_f64(),
        n as f64 / stored.as_secs_f64(),
        bytes as f64 / 1e6 / stored.as_secs_f64(),
        cpu,
        n as f64 / cpu.max(0.01)
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run a tiny case.
    let bench = std::env::args().any(|a| a == "--bench");
    let n: u64 = std::env::var("GM_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench { 200_000 } else { 2_000 });
    run_case(
        "small",
        n,
        r#"{"nodeId":"llm:step","deltas":[{"t":"text","v":"hello world"}]}"#,
    );
    let kb = format!(
        r#"{{"nodeId":"llm:step","deltas":[{{"t":"text","v":"{}"}}]}}"#,
        "x".repeat(1000)
    );
    run_case("1kb", n / 2, &kb);
}
