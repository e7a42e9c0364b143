//! `graphmind serve` end to end: the real binary, real sockets, a temp database.

mod common;
use common::*;
use graphmind_core::json::Value;
use std::process::Command;
use std::time::Duration;

#[test]
fn ingest_is_stored_and_served_over_http_and_record() {
    let srv = Server::start(&[], &[]);
    let health = srv.get_json("/health");
    assert_eq!(
        to_json(&health),
        format!(
            "{{\"ok\":true,\"name\":\"graphmind-ai\",\"version\":\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        )
    );

    let mut app = srv.ingest();
    let ack = app.hello("store-test", None);
    assert_eq!(i(&ack, &["versions", "protocol"]), Some(1));
    assert_eq!(
        to_json(ack.get("breakpoints").unwrap()),
        r#"[{"point":"error"}]"#
    );
    assert_eq!(s(&ack, &["mode"]), Some("run"));
    assert_eq!(s(&ack, &["sessionToken"]).map(str::len), Some(32));
    assert_eq!(
        to_json(ack.get("capabilities").unwrap()),
        r#"["pause","inject","run-claim"]"#
    );

    let mut frames = vec![
        app.event("run_a", "run.started", r#"{"app":"store-test","sdk":{"name":"t","version":"0"}}"#),
        app.event("run_a", "node.started", r#"{"nodeId":"tool:search","kind":"tool","name":"search","instanceId":"c1","input":{"q":"é \ud800"}}"#),
        app.event("run_a", "node.error", r#"{"nodeId":"tool:search","instanceId":"c1","error":{"name":"E","message":"m"}}"#),
    ];
    // Unknown types are stored opaquely; the frame is kept byte for byte (spaces included).
    let odd = "{ \"gm\": 1, \"seq\": 4, \"ts\": 1700000000004, \"runId\": \"run_a\", \"type\": \"custom.thing\", \"payload\": [1, 2] }";
    app.send(odd);
    app.seq = 5;
    frames.push(odd.to_owned());
    frames.push(app.event("run_a", "run.finished", r#"{"status":"error"}"#));

    let run = srv.wait_run("run_a", |r| {
        i(r, &["eventCount"]) == Some(5) && s(r, &["status"]) == Some("error")
    });
    assert_eq!(s(&run, &["app"]), Some("store-test"));
    assert_eq!(i(&run, &["errorCount"]), Some(1));
    assert_eq!(i(&run, &["startedAt"]), Some(1_700_000_000_001));
    assert_eq!(i(&run, &["finishedAt"]), Some(1_700_000_000_005));
    assert_eq!(i(&run, &["durationMs"]), Some(4));
    assert_eq!(s(&run, &["source"]), Some("live"));
    assert_eq!(i(&run, &["schemaVersion"]), Some(1));
    assert_eq!(run.get("live").and_then(Value::as_bool), Some(true));

    let (_, body) = srv.get("/api/runs/run_a/events");
    assert_eq!(
        body,
        format!(
            "{{\"runId\":\"run_a\",\"total\":5,\"events\":[{}],\"nextAfterSeq\":null}}",
            frames.join(",")
        )
    );
    let page = srv.get_json("/api/runs/run_a/events?afterSeq=0&limit=2");
    assert_eq!(i(&page, &["nextAfterSeq"]), Some(2));
    assert_eq!(
        page.get("events").and_then(Value::as_array).map(|a| a
            .iter()
            .map(|e| i(e, &["seq"]).unwrap())
            .collect::<Vec<_>>()),
        Some(vec![1, 2])
    );
    assert_eq!(
        i(
            &srv.get_json("/api/runs/run_a/events?afterSeq=3&limit=2"),
            &["nextAfterSeq"]
        ),
        None,
        "last page"
    );
    assert_eq!(srv.get("/api/runs/nope/events").0, 404);
    assert_eq!(srv.get("/api/runs/run_a/events?limit=0").0, 400);
    assert_eq!(srv.get("/nothing-here").0, 404);

    // `graphmind record` writes the same envelopes, one per line, in seq order.
    let out = srv.dir.join("run.ndjson");
    let st = Command::new(BIN)
        .args(["record", "run_a", "--db"])
        .arg(&srv.db)
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        frames.iter().map(|f| format!("{f}\n")).collect::<String>()
    );
    let o = Command::new(BIN)
        .args(["record", "missing", "--db"])
        .arg(&srv.db)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("run_a"),
        "lists recent runs"
    );

    let o = Command::new(BIN)
        .args(["runs", "--db"])
        .arg(&srv.db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        text.lines().any(|l| l.contains("run_a")
            && l.contains("store-test")
            && l.contains("error")
            && l.contains(" 5 ")),
        "{text}"
    );
}

#[test]
fn replaying_a_run_is_idempotent_and_reclaims_it() {
    let srv = Server::start(&[], &[]);
    let mut app = srv.ingest();
    let token = s(&app.hello("replay", None), &["sessionToken"])
        .unwrap()
        .to_owned();
    let frames: Vec<String> = (0..50)
        .map(|n| {
            app.event(
                "run_r",
                "node.token",
                &format!(r#"{{"nodeId":"llm:step","deltas":[{{"t":"text","v":"{n}"}}]}}"#),
            )
        })
        .collect();
    srv.wait_run("run_r", |r| i(r, &["eventCount"]) == Some(50));
    drop(app);

    // Same app reconnects (echoing its token) and replays its whole buffer, then goes on.
    let mut again = srv.ingest();
    again.hello("replay", Some(&token));
    for f in &frames {
        again.send(f);
    }

    // A known type with a bad payload is not an event: dropped, as the reference does.
    again.send(&frame(51, "run_r", "node.started", r#"{"nodeId":"n"}"#));
    again.send(&frame(52, "run_r", "custom.later", r#"{"any":"thing"}"#));
    srv.wait_run("run_r", |r| i(r, &["eventCount"]) == Some(51));
    let (_, body) = srv.get("/api/runs/run_r/events?afterSeq=50");
    assert!(
        !body.contains("\"seq\":51") && body.contains("\"seq\":52"),
        "{body}"
    );

    again.seq = 53;
    again.event("run_r", "run.finished", r#"{"status":"ok"}"#);
    let run = srv.wait_run("run_r", |r| s(r, &["status"]) == Some("ok"));
    assert_eq!(i(&run, &["eventCount"]), Some(52));

    // Another connection (a fresh token) cannot write to a run claimed by a run-claim client.
    let mut other = srv.ingest();
    other.hello("intruder", None);
    other.seq = 100;
    other.event(
        "run_r",
        "node.started",
        r#"{"nodeId":"x","kind":"tool","name":"x","instanceId":"i"}"#,
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        i(&srv.wait_run("run_r", |_| true), &["eventCount"]),
        Some(52)
    );
}

#[test]
fn viewer_protocol_replay_then_tail_and_run_updates() {
    let srv = Server::start(&["--pause-on-error", "tool"], &[]);
    let mut ui = srv.ui();
    let welcome = ui.recv();
    assert_eq!(s(&welcome, &["type"]), Some("welcome"));
    assert_eq!(i(&welcome, &["versions", "protocol"]), Some(1));
    assert_eq!(
        s(&welcome, &["versions", "server"]),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        to_json(welcome.get("breakpoints").unwrap()),
        r#"[{"point":"error","kind":"tool"}]"#
    );
    assert_eq!(s(&welcome, &["mode"]), Some("run"));

    ui.send(r#"{"type":"subscribe","runId":"*"}"#);
    let runs = ui.recv();
    assert_eq!(
        to_json(&runs),
        r#"{"type":"runs","runs":[],"nextCursor":null}"#
    );

    let mut app = srv.ingest();
    app.hello("viewer-test", None);
    let started = app.event(
        "run_v",
        "run.started",
        r#"{"app":"viewer-test","sdk":{"name":"t","version":"0"}}"#,
    );
    let upd = ui.recv_type("run.update");
    assert_eq!(s(&upd, &["run", "id"]), Some("run_v"));
    assert_eq!(
        upd.get("run")
            .and_then(|r| r.get("live"))
            .and_then(Value::as_bool),
        Some(true)
    );
    srv.wait_run("run_v", |r| i(r, &["eventCount"]) == Some(1));

    ui.send(r#"{"type":"subscribe","runId":"run_v"}"#);
    let start = ui.recv_type("replay.start");
    assert_eq!(
        to_json(&start),
        r#"{"type":"replay.start","runId":"run_v","count":1}"#
    );
    let ev = ui.recv();
    assert_eq!(
        to_json(&ev),
        format!("{{\"type\":\"event\",\"runId\":\"run_v\",\"envelope\":{started}}}")
    );
    assert_eq!(
        to_json(&ui.recv()),
        r#"{"type":"replay.end","runId":"run_v"}"#
    );

    let live = app.event(
        "run_v",
        "node.started",
        r#"{"nodeId":"tool:a","kind":"tool","name":"a","instanceId":"c"}"#,
    );
    let ev = ui.recv_type("event");
    assert_eq!(to_json(ev.get("envelope").unwrap()), live);

    // Subscribing again acknowledges without replaying.
    ui.send(r#"{"type":"subscribe","runId":"run_v"}"#);
    assert_eq!(
        to_json(&ui.recv_type("replay.start")),
        r#"{"type":"replay.start","runId":"run_v","count":0}"#
    );
    ui.recv_type("replay.end");

    // The app goes away: run.update says the run is no longer live.
    drop(app);
    let upd = ui.recv_type("run.update");
    assert_eq!(
        upd.get("run")
            .and_then(|r| r.get("live"))
            .and_then(Value::as_bool),
        Some(false)
    );

    // Bad requests get `error`.
    ui.send("not json");
    assert_eq!(
        to_json(&ui.recv_type("error")),
        r#"{"type":"error","message":"frame is not valid JSON"}"#
    );
    ui.send(r#"{"type":"dance"}"#);
    assert_eq!(
        s(&ui.recv_type("error"), &["message"]),
        Some("unknown message type \"dance\"")
    );
    ui.send(r#"{"type":"subscribe"}"#);
    assert_eq!(
        s(&ui.recv_type("error"), &["message"]),
        Some("subscribe requires a string \"runId\"")
    );
    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(
            0,
            "*",
            "node.started",
            r#"{"nodeId":"a","kind":"tool","name":"a","instanceId":"i"}"#
        )
    ));
    assert_eq!(
        s(&ui.recv_type("error"), &["message"]),
        Some("\"node.started\" is not a control type")
    );
}

#[test]
fn breakpoints_and_mode_are_server_state_relayed_to_every_app() {
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut app1 = srv.ingest();
    assert_eq!(
        to_json(app1.hello("a1", None).get("breakpoints").unwrap()),
        "[]"
    );
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    let mut ui2 = srv.ui();
    ui2.recv_type("welcome");

    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(
            0,
            "*",
            "breakpoint.set",
            r#"{"matcher":{"kind":"tool","name":"lookup"}}"#
        )
    ));
    let relayed = app1.recv_type("breakpoint.set");
    assert_eq!(s(&relayed, &["runId"]), Some("*"));
    assert_eq!(
        to_json(relayed.get("payload").unwrap()),
        r#"{"matcher":{"kind":"tool","name":"lookup"}}"#
    );
    let state = ui2.recv_type("state");
    assert_eq!(
        to_json(&state),
        r#"{"type":"state","set":{"kind":"tool","name":"lookup"},"breakpointCount":1,"mode":"run"}"#,
        "the change, not the list"
    );

    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(1, "*", "mode.set", r#"{"mode":"step"}"#)
    ));
    assert_eq!(
        to_json(app1.recv_type("mode.set").get("payload").unwrap()),
        r#"{"mode":"step"}"#
    );
    assert_eq!(s(&ui2.recv_type("state"), &["mode"]), Some("step"));

    // A later app is armed by its hello.ack.
    let mut app2 = srv.ingest();
    let ack = app2.hello("a2", None);
    assert_eq!(
        to_json(ack.get("breakpoints").unwrap()),
        r#"[{"kind":"tool","name":"lookup"}]"#
    );
    assert_eq!(s(&ack, &["mode"]), Some("step"));

    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(
            2,
            "*",
            "breakpoint.clear",
            r#"{"matcher":{"name":"lookup","kind":"tool"}}"#
        )
    ));
    app1.recv_type("breakpoint.clear");
    app2.recv_type("breakpoint.clear");
    let cleared = ui2.recv_type("state");
    assert_eq!(
        to_json(cleared.get("cleared").unwrap()),
        r#"{"name":"lookup","kind":"tool"}"#
    );
    assert_eq!(
        cleared.get("breakpointCount").and_then(Value::as_i64),
        Some(0)
    );

    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(3, "*", "mode.set", r#"{"mode":"fast"}"#)
    ));
    assert!(s(&ui.recv_type("error"), &["message"])
        .unwrap()
        .starts_with("invalid control envelope"));
}

#[test]
fn resume_goes_to_the_owning_app_and_the_first_resume_wins() {
    let srv = Server::start(&[], &[]);
    let mut app = srv.ingest();
    app.hello("pauser", None);
    let mut bystander = srv.ingest();
    bystander.hello("other", None);
    app.event(
        "run_p",
        "run.started",
        r#"{"app":"pauser","sdk":{"name":"t","version":"0"}}"#,
    );
    app.event(
        "run_p",
        "exec.paused",
        r#"{"pauseId":"p1","nodeId":"tool:lookup","point":"before"}"#,
    );

    let mut ui1 = srv.ui();
    ui1.recv_type("welcome");
    let mut ui2 = srv.ui();
    ui2.recv_type("welcome");
    ui1.send(r#"{"type":"subscribe","runId":"run_p"}"#);
    loop {
        let m = ui1.recv();
        if s(&m, &["type"]) == Some("event") && s(&m, &["envelope", "type"]) == Some("exec.paused")
        {
            break;
        }
    }

    let resume = |action: &str, extra: &str| {
        format!(
            r#"{{"type":"control","envelope":{}}}"#,
            frame(
                9,
                "run_p",
                "exec.resume",
                &format!(r#"{{"pauseId":"p1","action":"{action}"{extra}}}"#)
            )
        )
    };
    ui1.send(&resume(
        "inject",
        r#","output":{"v":42},"requestId":"req-1""#,
    ));
    let fwd = app.recv_type("exec.resume");
    assert_eq!(s(&fwd, &["runId"]), Some("run_p"));
    assert_eq!(
        to_json(fwd.get("payload").unwrap()),
        r#"{"pauseId":"p1","action":"inject","requestId":"req-1","output":{"v":42}}"#
    );

    ui2.send(&resume("continue", ""));
    let taken = ui2.recv_type("resume.result");
    assert_eq!(s(&taken, &["outcome"]), Some("taken"));
    assert_eq!(s(&taken, &["code"]), Some("pause-taken"));
    assert_eq!(s(&taken, &["pauseId"]), Some("p1"));
    assert!(
        app.recv_within(Duration::from_millis(300)).is_none(),
        "only one resume reaches the app"
    );
    assert!(
        bystander.recv_within(Duration::from_millis(100)).is_none(),
        "other apps hear nothing"
    );

    app.event(
        "run_p",
        "exec.resumed",
        r#"{"pauseId":"p1","action":"inject"}"#,
    );
    let won = ui1.recv_type("resume.result");
    assert_eq!(
        to_json(&won),
        r#"{"type":"resume.result","runId":"run_p","pauseId":"p1","requestId":"req-1","outcome":"resumed"}"#
    );
    // The stored exec.resumed says who released the gate: the viewer token's principal.
    let stored = srv.get_json("/api/runs/run_p/events");
    let resumed = stored
        .get("events")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .find(|e| s(e, &["type"]) == Some("exec.resumed"))
        .cloned()
        .unwrap();
    assert_eq!(s(&resumed, &["payload", "principal"]), Some("viewer"));

    // After it was released, a late resume is told the pause is no longer held (reference).
    ui2.send(&resume("continue", ""));
    let late = ui2.recv_type("resume.result");
    assert_eq!(
        (s(&late, &["outcome"]), s(&late, &["code"])),
        (Some("no-such-pause"), Some("no-such-pause"))
    );

    // A run nobody owns: no app to route to.
    ui2.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(
            9,
            "run_ghost",
            "exec.resume",
            r#"{"pauseId":"p9","action":"continue"}"#
        )
    ));
    let none = ui2.recv_type("resume.result");
    assert_eq!(
        (s(&none, &["outcome"]), s(&none, &["code"])),
        (Some("no-such-pause"), Some("no-owner"))
    );
    ui2.send(&resume("explode", ""));
    assert!(s(&ui2.recv_type("error"), &["message"])
        .unwrap()
        .contains("action"));
}

#[test]
fn oversize_frame_is_refused_with_1009_and_the_server_keeps_serving() {
    let srv = Server::start(&[], &[]);
    let mut app = srv.ingest();
    app.hello("big", None);
    let big = frame(
        1,
        "run_big",
        "node.finished",
        &format!(r#"{{"output":"{}"}}"#, "x".repeat(16 * 1024 * 1024 + 10)),
    );
    let _ = app.ws.send(tungstenite::Message::text(big));
    let mut code = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        match app.ws.read() {
            Ok(tungstenite::Message::Close(Some(f))) => {
                code = Some(u16::from(f.code));
                break;
            }
            Ok(_) => {}
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    assert_eq!(code, Some(1009));
    assert_eq!(srv.get("/health").0, 200);
    let mut again = srv.ingest();
    again.hello("small", None);
    again.event(
        "run_small",
        "run.started",
        r#"{"app":"small","sdk":{"name":"t","version":"0"}}"#,
    );
    srv.wait_run("run_small", |r| i(r, &["eventCount"]) == Some(1));
    // Just under the ceiling is fine: the 600 KB payload is stored shrunk to 512 KB.
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    let mut ok = srv.ingest();
    ok.hello("edge", None);
    ok.event(
        "run_edge",
        "node.finished",
        &format!(
            r#"{{"nodeId":"tool:t","instanceId":"i","durationMs":1,"status":"ok","output":"{}"}}"#,
            "y".repeat(600 * 1024)
        ),
    );
    srv.wait_run("run_edge", |r| i(r, &["eventCount"]) == Some(1));
    let page = srv.get_json("/api/runs/run_edge/events");
    let ev = &page.get("events").and_then(Value::as_array).unwrap()[0];
    assert_eq!(
        ev.get("payload")
            .and_then(|p| p.get("__graphmindTruncated"))
            .and_then(Value::as_bool),
        Some(true)
    );
    assert!(graphmind_core::json::to_string(ev).len() < 530 * 1024);
}

#[test]
fn version_mismatch_closes_1002() {
    let srv = Server::start(&[], &[]);
    let mut app = srv.ingest();
    app.send(r#"{"gm":2,"seq":0,"ts":0,"runId":"*","type":"hello","payload":{}}"#);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut code = None;
    while std::time::Instant::now() < deadline {
        match app.ws.read() {
            Ok(tungstenite::Message::Close(Some(f))) => {
                code = Some(u16::from(f.code));
                break;
            }
            Ok(_) => {}
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    assert_eq!(code, Some(1002));
}

#[test]
fn runs_are_abandoned_after_the_grace_unless_the_app_returns_and_at_startup() {
    let dir = temp_dir();
    let mut srv = Server::start_in(dir.clone(), &[], &[("GRAPHMIND_ABANDON_GRACE_MS", "300")]);
    let mut app = srv.ingest();
    app.hello("flaky", None);
    app.event(
        "run_gone",
        "run.started",
        r#"{"app":"flaky","sdk":{"name":"t","version":"0"}}"#,
    );
    app.event(
        "run_gone",
        "node.started",
        r#"{"nodeId":"n","kind":"tool","name":"n","instanceId":"i"}"#,
    );
    srv.wait_run("run_gone", |r| i(r, &["eventCount"]) == Some(2));
    drop(app);
    let run = srv.wait_run("run_gone", |r| s(r, &["status"]) == Some("abandoned"));
    assert_eq!(
        i(&run, &["finishedAt"]),
        Some(1_700_000_000_002),
        "finished at its last event"
    );

    // A reconnect (same token) inside the grace keeps the run running.
    let mut app = srv.ingest();
    let token = s(&app.hello("flaky", None), &["sessionToken"])
        .unwrap()
        .to_owned();
    app.event(
        "run_back",
        "run.started",
        r#"{"app":"flaky","sdk":{"name":"t","version":"0"}}"#,
    );
    srv.wait_run("run_back", |r| i(r, &["eventCount"]) == Some(1));
    drop(app);
    let mut back = srv.ingest();
    back.hello("flaky", Some(&token));
    back.seq = 1;
    back.event(
        "run_back",
        "node.started",
        r#"{"nodeId":"n","kind":"tool","name":"n","instanceId":"i"}"#,
    );
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        s(&srv.wait_run("run_back", |_| true), &["status"]),
        Some("running")
    );

    // A server that stops with a run in flight: the next start marks it abandoned.
    srv.stop();
    drop(back);
    // (Retention off: the test's runs are dated 2023, beyond the 30-day window.)
    let srv2 = Server::start_in(dir, &[], &[("GRAPHMIND_RETENTION", "off")]);
    srv2.wait_run("run_back", |r| s(r, &["status"]) == Some("abandoned"));
}

#[test]
fn origin_guard_refuses_foreign_pages() {
    let srv = Server::start(&[], &[]);
    let (status, _) = http_request(srv.port, &format!("GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nOrigin: https://evil.example\r\nConnection: close\r\n\r\n", srv.port));
    assert_eq!(status, 403);
    let (status, _) = http_request(
        srv.port,
        "GET /health HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 403);
    let (status, _) = http_request(srv.port, &format!("GET /health HTTP/1.1\r\nHost: localhost:{0}\r\nOrigin: http://localhost:{0}\r\nConnection: close\r\n\r\n", srv.port));
    assert_eq!(status, 200);
}

#[test]
fn a_pause_whose_app_leaves_or_whose_run_finishes_is_closed() {
    let srv = Server::start(&[], &[]);
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    let resume = |run: &str, pause: &str| {
        format!(
            r#"{{"type":"control","envelope":{}}}"#,
            frame(
                0,
                run,
                "exec.resume",
                &format!(r#"{{"pauseId":"{pause}","action":"continue"}}"#)
            )
        )
    };

    // Resolving when the app disconnects: the resume is answered app-disconnected.
    let mut app = srv.ingest();
    app.hello("leaver", None);
    app.event(
        "run_l",
        "exec.paused",
        r#"{"pauseId":"p","nodeId":"tool:x","point":"before"}"#,
    );
    srv.wait_run("run_l", |r| i(r, &["eventCount"]) == Some(1));
    ui.send(&resume("run_l", "p"));
    app.recv_type("exec.resume");
    drop(app);
    let r = ui.recv_type("resume.result");
    assert_eq!(
        (s(&r, &["outcome"]), s(&r, &["code"])),
        (Some("no-such-pause"), Some("app-disconnected"))
    );
    ui.send(&resume("run_l", "p"));
    assert_eq!(
        s(&ui.recv_type("resume.result"), &["code"]),
        Some("no-such-pause")
    );

    // An open pause of a run that finishes is no longer held.
    let mut app = srv.ingest();
    app.hello("finisher", None);
    app.event(
        "run_f",
        "exec.paused",
        r#"{"pauseId":"q","nodeId":"tool:x","point":"error"}"#,
    );
    app.event("run_f", "run.finished", r#"{"status":"aborted"}"#);
    srv.wait_run("run_f", |r| s(r, &["status"]) == Some("aborted"));
    ui.send(&resume("run_f", "q"));
    let r = ui.recv_type("resume.result");
    assert_eq!(
        (s(&r, &["outcome"]), s(&r, &["code"])),
        (Some("no-such-pause"), Some("no-such-pause"))
    );
    assert!(app.recv_within(Duration::from_millis(200)).is_none());
}

#[test]
fn pause_on_error_from_the_environment_and_record_to_stdout() {
    let srv = Server::start(&[], &[("GRAPHMIND_PAUSE_ON_ERROR", "llm")]);
    let mut app = srv.ingest();
    assert_eq!(
        to_json(app.hello("env", None).get("breakpoints").unwrap()),
        r#"[{"point":"error","kind":"llm"}]"#
    );
    let f = app.event(
        "run_o",
        "run.started",
        r#"{"app":"env","sdk":{"name":"t","version":"0"}}"#,
    );
    srv.wait_run("run_o", |r| i(r, &["eventCount"]) == Some(1));
    let o = Command::new(BIN)
        .args(["record", "run_o", "--out", "-", "--db"])
        .arg(&srv.db)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("{f}\n"));
    drop(app);

    // A bad variable is a warning and the default, not a failed start.
    let srv = Server::start(&[], &[("GRAPHMIND_PAUSE_ON_ERROR", "sometimes")]);
    let mut app = srv.ingest();
    assert_eq!(
        to_json(app.hello("env", None).get("breakpoints").unwrap()),
        r#"[{"point":"error"}]"#
    );
}

#[test]
fn an_app_that_releases_a_pause_and_leaves_at_once_still_answers_resumed() {
    let srv = Server::start(&[], &[]);
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    for round in 0..5 {
        let run = format!("run_quick_{round}");
        let mut app = srv.ingest();
        app.hello("quick", None);
        app.event(
            &run,
            "run.started",
            r#"{"app":"quick","sdk":{"name":"t","version":"0"}}"#,
        );
        app.event(
            &run,
            "exec.paused",
            r#"{"pauseId":"p1","nodeId":"tool:x","point":"before"}"#,
        );
        ui.send(&format!(r#"{{"type":"subscribe","runId":"{run}"}}"#));
        loop {
            let m = ui.recv();
            if s(&m, &["type"]) == Some("event")
                && s(&m, &["envelope", "type"]) == Some("exec.paused")
            {
                break;
            }
        }
        ui.send(&format!(
            r#"{{"type":"control","envelope":{}}}"#,
            frame(
                9,
                &run,
                "exec.resume",
                r#"{"pauseId":"p1","action":"continue"}"#
            )
        ));
        app.recv_type("exec.resume");
        // Release, finish and hang up in one go, as a short script does.
        app.event(
            &run,
            "exec.resumed",
            r#"{"pauseId":"p1","action":"continue"}"#,
        );
        app.event(&run, "run.finished", r#"{"status":"ok"}"#);
        drop(app);
        let result = ui.recv_type("resume.result");
        assert_eq!(
            s(&result, &["outcome"]),
            Some("resumed"),
            "round {round}: {}",
            to_json(&result)
        );
    }
}

/// Reads until the peer's close frame; returns its (code, reason).
fn close_frame_of(ws: &mut Ws, within: Duration) -> Option<(u16, String)> {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        match ws.ws.read() {
            Ok(tungstenite::Message::Close(Some(f))) => {
                return Some((u16::from(f.code), f.reason.to_string()))
            }
            Ok(tungstenite::Message::Close(None)) => return None,
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return None,
        }
    }
    None
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn shutdown_closes_every_socket_with_1001_and_abandons_nothing() {
    for signal in [15, 2] {
        // A zero abandon grace: a run whose app is closed by the shutdown would be marked
        // abandoned at once if the shutdown let the timer fire.
        let mut srv = Server::start(&[], &[("GRAPHMIND_ABANDON_GRACE_MS", "0")]);
        let mut app = srv.ingest();
        app.hello("going", None);
        app.event(
            "run_going",
            "run.started",
            r#"{"app":"going","sdk":{"name":"t","version":"0"}}"#,
        );
        srv.wait_run("run_going", |r| i(r, &["eventCount"]) == Some(1));
        let mut viewer = srv.ui();
        viewer.recv_type("welcome");
        let mut anon = srv.ui_anon();
        anon.recv_type("welcome");
        let started = std::time::Instant::now();
        unsafe { libc_kill(srv.child.id() as i32, signal) };
        for (name, ws) in [
            ("app", &mut app),
            ("viewer", &mut viewer),
            ("anonymous viewer", &mut anon),
        ] {
            let got = close_frame_of(ws, Duration::from_secs(5));
            assert_eq!(
                got,
                Some((1001, "server shutting down".to_owned())),
                "{name} (signal {signal})"
            );
            let _ = ws.ws.flush(); // answer the close: the server waits for it, not its grace
        }
        let status = srv.child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "signal {signal}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "prompt exit: {:?}",
            started.elapsed()
        );
        // The run stays `running`: abandoning it is the next start's job (as the reference).
        let status = run_status_from_cli(&srv.db, "run_going");
        assert_eq!(status.as_deref(), Some("running"), "signal {signal}");
        srv.stop();
    }
}

/// The run's status as `graphmind runs` prints it, without starting a server.
fn run_status_from_cli(db: &std::path::Path, run: &str) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_graphmind"))
        .args(["runs", "--db"])
        .arg(db)
        .env("GRAPHMIND_TELEMETRY", "0")
        .env("GRAPHMIND_RETENTION", "off")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().find(|l| l.contains(run)).map(|l| {
        l.split_whitespace()
            .find(|w| ["running", "abandoned", "ok", "error", "aborted"].contains(w))
            .unwrap_or("")
            .to_owned()
    })
}

#[test]
fn a_listing_whose_reader_has_gone_ends_quietly_not_with_a_panic() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let dir = temp_dir();
    let db = dir.join("graphmind.db");
    for args in [vec!["runs", "--db"], vec!["--help"], vec!["--version"]] {
        // stdout is a pipe whose read end is already closed: the first write fails
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        unsafe { libc::close(fds[0]) };
        let write_end = unsafe { OwnedFd::from_raw_fd(fds[1]) };
        let mut cmd = Command::new(BIN);
        cmd.args(&args);
        if args[0] == "runs" {
            cmd.arg(&db);
        }
        let out = cmd
            .stdout(write_end)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_listing_into_a_full_disk_is_one_clear_error_not_a_panic() {
    let dir = temp_dir();
    let db = dir.join("graphmind.db");
    for args in [vec!["runs", "--db"], vec!["--help"], vec!["--version"]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(&args);
        if args[0] == "runs" {
            cmd.arg(&db);
        }
        let out = cmd
            .stdout(full)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("graphmind: cannot write to standard output: "),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
