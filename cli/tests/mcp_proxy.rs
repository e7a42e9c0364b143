//! `graphmind mcp-proxy` and `graphmind mcp` against REAL peers: the npm reference servers
//! (`@modelcontextprotocol/server-everything`, `server-filesystem`) and the PyPI `mcp` 1.x
//! client as the host. Install them with `make setup` (scripts/setup.sh).

mod common;

use common::{s, to_json, Server, Ws, BIN};
use graphmind_core::json::{parse_str, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> PathBuf {
    let p = root().join(".venv-mcp/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run `make setup` (scripts/setup.sh) first",
        p.display()
    );
    p
}

fn peer(name: &str) -> String {
    let p = root()
        .join(".mcp-peers/node_modules/@modelcontextprotocol")
        .join(name)
        .join("dist/index.js");
    assert!(
        p.exists(),
        "{} is missing: run `make setup` (scripts/setup.sh) first",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp_peers")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs a command to completion within `limit` (killed past it), capturing its output.
fn run(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let t1 = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t2 = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: t1.join().unwrap(),
        stderr: t2.join().unwrap(),
    }
}

fn host(mode: &[&str], server: &[String]) -> Output {
    let mut cmd = Command::new(python());
    cmd.arg(script("host.py")).args(mode).arg("--").args(server);
    run(&mut cmd, Duration::from_secs(90))
}

fn proxied(flags: &[&str], server: &[String]) -> Vec<String> {
    let mut v = vec![BIN.to_owned(), "mcp-proxy".to_owned()];
    v.extend(flags.iter().map(|s| s.to_string()));
    v.push("--".into());
    v.extend(server.iter().cloned());
    v
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn everything() -> Vec<String> {
    vec!["node".into(), peer("server-everything")]
}

fn filesystem(dir: &Path) -> Vec<String> {
    vec![
        "node".into(),
        peer("server-filesystem"),
        dir.to_string_lossy().into_owned(),
    ]
}

/// A viewer on /ws/ui: sets breakpoints, finds the proxy's run, resumes its pauses.
struct Debugger {
    ws: Ws,
}

impl Debugger {
    fn new(srv: &Server) -> Debugger {
        let mut ws = srv.ui();
        ws.recv_type("welcome");
        ws.send(r#"{"type":"subscribe","runId":"*"}"#);
        Debugger { ws }
    }

    fn control(&mut self, run: &str, kind: &str, payload: &str) {
        self.ws.send(&format!(
            r#"{{"type":"control","envelope":{}}}"#,
            common::frame(0, run, kind, payload)
        ));
    }

    fn breakpoint(&mut self, matcher: &str) {
        self.control(
            "*",
            "breakpoint.set",
            &format!(r#"{{"matcher":{matcher}}}"#),
        );
        std::thread::sleep(Duration::from_millis(150));
    }

    /// The next envelope of this type on any run this viewer follows; follows new runs.
    fn next(&mut self, kind: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(m) = self.ws.recv_within(Duration::from_millis(100)) {
                if s(&m, &["type"]) == Some("run.update") {
                    if let Some(id) = s(&m, &["run", "id"]) {
                        let id = id.to_owned();
                        self.ws
                            .send(&format!(r#"{{"type":"subscribe","runId":"{id}"}}"#));
                    }
                }
                if s(&m, &["type"]) == Some("event") && s(&m, &["envelope", "type"]) == Some(kind) {
                    return m.get("envelope").cloned().unwrap();
                }
            }
        }
        panic!("no {kind} arrived");
    }

    /// The next message of this top-level `type` (e.g. `resume.result`).
    fn next_message(&mut self, kind: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(m) = self.ws.recv_within(Duration::from_millis(100)) {
                if s(&m, &["type"]) == Some(kind) {
                    return m;
                }
            }
        }
        panic!("no {kind} message arrived");
    }

    fn resume(&mut self, paused: &Value, action: &str, extra: &str) {
        let run = s(paused, &["runId"]).unwrap().to_owned();
        let pause_id = s(paused, &["payload", "pauseId"]).unwrap().to_owned();
        self.control(
            &run,
            "exec.resume",
            &format!(r#"{{"pauseId":"{pause_id}","action":"{action}"{extra}}}"#),
        );
    }
}

fn stored_events(srv: &Server, run_id: &str) -> Vec<Value> {
    let v = srv.get_json(&format!("/api/runs/{run_id}/events"));
    v.get("events")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn runs(srv: &Server) -> Vec<Value> {
    srv.get_json("/api/runs")
        .get("runs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn wait_finished_run(srv: &Server) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(r) = runs(srv)
            .into_iter()
            .find(|r| s(r, &["status"]) != Some("running"))
        {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "the proxy's run never finished: {:?}",
            runs(srv).iter().map(to_json).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Compares two `host.py everything` answers tool by tool (short messages on failure), then
/// as whole texts.
fn same_answers(direct: &[u8], via: &[u8], how: &str) {
    let (d, v) = (
        parse_str(text(direct).trim()).unwrap(),
        parse_str(text(via).trim()).expect("proxied host prints JSON"),
    );
    assert_eq!(
        to_json(d.get("tools").unwrap()),
        to_json(v.get("tools").unwrap()),
        "{how}: tools/list differs"
    );
    let (dr, vr) = (
        d.get("results").and_then(Value::as_object).unwrap(),
        v.get("results").and_then(Value::as_object).unwrap(),
    );
    for (name, want) in dr.iter() {
        let got = vr
            .get(name.as_str().unwrap())
            .map(to_json)
            .unwrap_or_default();
        assert_eq!(
            got,
            to_json(want),
            "{how}: result of {} differs",
            name.as_str().unwrap()
        );
    }
    assert_eq!(text(via), text(direct), "{how}: the host's answer differs");
}

#[test]
fn every_tool_listed_and_called_through_the_proxy_matches_a_direct_session() {
    let direct = host(&["everything"], &everything());
    assert!(
        direct.status.success(),
        "direct session failed: {}",
        text(&direct.stderr)
    );
    let answer = parse_str(text(&direct.stdout).trim()).expect("host prints JSON");
    let tools = answer.get("tools").and_then(Value::as_array).unwrap();
    assert!(
        tools.len() >= 10,
        "server-everything lists its tools: {}",
        tools.len()
    );
    assert_eq!(
        answer
            .get("results")
            .and_then(|r| r.as_object())
            .map(|o| o.len()),
        Some(tools.len()),
        "every tool was called"
    );

    // Detached: no GraphMind listening on the port.
    let port = closed_port().to_string();
    let via = host(&["everything"], &proxied(&["--port", &port], &everything()));
    assert!(
        via.status.success(),
        "proxied session failed: {}",
        text(&via.stderr)
    );
    same_answers(&direct.stdout, &via.stdout, "detached");

    // Attached to a real server (nothing armed): same bytes, and the run is recorded.
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let port = srv.port.to_string();
    let via = host(
        &["everything"],
        &proxied(&["--port", &port, "--wait-for-attach"], &everything()),
    );
    assert!(
        via.status.success(),
        "attached session failed: {}",
        text(&via.stderr)
    );
    same_answers(&direct.stdout, &via.stdout, "attached");
    let run = wait_finished_run(&srv);
    let events = stored_events(&srv, s(&run, &["id"]).unwrap());
    let started: Vec<String> = events
        .iter()
        .filter(|e| s(e, &["type"]) == Some("node.started"))
        .filter_map(|e| s(e, &["payload", "nodeId"]).map(str::to_owned))
        .collect();
    for expected in [
        "mcp:session",
        "mcp:initialize",
        "mcp:tools/list",
        "tool:echo",
        "tool:get-sum",
    ] {
        assert!(
            started.iter().any(|n| n == expected),
            "{expected} recorded; got {started:?}"
        );
    }
    let session = events
        .iter()
        .find(|e| {
            s(e, &["type"]) == Some("node.started")
                && s(e, &["payload", "nodeId"]) == Some("mcp:session")
        })
        .unwrap();
    assert_eq!(s(session, &["payload", "kind"]), Some("server"));
    let echo = events
        .iter()
        .find(|e| {
            s(e, &["type"]) == Some("node.started")
                && s(e, &["payload", "nodeId"]) == Some("tool:echo")
        })
        .unwrap();
    assert_eq!(s(echo, &["payload", "kind"]), Some("tool"));
    assert_eq!(s(echo, &["payload", "parentId"]), Some("mcp:session"));
    assert_eq!(s(&run, &["status"]), Some("ok"));
}

#[test]
fn raw_frames_are_relayed_byte_for_byte() {
    let dir = common::temp_dir();
    std::fs::write(dir.join("a.txt"), "héllo\nwörld ✓\n").unwrap();
    let d = dir.canonicalize().unwrap();
    let d = d.to_string_lossy();
    let frames = format!(
        "{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\r\n",
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"list_allowed_directories","arguments":{}}}"#,
        format_args!(
            r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"read_text_file","arguments":{{"path":"{d}/a.txt"}}}}}}"#
        ),
        format_args!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"read_text_file","arguments":{{"path":"{d}/missing.txt"}}}}}}"#
        ),
        r#"{"jsonrpc":"2.0","id":6,"method":"nope/nope"}"#,
        r#"{ "jsonrpc" : "2.0", "id" : 7.0, "method" : "ping" }"#,
    );
    let frames_file = dir.join("frames.ndjson");
    std::fs::write(&frames_file, frames).unwrap();
    let capture = |name: &str, cmd: Vec<String>| -> Vec<u8> {
        let out = dir.join(name);
        let mut c = Command::new(python());
        c.arg(script("raw_host.py"))
            .arg(&frames_file)
            .arg(&out)
            .arg("--")
            .args(cmd);
        let o = run(&mut c, Duration::from_secs(60));
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        std::fs::read(out).unwrap()
    };
    let direct = capture("direct.bin", filesystem(&dir));
    let port = closed_port().to_string();
    let via = capture(
        "proxied.bin",
        proxied(&["--port", &port], &filesystem(&dir)),
    );
    assert!(
        text(&direct).contains("isError"),
        "the failing call answered with isError"
    );
    assert!(
        text(&direct).contains("-32601"),
        "the unknown method answered with an error"
    );
    assert_eq!(text(&via), text(&direct));
    assert_eq!(via, direct);
}

