//! Test harness: the REAL `graphmind` binary on 127.0.0.1 with a temp SQLite file, a raw
//! HTTP client and tungstenite WebSocket clients. Shared by the cli and ffi crates' tests
//! (`#[path]`), so both drive the server the same way.
#![allow(dead_code)]

use graphmind_core::json::{parse_str, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket};

/// The server binary: cargo's own path in the cli crate's tests; the release build next to
/// the workspace for the other crates that share this harness (ffi).
pub const BIN: &str = match option_env!("CARGO_BIN_EXE_graphmind") {
    Some(path) => path,
    None => concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/graphmind"),
};

pub fn temp_dir() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "gm-cli-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub struct Server {
    pub child: Child,
    pub port: u16,
    pub db: PathBuf,
    pub dir: PathBuf,
    /// `GRAPHMIND_HOME` of this server (a temp folder, never ~/.graphmind).
    pub home: PathBuf,
    /// The viewer token, read from the server's redirect file.
    pub viewer_token: String,
    /// The agent token, read from `serve-<port>.json`.
    pub agent_token: String,
}

/// Environment every spawned `graphmind` gets: a temp HOME and GRAPHMIND_HOME, no
/// inherited GraphMind variables, telemetry off unless a test sets it.
pub fn isolate(cmd: &mut Command, dir: &std::path::Path) {
    for v in [
        "GRAPHMIND_PAUSE_ON_ERROR",
        "GRAPHMIND_DB",
        "GRAPHMIND_ABANDON_GRACE_MS",
        "GRAPHMIND_ALLOWED_ORIGINS",
        "GRAPHMIND_RETENTION",
        "GRAPHMIND_KEEP_RUNS",
        "GRAPHMIND_KEEP_DAYS",
        "GRAPHMIND_TELEMETRY",
        "GRAPHMIND_TELEMETRY_URL",
        "DO_NOT_TRACK",
        "CI",
        "GRAPHMIND_VIEWER_DIST",
        // A developer's own OpenTelemetry settings must not make every test server export.
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        // A developer's log filter must not change what the server's log tests read.
        "RUST_LOG",
    ] {
        cmd.env_remove(v);
    }
    cmd.env("HOME", dir.join("userhome"))
        .env("GRAPHMIND_HOME", dir.join("gmhome"))
        .env("GRAPHMIND_TELEMETRY", "0");
}

impl Server {
    pub fn start(args: &[&str], envs: &[(&str, &str)]) -> Server {
        let dir = temp_dir();
        Self::start_in(dir, args, envs)
    }

    /// A server whose log goes to `server.log` in its folder instead of the test's
    /// stderr (load tests: a line per attached app would bury the results).
    pub fn start_quiet(args: &[&str], envs: &[(&str, &str)]) -> Server {
        let dir = temp_dir();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        Self::start_with(dir, args, envs, Stdio::from(log))
    }

    pub fn start_in(dir: PathBuf, args: &[&str], envs: &[(&str, &str)]) -> Server {
        Self::start_with(dir, args, envs, Stdio::inherit())
    }

    fn start_with(dir: PathBuf, args: &[&str], envs: &[(&str, &str)], stderr: Stdio) -> Server {
        let db = dir.join("graphmind.db");
        let mut cmd = Command::new(BIN);
        cmd.args(["--port", "0", "--json", "--no-open", "--db"])
            .arg(&db)
            .args(args);
        isolate(&mut cmd, &dir);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn graphmind");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v = parse_str(line.trim()).unwrap_or_else(|_| panic!("--json line: {line:?}"));
        let port = v.get("port").and_then(Value::as_i64).unwrap() as u16;
        assert_eq!(
            v.get("url").and_then(Value::as_str),
            Some(format!("http://127.0.0.1:{port}").as_str())
        );
        assert_eq!(
            v.get("pid").and_then(Value::as_i64),
            Some(child.id() as i64)
        );
        assert!(v.get("version").and_then(Value::as_str).is_some());
        let home = dir.join("gmhome");
        let opener = std::fs::read_to_string(home.join("run").join(format!("open-{port}.html")))
            .unwrap_or_default();
        let viewer_token = opener
            .split("#token=")
            .nth(1)
            .map(|t| {
                t.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect()
            })
            .unwrap_or_default();
        let cred = std::fs::read_to_string(home.join("run").join(format!("serve-{port}.json")))
            .unwrap_or_default();
        let agent_token = parse_str(&cred)
            .ok()
            .and_then(|v| {
                v.get("agentToken")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        Server {
            child,
            port,
            db,
            dir,
            home,
            viewer_token,
            agent_token,
        }
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.port, path)
    }

    pub fn get_json(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "{path}: {body}");
        parse_str(&body).unwrap()
    }

