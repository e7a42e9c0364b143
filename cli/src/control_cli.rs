//! `graphmind pauses`, `graphmind wait`, `graphmind resume`: drive a held run from a
//! terminal or a coding agent, over HTTP to the `graphmind serve` on `--port`.
//!
//! Listing and waiting are reads (no credential). `resume` presents the agent token from
//! `$GRAPHMIND_HOME/run/serve-<port>.json`, and the SERVER decides what it may do
//! (`serve --allow-control`, default off).
//!
//! Exit codes: 0 ok · 1 usage/unexpected · 2 timeout · 3 server unreachable · 4 nothing to
//! act on · 5 not authorized · 6 refused · 7 taken.

use crate::args::ControlArgs;
use crate::config::DEFAULT_PORT;
use crate::util::{self, now_ms};
use graphmind_core::json::{self, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Success.
pub const EXIT_OK: i32 = 0;
/// Usage error, or something unexpected.
pub const EXIT_USAGE_CONTROL: i32 = 1;
/// Timeout.
pub const EXIT_TIMEOUT: i32 = 2;
/// No server on that port.
pub const EXIT_UNREACHABLE: i32 = 3;
/// Nothing to act on.
pub const EXIT_GONE: i32 = 4;
/// Not authorized.
pub const EXIT_UNAUTHORIZED: i32 = 5;
/// Refused.
pub const EXIT_REFUSED: i32 = 6;
/// Taken by another resume.
pub const EXIT_TAKEN: i32 = 7;
/// Default `wait --timeout`: returns before a coding agent's 2-minute tool timeout.
pub const DEFAULT_WAIT_SECONDS: f64 = 90.0;
/// Values up to this many JSON characters are printed inline; larger ones go to a file.
pub const INLINE_LIMIT: usize = 2_000;

/// A value shown inline, or the private file (and size) it was written to.
type Rendered = Result<Value, (PathBuf, usize)>;

pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: Value,
}

/// One HTTP exchange with the local server. `Err` is "unreachable", with the reason.
pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
    timeout: Duration,
) -> Result<Reply, String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|_| {
        format!("no GraphMind server on port {port} (start it with `graphmind serve`)")
    })?;
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("could not reach GraphMind on port {port} ({e})"))?;
    let mut raw = Vec::new();
    let closed = || {
        format!("the GraphMind server on port {port} closed the connection without answering (did it stop?)")
    };
    if let Err(e) = s.read_to_end(&mut raw) {
        if raw.is_empty() {
            return Err(match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    format!("the GraphMind server on port {port} did not answer in time")
                }
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted => {
                    closed()
                }
                _ => format!("could not reach GraphMind on port {port} ({e})"),
            });
        }
    }
    if raw.is_empty() {
        // A server that stops (Ctrl-C, a crash) while a long-poll waits hangs up on it.
        return Err(closed());
    }
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body_text = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    let body = match json::parse_str(body_text) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Default::default()),
    };
    Ok(Reply { status, body })
}

pub(crate) fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn text<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn ago(ms: f64) -> String {
    let s = ((now_ms() - ms) / 1000.0).round().max(0.0) as u64;
    if s < 60 {
        return format!("{s}s ago");
    }
    let m = (s as f64 / 60.0).round() as u64;
    if m < 60 {
        return format!("{m}m ago");
    }
    format!("{}h ago", (m as f64 / 60.0).round() as u64)
}

fn reason_label(p: &Value) -> String {
    if let Some(rule) = p
        .get("smart")
        .and_then(|s| s.get("rule"))
        .and_then(Value::as_str)
    {
        return format!("smart hold: {rule}");
    }
    if text(p, "reason") == Some("loop") {
        let kind = p
            .get("loop")
            .and_then(|l| l.get("kind"))
            .and_then(Value::as_str)
            .unwrap_or("repeat");
        let repeats = p
            .get("loop")
            .and_then(|l| l.get("repeats"))
            .and_then(Value::as_f64)
            .map(|r| format!(", {r} calls"))
            .unwrap_or_default();
        return format!("loop ({kind}{repeats})");
    }
    text(p, "reason").unwrap_or("breakpoint").to_owned()
}

