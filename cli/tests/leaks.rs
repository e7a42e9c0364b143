//! Credential-leak audit, against the real `graphmind serve`: distinctive keys are planted
//! where apps really carry them (a client header in an LLM request, an env-looking string
//! and a bearer token in tool arguments, an error message and stack trace, MCP params
//! through `graphmind mcp-proxy`), through the Rust core every SDK wraps, then searched
//! for in every place GraphMind writes or answers. The test asserts the exact list of
//! places each key appears in (docs/security.md, "Where a credential can end up"), so a
//! new leak, or a redaction that stops working, fails it.

mod common;
use common::*;
use graphmind_core::config::{self, EnvSnapshot, Options, SdkFlavor};
use graphmind_core::event::{ErrorInfo, NodeKind};
use graphmind_core::host_value::HostValue;
use graphmind_core::session::{NodeRef, RunOutcome, Session};
use graphmind_core::warn::WarnSink;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// The planted keys, each under the name of where it was planted.
const KEYS: [(&str, &str); 7] = [
    ("llm-header", "gmleak-hdr-7Qx2"),
    ("env-string", "sk-gmleak-env-9Kp4"),
    ("bearer-args", "gmleak-bearer-3Vn8"),
    ("error-message", "gmleak-errmsg-5Tz1"),
    ("stack-trace", "gmleak-stack-2Wq6"),
    ("mcp-secret-key", "gmleak-mcptok-8Ls3"),
    ("mcp-free-text", "gmleak-mcptext-4Hd7"),
];

/// Places that hold what the app sent, verbatim (the server records; hiding is the app
/// side's `GRAPHMIND_HIDE_*` switches).
const RECORDED_BY_DESIGN: [&str; 7] = [
    "llm-header",
    "env-string",
    "bearer-args",
    "error-message",
    "stack-trace",
    "mcp-secret-key",
    "mcp-free-text",
];
/// What an export keeps: values under secret-looking keys are redacted; free text and
/// `node.error` are not.
const EXPORTED: [&str; 4] = [
    "env-string",
    "error-message",
    "stack-trace",
    "mcp-free-text",
];

fn session_for(port: u16) -> Session {
    let options = Options {
        url: Some(format!("ws://127.0.0.1:{port}/ingest")),
        app_name: Some("leak-audit".into()),
        ..Options::default()
    };
    let config = config::resolve(&options, &EnvSnapshot::new(), SdkFlavor::Native);
    let sink: WarnSink = Arc::new(|_: &str| {});
    Session::new(config, sink)
}

fn key(name: &str) -> &'static str {
    KEYS.iter().find(|(n, _)| *n == name).unwrap().1
}

/// A run with the app-side plants; returns its id.
fn planted_run(session: &Session) -> String {
    let run = session.start_run("leaky", None);
    let llm = NodeRef::new(NodeKind::Llm, "chat");
    let request = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"headers":{{"x-api-key":"{}"}}}}"#,
        key("llm-header")
    );
    session.node_started_host(
        Some(&run.run_id),
        &llm,
        None,
        Some(HostValue::Text(request.into_bytes())),
    );
    session.node_finished_host(
        Some(&run.run_id),
        &llm,
        Some(HostValue::Text(br#"{"text":"ok"}"#.to_vec())),
        0.01,
        false,
    );
    let tool = NodeRef::new(NodeKind::Tool, "deploy");
    let args = format!(
        r#"{{"note":"OPENAI_API_KEY={}","headers":{{"Authorization":"Bearer {}"}}}}"#,
        key("env-string"),
        key("bearer-args")
    );
    session.node_started_host(
        Some(&run.run_id),
        &tool,
        None,
        Some(HostValue::Text(args.into_bytes())),
    );
    let mut error = ErrorInfo::new(
        "AuthError",
        format!("401 from upstream: invalid token {}", key("error-message")),
    );
    error.stack = Some(
        format!(
            "AuthError: 401\n    at call (client.js:1:1) headers={{Authorization: Bearer {}}}",
            key("stack-trace")
        )
        .into(),
    );
    session.node_error(Some(&run.run_id), &tool, error);
    session.finish_run(&run, RunOutcome::Error(ErrorInfo::new("AuthError", "401")));
    run.run_id
}

/// An MCP session through `graphmind mcp-proxy` whose `tools/call` carries two keys.
fn planted_mcp_session(srv: &Server) {
    // A minimal MCP server on stdio: answers initialize and tools/call, nothing else.
    let peer = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "leaky", "version": "0"}}
    else:
        r = {"content": [{"type": "text", "text": "done"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;
    let port = srv.port.to_string();
    let mut cmd = Command::new(BIN);
    isolate(&mut cmd, &srv.dir);
    let mut child = cmd
        .args([
            "mcp-proxy",
            "--port",
            &port,
            "--wait-for-attach",
            "--",
            "python3",
            "-c",
            peer,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"fetch","arguments":{{"token":"{}","note":"use Bearer {}"}}}}}}"#,
        key("mcp-secret-key"),
        key("mcp-free-text")
    );
    let input = format!(
        "{}\n{}\n{call}\n",
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
    );
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    // Answers come back before the host hangs up.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    for _ in 0..2 {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert!(line.contains("\"result\""), "{line}");
    }
    drop(stdin);
    let st = child.wait().unwrap();
    assert!(st.success());
}

