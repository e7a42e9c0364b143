//! The core's session against the real `graphmind serve` on 127.0.0.1: attach, storage,
//! every action at every gate point, step mode, loop hold, fail-open release, pause timeout,
//! replay after a restart with a gap marker, the disabled path and fork.

mod common;
use common::*;
use graphmind_core::config::{
    self, EnvSnapshot, LoopGuardOption, LoopGuardOverrides, Options, SdkFlavor,
};
use graphmind_core::event::{ErrorInfo, NodeKind};
use graphmind_core::gate::{GateDecision, PausePoint, ResumeAction};
use graphmind_core::host_value::HostValue;
use graphmind_core::json::{parse_str, Value};
use graphmind_core::session::{Gate, GateOptions, NodeRef, RunOutcome, Session};
use graphmind_core::step::{Next, Step};
use graphmind_core::warn::WarnSink;
use graphmind_core::wire::{self, ParseOutcome};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn session_for(
    port: u16,
    configure: impl FnOnce(&mut Options),
    env: &[(&str, &str)],
) -> (Session, Arc<Mutex<Vec<String>>>) {
    let mut options = Options {
        url: Some(format!("ws://127.0.0.1:{port}/ingest")),
        app_name: Some("rust-test".into()),
        ..Options::default()
    };
    configure(&mut options);
    let mut snapshot = EnvSnapshot::new();
    for (k, v) in env {
        snapshot.set(*k, *v);
    }
    let config = config::resolve(&options, &snapshot, SdkFlavor::Native);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink_lines = lines.clone();
    let sink: WarnSink = Arc::new(move |l: &str| sink_lines.lock().unwrap().push(l.to_string()));
    (Session::new(config, sink), lines)
}

fn attached(srv: &Server, configure: impl FnOnce(&mut Options)) -> Session {
    let (session, _) = session_for(srv.port, configure, &[]);
    assert!(
        session.ready(Duration::from_secs(3)),
        "the session attaches to a live server"
    );
    session
}

/// A viewer on /ws/ui: sets breakpoints and modes, watches a run, resumes its pauses.
struct Debugger {
    ws: Ws,
}

impl Debugger {
    fn new(srv: &Server) -> Debugger {
        let mut ws = srv.ui();
        ws.recv_type("welcome");
        Debugger { ws }
    }

    fn control(&mut self, run: &str, kind: &str, payload: &str) {
        self.ws.send(&format!(
            r#"{{"type":"control","envelope":{}}}"#,
            frame(0, run, kind, payload)
        ));
    }