#[test]
fn a_held_tools_call_answered_by_inject_never_reaches_the_server() {
    let srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    dbg.breakpoint(r#"{"kind":"tool","name":"write_file","point":"before"}"#);
    let dir = common::temp_dir();
    let target = dir.canonicalize().unwrap().join("written.txt");
    let args = format!(
        r#"{{"path":"{}","content":"should never be written"}}"#,
        target.display()
    );
    let port = srv.port.to_string();
    let server = proxied(&["--port", &port, "--wait-for-attach"], &filesystem(&dir));
    let client = std::thread::spawn(move || host(&["call", "write_file", &args], &server));
    let paused = dbg.next("exec.paused");
    assert_eq!(s(&paused, &["payload", "nodeId"]), Some("tool:write_file"));
    assert_eq!(s(&paused, &["payload", "point"]), Some("before"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(!target.exists(), "a held request reached the server");
    // write_file declares an outputSchema ({content: string}): a bare object is lifted into a
    // CallToolResult with that object as its structuredContent, which the client validates.
    dbg.resume(
        &paused,
        "inject",
        r#","output":{"content":"injected by the debugger"}"#,
    );
    let out = client.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result = parse_str(text(&out.stdout).trim()).unwrap();
    let content = result.get("content").and_then(Value::as_array).unwrap();
    assert_eq!(
        s(&content[0], &["text"]),
        Some(r#"{"content":"injected by the debugger"}"#)
    );
    assert_eq!(
        s(&result, &["structuredContent", "content"]),
        Some("injected by the debugger")
    );
    assert!(
        !target.exists(),
        "an injected request must never reach the server"
    );
    assert!(
        text(&out.stderr).contains("HOLDING tools/call"),
        "the hold is announced on stderr: {}",
        text(&out.stderr)
    );
}

#[test]
fn an_error_result_holds_by_default_and_graphmind_mcp_reads_the_recorded_run() {
    let srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    let dir = common::temp_dir();
    let missing = dir.canonicalize().unwrap().join("missing.txt");
    let args = format!(r#"{{"path":"{}"}}"#, missing.display());
    let port = srv.port.to_string();
    let server = proxied(&["--port", &port, "--wait-for-attach"], &filesystem(&dir));
    let client = std::thread::spawn(move || host(&["call", "read_text_file", &args], &server));
    let paused = dbg.next("exec.paused");
    assert_eq!(
        s(&paused, &["payload", "nodeId"]),
        Some("tool:read_text_file")
    );
    assert_eq!(s(&paused, &["payload", "point"]), Some("error"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !client.is_finished(),
        "the host must not see the error result while it is held"
    );
    dbg.resume(&paused, "continue", "");
    let out = client.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result = parse_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(result.get("isError").and_then(Value::as_bool), Some(true));
    let run = wait_finished_run(&srv);
    let run_id = s(&run, &["id"]).unwrap().to_owned();
    assert!(common::i(&run, &["errorCount"]).unwrap_or(0) >= 1);

    // `graphmind mcp` over the same database, driven by the same client.
    let db = srv.db.to_string_lossy().into_owned();
    let mcp = vec![
        BIN.to_owned(),
        "mcp".into(),
        "--db".into(),
        db,
        "--port".into(),
        "4848".into(),
    ];
    let get_run = format!(r#"{{"runId":"{run_id}"}}"#);
    let get_node = format!(r#"{{"runId":"{run_id}","nodeId":"tool:read_text_file"}}"#);
    let out = host(
        &[
            "tools",
            "list_runs",
            "{}",
            "get_run",
            &get_run,
            "get_node",
            &get_node,
            "find_errors",
            r#"{"limit":5}"#,
            "get_run",
            r#"{"runId":"nope"}"#,
            "list_runs",
            r#"{"limit":0}"#,
        ],
        &mcp,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = parse_str(text(&out.stdout).trim()).unwrap();
    let tools = v.get("tools").and_then(Value::as_array).unwrap();
    let names: Vec<&str> = tools.iter().filter_map(|t| s(t, &["name"])).collect();
    assert_eq!(names, ["list_runs", "get_run", "get_node", "find_errors"]);
    for t in tools {
        assert_eq!(
            t.get("annotations")
                .and_then(|a| a.get("readOnlyHint"))
                .and_then(Value::as_bool),
            Some(true)
        );
    }
    let calls = v.get("calls").and_then(Value::as_array).unwrap();
    let body = |i: usize| -> Value {
        let c = &calls[i];
        parse_str(
            s(
                &c.get("content").and_then(Value::as_array).unwrap()[0],
                &["text"],
            )
            .unwrap(),
        )
        .unwrap_or(Value::Null)
    };
    let listed = body(0);
    assert_eq!(
        s(
            &listed.get("runs").and_then(Value::as_array).unwrap()[0],
            &["id"]
        ),
        Some(run_id.as_str())
    );
    let got = body(1);
    let nodes = got.get("nodes").and_then(Value::as_array).unwrap();
    let node = nodes
        .iter()
        .find(|n| s(n, &["nodeId"]) == Some("tool:read_text_file"))
        .unwrap();
    assert_eq!(s(node, &["status"]), Some("error"));
    assert_eq!(
        s(node, &["link"]),
        Some(format!("http://127.0.0.1:4848/#/run/{run_id}/node/tool%3Aread_text_file").as_str())
    );
    let detail = body(2);
    assert_eq!(common::i(&detail, &["executions"]), Some(1));
    assert!(s(&detail, &["error", "message"])
        .unwrap()
        .contains("isError: true"));
    let errors = body(3);
    assert_eq!(
        s(
            &errors.get("errors").and_then(Value::as_array).unwrap()[0],
            &["nodeId"]
        ),
        Some("tool:read_text_file")
    );
    assert_eq!(calls[4].get("isError").and_then(Value::as_bool), Some(true));
    assert!(s(
        &calls[4].get("content").and_then(Value::as_array).unwrap()[0],
        &["text"]
    )
    .unwrap()
    .contains("not found"));
    assert_eq!(calls[5].get("isError").and_then(Value::as_bool), Some(true));
    assert_eq!(
        calls[0].get("isError").and_then(Value::as_bool),
        Some(false)
    );
}

#[test]
fn a_frame_over_the_ceiling_degrades_to_a_raw_relay_and_the_session_keeps_working() {
    let port = closed_port().to_string();
    let big = "x".repeat(5000);
    let args = format!(r#"{{"message":"{big}"}}"#);
    let out = host(
        &["call", "echo", &args],
        &proxied(
            &["--port", &port, "--max-frame-bytes", "1024"],
            &everything(),
        ),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result = parse_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(
        s(
            &result.get("content").and_then(Value::as_array).unwrap()[0],
            &["text"]
        ),
        Some(format!("Echo: {big}").as_str())
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("graphmind mcp-proxy: a client frame exceeded 1024 bytes (")
            && err.contains("buffered); relaying raw from here on — the graph will stop updating but the session keeps working (raise --max-frame-bytes)"),
        "{err}"
    );
    // The server's answer (the echoed 5,000 characters) passes the ceiling too: its side says so.
    assert!(
        err.contains("graphmind mcp-proxy: a server frame exceeded 1024 bytes ("),
        "{err}"
    );
    // Both requests were answered and relayed raw: the exit report must not say otherwise.
    assert!(
        !err.contains("unanswered") && !err.contains("before answering"),
        "{err}"
    );
}

#[test]
fn a_server_that_exits_before_answering_shows_its_stderr_tail() {
    let port = closed_port().to_string();
    let nowhere = common::temp_dir().join("does-not-exist");
    let mut child = Command::new(BIN)
        .args([
            "mcp-proxy",
            "--port",
            &port,
            "--",
            "node",
            &peer("server-filesystem"),
        ])
        .arg(&nowhere)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n");
    let out = {
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        err
    };
    let status = child.wait().unwrap();
    drop(stdin);
    assert!(
        !status.success(),
        "the proxy exits with the server's failure"
    );
    assert!(
        out.contains("graphmind mcp-proxy: the MCP server exited with code"),
        "{out}"
    );
    assert!(out.contains("before answering initialize"), "{out}");
    assert!(out.contains("line(s) of its stderr:"), "{out}");
    assert!(out.contains("  | "), "the tail is quoted: {out}");
}

#[test]
fn no_command_prints_a_recipe_and_a_missing_command_fails_open() {
    let out = run(Command::new(BIN).arg("mcp-proxy"), Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing but the protocol on stdout");
    assert!(text(&out.stderr)
        .contains("graphmind mcp-proxy -- npx -y @modelcontextprotocol/server-everything"));
    let port = closed_port().to_string();
    let t = Instant::now();
    let out = run(
        Command::new(BIN).args([
            "mcp-proxy",
            "--port",
            &port,
            "--",
            "/nonexistent/mcp-server",
        ]),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(127));
    assert!(
        text(&out.stderr).contains("cannot run \"/nonexistent/mcp-server\""),
        "{}",
        text(&out.stderr)
    );
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "waits at most ~1 s for a debugger"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn hide_switches_from_the_environment_keep_arguments_and_failed_content_out_of_the_run() {
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let dir = common::temp_dir();
    let secret = dir.canonicalize().unwrap().join("secret-name.txt");
    let args = format!(r#"{{"path":"{}"}}"#, secret.display());
    let port = srv.port.to_string();
    // The host passes a minimal environment to its server: set the switches with env(1).
    let mut server = vec![
        "env".to_owned(),
        "GRAPHMIND_HIDE_INPUTS=1".into(),
        "GRAPHMIND_HIDE_TOOL_RESULTS=true".into(),
    ];
    server.extend(proxied(
        &["--port", &port, "--wait-for-attach"],
        &filesystem(&dir),
    ));
    let out = host(&["call", "read_text_file", &args], &server);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("secret-name.txt"),
        "the host still sees the real answer"
    );
    let run = wait_finished_run(&srv);
    let base = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        s(&run, &["app"]),
        Some(format!("node index.js {base}").as_str()),
        "only the command and file names stay in the label"
    );
    let events = stored_events(&srv, s(&run, &["id"]).unwrap());
    let all = events.iter().map(to_json).collect::<Vec<_>>().join("\n");
    assert!(
        !all.contains("secret-name"),
        "no argument or failed content is recorded:\n{all}"
    );
    // The server's own stderr is streamed as text on the session node and kept in its output:
    // a log line that repeats its arguments is an output (GRAPHMIND_HIDE_OUTPUTS hides it).
    let is_log = |e: &Value| {
        s(e, &["payload", "nodeId"]) == Some("mcp:session")
            && matches!(s(e, &["type"]), Some("node.token" | "node.finished"))
    };
    let not_logs = events
        .iter()
        .filter(|e| !is_log(e))
        .map(to_json)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !not_logs.contains(&*dir.to_string_lossy()),
        "the server's path argument is not recorded:\n{not_logs}"
    );
    let error = events
        .iter()
        .find(|e| {
            s(e, &["type"]) == Some("node.error")
                && s(e, &["payload", "nodeId"]) == Some("tool:read_text_file")
        })
        .unwrap();
    let message = s(error, &["payload", "error", "message"]).unwrap();
    assert!(
        message.contains("isError: true") && message.contains("hidden"),
        "{message}"
    );
}

#[test]
fn abort_answers_the_host_with_an_error_and_retry_re_sends_the_request() {
    let srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    dbg.breakpoint(r#"{"kind":"tool","name":"get_file_info","point":"before"}"#);
    let dir = common::temp_dir();
    let d = dir.canonicalize().unwrap();
    let info = format!(r#"{{"path":"{}"}}"#, d.display());
    let missing = format!(r#"{{"path":"{}"}}"#, d.join("missing.txt").display());
    let port = srv.port.to_string();
    let server = proxied(&["--port", &port, "--wait-for-attach"], &filesystem(&dir));
    let client = std::thread::spawn(move || {
        host(
            &["calls", "get_file_info", &info, "read_text_file", &missing],
            &server,
        )
    });
    // 1. abort at `before`: the server never sees it, the host gets -32099.
    let paused = dbg.next("exec.paused");
    assert_eq!(
        s(&paused, &["payload", "nodeId"]),
        Some("tool:get_file_info")
    );
    dbg.resume(&paused, "abort", "");
    // 2. the failing read holds at `error`; retry re-sends it, it fails and holds again.
    let first = dbg.next("exec.paused");
    assert_eq!(
        (
            s(&first, &["payload", "nodeId"]),
            s(&first, &["payload", "point"])
        ),
        (Some("tool:read_text_file"), Some("error"))
    );
    dbg.resume(&first, "retry", "");
    let second = dbg.next("exec.paused");
    assert_eq!(s(&second, &["payload", "point"]), Some("error"));
    assert_ne!(
        s(&second, &["payload", "pauseId"]),
        s(&first, &["payload", "pauseId"])
    );
    dbg.resume(&second, "continue", "");
    let out = client.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = parse_str(text(&out.stdout).trim()).unwrap();
    let calls = v.as_array().unwrap();
    assert_eq!(common::i(&calls[0], &["rpcError", "code"]), Some(-32099));
    assert_eq!(
        s(&calls[0], &["rpcError", "message"]),
        Some("tools/call aborted by the GraphMind debugger")
    );
    assert_eq!(calls[1].get("isError").and_then(Value::as_bool), Some(true));
    let run = wait_finished_run(&srv);
    let events = stored_events(&srv, s(&run, &["id"]).unwrap());
    let errors = events
        .iter()
        .filter(|e| {
            s(e, &["type"]) == Some("node.error")
                && s(e, &["payload", "nodeId"]) == Some("tool:read_text_file")
        })
        .count();
    assert_eq!(
        errors, 2,
        "the retried request was answered twice by the server"
    );
}

/// The text of the first content block of a `host.py call` answer.
fn first_text(out: &Output) -> String {
    let result = parse_str(text(&out.stdout).trim())
        .unwrap_or_else(|_| panic!("host printed JSON: {}", text(&out.stderr)));
    s(
        &result.get("content").and_then(Value::as_array).unwrap()[0],
        &["text"],
    )
    .unwrap()
    .to_owned()
}

#[test]
fn edited_arguments_at_the_before_gate_reach_the_server_and_the_host_gets_their_answer() {
    let srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    dbg.breakpoint(r#"{"kind":"tool","name":"echo","point":"before"}"#);
    let port = srv.port.to_string();
    let server = proxied(&["--port", &port, "--wait-for-attach"], &everything());
    let client = std::thread::spawn(move || {
        host(
            &["call", "echo", r#"{"message":"as the host sent it"}"#],
            &server,
        )
    });
    let paused = dbg.next("exec.paused");
    assert_eq!(
        (
            s(&paused, &["payload", "nodeId"]),
            s(&paused, &["payload", "point"])
        ),
        (Some("tool:echo"), Some("before"))
    );
    assert_eq!(
        paused
            .get("payload")
            .and_then(|p| p.get("editable"))
            .and_then(Value::as_bool),
        Some(true),
        "a tools/call before gate is editable"
    );
    // The edit is merged into the request's params: `name` stays, `arguments` is replaced.
    dbg.resume(
        &paused,
        "continue",
        r#","input":{"arguments":{"message":"edited by the debugger ✓"}}"#,
    );
    let answer = dbg.next_message("resume.result");
    assert_eq!(
        s(&answer, &["outcome"]),
        Some("resumed"),
        "{}",
        to_json(&answer)
    );
    let out = client.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // server-everything's echo answered the edited arguments: the server received them.
    assert_eq!(first_text(&out), "Echo: edited by the debugger ✓");
    let run = wait_finished_run(&srv);
    let events = stored_events(&srv, s(&run, &["id"]).unwrap());
    let of_echo = |t: &str| {
        events
            .iter()
            .find(|e| {
                s(e, &["type"]) == Some(t) && s(e, &["payload", "nodeId"]) == Some("tool:echo")
            })
            .cloned()
            .unwrap()
    };
    assert_eq!(
        s(
            &of_echo("node.started"),
            &["payload", "input", "arguments", "message"]
        ),
        Some("as the host sent it")
    );
    let finished = of_echo("node.finished");
    let output = s(
        &finished
            .get("payload")
            .and_then(|p| p.get("output"))
            .and_then(|o| o.get("content"))
            .and_then(Value::as_array)
            .unwrap()[0],
        &["text"],
    )
    .map(str::to_owned);
    assert_eq!(output.as_deref(), Some("Echo: edited by the debugger ✓"));
}

#[test]
fn graphmind_disable_edit_input_makes_the_gate_non_editable() {
    let srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    dbg.breakpoint(r#"{"kind":"tool","name":"echo","point":"before"}"#);
    let port = srv.port.to_string();
    let mut server = vec!["env".to_owned(), "GRAPHMIND_DISABLE_EDIT_INPUT=1".into()];
    server.extend(proxied(
        &["--port", &port, "--wait-for-attach"],
        &everything(),
    ));
    let client = std::thread::spawn(move || {
        host(
            &["call", "echo", r#"{"message":"as the host sent it"}"#],
            &server,
        )
    });
    let paused = dbg.next("exec.paused");
    assert_eq!(s(&paused, &["payload", "nodeId"]), Some("tool:echo"));
    assert_ne!(
        paused
            .get("payload")
            .and_then(|p| p.get("editable"))
            .and_then(Value::as_bool),
        Some(true),
        "not offered as editable"
    );
    dbg.resume(
        &paused,
        "continue",
        r#","input":{"arguments":{"message":"edited"}}"#,
    );
    let refused = dbg.next_message("resume.result");
    assert_eq!(
        (s(&refused, &["outcome"]), s(&refused, &["code"])),
        (Some("refused"), Some("not-editable")),
        "{}",
        to_json(&refused)
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!client.is_finished(), "a refused edit leaves the call held");
    dbg.resume(&paused, "continue", "");
    let out = client.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(first_text(&out), "Echo: as the host sent it");
}

/// Spawns the proxy with piped stdio; returns it, its stdin and a reader of its stdout lines.
fn spawn_proxy(
    flags: &[&str],
    server: &[String],
    envs: &[(&str, &str)],
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    let mut cmd = Command::new(BIN);
    cmd.arg("mcp-proxy").args(flags).arg("--").args(server);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    (child, stdin, stdout)
}

/// Reads stdout lines until the answer to `id` arrives.
fn answer_to(out: &mut std::io::BufReader<std::process::ChildStdout>, id: i64) -> Value {
    use std::io::BufRead;
    loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the proxy closed stdout before answering #{id}"
        );
        if let Ok(v) = parse_str(line.trim()) {
            if common::i(&v, &["id"]) == Some(id) && v.get("method").is_none() {
                return v;
            }
        }
    }
}

/// Closes the proxy's stdin, waits for it to exit, returns its stderr.
fn finish(mut child: std::process::Child, stdin: std::process::ChildStdin) -> String {
    drop(stdin);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    child.wait().unwrap();
    err
}

#[test]
fn trace_prints_one_line_per_frame_even_with_recording_off() {
    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let port = closed_port().to_string();
    for envs in [&[][..], &[("GRAPHMIND_DISABLED", "1")][..]] {
        let (child, mut stdin, mut out) =
            spawn_proxy(&["--trace", "--port", &port], &everything(), envs);
        writeln!(stdin, "{INIT}").unwrap();
        assert!(answer_to(&mut out, 1).get("result").is_some());
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        writeln!(stdin, "not json\r").unwrap();
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":"nobody-asked","result":{{}}}}"#
        )
        .unwrap();
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"hi"}}}}}}"#).unwrap();
        assert_eq!(
            s(
                &answer_to(&mut out, 2)
                    .get("result")
                    .and_then(|r| r.get("content"))
                    .and_then(Value::as_array)
                    .unwrap()[0],
                &["text"]
            ),
            Some("Echo: hi")
        );
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"no-such-tool","arguments":{{}}}}}}"#).unwrap();
        answer_to(&mut out, 3);
        let err = finish(child, stdin);
        for line in [
            "[client->server] -> initialize #1",
            "[server->client] <- initialize #1 ok",
            "[client->server] ~> notifications/initialized (notification)",
            "[client->server] non-JSON frame (9 bytes), relayed verbatim",
            "[client->server] <- response #nobody-asked with no pending request",
            "[client->server] -> tools/call #2",
            "[server->client] <- tools/call #2 ok",
            "[client->server] -> tools/call #3",
            "[server->client] <- tools/call #3 ERROR",
        ] {
            assert!(
                err.lines().any(|l| l == line),
                "{envs:?}: missing trace line {line:?} in:\n{err}"
            );
        }
        assert!(
            err.contains("graphmind mcp-proxy: 1 response(s) arrived with no matching request id"),
            "{err}"
        );
        assert!(
            err.contains("graphmind mcp-proxy: 1 frame(s) were not JSON-RPC (relayed verbatim)"),
            "{err}"
        );
        let traced = err
            .lines()
            .filter(|l| l.starts_with("[client->server] ") || l.starts_with("[server->client] "))
            .count();
        assert!(traced >= 9, "{err}");
    }
    // Without --trace: no frame lines.
    let (child, mut stdin, mut out) = spawn_proxy(&["--port", &port], &everything(), &[]);
    writeln!(stdin, "{INIT}").unwrap();
    answer_to(&mut out, 1);
    let err = finish(child, stdin);
    assert!(
        !err.contains("[client->server]") && !err.contains("[server->client]"),
        "{err}"
    );
}

#[test]
fn the_third_identical_tools_call_is_held_as_a_loop_and_loop_allow_lets_it_through() {
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut dbg = Debugger::new(&srv);
    let port = srv.port.to_string();
    let same = r#"{"message":"again"}"#;
    let server = proxied(&["--port", &port, "--wait-for-attach"], &everything());
    let client = std::thread::spawn(move || {
        host(
            &["calls", "echo", same, "echo", same, "echo", same],
            &server,
        )
    });
    let paused = dbg.next("exec.paused");
    assert_eq!(
        (
            s(&paused, &["payload", "nodeId"]),
            s(&paused, &["payload", "point"])
        ),
        (Some("tool:echo"), Some("before"))
    );
    assert_eq!(s(&paused, &["payload", "reason"]), Some("loop"));
    assert_eq!(common::i(&paused, &["payload", "loop", "repeats"]), Some(3));
    std::thread::sleep(Duration::from_millis(300));
    assert!(!client.is_finished(), "the third call is held");
    dbg.resume(&paused, "continue", "");
    let out = client.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let calls = parse_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(calls.as_array().map(Vec::len), Some(3));

    // GRAPHMIND_LOOP_ALLOW (in the proxy's environment): the same three calls run through.
    let mut server = vec!["env".to_owned(), "GRAPHMIND_LOOP_ALLOW=echo".into()];
    server.extend(proxied(
        &["--port", &port, "--wait-for-attach"],
        &everything(),
    ));
    let out = host(
        &["calls", "echo", same, "echo", same, "echo", same],
        &server,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let deadline = Instant::now() + Duration::from_secs(10);
    let all = loop {
        let all = runs(&srv);
        if all.len() >= 2 || Instant::now() > deadline {
            break all;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(all.len(), 2);
    let allowed = all
        .iter()
        .find(|r| s(r, &["id"]) != s(&paused, &["runId"]))
        .unwrap();
    let run_id = s(allowed, &["id"]).unwrap().to_owned();
    srv.wait_run(&run_id, |r| s(r, &["status"]) != Some("running"));
    let events = stored_events(&srv, &run_id);
    assert_eq!(
        events
            .iter()
            .filter(|e| s(e, &["type"]) == Some("node.started")
                && s(e, &["payload", "nodeId"]) == Some("tool:echo"))
            .count(),
        3
    );
    assert!(
        !events
            .iter()
            .any(|e| s(e, &["type"]) == Some("exec.paused")),
        "an allowed tool is never held"
    );
}

#[test]
fn a_server_that_fails_to_start_reaches_the_graph() {
    let srv = Server::start(&[], &[]);
    let port = srv.port.to_string();
    let t = Instant::now();
    let out = run(
        Command::new(BIN).args([
            "mcp-proxy",
            "--port",
            &port,
            "--",
            "/nonexistent/mcp-server",
            "--flag",
        ]),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(127));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let run = wait_finished_run(&srv);
    assert_eq!(s(&run, &["status"]), Some("error"));
    let events = stored_events(&srv, s(&run, &["id"]).unwrap());
    let error = events
        .iter()
        .find(|e| {
            s(e, &["type"]) == Some("node.error")
                && s(e, &["payload", "nodeId"]) == Some("mcp:session")
        })
        .expect("the session node failed");
    assert_eq!(
        s(error, &["payload", "error", "name"]),
        Some("McpServerSpawnFailed")
    );
    assert!(s(error, &["payload", "error", "message"])
        .unwrap()
        .starts_with("cannot run \"/nonexistent/mcp-server\": "));
}

#[test]
fn a_debugger_that_dies_releases_the_held_request() {
    let mut srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    dbg.breakpoint(r#"{"kind":"tool","name":"echo","point":"before"}"#);
    let port = srv.port.to_string();
    let server = proxied(&["--port", &port, "--wait-for-attach"], &everything());
    let client = std::thread::spawn(move || {
        host(
            &["call", "echo", r#"{"message":"still answered"}"#],
            &server,
        )
    });
    let paused = dbg.next("exec.paused");
    assert_eq!(s(&paused, &["payload", "nodeId"]), Some("tool:echo"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(!client.is_finished());
    let t = Instant::now();
    srv.stop();
    let out = client.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(first_text(&out), "Echo: still answered");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "released promptly: {:?}",
        t.elapsed()
    );
}

#[test]
fn graphmind_help_lists_every_command_with_a_description() {
    let out = run(Command::new(BIN).arg("--help"), Duration::from_secs(10));
    assert!(out.status.success());
    let help = text(&out.stdout);
    let section: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    // A command line is `  name  description`; continuation lines are indented deeper.
    let mut listed = Vec::new();
    for line in &section {
        if line.starts_with("  ") && !line.starts_with("   ") {
            let (name, description) = line
                .trim()
                .split_once(char::is_whitespace)
                .unwrap_or_else(|| panic!("{line:?} has a description"));
            assert!(
                description.trim().len() > 10,
                "{name}: one-line description"
            );
            listed.push(name.to_owned());
        }
    }
    let expected = [
        "serve",
        "demo",
        "open",
        "init",
        "skill",
        "runs",
        "record",
        "replay",
        "import",
        "pauses",
        "wait",
        "resume",
        "completions",
        "mcp",
        "mcp-proxy",
    ];
    assert_eq!(listed, expected, "the commands --help lists");
    // Every listed command exists: given stray arguments, the command itself refuses them
    // (an unknown word is "unknown command"). mcp and mcp-proxy are checked below.
    let stray = |name: &str| {
        let mut cmd = Command::new(BIN);
        common::isolate(&mut cmd, &common::temp_dir());
        let o = run(
            cmd.args([name, "stray-1", "stray-2", "stray-3", "stray-4"]),
            Duration::from_secs(10),
        );
        (o.status.code(), text(&o.stderr))
    };
    for name in &expected[..expected.len() - 2] {
        let (code, err) = stray(name);
        assert!(
            code.is_some_and(|c| c != 0)
                && !err.contains("unknown command")
                && err.contains("stray-"),
            "graphmind {name}: {code:?} {err}"
        );
    }
    let (code, err) = stray("no-such-command");
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown command \"no-such-command\""), "{err}");
    // mcp-proxy and mcp print their own usage on stderr (stdout is the protocol), exit 0.
    for (name, needle) in [("mcp-proxy", "--trace"), ("mcp", "list_runs")] {
        let o = run(
            Command::new(BIN).args([name, "--help"]),
            Duration::from_secs(10),
        );
        assert_eq!(o.status.code(), Some(0));
        assert!(o.stdout.is_empty(), "{name} --help keeps stdout clean");
        assert!(
            text(&o.stderr).contains(needle),
            "{name} --help: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn resources_prompts_and_a_server_sampling_request_are_recorded_and_sampling_can_be_injected() {
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut dbg = Debugger::new(&srv);
    dbg.breakpoint(r#"{"kind":"llm","point":"before"}"#);
    let port = srv.port.to_string();
    let server = proxied(&["--port", &port, "--wait-for-attach"], &everything());
    let client = std::thread::spawn(move || host(&["mapping"], &server));
    // server-everything's trigger-sampling-request sends sampling/createMessage to the host:
    // held at its before gate, answered by inject, the host's callback never runs.
    let paused = dbg.next("exec.paused");
    assert_eq!(
        (
            s(&paused, &["payload", "nodeId"]),
            s(&paused, &["payload", "point"])
        ),
        (Some("llm:sampling"), Some("before"))
    );
    dbg.resume(&paused, "inject", r#","output":"injected completion""#);
    let out = client.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = parse_str(text(&out.stdout).trim()).unwrap();
    let sampled = s(&v, &["sampling"]).unwrap();
    assert!(
        sampled.contains("injected completion") && sampled.contains("graphmind-injected"),
        "the server got the injected CreateMessageResult: {sampled}"
    );
    assert!(!sampled.contains("sampled by the host"));
    let uri = s(&v, &["resource"]).unwrap().to_owned();
    let run = wait_finished_run(&srv);
    let events = stored_events(&srv, s(&run, &["id"]).unwrap());
    let started = |node: &str| {
        events
            .iter()
            .find(|e| {
                s(e, &["type"]) == Some("node.started")
                    && s(e, &["payload", "nodeId"]) == Some(node)
            })
            .cloned()
    };
    for (node, kind) in [
        (format!("resource:{uri}"), "resource"),
        ("prompt:simple-prompt".into(), "prompt"),
        ("llm:sampling".into(), "llm"),
        ("tool:trigger-sampling-request".into(), "tool"),
    ] {
        let e = started(&node).unwrap_or_else(|| panic!("{node} recorded"));
        assert_eq!(s(&e, &["payload", "kind"]), Some(kind), "{node}");
        assert_eq!(
            s(&e, &["payload", "parentId"]),
            Some("mcp:session"),
            "{node}"
        );
    }
    assert_eq!(
        s(
            &started("llm:sampling").unwrap(),
            &["payload", "input", "systemPrompt"]
        ),
        Some("You are a helpful test server.")
    );
}

#[test]
fn a_response_held_at_after_can_be_replaced_by_inject_or_abort() {
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut dbg = Debugger::new(&srv);
    dbg.breakpoint(r#"{"kind":"tool","point":"after"}"#);
    let port = srv.port.to_string();
    let server = proxied(&["--port", &port, "--wait-for-attach"], &everything());
    let client = std::thread::spawn(move || {
        host(
            &[
                "calls",
                "echo",
                r#"{"message":"real"}"#,
                "get-sum",
                r#"{"a":1,"b":2}"#,
            ],
            &server,
        )
    });
    let first = dbg.next("exec.paused");
    assert_eq!(
        (
            s(&first, &["payload", "nodeId"]),
            s(&first, &["payload", "point"])
        ),
        (Some("tool:echo"), Some("after"))
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !client.is_finished(),
        "the host waits while the answer is held"
    );
    dbg.resume(&first, "inject", r#","output":"replaced by the debugger""#);
    let second = dbg.next("exec.paused");
    assert_eq!(
        (
            s(&second, &["payload", "nodeId"]),
            s(&second, &["payload", "point"])
        ),
        (Some("tool:get-sum"), Some("after"))
    );
    dbg.resume(&second, "abort", "");
    let out = client.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = parse_str(text(&out.stdout).trim()).unwrap();
    let calls = v.as_array().unwrap();
    assert_eq!(
        s(
            &calls[0].get("content").and_then(Value::as_array).unwrap()[0],
            &["text"]
        ),
        Some("replaced by the debugger")
    );
    assert_eq!(common::i(&calls[1], &["rpcError", "code"]), Some(-32099));
    assert_eq!(
        s(&calls[1], &["rpcError", "message"]),
        Some("tools/call aborted by the GraphMind debugger")
    );
}

#[test]
fn wait_for_attach_holds_the_first_frame_at_most_three_seconds() {
    // A "server" that accepts the connection and never answers the handshake.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let keep = std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((conn, _)) = silent.accept() {
            held.push(conn);
            if held.len() > 20 {
                break;
            }
        }
    });
    let t = Instant::now();
    let out = host(
        &["call", "echo", r#"{"message":"late"}"#],
        &proxied(&["--port", &port, "--wait-for-attach"], &everything()),
    );
    let took = t.elapsed();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(first_text(&out), "Echo: late");
    assert!(
        took >= Duration::from_millis(2900),
        "held up to the 3 s budget: {took:?}"
    );
    assert!(
        took < Duration::from_secs(12),
        "then starts detached: {took:?}"
    );
    drop(keep);
}

#[test]
fn graphmind_mcp_get_node_keeps_the_25_most_recent_instances_with_previews() {
    let mut srv = Server::start(&["--pause-on-error", "off"], &[]);
    let port = srv.port.to_string();
    let big = "y".repeat(5000);
    let mut calls: Vec<String> = Vec::new();
    for i in 0..29 {
        calls.extend(["echo".to_owned(), format!(r#"{{"message":"call {i}"}}"#)]);
    }
    calls.extend(["echo".to_owned(), format!(r#"{{"message":"{big}"}}"#)]);
    let mode: Vec<&str> = std::iter::once("calls")
        .chain(calls.iter().map(String::as_str))
        .collect();
    let out = host(
        &mode,
        &proxied(&["--port", &port, "--wait-for-attach"], &everything()),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run = wait_finished_run(&srv);
    let run_id = s(&run, &["id"]).unwrap().to_owned();
    // `graphmind mcp` needs no running server: the one that recorded the run is killed first.
    srv.stop();
    let mcp = vec![
        BIN.to_owned(),
        "mcp".into(),
        "--db".into(),
        srv.db.to_string_lossy().into_owned(),
    ];
    let get_node = format!(r#"{{"runId":"{run_id}","nodeId":"tool:echo"}}"#);
    let out = host(
        &[
            "tools",
            "get_node",
            &get_node,
            "list_runs",
            r#"{"limit":1000}"#,
        ],
        &mcp,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = parse_str(text(&out.stdout).trim()).unwrap();
    let calls = v.get("calls").and_then(Value::as_array).unwrap();
    let body = |i: usize| {
        parse_str(
            s(
                &calls[i].get("content").and_then(Value::as_array).unwrap()[0],
                &["text"],
            )
            .unwrap(),
        )
        .unwrap()
    };
    let node = body(0);
    assert_eq!(common::i(&node, &["executions"]), Some(30));
    assert_eq!(common::i(&node, &["instancesOmitted"]), Some(5));
    let instances = node.get("instances").and_then(Value::as_array).unwrap();
    assert_eq!(instances.len(), 25, "the 25 most recent");
    assert_eq!(
        s(&instances[0], &["input", "arguments", "message"]),
        Some("call 5")
    );
    let last = &instances[24];
    assert_eq!(
        last.get("input")
            .and_then(|i| i.get("truncated"))
            .and_then(Value::as_bool),
        Some(true)
    );
    assert_eq!(
        s(last, &["input", "preview"]).map(|p| p.chars().count()),
        Some(4000)
    );
    assert!(common::i(last, &["input", "chars"]).unwrap() > 5000);
    assert_eq!(
        calls[1].get("isError").and_then(Value::as_bool),
        Some(false),
        "a limit over 100 is capped, not refused"
    );
    assert_eq!(common::i(&body(1), &["total"]), Some(1));
}

#[test]
fn hide_outputs_and_hide_tool_args_from_the_environment() {
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let dir = common::temp_dir();
    std::fs::write(dir.join("note.txt"), "output-secret-text").unwrap();
    let file = dir.canonicalize().unwrap().join("note.txt");
    let args = format!(r#"{{"path":"{}"}}"#, file.display());
    let port = srv.port.to_string();
    let mut server = vec![
        "env".to_owned(),
        "GRAPHMIND_HIDE_OUTPUTS=1".into(),
        "GRAPHMIND_HIDE_TOOL_ARGS=1".into(),
    ];
    server.extend(proxied(
        &["--port", &port, "--wait-for-attach"],
        &filesystem(&dir),
    ));
    let out = host(&["call", "read_text_file", &args], &server);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("output-secret-text"),
        "the host still gets the real answer"
    );
    let run = wait_finished_run(&srv);
    let events = stored_events(&srv, s(&run, &["id"]).unwrap());
    let all = events.iter().map(to_json).collect::<Vec<_>>().join("\n");
    assert!(
        !all.contains("output-secret-text"),
        "no output recorded:\n{all}"
    );
    assert!(
        !all.contains("note.txt"),
        "no tool argument recorded:\n{all}"
    );
    assert!(
        !all.contains("Secure MCP Filesystem Server"),
        "the server's stderr log is an output:\n{all}"
    );
    let of = |t: &str, node: &str| {
        events
            .iter()
            .find(|e| s(e, &["type"]) == Some(t) && s(e, &["payload", "nodeId"]) == Some(node))
            .cloned()
            .unwrap()
    };
    assert_eq!(
        s(
            &of("node.started", "tool:read_text_file"),
            &["payload", "input"]
        ),
        Some("__REDACTED__")
    );
    assert_eq!(
        s(
            &of("node.finished", "tool:read_text_file"),
            &["payload", "output"]
        ),
        Some("__REDACTED__")
    );
    // Only tool arguments are hidden: the handshake's params are kept.
    assert_eq!(
        s(
            &of("node.started", "mcp:initialize"),
            &["payload", "input", "clientInfo", "name"]
        ),
        Some("mcp")
    );
}

#[test]
fn mcp_and_mcp_proxy_record_their_command_for_telemetry() {
    let home = common::temp_dir();
    for (args, event) in [
        (
            &["mcp-proxy", "--port", "9", "--", "/nonexistent/mcp-server"][..],
            "mcp-proxy",
        ),
        (&["mcp", "--db", "/nonexistent/x.db"][..], "mcp"),
    ] {
        let mut cmd = Command::new(BIN);
        common::isolate(&mut cmd, &home);
        let out = run(
            cmd.args(args).env("GRAPHMIND_TELEMETRY", "log"),
            Duration::from_secs(10),
        );
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("[graphmind telemetry] {{\"event\":\"{event}\",")),
            "{event}: {err}"
        );
        assert!(
            out.stdout.is_empty(),
            "telemetry never touches the protocol channel"
        );
    }
}

/// The proxy follows the TypeScript client's kill switch (the spec): Python's production
/// variables do not switch it off, `NODE_ENV=production` does unless `GRAPHMIND=1`, and what
/// it prints names the variable that actually switched it off.
#[test]
fn the_proxy_switches_off_by_the_typescript_rule_and_names_the_variable_that_did() {
    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let port = srv.port.to_string();
    // (the proxy's environment, what it prints when that switches it off)
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
    let cases: &[Case] = &[
        (&[("ENV", "prod")], None),
        (&[("APP_ENV", "Production")], None),
        (&[("PYTHON_ENV", "production"), ("GRAPHMIND_ENV", "prod")], None),
        (&[("NODE_ENV", "Production")], None), // the TypeScript check is exact
        (&[("NODE_ENV", "production"), ("GRAPHMIND", "1")], None),
        (&[("NODE_ENV", "production")], Some("NODE_ENV=production is set (GRAPHMIND=1 records there anyway): relaying only, nothing is recorded")),
        (&[("GRAPHMIND_DISABLED", "1"), ("ENV", "prod")], Some("GRAPHMIND_DISABLED=1 is set: relaying only, nothing is recorded")),
    ];
    for (envs, off) in cases {
        let before = runs(&srv).len();
        let (child, mut stdin, mut out) =
            spawn_proxy(&["--port", &port, "--wait-for-attach"], &everything(), envs);
        writeln!(stdin, "{INIT}").unwrap();
        assert!(
            answer_to(&mut out, 1).get("result").is_some(),
            "{envs:?}: the session works either way"
        );
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"hi"}}}}}}"#).unwrap();
        answer_to(&mut out, 2);
        let err = finish(child, stdin);
        match off {
            Some(line) => {
                assert!(err.contains(line), "{envs:?}: {err}");
                std::thread::sleep(Duration::from_millis(300));
                assert_eq!(runs(&srv).len(), before, "{envs:?}: nothing recorded");
            }
            None => {
                assert!(
                    err.contains("reporting to ws://127.0.0.1:"),
                    "{envs:?}: {err}"
                );
                assert!(!err.contains("relaying only"), "{envs:?}: {err}");
                let deadline = Instant::now() + Duration::from_secs(15);
                while runs(&srv).len() == before {
                    assert!(Instant::now() < deadline, "{envs:?}: the run is recorded");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
}