fn point_label(point: &str) -> &'static str {
    match point {
        "before" => "before the call",
        "after" => "after the call",
        _ => "on error",
    }
}

fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// `graphmind pauses [--run ID] [--json]`.
pub fn pauses(a: &ControlArgs) -> i32 {
    let port = a.query.port.unwrap_or(DEFAULT_PORT);
    let query = a
        .query
        .run
        .as_deref()
        .map(|r| format!("?runId={}", enc(r)))
        .unwrap_or_default();
    let reply = match request(
        port,
        "GET",
        &format!("/api/pauses{query}"),
        "",
        "",
        Duration::from_secs(5),
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("graphmind pauses: {e}");
            return EXIT_UNREACHABLE;
        }
    };
    if reply.status != 200 {
        eprintln!("graphmind pauses: the server answered {}", reply.status);
        return EXIT_USAGE_CONTROL;
    }
    let list = reply
        .body
        .get("pauses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if a.query.json {
        println!(
            "{}",
            util::text(util::object([("pauses", Value::Array(list))]))
        );
        return EXIT_OK;
    }
    let base = format!("http://127.0.0.1:{port}");
    if list.is_empty() {
        println!(
            "No open pauses on {base}{}.",
            a.query
                .run
                .as_deref()
                .map(|r| format!(" in run {r}"))
                .unwrap_or_default()
        );
        println!("Block until one appears:  graphmind wait");
        return EXIT_OK;
    }
    println!("{} held pause(s) on {base}\n", list.len());
    println!(
        "  {:<24} {:<10} {:<26} {:<7} {:<22} {:<10} SINCE",
        "RUN", "PAUSE", "NODE", "POINT", "REASON", "STATE"
    );
    for p in &list {
        println!(
            "  {:<24} {:<10} {:<26} {:<7} {:<22} {:<10} {}{}",
            cut(text(p, "runId").unwrap_or(""), 24),
            cut(text(p, "pauseId").unwrap_or(""), 10),
            cut(text(p, "nodeId").unwrap_or(""), 26),
            text(p, "point").unwrap_or(""),
            cut(&reason_label(p), 22),
            text(p, "state").unwrap_or(""),
            ago(p.get("since").and_then(Value::as_f64).unwrap_or(0.0)),
            if p.get("editable").and_then(Value::as_bool) == Some(true) {
                "  (editable)"
            } else {
                ""
            }
        );
    }
    let first = &list[0];
    let (run, pause) = (
        text(first, "runId").unwrap_or(""),
        text(first, "pauseId").unwrap_or(""),
    );
    println!("\nInspect one:  graphmind wait --run {run}");
    println!("Release it:   graphmind resume {pause} --run {run} --action continue");
    EXIT_OK
}

fn next_commands(p: &Value) -> Vec<String> {
    let base = format!(
        "graphmind resume {} --run {}",
        text(p, "pauseId").unwrap_or(""),
        text(p, "runId").unwrap_or("")
    );
    let point = text(p, "point").unwrap_or("");
    let mut out = vec![format!("{base} --action continue")];
    if p.get("editable").and_then(Value::as_bool) == Some(true) {
        out.push(if point == "before" {
            format!("{base} --action continue --input @edited-input.json")
        } else {
            format!("{base} --action retry --input @edited-input.json")
        });
    }
    if point != "before" {
        out.push(format!("{base} --action retry"));
    }
    out.push(format!("{base} --action inject --output '<json result>'"));
    out.push(format!("{base} --action abort"));
    out
}

fn private_temp_dir() -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("graphmind-pause-{}", crate::util::new_token()));
    crate::tokens::ensure_private_dir(&dir).ok()?;
    Some(dir)
}