    fn breakpoint(&mut self, matcher: &str) {
        self.control(
            "*",
            "breakpoint.set",
            &format!(r#"{{"matcher":{matcher}}}"#),
        );
    }

    fn clear(&mut self, matcher: &str) {
        self.control(
            "*",
            "breakpoint.clear",
            &format!(r#"{{"matcher":{matcher}}}"#),
        );
    }

    fn mode(&mut self, mode: &str) {
        self.control("*", "mode.set", &format!(r#"{{"mode":"{mode}"}}"#));
    }

    fn watch(&mut self, run: &str) {
        self.ws
            .send(&format!(r#"{{"type":"subscribe","runId":"{run}"}}"#));
    }

    /// The next envelope of this type on a watched run.
    fn next(&mut self, kind: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(m) = self.ws.recv_within(Duration::from_millis(100)) {
                if std::env::var("GM_DEBUG").is_ok() {
                    eprintln!("ui <- {}", to_json(&m));
                }
                if s(&m, &["type"]) == Some("event") && s(&m, &["envelope", "type"]) == Some(kind) {
                    return m.get("envelope").cloned().unwrap();
                }
            }
        }
        panic!("no {kind} arrived");
    }

    fn resume(&mut self, run: &str, pause_id: &str, action: &str, extra: &str) {
        self.control(
            run,
            "exec.resume",
            &format!(r#"{{"pauseId":"{pause_id}","action":"{action}"{extra}}}"#),
        );
    }
}

/// Lets the server apply a control before the app gates (the relay is asynchronous).
fn settle() {
    std::thread::sleep(Duration::from_millis(150));
}

fn stored(srv: &Server, run_id: &str, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // 404 until the writer thread has stored the run.
        let (status, body) = srv.get(&format!("/api/runs/{run_id}/events?limit=1000"));
        let events = match status {
            200 => parse_str(&body)
                .unwrap()
                .get("events")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        if events.len() >= count || Instant::now() > deadline {
            return events;
        }
        std::thread::sleep(Duration::from_millis(30));
    }
}

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| s(e, &["type"]).unwrap_or("?").to_string())
        .collect()
}

#[test]
fn a_run_is_stored_in_order_and_every_frame_is_a_valid_envelope() {
    let srv = Server::start(&[], &[]);
    let session = attached(&srv, |_| {});
    let run = session.start_run("store", None);
    let node = NodeRef::new(NodeKind::Tool, "search");
    session.node_started(
        Some(&run.run_id),
        &node,
        None,
        Some(parse_str(r#"{"q":"é \ud800 😀"}"#).unwrap()),
    );
    session.node_finished(
        Some(&run.run_id),
        &node,
        Some(Value::from("found")),
        1.234,
        false,
    );
    session.finish_run(&run, RunOutcome::Ok);
    assert!(session.flush(Duration::from_secs(2)));
    let events = stored(&srv, &run.run_id, 4);
    assert_eq!(
        types(&events),
        [
            "run.started",
            "node.started",
            "node.finished",
            "run.finished"
        ]
    );
    for event in &events {
        let text = to_json(event);
        assert!(
            matches!(wire::parse_envelope(text.as_bytes()), ParseOutcome::Ok(_)),
            "{text}"
        );
    }
    assert_eq!(s(&events[0], &["payload", "app"]), Some("rust-test"));
    assert_eq!(s(&events[0], &["payload", "meta", "name"]), Some("store"));
    assert_eq!(
        to_json(events[1].get("payload").unwrap().get("input").unwrap()),
        r#"{"q":"é \ud800 😀"}"#
    );
    assert_eq!(
        s(
            &srv.wait_run(&run.run_id, |r| s(r, &["status"]) == Some("ok")),
            &["status"]
        ),
        Some("ok")
    );
    session.dispose(Duration::from_secs(2));
}

/// Holds the gate at `point` of a tool on another thread and returns what it decided.
fn held_decision(
    session: &Session,
    run_id: &str,
    point: PausePoint,
    dbg: &mut Debugger,
    action: &str,
    extra: &str,
) -> (GateDecision, Value) {
    let node = NodeRef::new(NodeKind::Tool, "lookup");
    let gate_node = node.gate_node();
    let s2 = session.clone();
    let run = run_id.to_string();
    let waiter = std::thread::spawn(move || {
        s2.gate(Some(&run), point, &gate_node, GateOptions::default())
            .wait()
    });
    let paused = dbg.next("exec.paused");
    let pause_id = s(&paused, &["payload", "pauseId"]).unwrap().to_string();
    dbg.resume(run_id, &pause_id, action, extra);
    let decision = waiter.join().unwrap();
    let resumed = dbg.next("exec.resumed");
    assert_eq!(
        s(&resumed, &["payload", "pauseId"]),
        Some(pause_id.as_str())
    );
    assert_eq!(s(&resumed, &["payload", "action"]), Some(action));
    (decision, paused)
}

#[test]
fn every_action_at_every_point_reaches_the_app() {
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut dbg = Debugger::new(&srv);
    for point in ["before", "after", "error"] {
        dbg.breakpoint(&format!(r#"{{"kind":"tool","point":"{point}"}}"#));
    }
    settle();
    let session = attached(&srv, |_| {});
    for (point, name) in [
        (PausePoint::Before, "before"),
        (PausePoint::After, "after"),
        (PausePoint::Error, "error"),
    ] {
        for action in ["continue", "retry", "inject", "abort"] {
            let run = session.start_run(&format!("{name}-{action}"), None);
            dbg.watch(&run.run_id);
            let extra = if action == "inject" {
                r#","output":{"injected":[1,2]}"#
            } else {
                ""
            };
            let (decision, paused) =
                held_decision(&session, &run.run_id, point, &mut dbg, action, extra);
            assert_eq!(s(&paused, &["payload", "point"]), Some(name));
            assert_eq!(
                s(&paused, &["payload", "reason"]),
                Some(if point == PausePoint::Error {
                    "error"
                } else {
                    "breakpoint"
                })
            );
            assert_eq!(
                decision.action,
                ResumeAction::parse(action).unwrap(),
                "{name} {action}"
            );
            if action == "inject" {
                assert_eq!(
                    to_json(decision.output.as_ref().unwrap()),
                    r#"{"injected":[1,2]}"#
                );
            } else {
                assert!(decision.output.is_none());
            }
            assert_eq!(
                run.signal.is_aborted(),
                action == "abort",
                "abort aborts the run's signal"
            );
            session.finish_run(&run, RunOutcome::Ok);
            let want = if action == "abort" { "aborted" } else { "ok" };
            srv.wait_run(&run.run_id, |r| s(r, &["status"]) == Some(want));
        }
    }
    session.dispose(Duration::from_secs(2));
}

#[test]
fn step_mode_holds_before_and_error_and_clearing_a_breakpoint_disarms_it() {
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut dbg = Debugger::new(&srv);
    dbg.mode("step");
    settle();
    let session = attached(&srv, |_| {});
    let run = session.start_run("step", None);
    dbg.watch(&run.run_id);
    let node = NodeRef::new(NodeKind::Llm, "model").gate_node();
    assert!(matches!(
        session.gate(
            Some(&run.run_id),
            PausePoint::After,
            &node,
            GateOptions::default()
        ),
        Gate::Continue
    ));
    let (_, paused) = held_decision(
        &session,
        &run.run_id,
        PausePoint::Before,
        &mut dbg,
        "continue",
        "",
    );
    assert_eq!(s(&paused, &["payload", "reason"]), Some("step"));
    dbg.mode("run");
    dbg.breakpoint(r#"{"name":"lookup"}"#);
    settle();
    let (_, paused) = held_decision(
        &session,
        &run.run_id,
        PausePoint::Before,
        &mut dbg,
        "continue",
        "",
    );
    assert_eq!(s(&paused, &["payload", "reason"]), Some("breakpoint"));
    dbg.clear(r#"{"name":"lookup"}"#);
    settle();
    let lookup = NodeRef::new(NodeKind::Tool, "lookup").gate_node();
    assert!(matches!(
        session.gate(
            Some(&run.run_id),
            PausePoint::Before,
            &lookup,
            GateOptions::default()
        ),
        Gate::Continue
    ));
    session.dispose(Duration::from_secs(2));
}

#[test]
fn the_third_identical_tool_call_is_held_as_a_loop() {
    let srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    let session = attached(&srv, |_| {});
    let run = session.start_run("loop", None);
    dbg.watch(&run.run_id);
    let input = parse_str(r#"{"query":"flights to Oslo","page":1}"#).unwrap();
    let mut seqs = Vec::new();
    for call in 0..3 {
        let node = NodeRef::new(NodeKind::Tool, "searchFlights");
        seqs.push(
            session
                .node_started(Some(&run.run_id), &node, None, Some(input.clone()))
                .unwrap(),
        );
        let gate = session.gate(
            Some(&run.run_id),
            PausePoint::Before,
            &node.gate_node(),
            GateOptions::default(),
        );
        if call < 2 {
            assert!(matches!(gate, Gate::Continue), "call {call} runs");
            session.node_finished(
                Some(&run.run_id),
                &node,
                Some(Value::from("[]")),
                1.0,
                false,
            );
            continue;
        }
        let Gate::Held(pending) = gate else {
            panic!("the third identical call is held")
        };
        let paused = dbg.next("exec.paused");
        assert_eq!(s(&paused, &["payload", "reason"]), Some("loop"));
        assert_eq!(i(&paused, &["payload", "loop", "repeats"]), Some(3));
        assert_eq!(
            i(&paused, &["payload", "loop", "firstSeq"]),
            Some(seqs[0] as i64)
        );
        assert_eq!(
            i(&paused, &["payload", "loop", "lastSeq"]),
            Some(seqs[2] as i64)
        );
        let fingerprint =
            graphmind_core::fingerprint::fingerprint("tool:searchFlights", Some(&input));
        assert_eq!(
            s(&paused, &["payload", "loop", "fingerprint"]),
            Some(fingerprint.as_str())
        );
        dbg.resume(
            &run.run_id,
            pending.pause_id(),
            "inject",
            r#","output":"stop searching""#,
        );
        let decision = pending.wait();
        assert_eq!(decision.action, ResumeAction::Inject);
        assert_eq!(decision.output, Some(Value::from("stop searching")));
    }
    session.dispose(Duration::from_secs(2));
}

/// One call of tool `name` as every SDK wrapper makes it, returning `result`'s output or
/// raising its error; no gate may hold it.
fn call_tool(session: &Session, run_id: &str, name: &str, input: &str, result: Result<&str, &str>) {
    let input = parse_str(input).unwrap();
    let mut step = Step::start(
        session,
        Some(run_id),
        NodeRef::new(NodeKind::Tool, name),
        None,
        Some(input),
        true,
    );
    assert!(matches!(step.before(), Gate::Continue), "{name} runs");
    assert!(matches!(
        step.on_before(GateDecision::proceed()),
        Next::Run { .. }
    ));
    match result {
        Ok(output) => {
            assert!(matches!(step.after(), Gate::Continue));
            step.on_after(GateDecision::proceed(), Some(parse_str(output).unwrap()));
        }
        Err(message) => {
            assert!(matches!(
                step.error(ErrorInfo::new("HttpError", message)),
                Gate::Continue
            ));
            assert_eq!(step.on_error(GateDecision::proceed()), Next::Reraise);
        }
    }
}

/// The before-gate of the next call of tool `name`.
fn next_call(session: &Session, run_id: &str, name: &str, input: &str) -> (Step, Gate) {
    let input = parse_str(input).unwrap();
    let step = Step::start(
        session,
        Some(run_id),
        NodeRef::new(NodeKind::Tool, name),
        None,
        Some(input),
        true,
    );
    let gate = step.before();
    (step, gate)
}

/// Options that turn on the opt-in loop detectors named (`loopGuard.detect`).
fn detecting(names: &'static [&'static str]) -> impl FnOnce(&mut Options) {
    move |options| {
        options.loop_guard = Some(LoopGuardOption::Fields(LoopGuardOverrides {
            detect: Some(names.iter().map(|n| n.to_string()).collect()),
            ..LoopGuardOverrides::default()
        }))
    }
}

#[test]
fn by_default_alternating_tools_and_a_repeated_error_are_not_held() {
    // The spec: "An agent alternating between two tools (search, read, search, read) is not
    // held", and another call in between starts the count again. The cycle and error-repeat
    // detectors are opt-in.
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let session = attached(&srv, |_| {});
    let run = session.start_run("alternating", None);
    for _ in 0..4 {
        call_tool(
            &session,
            &run.run_id,
            "search",
            r#"{"q":"oslo"}"#,
            Ok(r#"{"hits":[]}"#),
        );
        call_tool(
            &session,
            &run.run_id,
            "refine",
            r#"{"q":"oslo","broader":true}"#,
            Ok(r#"{"q":"oslo"}"#),
        );
    }
    for page in 0..3 {
        call_tool(
            &session,
            &run.run_id,
            "fetch",
            &format!(r#"{{"page":{page}}}"#),
            Err("503 Service Unavailable"),
        );
    }
    let (mut step, gate) = next_call(&session, &run.run_id, "fetch", r#"{"page":3}"#);
    assert!(
        matches!(gate, Gate::Continue),
        "not held without loopGuard.detect"
    );
    assert!(matches!(
        step.on_before(GateDecision::proceed()),
        Next::Run { .. }
    ));
    step.on_after(GateDecision::proceed(), Some(Value::from("done")));
    session.finish_run(&run, RunOutcome::Ok);
    session.dispose(Duration::from_secs(2));
}

#[test]
fn a_cycle_of_two_tools_with_identical_results_is_held_at_its_fourth_lap() {
    // Back to back, with no pause between calls: the worker keys each successful output
    // after the call completes, so the start that closes the cycle may have to wait for
    // those keys (and must, to hold).
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut dbg = Debugger::new(&srv);
    let session = attached(&srv, detecting(&["cycle"]));
    for round in 0..3 {
        let run = session.start_run("cycle", None);
        dbg.watch(&run.run_id);
        for _ in 0..3 {
            call_tool(
                &session,
                &run.run_id,
                "search",
                r#"{"q":"oslo"}"#,
                Ok(r#"{"hits":[]}"#),
            );
            call_tool(
                &session,
                &run.run_id,
                "refine",
                r#"{"q":"oslo","broader":true}"#,
                Ok(r#"{"q":"oslo"}"#),
            );
        }
        let (mut step, gate) = next_call(&session, &run.run_id, "search", r#"{"q":"oslo"}"#);
        let Gate::Held(pending) = gate else {
            panic!("round {round}: the fourth lap is held")
        };
        let paused = dbg.next("exec.paused");
        assert_eq!(s(&paused, &["payload", "reason"]), Some("loop"));
        assert_eq!(s(&paused, &["payload", "loop", "kind"]), Some("cycle"));
        assert_eq!(i(&paused, &["payload", "loop", "period"]), Some(2));
        assert_eq!(i(&paused, &["payload", "loop", "laps"]), Some(3));
        dbg.resume(
            &run.run_id,
            pending.pause_id(),
            "inject",
            r#","output":"enough""#,
        );
        assert_eq!(
            step.on_before(pending.wait()),
            Next::ReturnInjected(Value::from("enough"))
        );
        session.finish_run(&run, RunOutcome::Ok);
    }
    session.dispose(Duration::from_secs(2));
}

#[test]
fn a_cycle_whose_results_change_is_not_held() {
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let session = attached(&srv, detecting(&["cycle", "error-repeat"]));
    let run = session.start_run("polling", None);
    for lap in 0..3 {
        call_tool(
            &session,
            &run.run_id,
            "submit",
            r#"{"job":7}"#,
            Ok(r#"{"queued":true}"#),
        );
        let status = format!(r#"{{"progress":{}}}"#, lap * 30);
        call_tool(&session, &run.run_id, "status", r#"{"job":7}"#, Ok(&status));
    }
    let (mut step, gate) = next_call(&session, &run.run_id, "submit", r#"{"job":7}"#);
    assert!(
        matches!(gate, Gate::Continue),
        "the results changed every lap: not a cycle"
    );
    assert!(matches!(
        step.on_before(GateDecision::proceed()),
        Next::Run { .. }
    ));
    step.on_after(GateDecision::proceed(), Some(Value::from("done")));
    session.dispose(Duration::from_secs(2));
}

#[test]
fn the_fourth_call_after_three_identical_failures_is_held_as_an_error_repeat() {
    let srv = Server::start(&["--pause-on-error", "off"], &[]);
    let mut dbg = Debugger::new(&srv);
    let session = attached(&srv, detecting(&["error-repeat"]));
    let run = session.start_run("failing", None);
    dbg.watch(&run.run_id);
    // Other arguments each time (not the v3 repeat), one identical error.
    for page in 0..3 {
        call_tool(
            &session,
            &run.run_id,
            "fetch",
            &format!(r#"{{"page":{page}}}"#),
            Err("503 Service Unavailable"),
        );
    }
    let (mut step, gate) = next_call(&session, &run.run_id, "fetch", r#"{"page":3}"#);
    let Gate::Held(pending) = gate else {
        panic!("held after three identical failures")
    };
    let paused = dbg.next("exec.paused");
    assert_eq!(s(&paused, &["payload", "reason"]), Some("loop"));
    assert_eq!(
        s(&paused, &["payload", "loop", "kind"]),
        Some("error-repeat")
    );
    assert_eq!(i(&paused, &["payload", "loop", "repeats"]), Some(3));
    dbg.resume(&run.run_id, pending.pause_id(), "abort", "");
    assert_eq!(step.on_before(pending.wait()), Next::Abort);
    session.dispose(Duration::from_secs(2));
}

#[test]
fn a_dying_server_releases_every_held_gate_within_100ms() {
    let mut srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    dbg.breakpoint("{}");
    settle();
    let session = attached(&srv, |_| {});
    let run = session.start_run("die", None);
    dbg.watch(&run.run_id);
    let mut waiters = Vec::new();
    for n in 0..3 {
        let s2 = session.clone();
        let run_id = run.run_id.clone();
        waiters.push(std::thread::spawn(move || {
            let node = NodeRef::new(NodeKind::Tool, &format!("t{n}")).gate_node();
            let gate = s2.gate(
                Some(&run_id),
                PausePoint::Before,
                &node,
                GateOptions::default(),
            );
            let Gate::Held(pending) = gate else {
                panic!("held")
            };
            loop {
                if let Some(d) = pending.wait_timeout(Duration::from_secs(10)) {
                    return (d, Instant::now());
                }
            }
        }));
    }
    for _ in 0..3 {
        dbg.next("exec.paused");
    }
    assert_eq!(session.stats().held_gates, 3);
    let killed = Instant::now();
    srv.stop();
    for waiter in waiters {
        let (decision, at) = waiter.join().unwrap();
        assert_eq!(decision.action, ResumeAction::Continue);
        let after = at.duration_since(killed);
        assert!(
            after < Duration::from_millis(100),
            "released {after:?} after the server died"
        );
    }
    assert_eq!(session.stats().held_gates, 0);
    assert!(!session.is_attached());
    session.dispose(Duration::from_secs(1));
}

#[test]
fn a_pause_timeout_auto_continues_and_is_recorded() {
    let srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    dbg.breakpoint(r#"{"kind":"tool"}"#);
    settle();
    let session = attached(&srv, |o| o.pause_timeout_ms = Some(150.0));
    let run = session.start_run("timeout", None);
    dbg.watch(&run.run_id);
    let node = NodeRef::new(NodeKind::Tool, "slow");
    session.node_started(Some(&run.run_id), &node, None, None);
    let started = Instant::now();
    let decision = session
        .gate(
            Some(&run.run_id),
            PausePoint::Before,
            &node.gate_node(),
            GateOptions::default(),
        )
        .wait();
    let waited = started.elapsed();
    assert_eq!(decision.action, ResumeAction::Continue);
    assert!(
        waited >= Duration::from_millis(140) && waited < Duration::from_millis(1500),
        "{waited:?}"
    );
    let resumed = dbg.next("exec.resumed");
    assert_eq!(s(&resumed, &["payload", "action"]), Some("continue"));
    session.node_finished(
        Some(&run.run_id),
        &node,
        None,
        waited.as_secs_f64() * 1000.0,
        false,
    );
    let finished = dbg.next("node.finished");
    let held = finished
        .get("payload")
        .and_then(|p| p.get("heldMs"))
        .and_then(Value::as_f64)
        .unwrap();
    assert!(held >= 140.0, "node.finished carries heldMs ({held})");
    session.dispose(Duration::from_secs(2));
}

#[test]
fn events_emitted_while_the_server_is_down_are_replayed_with_a_gap_marker() {
    let dir = temp_dir();
    let port = free_port();
    let mut srv = Server::start_in(dir.clone(), &["--port", &port.to_string()], &[]);
    let session = attached(&srv, |o| o.buffer_size = Some(20));
    let run = session.start_run("restart", None);
    let node = NodeRef::new(NodeKind::Tool, "t");
    session.node_started(Some(&run.run_id), &node, None, None);
    assert!(session.flush(Duration::from_secs(2)));
    stored(&srv, &run.run_id, 2);
    srv.stop();
    let deadline = Instant::now() + Duration::from_secs(2);
    while session.is_attached() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!session.is_attached());
    // 30 events while detached; the buffer keeps 20, so the 10 oldest unsent are lost.
    for n in 0..30 {
        // Raw emits: one frame each (node_token would batch them).
        let payload = parse_str(&format!(
            r#"{{"nodeId":"tool:t","deltas":[{{"t":"text","v":"t{n}"}}]}}"#
        ))
        .unwrap();
        session.emit(Some(&run.run_id), "node.token", payload);
    }
    session.finish_run(&run, RunOutcome::Ok);
    assert!(session.flush(Duration::from_secs(2)));
    let stats = session.stats();
    assert_eq!(stats.lost, 11, "{stats:?}");
    assert_eq!(stats.pending_gaps, 1);

    let srv = Server::start_in(dir, &["--port", &port.to_string()], &[]);
    assert!(
        session.ready(Duration::from_secs(5)),
        "reconnects to the restarted server"
    );
    assert!(session.flush(Duration::from_secs(2)));
    let events = stored(&srv, &run.run_id, 2 + 1 + 20);
    let gap = events
        .iter()
        .find(|e| s(e, &["type"]) == Some("graph.hint"))
        .expect("a gap marker");
    assert_eq!(i(gap, &["payload", "gap", "droppedCount"]), Some(11));
    assert_eq!(
        s(gap, &["payload", "gap", "reason"]),
        Some("buffer-overflow")
    );
    let tokens = events
        .iter()
        .filter(|e| s(e, &["type"]) == Some("node.token"))
        .count();
    assert_eq!(tokens, 19, "the newest events that fit the buffer survive");
    assert!(events
        .iter()
        .any(|e| s(e, &["type"]) == Some("run.finished")));
    let first_lost = i(gap, &["payload", "gap", "fromSeq"]).unwrap();
    let last_lost = i(gap, &["payload", "gap", "toSeq"]).unwrap();
    assert_eq!(last_lost - first_lost + 1, 11);
    for e in &events {
        let seq = i(e, &["seq"]).unwrap();
        assert!(
            !(first_lost..=last_lost).contains(&seq) || s(e, &["type"]) == Some("graph.hint"),
            "a lost seq was stored"
        );
    }
    session.dispose(Duration::from_secs(2));
}

#[test]
fn a_disabled_session_does_nothing_but_runs_still_work() {
    let srv = Server::start(&[], &[]);
    let (session, warnings) = session_for(
        srv.port,
        |o| o.enabled = Some(true),
        &[("GRAPHMIND_DISABLED", "1")],
    );
    assert!(!session.is_enabled());
    assert!(!session.ready(Duration::from_millis(300)));
    let run = session.start_run("off", None);
    assert!(run.run_id.starts_with("run_"));
    let node = NodeRef::new(NodeKind::Tool, "t");
    assert_eq!(
        session.node_started(Some(&run.run_id), &node, None, None),
        None
    );
    assert!(matches!(
        session.gate(
            Some(&run.run_id),
            PausePoint::Before,
            &node.gate_node(),
            GateOptions::default()
        ),
        Gate::Continue
    ));
    session.node_error(Some(&run.run_id), &node, ErrorInfo::new("E", "m"));
    session.finish_run(&run, RunOutcome::Ok);
    session.dispose(Duration::from_millis(100));
    let runs = srv.get_json("/api/runs");
    assert_eq!(
        to_json(runs.get("runs").unwrap()),
        "[]",
        "nothing reached the server"
    );
    assert!(
        warnings.lock().unwrap().is_empty(),
        "a disabled session says nothing"
    );
    assert_eq!(session.stats().seq, 0);
}

#[test]
fn a_detached_session_never_blocks_the_app() {
    let port = free_port();
    let (session, _) = session_for(port, |_| {}, &[]);
    let started = Instant::now();
    let run = session.start_run("nobody", None);
    for _ in 0..1000 {
        let node = NodeRef::new(NodeKind::Tool, "t");
        session.node_started(Some(&run.run_id), &node, None, Some(Value::from("x")));
        assert!(matches!(
            session.gate(
                Some(&run.run_id),
                PausePoint::Before,
                &node.gate_node(),
                GateOptions::default()
            ),
            Gate::Continue
        ));
        session.node_finished(Some(&run.run_id), &node, None, 0.0, false);
    }
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        !session.ready(Duration::from_millis(400)),
        "no server: ready() resolves false"
    );
    let t = Instant::now();
    session.dispose(Duration::from_millis(500));
    assert!(t.elapsed() < Duration::from_millis(1500));
}

#[test]
fn a_forked_child_reconnects_and_records_its_own_events() {
    let srv = Server::start(&[], &[]);
    let session = attached(&srv, |_| {});
    let parent_run = session.start_run("parent", None);
    assert!(session.flush(Duration::from_secs(2)));
    session.before_fork();
    // SAFETY: the child only uses the session (whose lock we hold across the fork) and exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        session.after_fork_child();
        let ok = !session.is_attached() && session.ready(Duration::from_secs(3));
        let run = session.start_run("child", None);
        session.finish_run(&run, RunOutcome::Ok);
        session.flush(Duration::from_secs(2));
        session.dispose(Duration::from_secs(2));
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    session.after_fork_parent();
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child attached on its own (status {status})"
    );
    // The child flushed to its socket; the server commits on its own writer thread.
    let deadline = Instant::now() + Duration::from_secs(5);
    let others = loop {
        let runs = srv.get_json("/api/runs");
        let others: Vec<Value> = runs
            .get("runs")
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .filter(|r| {
                s(r, &["id"]) != Some(parent_run.run_id.as_str()) && s(r, &["status"]) == Some("ok")
            })
            .cloned()
            .collect();
        if !others.is_empty() || Instant::now() > deadline {
            break others;
        }
        std::thread::sleep(Duration::from_millis(30));
    };
    assert_eq!(others.len(), 1, "the child's own run is stored");
    assert_eq!(s(&others[0], &["status"]), Some("ok"));
    session.finish_run(&parent_run, RunOutcome::Ok);
    assert!(session.flush(Duration::from_secs(2)));
    srv.wait_run(&parent_run.run_id, |r| s(r, &["status"]) == Some("ok"));
    session.dispose(Duration::from_secs(2));
}

/// Records runs of distinct tool calls on `session` until `stop` is set; returns how many.
fn record_until(session: &Session, stop: &std::sync::atomic::AtomicBool, tag: &str) -> usize {
    let mut count = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let run = session.start_run(tag, None);
        call_tool(
            session,
            &run.run_id,
            "lookup",
            &format!(r#"{{"tag":"{tag}","n":{count}}}"#),
            Ok(r#"{"ok":true}"#),
        );
        session.finish_run(&run, RunOutcome::Ok);
        count += 1;
    }
    count
}

/// Waits for child `pid` up to `limit`; a child still running then is killed, and reported
/// as `None`.
fn wait_child(pid: libc::pid_t, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: pid is our child; status is a valid out pointer.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            return Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            });
        }
        if Instant::now() > deadline {
            // SAFETY: as above.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_child_forked_while_threads_wait_on_the_session_never_hangs() {
    // The CI hang of 2026-11-30: threads of the parent waiting on a session lock at the
    // moment of fork() must not be inherited by the child as waiters that never run.
    let srv = Server::start(&[], &[]);
    let session = attached(&srv, |_| {});
    assert!(
        graphmind_core::fork::register(&session),
        "the process's fork hooks are installed"
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..2)
        .map(|i| {
            let (session, stop) = (session.clone(), stop.clone());
            std::thread::spawn(move || record_until(&session, &stop, &format!("busy-{i}")))
        })
        .collect();
    let mut child_runs = Vec::new();
    for round in 0..6 {
        std::thread::sleep(Duration::from_millis(20));
        let mut fds = [0; 2];
        // SAFETY: fds is a valid out array of two.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child uses only the session (the fork hooks carried its locks across)
        // and a pipe, and exits with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let ok = !session.is_attached() && session.ready(Duration::from_secs(3));
            let run = session.start_run("child", None);
            call_tool(
                &session,
                &run.run_id,
                "lookup",
                r#"{"from":"child"}"#,
                Ok(r#"{"ok":true}"#),
            );
            session.finish_run(&run, RunOutcome::Ok);
            let flushed = session.flush(Duration::from_secs(3));
            session.dispose(Duration::from_secs(2));
            // SAFETY: fds[1] is the pipe's write end; the buffer outlives the call.
            unsafe {
                libc::write(fds[1], run.run_id.as_ptr().cast(), run.run_id.len());
                libc::_exit(if ok && flushed { 0 } else { 3 });
            }
        }
        // SAFETY: the parent closes its write end and reads the child's run id.
        unsafe { libc::close(fds[1]) };
        let status = wait_child(pid, Duration::from_secs(15));
        let mut id = [0u8; 128];
        // SAFETY: id is a writable buffer of its length; the read end is ours to close.
        let n = unsafe {
            let n = libc::read(fds[0], id.as_mut_ptr().cast(), id.len());
            libc::close(fds[0]);
            n
        };
        assert_eq!(
            status,
            Some(0),
            "child of round {round} attached, recorded and exited (None: it hung)"
        );
        child_runs.push(String::from_utf8_lossy(&id[..n.max(0) as usize]).into_owned());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let recorded: usize = busy.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(
        recorded > 0,
        "the parent's threads kept recording across the forks"
    );
    assert!(
        session.flush(Duration::from_secs(5)),
        "the parent's worker still drains its queue"
    );
    for run_id in &child_runs {
        assert!(!run_id.is_empty());
        srv.wait_run(run_id, |r| s(r, &["status"]) == Some("ok"));
    }
    graphmind_core::fork::unregister(&session);
    session.dispose(Duration::from_secs(2));
}

#[test]
fn flush_and_dispose_wait_for_a_full_outbox_to_drain() {
    // Producers faster than the worker fill the outbox; flush must then wait for room for
    // its marker, not give up at once (it did, with 60 s to spare).
    let srv = Server::start(&[], &[]);
    let session = attached(&srv, |_| {});
    let producers: Vec<_> = (0..2)
        .map(|t| {
            let session = session.clone();
            std::thread::spawn(move || {
                let run = session.start_run(&format!("flood-{t}"), None);
                for n in 0..60_000 {
                    call_tool(
                        &session,
                        &run.run_id,
                        "lookup",
                        &format!(r#"{{"t":{t},"n":{n}}}"#),
                        Ok(r#"{"ok":true}"#),
                    );
                }
                session.finish_run(&run, RunOutcome::Ok);
            })
        })
        .collect();
    // Flushed while the producers still run (and keep the outbox full), then once more.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        session.flush(Duration::from_secs(60)),
        "flush waits while the worker drains a full outbox"
    );
    producers.into_iter().for_each(|p| p.join().unwrap());
    assert!(session.flush(Duration::from_secs(60)));
    let marker = session.start_run("after-flood", None);
    session.finish_run(&marker, RunOutcome::Ok);
    let t = Instant::now();
    session.dispose(Duration::from_secs(30));
    assert!(t.elapsed() < Duration::from_secs(30));
    srv.wait_run(&marker.run_id, |r| s(r, &["status"]) == Some("ok"));
}

/// Drives a `Step` the way every SDK wrapper does, with a function that fails `failures`
/// times before it succeeds.
fn drive(session: &Session, run_id: &str, failures: usize) -> Result<Value, String> {
    // Distinct arguments per call, so that the loop guard does not see a loop.
    let input = parse_str(&format!(
        r#"{{"failures":{failures},"nonce":"{}"}}"#,
        graphmind_core::event::new_id("n")
    ))
    .unwrap();
    let mut step = Step::start(
        session,
        Some(run_id),
        NodeRef::new(NodeKind::Tool, "flaky"),
        None,
        Some(input),
        true,
    );
    let mut calls = 0;
    let mut next = step.on_before(step.before().wait());
    loop {
        match next {
            Next::Run { .. } => {
                calls += 1;
                if calls <= failures {
                    let decision = step
                        .error(ErrorInfo::new("Flaky", format!("failure {calls}")))
                        .wait();
                    next = step.on_error(decision);
                } else {
                    let output = Value::from(format!("ok after {calls}"));
                    let decision = step.after().wait();
                    next = step.on_after(decision, Some(output));
                    if next == Next::ReturnResult {
                        return Ok(Value::from(format!("ok after {calls}")));
                    }
                }
            }
            Next::ReturnResult => unreachable!(),
            Next::ReturnInjected(v) => return Ok(v),
            Next::Reraise => return Err(format!("raised after {calls}")),
            Next::Abort => return Err("aborted".into()),
            Next::Raise(e) => return Err(e.message.to_string_lossy().into_owned()),
            Next::Stream(_) => unreachable!(),
        }
    }
}

#[test]
fn a_step_applies_each_decision_the_way_the_reference_wrappers_do() {
    let srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    let session = attached(&srv, |_| {});
    let run = session.start_run("steps", None);
    dbg.watch(&run.run_id);

    // Detached from any breakpoint, a failing call re-raises after the default error pause
    // is continued; a retry at the error gate runs it again and it succeeds.
    let s2 = session.clone();
    let id = run.run_id.clone();
    let worker = std::thread::spawn(move || drive(&s2, &id, 1));
    let paused = dbg.next("exec.paused");
    assert_eq!(s(&paused, &["payload", "point"]), Some("error"));
    dbg.resume(
        &run.run_id,
        s(&paused, &["payload", "pauseId"]).unwrap(),
        "retry",
        "",
    );
    assert_eq!(worker.join().unwrap(), Ok(Value::from("ok after 2")));

    let s2 = session.clone();
    let id = run.run_id.clone();
    let worker = std::thread::spawn(move || drive(&s2, &id, 5));
    let paused = dbg.next("exec.paused");
    dbg.resume(
        &run.run_id,
        s(&paused, &["payload", "pauseId"]).unwrap(),
        "inject",
        r#","output":"recovered""#,
    );
    assert_eq!(worker.join().unwrap(), Ok(Value::from("recovered")));
    let finished = dbg.next("node.finished");
    assert_eq!(
        finished
            .get("payload")
            .unwrap()
            .get("recoveredFromError")
            .and_then(Value::as_bool),
        Some(true)
    );
    assert_eq!(
        finished
            .get("payload")
            .unwrap()
            .get("injected")
            .and_then(Value::as_bool),
        Some(true)
    );

    let s2 = session.clone();
    let id = run.run_id.clone();
    let worker = std::thread::spawn(move || drive(&s2, &id, 5));
    let paused = dbg.next("exec.paused");
    dbg.resume(
        &run.run_id,
        s(&paused, &["payload", "pauseId"]).unwrap(),
        "continue",
        "",
    );
    assert_eq!(worker.join().unwrap(), Err("raised after 1".into()));
    let finished = dbg.next("node.finished");
    assert_eq!(s(&finished, &["payload", "status"]), Some("error"));
    session.dispose(Duration::from_secs(2));
}

/// One call through a `Step` with its input and output as JSON text (how the Node binding
/// and C callers hand values over); `edit` is the debugger's edit at a held `before` gate.
fn text_step(session: &Session, run_id: &str, input: &[u8], output: &[u8]) -> Next {
    let node = NodeRef::new(NodeKind::Tool, "search");
    let mut step = Step::start_host(
        session,
        Some(run_id),
        node,
        None,
        Some(HostValue::Text(input.to_vec())),
        true,
    );
    let next = step.on_before(step.before().wait());
    assert!(matches!(next, Next::Run { .. }), "{next:?}");
    let ran = next;
    let after = step.after().wait();
    assert_eq!(
        step.on_after_host(after, Some(HostValue::Text(output.to_vec()))),
        Next::ReturnResult
    );
    ran
}

#[test]
fn json_text_from_a_binding_is_recorded_alike_detached_and_attached() {
    let dir = temp_dir();
    let port = free_port();
    let input = r#"{"q":"é \ud800 😀","n":[1,2.50,1e3]}"#;
    let recorded = r#"{"q":"é \ud800 😀","n":[1,2.5,1000]}"#;
    // Detached (nothing listens yet): the worker parses the text; the replay delivers it.
    let (session, lines) = session_for(port, |_| {}, &[]);
    let run = session.start_run("text", None);
    text_step(&session, &run.run_id, input.as_bytes(), br#"["found",1]"#);
    // Text that is not JSON is kept as a string, with a warning, not lost.
    text_step(&session, &run.run_id, b"{\"q\":2}", b"{not json");
    assert!(session.flush(Duration::from_secs(2)));
    assert!(
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("not valid JSON")),
        "{:?}",
        lines.lock().unwrap()
    );

    let srv = Server::start_in(dir, &["--port", &port.to_string()], &[]);
    assert!(
        session.ready(Duration::from_secs(5)),
        "attaches to the server started late"
    );
    // Attached with a breakpoint: the text is parsed on the calling thread, the pause is
    // editable (the step kept the live input) and an edit merges into it.
    let mut dbg = Debugger::new(&srv);
    dbg.watch(&run.run_id);
    dbg.breakpoint(r#"{"name":"search","point":"before"}"#);
    settle();
    let s2 = session.clone();
    let id = run.run_id.clone();
    let caller =
        std::thread::spawn(move || text_step(&s2, &id, input.as_bytes(), br#"{"ok":true}"#));
    let paused = dbg.next("exec.paused");
    assert_eq!(
        paused
            .get("payload")
            .unwrap()
            .get("editable")
            .and_then(Value::as_bool),
        Some(true),
        "{}",
        to_json(&paused)
    );
    dbg.resume(
        &run.run_id,
        s(&paused, &["payload", "pauseId"]).unwrap(),
        "continue",
        r#","input":{"n":[7]}"#,
    );
    match caller.join().unwrap() {
        Next::Run {
            input: Some(edited),
        } => assert_eq!(to_json(&edited), r#"{"q":"é \ud800 😀","n":[7]}"#),
        other => panic!("the edit did not reach the call: {other:?}"),
    }
    session.finish_run(&run, RunOutcome::Ok);
    assert!(session.flush(Duration::from_secs(2)));
    let events = stored(&srv, &run.run_id, 10);
    let payloads = |kind: &str, key: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| s(e, &["type"]) == Some(kind))
            .filter_map(|e| e.get("payload").unwrap().get(key).map(to_json))
            .collect()
    };
    assert_eq!(
        payloads("node.started", "input"),
        [recorded, r#"{"q":2}"#, recorded]
    );
    assert_eq!(
        payloads("node.finished", "output"),
        [r#"["found",1]"#, r#""{not json""#, r#"{"ok":true}"#]
    );
    session.dispose(Duration::from_secs(2));
}

/// One call through a `Step` with its input and output as `JSON.stringify`'s text (the
/// Node binding's hand-over), detached.
fn stringified_step(
    session: &Session,
    run_id: &str,
    input: &[u8],
    output: &[u8],
    as_written: bool,
) {
    let wrap = |b: &[u8]| {
        if as_written {
            HostValue::Stringified(b.to_vec())
        } else {
            HostValue::Text(b.to_vec())
        }
    };
    let node = NodeRef::new(NodeKind::Tool, "search");
    let mut step = Step::start_host(session, Some(run_id), node, None, Some(wrap(input)), true);
    assert!(matches!(
        step.on_before(step.before().wait()),
        Next::Run { .. }
    ));
    let after = step.after().wait();
    assert_eq!(
        step.on_after_host(after, Some(wrap(output))),
        Next::ReturnResult
    );
}

#[test]
fn stringified_text_sent_as_written_is_stored_as_the_parsed_text_would_be() {
    // The worker forwards JSON.stringify's text without parsing it when nothing needs the
    // value; what the server stores must not depend on that: the same calls handed over as
    // plain text (always parsed) are the oracle. Cases: escapes and non-ASCII, a value deeper
    // than the depth limit (cut), one over the payload budget (shrunk), a hide switch on.
    let deep = format!(
        "{}1{}",
        "[".repeat(graphmind_core::shrink::depth::MAX_VALUE_DEPTH + 3),
        "]".repeat(graphmind_core::shrink::depth::MAX_VALUE_DEPTH + 3)
    );
    let big = format!(
        r#"{{"blob":"{}"}}"#,
        "x".repeat(graphmind_core::shrink::MAX_PAYLOAD_BYTES + 10)
    );
    let cases: [(&str, &[u8], &[u8]); 4] = [
        (
            "plain",
            r#"{"q":"é \"quoted\" \\ \n\u0001 \ud800 😀","n":[1,2.5,1e+21,-0.5],"o":{}}"#
                .as_bytes(),
            br#"["found",{"k":null}]"#,
        ),
        ("deep", deep.as_bytes(), b"true"),
        ("big", br#"{"q":1}"#, big.as_bytes()),
        ("shallow", b"[[1]]", b"\"ok\""),
    ];
    for hide in [false, true] {
        let dir = temp_dir();
        let port = free_port();
        let configure = |o: &mut Options| {
            o.loop_guard = Some(graphmind_core::config::LoopGuardOption::Off);
            if hide {
                o.hide_inputs = Some(true);
            }
        };
        let (session, _) = session_for(port, configure, &[]);
        let mut runs = Vec::new();
        for as_written in [true, false] {
            let run = session.start_run(if as_written { "stringified" } else { "text" }, None);
            for (_, input, output) in &cases {
                stringified_step(&session, &run.run_id, input, output, as_written);
            }
            session.finish_run(&run, RunOutcome::Ok);
            runs.push(run.run_id);
        }
        let srv = Server::start_in(dir, &["--port", &port.to_string()], &[]);
        assert!(
            session.ready(Duration::from_secs(5)),
            "attaches to the server started late"
        );
        assert!(session.flush(Duration::from_secs(5)));
        let members = |run: &str| -> Vec<String> {
            stored(&srv, run, 2 + 2 * cases.len())
                .iter()
                .filter_map(|e| {
                    let p = e.get("payload")?;
                    match s(e, &["type"])? {
                        "node.started" => Some(format!(
                            "in {}",
                            p.get("input").map(to_json).unwrap_or_default()
                        )),
                        "node.finished" => Some(format!(
                            "out {}",
                            p.get("output").map(to_json).unwrap_or_default()
                        )),
                        _ => None,
                    }
                })
                .collect()
        };
        let (written, parsed) = (members(&runs[0]), members(&runs[1]));
        assert_eq!(written.len(), 2 * cases.len(), "hide={hide}: {written:?}");
        assert_eq!(written, parsed, "hide={hide}");
        // The oracle itself did what each case is about.
        if hide {
            assert!(!written[0].contains("quoted"), "{}", written[0]);
        } else {
            assert!(
                written[0].contains(r#""n":[1,2.5,1e+21,-0.5]"#),
                "{}",
                written[0]
            );
            let too_deep = "[".repeat(graphmind_core::shrink::depth::MAX_VALUE_DEPTH);
            assert!(
                written[2].contains(&"[".repeat(100)) && !written[2].contains(&too_deep),
                "the deep value is cut: {}",
                written[2]
            );
        }
        assert!(
            written[5].len() < graphmind_core::shrink::MAX_PAYLOAD_BYTES,
            "the big output is shrunk"
        );
        session.dispose(Duration::from_secs(2));
    }
}

#[test]
fn streamed_tokens_are_batched_by_the_flush_interval_and_keep_their_order() {
    let srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    let session = attached(&srv, |o| o.token_interval_ms = Some(60_000.0));
    let run = session.start_run("stream", None);
    dbg.watch(&run.run_id);
    let node = NodeRef::new(NodeKind::Llm, "model");
    session.node_started(Some(&run.run_id), &node, None, None);
    for n in 0..100 {
        session.node_token(
            Some(&run.run_id),
            &node,
            graphmind_core::event::TokenChannel::Text,
            &format!("{n} "),
        );
    }
    // Nothing else happened, so the 100 deltas wait in one batch; finishing the node sends
    // them first, in one frame, before node.finished.
    session.node_finished(
        Some(&run.run_id),
        &node,
        Some(Value::from("done")),
        5.0,
        false,
    );
    let token = dbg.next("node.token");
    let deltas = token
        .get("payload")
        .and_then(|p| p.get("deltas"))
        .and_then(Value::as_array)
        .unwrap();
    assert_eq!(deltas.len(), 100);
    let text: String = deltas
        .iter()
        .map(|d| s(d, &["v"]).unwrap().to_string())
        .collect();
    assert_eq!(text, (0..100).map(|n| format!("{n} ")).collect::<String>());
    assert_eq!(
        s(&token, &["payload", "instanceId"]),
        Some(node.instance_id.as_str())
    );
    let finished = dbg.next("node.finished");
    assert!(i(&finished, &["seq"]).unwrap() > i(&token, &["seq"]).unwrap());

    // With a short interval, a stream that keeps going is sent in several batches.
    let quick = attached(&srv, |o| o.token_interval_ms = Some(20.0));
    let run2 = quick.start_run("stream-2", None);
    dbg.watch(&run2.run_id);
    let node2 = NodeRef::new(NodeKind::Llm, "model");
    for n in 0..20 {
        quick.node_token(
            Some(&run2.run_id),
            &node2,
            graphmind_core::event::TokenChannel::Text,
            &format!("{n}"),
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(quick.flush(Duration::from_secs(2)));
    let frames = stored(&srv, &run2.run_id, 3)
        .iter()
        .filter(|e| s(e, &["type"]) == Some("node.token"))
        .count();
    assert!(
        (2..20).contains(&frames),
        "{frames} frames for 20 deltas over ~100 ms"
    );
    quick.dispose(Duration::from_secs(1));
    session.dispose(Duration::from_secs(1));
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn an_error_hold_counts_as_held_time_on_the_node_finished_that_follows_it() {
    let srv = Server::start(&[], &[]);
    let mut dbg = Debugger::new(&srv);
    let session = attached(&srv, |_| {});
    let run = session.start_run("error-hold", None);
    dbg.watch(&run.run_id);
    // one failure: the error gate holds (the default error pause) until the debugger retries
    let s2 = session.clone();
    let id = run.run_id.clone();
    let worker = std::thread::spawn(move || drive(&s2, &id, 1));
    let error = dbg.next("node.error");
    assert!(
        error.get("payload").and_then(|p| p.get("heldMs")).is_none(),
        "nothing held before the error"
    );
    let paused = dbg.next("exec.paused");
    assert_eq!(s(&paused, &["payload", "point"]), Some("error"));
    std::thread::sleep(Duration::from_millis(300));
    dbg.resume(
        &run.run_id,
        s(&paused, &["payload", "pauseId"]).unwrap(),
        "retry",
        "",
    );
    assert_eq!(worker.join().unwrap(), Ok(Value::from("ok after 2")));
    let finished = dbg.next("node.finished");
    let p = finished.get("payload").unwrap();
    let held = p
        .get("heldMs")
        .and_then(Value::as_f64)
        .expect("node.finished carries heldMs");
    let duration = p.get("durationMs").and_then(Value::as_f64).unwrap();
    assert!(held >= 290.0, "the error hold is held time ({held} ms)");
    assert!(
        duration - held < 250.0,
        "and not run time: ran {} ms",
        duration - held
    );
    session.dispose(Duration::from_secs(2));
}