    pub fn ingest(&self) -> Ws {
        Ws::connect(self.port, "/ingest")
    }

    /// A viewer socket with the viewer token (full control).
    pub fn ui(&self) -> Ws {
        Ws::connect_with(
            self.port,
            "/ws/ui",
            &[(
                "Sec-WebSocket-Protocol",
                &format!("graphmind.v1, gm.auth.{}", self.viewer_token),
            )],
        )
    }

    /// A viewer socket without a credential (`anonymous`).
    pub fn ui_anon(&self) -> Ws {
        Ws::connect(self.port, "/ws/ui")
    }

    /// Runs the `graphmind` binary with this server's isolation and extra args/env.
    pub fn cli(&self, args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
        let mut cmd = Command::new(BIN);
        isolate(&mut cmd, &self.dir);
        cmd.args(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// The run `id` as `GET /api/runs` lists it, following its pages.
    pub fn find_run(&self, id: &str) -> Option<Value> {
        let mut path = "/api/runs".to_string();
        loop {
            let page = self.get_json(&path);
            let found = page.get("runs").and_then(Value::as_array).and_then(|a| {
                a.iter()
                    .find(|r| r.get("id").and_then(Value::as_str) == Some(id))
                    .cloned()
            });
            if found.is_some() {
                return found;
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(c) => path = format!("/api/runs?cursor={}", c.replace('~', "%7E")),
                None => return None,
            }
        }
    }

    /// Polls `/api/runs` until `pred` holds for the run `id` (or panics after 10 s).
    pub fn wait_run(&self, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let run = self.find_run(id);
            if let Some(r) = run {
                if pred(&r) {
                    return r;
                }
                if Instant::now() > deadline {
                    panic!(
                        "run {id} never matched; last: {}",
                        graphmind_core::json::to_string(&r)
                    );
                }
            } else if Instant::now() > deadline {
                panic!("run {id} never appeared");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Every stored event of `run_id`, paged with `afterSeq`.
    pub fn all_events(&self, run_id: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut after = -1i64;
        loop {
            let (status, body) = self.get(&format!(
                "/api/runs/{run_id}/events?afterSeq={after}&limit=1000"
            ));
            if status != 200 {
                return out;
            }
            let page = parse_str(&body)
                .unwrap()
                .get("events")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let Some(last) = page.last().and_then(|e| i(e, &["seq"])) else {
                return out;
            };
            after = last;
            out.extend(page);
        }
    }

    /// The stored events of `run_id` once `count` of them are there (or 30 s passed).
    pub fn stored_at_least(&self, run_id: &str, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let events = self.all_events(run_id);
            if events.len() >= count || Instant::now() > deadline {
                return events;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn http_get(port: u16, path: &str) -> (u16, String) {
    http_request(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"),
    )
}

pub fn http_request(port: u16, raw: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

pub struct Ws {
    pub ws: WebSocket<TcpStream>,
    pub seq: u64,
}

impl Ws {
    pub fn connect(port: u16, path: &str) -> Ws {
        Self::connect_with(port, path, &[])
    }

    /// Connects with extra request headers (subprotocols, Origin...).
    pub fn connect_with(port: u16, path: &str, headers: &[(&str, &str)]) -> Ws {
        Self::try_connect(port, path, headers).expect("websocket handshake")
    }

    /// The handshake's result (a refused upgrade is an error carrying the HTTP status).
    pub fn try_connect(
        port: u16,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<Ws, tungstenite::Error> {
        use tungstenite::client::IntoClientRequest;
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        // As every real client does: without it, Nagle holds a small frame for the peer's
        // delayed ACK (~40 ms) and every timing a test observes is that, not the server.
        stream.set_nodelay(true).unwrap();
        let mut req = format!("ws://127.0.0.1:{port}{path}")
            .into_client_request()
            .unwrap();
        for (k, v) in headers {
            req.headers_mut().insert(
                tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                tungstenite::http::HeaderValue::from_str(v).unwrap(),
            );
        }
        let (ws, _) = tungstenite::client(req, stream).map_err(|e| match e {
            tungstenite::HandshakeError::Failure(e) => e,
            tungstenite::HandshakeError::Interrupted(_) => tungstenite::Error::ConnectionClosed,
        })?;
        ws.get_ref()
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        Ok(Ws { ws, seq: 0 })
    }

    pub fn send(&mut self, text: &str) {
        self.ws.send(Message::text(text.to_owned())).unwrap();
    }

    /// Sends an app envelope with the next seq.
    pub fn event(&mut self, run: &str, kind: &str, payload: &str) -> String {
        let f = frame(self.seq, run, kind, payload);
        self.seq += 1;
        self.send(&f);
        f
    }

    /// The next text message as JSON, or None after `timeout`.
    pub fn recv_within(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.ws.read() {
                Ok(Message::Text(t)) => {
                    return Some(parse_str(t.as_str()).expect("server sent JSON"))
                }
                Ok(Message::Close(_)) => return None,
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if Instant::now() > deadline {
                        return None;
                    }
                }
                Err(e) => panic!("websocket error: {e}"),
            }
        }
    }

    pub fn recv(&mut self) -> Value {
        self.recv_within(Duration::from_secs(10))
            .expect("expected a message")
    }

    /// Skips messages until one with this `type` arrives.
    pub fn recv_type(&mut self, kind: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(m) = self.recv_within(Duration::from_millis(200)) {
                if m.get("type").and_then(Value::as_str) == Some(kind) {
                    return m;
                }
            }
        }
        panic!("no {kind} message arrived");
    }

    /// Does the app side: hello, returns hello.ack's payload.
    pub fn hello(&mut self, app: &str, token: Option<&str>) -> Value {
        let token = token
            .map(|t| format!(",\"resumeToken\":\"{t}\""))
            .unwrap_or_default();
        let payload = format!(
            "{{\"versions\":{{\"protocol\":1,\"client\":\"test\"}},\"capabilities\":[\"pause\",\"inject\",\"run-claim\"],\"app\":\"{app}\"{token}}}"
        );
        self.event("*", "hello", &payload);
        let ack = self.recv_type("hello.ack");
        assert_eq!(ack.get("runId").and_then(Value::as_str), Some("*"));
        assert_eq!(ack.get("gm").and_then(Value::as_i64), Some(1));
        ack.get("payload").cloned().unwrap()
    }
}

pub fn frame(seq: u64, run: &str, kind: &str, payload: &str) -> String {
    format!("{{\"gm\":1,\"seq\":{seq},\"ts\":{},\"runId\":\"{run}\",\"type\":\"{kind}\",\"payload\":{payload}}}", 1_700_000_000_000u64 + seq)
}

pub fn s<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_str()
}

pub fn i(v: &Value, path: &[&str]) -> Option<i64> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_i64()
}

pub fn to_json(v: &Value) -> String {
    graphmind_core::json::to_string(v)
}

/// The whole raw response (status line, headers, body).
pub fn http_raw(port: u16, raw: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// A request with a method, path, extra header lines and a body; returns (status, head, body).
pub fn http_call(
    port: u16,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> (u16, String, String) {
    let raw = http_raw(
        port,
        &format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()),
    );
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .map(|(h, b)| (h.to_owned(), b.to_owned()))
        .unwrap_or_default();
    (status, head, body)
}

/// The value of a response header (case-insensitive name).
pub fn header_of(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        l.split_once(':')
            .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_owned())
    })
}

/// Sends `raw` and returns the response head only (for upgrades that stay open).
pub fn http_head(port: u16, raw: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => out.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One finished `tool:lookup` call in `run_id` whose input is the JSON text `input` (output
/// `{"hits":1}`), through the session's host-value entry points.
pub fn tool_call_text(session: &graphmind_core::session::Session, run_id: &str, input: &str) {
    use graphmind_core::{event::NodeKind, host_value::HostValue, session::NodeRef};
    let node = NodeRef::new(NodeKind::Tool, "lookup");
    session.node_started_host(
        Some(run_id),
        &node,
        None,
        Some(HostValue::Text(input.into())),
    );
    session.node_finished_host(
        Some(run_id),
        &node,
        Some(HostValue::Text(r#"{"hits":1}"#.into())),
        0.01,
        false,
    );
}