/// `graphmind wait [--run ID] [--timeout S] [--json]`: long-polls until an open pause.
pub fn wait(a: &ControlArgs) -> i32 {
    let port = a.query.port.unwrap_or(DEFAULT_PORT);
    let timeout_s = a.timeout.unwrap_or(DEFAULT_WAIT_SECONDS);
    let deadline = if timeout_s == 0.0 {
        None
    } else {
        Some(Instant::now() + Duration::from_secs_f64(timeout_s))
    };
    let mut found: Option<Value>;
    let mut ended: Option<String> = None;
    loop {
        let remaining = deadline
            .map(|d| d.saturating_duration_since(Instant::now()).as_secs_f64())
            .unwrap_or(30.0);
        let chunk = remaining.ceil().clamp(0.0, 30.0) as u64;
        let mut query = format!("wait={chunk}");
        if let Some(r) = &a.query.run {
            query = format!("runId={}&{query}", enc(r));
        }
        let reply = match request(
            port,
            "GET",
            &format!("/api/pauses?{query}"),
            "",
            "",
            Duration::from_secs(chunk + 10),
        ) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("graphmind wait: {e}");
                return EXIT_UNREACHABLE;
            }
        };
        if reply.status == 429 {
            std::thread::sleep(Duration::from_secs(1));
            continue;
        }
        if reply.status == 503 {
            eprintln!("graphmind wait: the GraphMind server on port {port} is shutting down; nothing is held any more");
            return EXIT_UNREACHABLE;
        }
        if reply.status != 200 {
            eprintln!("graphmind wait: the server answered {}", reply.status);
            return EXIT_USAGE_CONTROL;
        }
        let list = reply
            .body
            .get("pauses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        found = list.into_iter().find(|p| text(p, "state") == Some("open"));
        if found.is_some() {
            break;
        }
        if a.query.run.is_some() {
            if let Some(status) = reply
                .body
                .get("run")
                .and_then(|r| r.get("status"))
                .and_then(Value::as_str)
            {
                if status != "running" {
                    ended = Some(status.to_owned());
                    break;
                }
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    let Some(pause) = found else {
        if let Some(status) = ended {
            let run = a.query.run.clone().unwrap_or_default();
            if a.query.json {
                let run = util::object([("id", run.into()), ("status", status.into())]);
                println!(
                    "{}",
                    util::text(util::object([("pause", Value::Null), ("run", run.into())]))
                );
            } else {
                println!("Run {run} ended ({status}) without pausing.");
            }
            return EXIT_GONE;
        }
        if a.query.json {
            let out = util::object([("pause", Value::Null), ("timedOut", true.into())]);
            println!("{}", util::text(out));
        } else {
            println!(
                "No pause within {timeout_s}s{}. Run it again to keep waiting.",
                a.query
                    .run
                    .as_deref()
                    .map(|r| format!(" in run {r}"))
                    .unwrap_or_default()
            );
        }
        return EXIT_TIMEOUT;
    };
    let (run, pid) = (
        text(&pause, "runId").unwrap_or("").to_owned(),
        text(&pause, "pauseId").unwrap_or("").to_owned(),
    );
    let detail = request(
        port,
        "GET",
        &format!("/api/runs/{}/pauses/{}", enc(&run), enc(&pid)),
        "",
        "",
        Duration::from_secs(10),
    )
    .ok()
    .filter(|r| r.status == 200)
    .and_then(|r| r.body.get("pause").cloned())
    .unwrap_or_default();
    let node = detail.get("node").cloned().unwrap_or_default();
    let mut dir: Option<PathBuf> = None;
    let mut rendered: Vec<(&str, Rendered)> = Vec::new();
    for name in ["input", "output", "error"] {
        let Some(v) = node.get(name) else { continue };
        let pretty = json::to_string(v);
        if pretty.chars().count() <= INLINE_LIMIT {
            rendered.push((name, Ok(v.clone())));
            continue;
        }
        if dir.is_none() {
            dir = private_temp_dir();
        }
        let Some(d) = &dir else { continue };
        let file = d.join(format!("{name}.json"));
        let _ = crate::tokens::write_private_file(&file, &format!("{pretty}\n"));
        rendered.push((name, Err((file, pretty.len()))));
    }
    let commands = next_commands(&pause);
    if a.query.json {
        let mut p = pause.as_object().cloned().unwrap_or_default();
        let mut n = graphmind_core::json::Map::new();
        for k in ["kind", "name", "instanceId"] {
            if let Some(v) = node.get(k) {
                n.insert(k, v.clone());
            }
        }
        p.insert("node", Value::Object(n));
        let mut out = util::object([
            ("pause", Value::Object(p)),
            ("next", util::strings(commands.iter().map(String::as_str))),
        ]);
        for (name, r) in &rendered {
            match r {
                Ok(v) => {
                    out.insert(*name, v.clone());
                }
                Err((file, bytes)) => {
                    out.insert(format!("{name}File"), file.display().to_string().into());
                    out.insert(format!("{name}Bytes"), Value::from(*bytes as u64));
                }
            }
        }
        println!("{}", util::text(out));
        return EXIT_OK;
    }
    let app = text(&pause, "app")
        .map(|a| format!(" · app {a}"))
        .unwrap_or_default();
    println!("Paused: run {run} · pause {pid}{app}");
    let node_id = text(&pause, "nodeId").unwrap_or("");
    let named = match text(&node, "name") {
        Some(n) => format!(
            "{node_id} ({} \"{n}\")",
            text(&node, "kind").unwrap_or("node")
        ),
        None => node_id.to_owned(),
    };
    println!(
        "  node      {named}, {}",
        point_label(text(&pause, "point").unwrap_or(""))
    );
    let detail_text = pause
        .get("smart")
        .and_then(|s| s.get("detail"))
        .and_then(Value::as_str)
        .map(|d| format!(" — {d}"))
        .unwrap_or_default();
    println!("  reason    {}{detail_text}", reason_label(&pause));
    println!(
        "  editable  {}",
        if pause.get("editable").and_then(Value::as_bool) == Some(true) {
            "yes (--input runs the REAL call with the arguments you give)"
        } else {
            "no"
        }
    );
    for (name, r) in &rendered {
        match r {
            Ok(v) => println!("  {name:<9} {}", json::to_string(v)),
            Err((file, bytes)) => {
                let size = if *bytes < 1024 {
                    format!("{bytes} B")
                } else {
                    format!("{:.1} KB", *bytes as f64 / 1024.0)
                };
                println!("  {name:<9} {size} → {}", file.display());
            }
        }
    }
    println!("Next:");
    for c in commands {
        println!("  {c}");
    }
    EXIT_OK
}

pub(crate) fn read_json_arg(flag: &str, raw: &str) -> Result<Value, String> {
    let content = match raw.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("{flag}: cannot read {path} ({e})"))?,
        None => raw.to_owned(),
    };
    json::parse_str(&content).map_err(|_| {
        format!("{flag} must be JSON or @file (a plain string needs JSON quotes: {flag} '\"text\"'; a value starting with \"-\" needs {flag}=<value>)")
    })
}

