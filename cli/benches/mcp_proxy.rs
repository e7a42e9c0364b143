//! What `graphmind mcp-proxy` adds to a request/response pair: 10,000 `tools/call` echoes
//! to the real `@modelcontextprotocol/server-everything`, one at a time, measured from the
//! host's side (write the request line, read until its answer). Four sessions in the same
//! run: direct, through the proxy as a plain pipe (`GRAPHMIND_DISABLED=1`), through a
//! detached proxy (no GraphMind listening) and through a proxy attached to a real
//! `graphmind` server (recording every call, nothing armed).
//! p50 / p99 of each and the difference to the direct session. Goal: <= 50 µs added at p50.
//! A fifth session is the floor: this bench binary itself as a bare relay (one blocking
//! read/write loop per direction, nothing else), which is what any process in the middle
//! costs on this machine, however little it does.
//!
//! The sessions run side by side and take turns in rounds of `CALLS / ROUNDS` calls (the
//! order rotating each round), so a shared machine's changing load falls on all of them
//! alike instead of on whichever session ran while another build was busy.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const CALLS: usize = 10_000;
const WARMUP: usize = 500;
const ROUNDS: usize = 50;
/// The server binary: cargo's build, or the one `GRAPHMIND_BENCH_BIN` names
/// (`scripts/bench-servers.sh BASE NEW` compares two builds this way).
fn bin() -> String {
    std::env::var("GRAPHMIND_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_graphmind").to_owned())
}

fn peer() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.mcp-peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(p.exists(), "{} missing: run `make setup`", p.display());
    p.to_string_lossy().into_owned()
}

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
    out: Vec<u8>,
}

impl Peer {
    fn start(cmd: &[String], env: &[(&str, &str)]) -> Peer {
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        let mut p = Peer {
            child,
            stdin,
            stdout,
            line: String::new(),
            out: Vec::new(),
        };
        p.call(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#, "\"id\":0");
        p.stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
        p
    }

    /// Writes one request line and reads lines until the one carrying `id_marker`.
    fn call(&mut self, frame: &str, id_marker: &str) {
        // One write per line, as MCP hosts send a frame (two writes would wake the relay
        // twice per request).
        self.out.clear();
        self.out.extend_from_slice(frame.as_bytes());
        self.out.push(b'\n');
        self.stdin.write_all(&self.out).unwrap();
        loop {
            self.line.clear();
            assert!(
                self.stdout.read_line(&mut self.line).unwrap() > 0,
                "peer closed"
            );
            if self.line.contains(id_marker) && self.line.contains("\"result\"") {
                return;
            }
        }
    }

    fn measure(&mut self, n: usize, base: usize) -> Vec<Duration> {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let id = base + i;
            let frame = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"bench {id}"}}}}}}"#
            );
            let marker = format!("\"id\":{id}}}");
            let t = Instant::now();
            self.call(&frame, &marker);
            out.push(t.elapsed());
        }
        out
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn start_server(dir: &Path) -> (Child, u16) {
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
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .split("\"port\":")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    (child, port)
}

/// The floor: the least any relay process in the middle can cost. `bench --relay -- CMD`
/// starts CMD and copies bytes both ways with one blocking thread per direction, nothing
/// else (no parsing, no locks, no recording).
fn bare_relay(cmd: &[String]) {
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_child = child.stdin.take().unwrap();
    let mut from_child = child.stdout.take().unwrap();
    fn pump(from: &mut impl std::io::Read, to: &mut impl Write) {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || to.write_all(&buf[..n]).is_err() {
                return;
            }
        }
    }
    std::thread::spawn(move || pump(&mut std::io::stdin().lock(), &mut to_child));
    std::thread::spawn(move || pump(&mut from_child, &mut std::io::stdout().lock()));
    let _ = child.wait();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--relay") {
        bare_relay(&args[at + 2..]); // after `--relay --`
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let server = peer();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("gm-mcp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut gm, port) = start_server(&dir);

    let direct = vec!["node".to_owned(), server.clone()];
    let proxy_of = |bin: &str, flags: Vec<String>| {
        let mut v = vec![bin.to_owned(), "mcp-proxy".to_owned()];
        v.extend(flags);
        v.push("--".into());
        v.extend(direct.iter().cloned());
        v
    };
    let proxy = |flags: Vec<String>| proxy_of(&bin(), flags);
    let off: &[(&str, &str)] = &[("GRAPHMIND_DISABLED", "1")];
    type Session<'a> = (&'a str, Vec<String>, &'a [(&'a str, &'a str)]);
    let mut bare = vec![
        std::env::current_exe()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        "--relay".into(),
        "--".into(),
    ];
    bare.extend(direct.iter().cloned());
    let mut sessions: Vec<Session> = vec![
        ("direct", direct.clone(), &[]),
        ("bare relay (floor)", bare, &[]),
        ("proxy, plain pipe", proxy(vec![]), off),
        (
            "proxy, detached",
            proxy(vec!["--port".into(), closed.to_string()]),
            &[],
        ),
        (
            "proxy, attached",
            proxy(vec![
                "--port".into(),
                port.to_string(),
                "--wait-for-attach".into(),
            ]),
            &[],
        ),
    ];
    // GRAPHMIND_BENCH_BEFORE=<another graphmind binary>: its proxy runs alongside, for a
    // before/after comparison under the same load.
    let before = std::env::var("GRAPHMIND_BENCH_BEFORE").ok();
    if let Some(bin) = before.as_deref() {
        sessions.push(("before: plain pipe", proxy_of(bin, vec![]), off));
        sessions.push((
            "before: detached",
            proxy_of(bin, vec!["--port".into(), closed.to_string()]),
            &[],
        ));
        sessions.push((
            "before: attached",
            proxy_of(
                bin,
                vec![
                    "--port".into(),
                    port.to_string(),
                    "--wait-for-attach".into(),
                ],
            ),
            &[],
        ));
    }
    let load = || {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split(' ')
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let load_before = load();
    let mut peers: Vec<(&str, Peer)> = sessions
        .into_iter()
        .map(|(name, cmd, env)| (name, Peer::start(&cmd, env)))
        .collect();
    for (_, p) in peers.iter_mut() {
        p.measure(WARMUP, 1);
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(CALLS); peers.len()];
    let per_round = CALLS / ROUNDS;
    for round in 0..ROUNDS {
        for k in 0..peers.len() {
            let s = (round + k) % peers.len();
            let base = 1 + WARMUP + round * per_round;
            samples[s].extend(peers[s].1.measure(per_round, base));
        }
    }
    println!("mcp-proxy: {CALLS} tools/call echoes per session to server-everything (after {WARMUP} warm-up calls), sessions interleaved in {ROUNDS} rounds; load average {load_before} before, {} after", load());
    println!(
        "{:<20} {:>10} {:>10} {:>14} {:>14}",
        "session", "p50 µs", "p99 µs", "added p50 µs", "added p99 µs"
    );
    let mut base: Option<(f64, f64)> = None;
    for ((name, p), mut samples) in peers.into_iter().zip(samples) {
        p.stop();
        samples.sort();
        let (p50, p99) = (pct(&samples, 0.50), pct(&samples, 0.99));
        let (a50, a99) = match base {
            None => {
                base = Some((p50, p99));
                ("—".to_owned(), "—".to_owned())
            }
            Some((b50, b99)) => (format!("{:+.1}", p50 - b50), format!("{:+.1}", p99 - b99)),
        };
        println!("{name:<20} {p50:>10.1} {p99:>10.1} {a50:>14} {a99:>14}");
    }
    let _ = gm.kill();
    let _ = gm.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