fn found_in(text: &str) -> BTreeSet<&'static str> {
    KEYS.iter()
        .filter(|(_, k)| text.contains(k))
        .map(|(n, _)| *n)
        .collect()
}

fn set(names: &[&'static str]) -> BTreeSet<&'static str> {
    names.iter().copied().collect()
}

#[test]
fn every_planted_credential_is_redacted_or_recorded_by_design_and_nowhere_else() {
    let srv = Server::start_quiet(
        &["--pause-on-error", "off"],
        &[("GRAPHMIND_TELEMETRY", "log")],
    );
    let mut ui = srv.ui();
    ui.recv_type("welcome");

    let session = session_for(srv.port);
    assert!(session.ready(Duration::from_secs(5)));
    let app_run = planted_run(&session);
    assert!(session.flush(Duration::from_secs(10)));
    session.dispose(session.exit_deadline());
    srv.wait_run(&app_run, |r| s(r, &["status"]) == Some("error"));
    planted_mcp_session(&srv);

    let mut places: BTreeMap<&str, String> = BTreeMap::new();
    // The database, its WAL included, as bytes on disk.
    let mut db_bytes = Vec::new();
    for suffix in ["", "-wal"] {
        db_bytes.extend(std::fs::read(format!("{}{suffix}", srv.db.display())).unwrap_or_default());
    }
    places.insert("sqlite", String::from_utf8_lossy(&db_bytes).into_owned());
    // Every HTTP API answer about the runs.
    let (_, runs) = srv.get("/api/runs");
    let mut api = runs.clone();
    let run_ids: Vec<String> = graphmind_core::json::parse_str(&runs)
        .unwrap()
        .get("runs")
        .and_then(|r| r.as_array())
        .unwrap()
        .iter()
        .filter_map(|r| s(r, &["id"]).map(str::to_owned))
        .collect();
    assert_eq!(run_ids.len(), 2, "{runs}");
    for id in &run_ids {
        api.push_str(&srv.get(&format!("/api/runs/{id}/events?limit=5000")).1);
    }
    api.push_str(&srv.get("/health").1);
    places.insert("http-api", api);
    // The viewer socket: replay of each run.
    let mut frames = String::new();
    for id in &run_ids {
        ui.send(&format!(r#"{{"type":"subscribe","runId":"{id}"}}"#));
        loop {
            let m = ui.recv();
            frames.push_str(&to_json(&m));
            if s(&m, &["type"]) == Some("replay.end") {
                break;
            }
        }
    }
    places.insert("ws-ui", frames);
    // Exports, and the telemetry they log.
    let mut telemetry = String::new();
    for (place, extra) in [
        ("record-ndjson", &[][..]),
        ("record-otlp", &["--format", "otlp"][..]),
        ("record-html", &["--html"][..]),
    ] {
        let mut text = String::new();
        for id in &run_ids {
            let mut args = vec![
                "record",
                id.as_str(),
                "--db",
                srv.db.to_str().unwrap(),
                "--out",
                "-",
            ];
            args.extend_from_slice(extra);
            let out = srv.cli(&args, &[("GRAPHMIND_TELEMETRY", "log")]);
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            if place == "record-html" && !out.status.success() && err.contains("make viewer") {
                eprintln!("SKIPPED record-html: this build embeds no viewer (run `make viewer`)");
                break;
            }
            assert!(out.status.success(), "{place}: {err}");
            text.push_str(&String::from_utf8_lossy(&out.stdout));
            telemetry.push_str(&err);
        }
        if !text.is_empty() {
            places.insert(place, text);
        }
    }
    assert!(
        telemetry.contains("[graphmind telemetry]"),
        "telemetry logged: {telemetry}"
    );
    places.insert("telemetry+record-stderr", telemetry);
    // The server's own log (stderr: attach/detach lines, telemetry, warnings).
    places.insert(
        "server-log",
        std::fs::read_to_string(srv.dir.join("server.log")).unwrap(),
    );

    let expected: BTreeMap<&str, BTreeSet<&str>> = places
        .keys()
        .map(|p| {
            let want = match *p {
                "sqlite" | "http-api" | "ws-ui" => set(&RECORDED_BY_DESIGN),
                "record-ndjson" | "record-otlp" | "record-html" => set(&EXPORTED),
                _ => BTreeSet::new(),
            };
            (*p, want)
        })
        .collect();
    let actual: BTreeMap<&str, BTreeSet<&str>> = places
        .iter()
        .map(|(p, text)| (*p, found_in(text)))
        .collect();
    for (p, found) in &actual {
        eprintln!("{p}: {found:?}");
    }
    assert_eq!(actual, expected);
}