/// `graphmind resume PAUSE_ID --run ID --action A [...]`.
pub fn resume(a: &ControlArgs) -> i32 {
    let usage = "usage: graphmind resume <pauseId> --run <id> --action continue|retry|inject|abort";
    let Some(pause) = a.pause_id.as_deref().filter(|p| !p.is_empty()) else {
        eprintln!("{usage}");
        return EXIT_USAGE_CONTROL;
    };
    let Some(run) = a.query.run.as_deref().filter(|r| !r.is_empty()) else {
        eprintln!(
            "graphmind resume: --run <id> is required (graphmind pauses lists them)\n{usage}"
        );
        return EXIT_USAGE_CONTROL;
    };
    let action = a.action.as_deref().unwrap_or("");
    if !matches!(action, "continue" | "retry" | "inject" | "abort") {
        eprintln!(
            "graphmind resume: --action must be one of continue, retry, inject, abort\n{usage}"
        );
        return EXIT_USAGE_CONTROL;
    }
    if a.output.is_some() && action != "inject" {
        eprintln!("graphmind resume: --output is only meaningful with --action inject");
        return EXIT_USAGE_CONTROL;
    }
    if action == "inject" && a.output.is_none() {
        eprintln!("graphmind resume: --action inject needs --output <json|@file> (e.g. --output '{{\"ok\":true}}')");
        return EXIT_USAGE_CONTROL;
    }
    let mut body = graphmind_core::json::Map::new();
    body.insert("action", Value::from(action));
    for (flag, key, raw) in [
        ("--output", "output", &a.output),
        ("--input", "input", &a.input),
    ] {
        if let Some(raw) = raw {
            match read_json_arg(flag, raw) {
                Ok(v) => {
                    body.insert(key, v);
                }
                Err(m) => {
                    eprintln!("graphmind resume: {m}");
                    return EXIT_USAGE_CONTROL;
                }
            }
        }
    }
    if let Some(op) = &a.operator {
        body.insert("operator", Value::from(op.as_str()));
    }
    let wait_s = a.timeout.unwrap_or(30.0).clamp(1.0, 120.0);
    body.insert("timeoutMs", Value::from((wait_s * 1000.0).round() as i64));
    let has_input = body.get("input").is_some();
    let port = a.query.port.unwrap_or(DEFAULT_PORT);
    let home = match crate::config::resolve(&Default::default()) {
        Ok(c) => c.home,
        Err(e) => {
            eprintln!("graphmind resume: {e}");
            return EXIT_USAGE_CONTROL;
        }
    };
    let cred = match crate::tokens::read_run_file(&home, port) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("graphmind resume: {}", e.message);
            return EXIT_UNAUTHORIZED;
        }
    };
    let reply = match request(
        port,
        "POST",
        &format!("/api/runs/{}/pauses/{}/resume", enc(run), enc(pause)),
        &format!(
            "Content-Type: application/json\r\nAuthorization: Bearer {}\r\n",
            cred.agent_token
        ),
        &json::to_string(&Value::Object(body)),
        Duration::from_secs_f64(wait_s + 15.0),
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("graphmind resume: {e}");
            return EXIT_UNREACHABLE;
        }
    };
    let answer = &reply.body;
    if a.query.json {
        println!("{}", json::to_string(answer));
    }
    let message = text(answer, "message").unwrap_or("").to_owned();
    let code = text(answer, "code")
        .map(|c| format!(" [{c}]"))
        .unwrap_or_default();
    if reply.status == 401 {
        if !a.query.json {
            eprintln!(
                "graphmind resume: the server refused the agent token in {} — it is from an earlier `graphmind serve`; the file is rewritten when the server on this port restarts",
                cred.path.display()
            );
        }
        return EXIT_UNAUTHORIZED;
    }
    let Some(outcome) = text(answer, "outcome") else {
        if !a.query.json {
            if reply.status == 503 {
                eprintln!("graphmind resume: the GraphMind server on port {port} is shutting down before the app answered; the app releases what it holds when its server goes away, so the pause ends either way");
            } else {
                eprintln!(
                    "graphmind resume: {}",
                    if message.is_empty() {
                        format!("the server answered {}", reply.status)
                    } else {
                        message
                    }
                );
            }
        }
        return match reply.status {
            429 => EXIT_TIMEOUT,
            503 => EXIT_UNREACHABLE, // the server is shutting down
            _ => EXIT_USAGE_CONTROL,
        };
    };
    let place = format!("pause {pause} (run {run})");
    let say = |line: String, err: bool| {
        if a.query.json {
            return;
        }
        if err {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    match outcome {
        "resumed" => {
            say(
                format!(
                    "resumed {place}: {action}{} (as {})",
                    if has_input {
                        " with the edited input"
                    } else {
                        ""
                    },
                    text(answer, "principal").unwrap_or("agent")
                ),
                false,
            );
            EXIT_OK
        }
        "refused" => {
            say(format!("refused {place}{code}: {message}"), true);
            if reply.status == 403 {
                EXIT_UNAUTHORIZED
            } else {
                EXIT_REFUSED
            }
        }
        "taken" => {
            say(format!("taken {place}{code}: {message}"), true);
            EXIT_TAKEN
        }
        "timeout" => {
            say(format!("no answer yet for {place}{code}: {message}"), true);
            EXIT_TIMEOUT
        }
        "no-such-pause" => {
            say(format!("{place} is not held{code}: {message}"), true);
            EXIT_GONE
        }
        other => {
            say(
                format!("graphmind resume: unexpected outcome \"{other}\""),
                true,
            );
            EXIT_USAGE_CONTROL
        }
    }
}
