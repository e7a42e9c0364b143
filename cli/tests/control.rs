//! The agent-facing control plane against the real binary: GET /api/session, the
//! /api/pauses long-poll, the pause detail, POST .../resume with its outcomes and status
//! codes, and the `pauses`, `wait`, `resume` commands with their exit codes.

mod common;
use common::*;
use graphmind_core::json::{parse_str, Value};
use std::time::{Duration, Instant};

fn json_of(body: &str) -> Value {
    parse_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"))
}

fn resume_http(srv: &Server, token: &str, run: &str, pause: &str, body: &str) -> (u16, Value) {
    let (st, _, b) = http_call(
        srv.port,
        "POST",
        &format!("/api/runs/{run}/pauses/{pause}/resume"),
        &format!("Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"),
        body,
    );
    (st, parse_str(&b).unwrap_or_default())
}

/// An app holding pause `p1` before `tool:search` in `run`.
fn held(srv: &Server, run: &str, caps: &str) -> Ws {
    let mut app = srv.ingest();
    let payload = format!(
        r#"{{"versions":{{"protocol":1,"client":"test"}},"capabilities":[{caps}],"app":"holder"}}"#
    );
    app.event("*", "hello", &payload);
    app.recv_type("hello.ack");
    app.event(
        run,
        "run.started",
        r#"{"app":"holder","sdk":{"name":"t","version":"0"}}"#,
    );
    app.event(run, "node.started", r#"{"nodeId":"tool:search","kind":"tool","name":"search","instanceId":"c1","input":{"q":"flights","api_key":"sk-1"}}"#);
    app.event(
        run,
        "exec.paused",
        r#"{"pauseId":"p1","nodeId":"tool:search","point":"before","editable":true}"#,
    );
    srv.wait_run(run, |r| i(r, &["eventCount"]) == Some(3));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !srv.get("/api/pauses").1.contains("\"p1\"") {
        assert!(Instant::now() < deadline, "pause never listed");
        std::thread::sleep(Duration::from_millis(10));
    }
    app
}

#[test]
fn pauses_are_listed_described_and_long_polled() {
    let srv = Server::start(&[], &[]);
    // Long-poll started before anything is held: it returns when the pause opens.
    let port = srv.port;
    let waiter = std::thread::spawn(move || {
        let t = Instant::now();
        let (st, _, body) = http_call(port, "GET", "/api/pauses?wait=10", "", "");
        (st, body, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    let _app = held(&srv, "run_h", r#""pause","run-claim""#);
    let (st, body, took) = waiter.join().unwrap();
    assert_eq!(st, 200);
    assert!(
        took < Duration::from_secs(5),
        "woke on the pause, not the deadline ({took:?})"
    );
    let v = json_of(&body);
    let p = &v.get("pauses").and_then(Value::as_array).unwrap()[0];
    assert_eq!(
        to_json(p),
        r#"{"runId":"run_h","pauseId":"p1","nodeId":"tool:search","point":"before","since":1700000000003,"editable":true,"state":"open","app":"holder"}"#
    );
    assert!(v.get("timedOut").is_none());

    // Scoped to a run: the run's state is reported.
    let v = json_of(&srv.get("/api/pauses?runId=run_h").1);
    assert_eq!(
        to_json(v.get("run").unwrap()),
        r#"{"id":"run_h","status":"running","live":true}"#
    );
    assert_eq!(
        to_json(
            json_of(&srv.get("/api/pauses?runId=nope").1)
                .get("run")
                .unwrap()
        ),
        "null"
    );
    // Nothing to wait for: the deadline answers with timedOut.
    let t = Instant::now();
    let v = json_of(&srv.get("/api/pauses?runId=other&wait=0.4").1);
    assert!(t.elapsed() >= Duration::from_millis(350));
    assert_eq!(v.get("timedOut").and_then(Value::as_bool), Some(true));
    assert_eq!(srv.get("/api/pauses?wait=soon").0, 400);

    // The detail: the held node's recorded input.
    let v = json_of(&srv.get("/api/runs/run_h/pauses/p1").1);
    let pause = v.get("pause").unwrap();
    assert_eq!(s(pause, &["state"]), Some("open"));
    assert_eq!(
        to_json(pause.get("node").unwrap()),
        r#"{"kind":"tool","name":"search","instanceId":"c1","input":{"q":"flights","api_key":"sk-1"}}"#
    );
    let (st, body) = srv.get("/api/runs/run_h/pauses/nope");
    assert_eq!(
        (st, s(&json_of(&body), &["error"])),
        (404, Some("no-such-pause"))
    );
    let (st, body) = srv.get("/api/runs/ghost/pauses/p1");
    assert_eq!(
        (st, s(&json_of(&body), &["error"])),
        (404, Some("no-such-run"))
    );
}

#[test]
fn a_long_poll_on_a_run_returns_when_the_run_ends() {
    let srv = Server::start(&[], &[]);
    let mut app = srv.ingest();
    app.hello("ender", None);
    app.event(
        "run_e",
        "run.started",
        r#"{"app":"ender","sdk":{"name":"t","version":"0"}}"#,
    );
    srv.wait_run("run_e", |r| i(r, &["eventCount"]) == Some(1));
    let port = srv.port;
    let waiter = std::thread::spawn(move || {
        http_call(port, "GET", "/api/pauses?runId=run_e&wait=10", "", "")
    });
    std::thread::sleep(Duration::from_millis(300));
    app.event("run_e", "run.finished", r#"{"status":"ok"}"#);
    let (_, _, body) = waiter.join().unwrap();
    let v = json_of(&body);
    assert_eq!(s(&v, &["run", "status"]), Some("ok"));
    assert!(v.get("timedOut").is_none());
}

#[test]
fn resume_over_http_outcomes_and_status_codes() {
    let srv = Server::start(&["--allow-control", "resume"], &[]);
    let mut app = held(&srv, "run_r", r#""pause","inject","run-claim""#);
    let agent = srv.agent_token.clone();

    // Request shape errors.
    let (st, _, body) = http_call(
        srv.port,
        "POST",
        "/api/runs/run_r/pauses/p1/resume",
        &format!("Authorization: Bearer {agent}\r\nContent-Type: text/plain\r\n"),
        "{}",
    );
    assert_eq!(
        (st, s(&json_of(&body), &["error"])),
        (415, Some("unsupported-media-type"))
    );
    assert_eq!(resume_http(&srv, &agent, "run_r", "p1", "{nope").0, 400);
    assert_eq!(resume_http(&srv, &agent, "run_r", "p1", "[1]").0, 400);
    assert_eq!(
        resume_http(&srv, &agent, "run_r", "p1", r#"{"action":"explode"}"#).0,
        400
    );
    assert_eq!(
        resume_http(
            &srv,
            &agent,
            "run_r",
            "p1",
            r#"{"action":"continue","timeoutMs":10}"#
        )
        .0,
        400
    );
    assert_eq!(
        resume_http(&srv, "gma_wrong", "run_r", "p1", r#"{"action":"continue"}"#).0,
        401
    );

    // Level `resume` may not inject: 403 forbidden, nothing reaches the app.
    let (st, v) = resume_http(
        &srv,
        &agent,
        "run_r",
        "p1",
        r#"{"action":"inject","output":{"x":1}}"#,
    );
    assert_eq!(
        (st, s(&v, &["outcome"]), s(&v, &["code"])),
        (403, Some("refused"), Some("forbidden"))
    );
    assert!(s(&v, &["message"])
        .unwrap()
        .contains("--allow-control=inject"));
    assert!(app.recv_within(Duration::from_millis(200)).is_none());

    // Continue: forwarded; the app answers; 200 resumed as agent; the stored event is stamped.
    let port = srv.port;
    let a2 = agent.clone();
    let call = std::thread::spawn(move || {
        let (st, _, b) = http_call(
            port,
            "POST",
            "/api/runs/run_r/pauses/p1/resume",
            &format!("Authorization: Bearer {a2}\r\nContent-Type: application/json\r\n"),
            r#"{"action":"continue","requestId":"req-7","operator":"claude\u202e code"}"#,
        );
        (st, b)
    });
    let fwd = app.recv_type("exec.resume");
    assert_eq!(
        to_json(fwd.get("payload").unwrap()),
        r#"{"pauseId":"p1","action":"continue","requestId":"req-7"}"#
    );
    // The listing shows it resolving meanwhile.
    assert!(srv.get("/api/pauses").1.contains("\"state\":\"resolving\""));
    app.event(
        "run_r",
        "exec.resumed",
        r#"{"pauseId":"p1","action":"continue","requestId":"req-7","principal":"viewer"}"#,
    );
    let (st, body) = call.join().unwrap();
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        body,
        r#"{"outcome":"resumed","runId":"run_r","pauseId":"p1","requestId":"req-7","principal":"agent"}"#
    );
    let events = srv.get_json("/api/runs/run_r/events");
    let resumed = events
        .get("events")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .find(|e| s(e, &["type"]) == Some("exec.resumed"))
        .cloned()
        .unwrap();
    assert_eq!(
        to_json(resumed.get("payload").unwrap()),
        r#"{"pauseId":"p1","action":"continue","requestId":"req-7","principal":"agent","operator":"claude code"}"#,
        "the app's own principal is stripped; the hub stamps the winner's"
    );

    // After release: 404 no-such-pause. A run nobody owns: 404 no-owner.
    let (st, v) = resume_http(&srv, &agent, "run_r", "p1", r#"{"action":"continue"}"#);
    assert_eq!((st, s(&v, &["code"])), (404, Some("no-such-pause")));
    let (st, v) = resume_http(&srv, &agent, "ghost", "p9", r#"{"action":"abort"}"#);
    assert_eq!((st, s(&v, &["code"])), (404, Some("no-owner")));

    // The detail now says who resumed it.
    let d = json_of(&srv.get("/api/runs/run_r/pauses/p1").1);
    assert_eq!(s(&d, &["pause", "state"]), Some("closed"));
    assert_eq!(s(&d, &["pause", "resumed", "principal"]), Some("agent"));
}

#[test]
fn first_writer_wins_timeouts_and_content_guards() {
    let srv = Server::start(&["--allow-control", "edit"], &[]);
    let mut app = held(&srv, "run_t", r#""pause","inject","run-claim""#);
    let agent = srv.agent_token.clone();
    // Placeholder and truncation markers are refused (422), before anything is forwarded.
    let (st, v) = resume_http(
        &srv,
        &agent,
        "run_t",
        "p1",
        r#"{"action":"inject","output":{"k":"__REDACTED__"}}"#,
    );
    assert_eq!((st, s(&v, &["code"])), (422, Some("placeholder")));
    // An edit to an app that did not announce edit-input: 422 not-editable.
    let (st, v) = resume_http(
        &srv,
        &agent,
        "run_t",
        "p1",
        r#"{"action":"continue","input":{"q":"x"}}"#,
    );
    assert_eq!((st, s(&v, &["code"])), (422, Some("not-editable")));
    assert!(app.recv_within(Duration::from_millis(150)).is_none());

    // The viewer wins the pause; the agent's resume is taken (409).
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(
            0,
            "run_t",
            "exec.resume",
            r#"{"pauseId":"p1","action":"continue"}"#
        )
    ));
    app.recv_type("exec.resume");
    let (st, v) = resume_http(&srv, &agent, "run_t", "p1", r#"{"action":"abort"}"#);
    assert_eq!(
        (st, s(&v, &["outcome"]), s(&v, &["code"])),
        (409, Some("taken"), Some("pause-taken"))
    );
    app.event(
        "run_t",
        "exec.resumed",
        r#"{"pauseId":"p1","action":"continue"}"#,
    );
    assert_eq!(
        s(&ui.recv_type("resume.result"), &["outcome"]),
        Some("resumed")
    );

    // A pause the app never answers: 202 timeout after timeoutMs, then still-resolving.
    app.event(
        "run_t",
        "exec.paused",
        r#"{"pauseId":"p2","nodeId":"tool:search","point":"after"}"#,
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !srv.get("/api/pauses").1.contains("\"p2\"") {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = Instant::now();
    let (st, v) = resume_http(
        &srv,
        &agent,
        "run_t",
        "p2",
        r#"{"action":"retry","timeoutMs":1000}"#,
    );
    assert!(t.elapsed() >= Duration::from_millis(950));
    assert_eq!(
        (st, s(&v, &["outcome"]), s(&v, &["code"])),
        (202, Some("timeout"), Some("no-answer"))
    );
    let (st, v) = resume_http(&srv, &agent, "run_t", "p2", r#"{"action":"retry"}"#);
    assert_eq!((st, s(&v, &["code"])), (202, Some("still-resolving")));

    // An anonymous viewer may continue but not inject.
    let mut anon = srv.ui_anon();
    anon.recv_type("welcome");
    anon.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(
            0,
            "run_t",
            "exec.resume",
            r#"{"pauseId":"p2","action":"inject","output":1}"#
        )
    ));
    let r = anon.recv_type("resume.result");
    assert_eq!(
        (s(&r, &["outcome"]), s(&r, &["code"])),
        (Some("refused"), Some("forbidden"))
    );
}

#[test]
fn no_edit_input_refuses_every_edit() {
    let srv = Server::start(&["--allow-control", "edit", "--no-edit-input"], &[]);
    let _app = held(&srv, "run_n", r#""pause","edit-input","run-claim""#);
    let (st, v) = resume_http(
        &srv,
        &srv.agent_token,
        "run_n",
        "p1",
        r#"{"action":"continue","input":{"q":"x"}}"#,
    );
    assert_eq!((st, s(&v, &["code"])), (403, Some("edit-refused")));
    let mut app2 = srv.ingest();
    assert_eq!(
        to_json(app2.hello("x", None).get("hubCapabilities").unwrap()),
        r#"["pause-registry"]"#
    );
}

#[test]
fn an_edit_reaches_an_app_that_announced_edit_input() {
    let srv = Server::start(&["--allow-control", "edit"], &[]);
    let mut app = held(&srv, "run_ed", r#""pause","edit-input","run-claim""#);
    let port = srv.port;
    let agent = srv.agent_token.clone();
    let call = std::thread::spawn(move || {
        http_call(
            port,
            "POST",
            "/api/runs/run_ed/pauses/p1/resume",
            &format!("Authorization: Bearer {agent}\r\nContent-Type: application/json\r\n"),
            r#"{"action":"continue","input":{"q":"trains"}}"#,
        )
    });
    let fwd = app.recv_type("exec.resume");
    assert_eq!(
        to_json(fwd.get("payload").unwrap().get("input").unwrap()),
        r#"{"q":"trains"}"#
    );
    let rid = s(&fwd, &["payload", "requestId"]).unwrap().to_owned();
    // The app refuses the edit: the resumer hears 422 refused with the app's code.
    app.event(
        "run_ed",
        "exec.refused",
        &format!(
            r#"{{"pauseId":"p1","requestId":"{rid}","code":"schema","message":"q must be a city"}}"#
        ),
    );
    let (st, _, body) = call.join().unwrap();
    let v = json_of(&body);
    assert_eq!(
        (st, s(&v, &["outcome"]), s(&v, &["code"])),
        (422, Some("refused"), Some("schema")),
        "{body}"
    );
    assert!(
        srv.get("/api/pauses").1.contains("\"state\":\"open\""),
        "still held after a refused edit"
    );
}

#[test]
fn pauses_wait_and_resume_commands_with_their_exit_codes() {
    let srv = Server::start(&["--allow-control", "resume"], &[]);
    let port = srv.port.to_string();
    let p = port.as_str();
    // Nothing held yet.
    let o = srv.cli(&["pauses", "--port", p], &[]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("No open pauses"));
    let o = srv.cli(&["wait", "--port", p, "--timeout", "0.5", "--json"], &[]);
    assert_eq!(o.status.code(), Some(2), "timeout");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        r#"{"pause":null,"timedOut":true}"#
    );

    let mut app = held(&srv, "run_c", r#""pause","run-claim""#);
    let o = srv.cli(&["pauses", "--port", p, "--json"], &[]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains(r#""pauseId":"p1""#));
    let o = srv.cli(&["pauses", "--port", p], &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("1 held pause(s)")
            && text.contains("graphmind resume p1 --run run_c --action continue"),
        "{text}"
    );

    let o = srv.cli(&["wait", "--port", p, "--run", "run_c", "--json"], &[]);
    assert_eq!(o.status.code(), Some(0));
    let v = json_of(String::from_utf8_lossy(&o.stdout).trim());
    assert_eq!(s(&v, &["pause", "pauseId"]), Some("p1"));
    assert_eq!(
        to_json(v.get("input").unwrap()),
        r#"{"q":"flights","api_key":"sk-1"}"#
    );
    assert_eq!(
        s(&v.get("next").and_then(Value::as_array).unwrap()[0], &[]),
        Some("graphmind resume p1 --run run_c --action continue")
    );
    let o = srv.cli(&["wait", "--port", p], &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("Paused: run run_c · pause p1 · app holder")
            && text.contains("node      tool:search (tool \"search\"), before the call"),
        "{text}"
    );

    // Usage errors exit 1 (2 means timeout here).
    assert_eq!(
        srv.cli(&["resume", "p1", "--port", p, "--action", "continue"], &[])
            .status
            .code(),
        Some(1),
        "no --run"
    );
    assert_eq!(
        srv.cli(
            &["resume", "p1", "--run", "run_c", "--port", p, "--action", "inject"],
            &[]
        )
        .status
        .code(),
        Some(1),
        "inject without --output"
    );
    assert_eq!(srv.cli(&["resume", "--bogus"], &[]).status.code(), Some(1));
    // Level resume cannot inject: 5.
    let o = srv.cli(
        &[
            "resume",
            "p1",
            "--run",
            "run_c",
            "--port",
            p,
            "--action",
            "inject",
            "--output",
            "{\"ok\":true}",
        ],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Continue: 0, once the app answers.
    let port_u = srv.port;
    let dir = srv.dir.clone();
    let cli = std::thread::spawn(move || {
        let mut cmd = std::process::Command::new(BIN);
        isolate(&mut cmd, &dir);
        cmd.args([
            "resume",
            "p1",
            "--run",
            "run_c",
            "--port",
            &port_u.to_string(),
            "--action",
            "continue",
            "--operator",
            "ci",
        ])
        .output()
        .unwrap()
    });
    let fwd = app.recv_type("exec.resume");
    let rid = s(&fwd, &["payload", "requestId"]).unwrap().to_owned();
    app.event(
        "run_c",
        "exec.resumed",
        &format!(r#"{{"pauseId":"p1","action":"continue","requestId":"{rid}"}}"#),
    );
    let o = cli.join().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "resumed pause p1 (run run_c): continue (as agent)"
    );
    // Not held any more: 4.
    assert_eq!(
        srv.cli(
            &["resume", "p1", "--run", "run_c", "--port", p, "--action", "continue"],
            &[]
        )
        .status
        .code(),
        Some(4)
    );
    // No answer in time: 2.
    app.event(
        "run_c",
        "exec.paused",
        r#"{"pauseId":"p3","nodeId":"tool:search","point":"error"}"#,
    );
    std::thread::sleep(Duration::from_millis(200));
    let o = srv.cli(
        &[
            "resume",
            "p3",
            "--run",
            "run_c",
            "--port",
            p,
            "--action",
            "retry",
            "--timeout",
            "1",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    // Taken by the earlier resume still resolving: 2 (still-resolving is a timeout) — and a
    // viewer's win shows as 7.
    app.event(
        "run_c",
        "exec.paused",
        r#"{"pauseId":"p4","nodeId":"tool:search","point":"error"}"#,
    );
    std::thread::sleep(Duration::from_millis(200));
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(
            0,
            "run_c",
            "exec.resume",
            r#"{"pauseId":"p4","action":"continue"}"#
        )
    ));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        srv.cli(
            &["resume", "p4", "--run", "run_c", "--port", p, "--action", "abort"],
            &[]
        )
        .status
        .code(),
        Some(7)
    );
    // No server there: 3. A stale token file: 5.
    let o = srv.cli(&["pauses", "--port", "1"], &[]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        srv.cli(
            &["resume", "p4", "--run", "run_c", "--port", "1", "--action", "abort"],
            &[]
        )
        .status
        .code(),
        Some(5),
        "no token file for that port"
    );
}

#[test]
fn resume_at_the_default_level_is_refused_with_exit_5() {
    let srv = Server::start(&[], &[]);
    let _app = held(&srv, "run_off", r#""pause","run-claim""#);
    let o = srv.cli(
        &[
            "resume",
            "p1",
            "--run",
            "run_off",
            "--port",
            &srv.port.to_string(),
            "--action",
            "continue",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(5));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "agent control is off on this server; restart it with --allow-control=resume"
        ),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn wait_reports_a_server_that_stops_while_it_waits_as_unreachable() {
    // `graphmind wait` long-polls; the server is stopped (SIGTERM, as Ctrl-C) meanwhile.
    let srv = Server::start(&[], &[]);
    let mut cmd = std::process::Command::new(BIN);
    isolate(&mut cmd, &srv.dir);
    cmd.args(["wait", "--port", &srv.port.to_string(), "--timeout", "30"]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let waiting = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &srv.child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let t = Instant::now();
    let o = waiting.wait_with_output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "wait noticed the server stop at once"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "the GraphMind server on port {} is shutting down",
            srv.port
        )),
        "{err}"
    );
}

#[test]
fn a_long_poll_is_answered_503_when_the_server_stops() {
    // The raw HTTP side of the test above: the long-poll gets an answer, not a dropped
    // connection.
    let srv = Server::start(&[], &[]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    use std::io::{Read, Write};
    s.write_all(
        format!(
            "GET /api/pauses?wait=60 HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
            srv.port
        )
        .as_bytes(),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &srv.child.id().to_string()])
        .status()
        .unwrap()
        .success());
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains(r#""error":"shutting-down""#), "{answer}");
}

#[test]
fn a_long_poll_whose_client_hangs_up_frees_its_slot() {
    let srv = Server::start(&[], &[]);
    // Fill every slot, then hang up; a new long-poll must still be accepted.
    for _ in 0..16 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        use std::io::Write;
        s.write_all(
            format!(
                "GET /api/pauses?wait=60 HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
                srv.port
            )
            .as_bytes(),
        )
        .unwrap();
        drop(s);
    }
    std::thread::sleep(Duration::from_millis(800));
    let t = Instant::now();
    let (st, _, body) = http_call(srv.port, "GET", "/api/pauses?wait=0.3", "", "");
    assert_eq!(st, 200, "{body}");
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "it waited: a slot was free"
    );
}
