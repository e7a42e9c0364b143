//! The session's rules against the in-memory debugger ([`super::memory_link`]): what goes
//! out on attach (hello, gap markers, the ring in seq order), a gate held and resumed by a
//! message on the link, flush, dispose during a hold, and fail-open when the link breaks;
//! the worker's channels: a flush or shutdown covers every event handed over before it,
//! a shutdown finds room with the event channel full, the worker ends (and is joined) on
//! dispose and when the app's last handle drops, within their bounds even while the link
//! is stalled.
//! The same rules run end to end against `graphmind serve` in `cli/tests/session.rs`.

use super::memory_link::MemoryDebugger;
use super::*;
use crate::config::{self, EnvSnapshot, Options, SdkFlavor};

/// Bound on every wait in these tests (they normally take milliseconds).
const WAIT: Duration = Duration::from_secs(5);
/// How long a frame that should not come is waited for.
const QUIET: Duration = Duration::from_millis(150);
/// A short dispose bound, for the cases where the worker cannot finish in time.
const SHORT: Duration = Duration::from_millis(200);
/// What this loaded 2-core machine may add to a bound (thread wake-ups, a busy neighbour).
const SLACK: Duration = Duration::from_millis(400);

fn session(dbg: &MemoryDebugger, configure: impl FnOnce(&mut Options)) -> Session {
    let mut options = Options {
        url: Some("ws://127.0.0.1:9/ingest".into()),
        app_name: Some("unit".into()),
        ..Options::default()
    };
    configure(&mut options);
    let config = config::resolve(&options, &EnvSnapshot::new(), SdkFlavor::Native);
    assert!(config.enabled, "{:?}", config.warnings);
    let sink: WarnSink = Arc::new(|_: &str| {});
    Session::with_connector(config, sink, dbg.connector())
}

fn kind(frame: &Value) -> &str {
    frame.get("type").and_then(Value::as_str).unwrap_or("")
}

fn seq(frame: &Value) -> i64 {
    frame.get("seq").and_then(Value::as_i64).expect("a seq")
}

fn payload_str<'a>(frame: &'a Value, key: &str) -> Option<&'a str> {
    frame.get("payload")?.get(key)?.as_str()
}

/// One tool node started and finished in `run`.
fn tool_node(session: &Session, run: &Run, name: &str) {
    let node = NodeRef::new(NodeKind::Tool, name);
    session.node_started(Some(&run.run_id), &node, None, Some(Value::Null));
    session.node_finished(Some(&run.run_id), &node, Some(Value::Null), 1.0, false);
}

/// A control frame as the hub sends it.
fn control(run_id: &str, kind: &str, payload: &str) -> String {
    wire::encode_envelope(PROTOCOL_VERSION, 0, epoch_ms(), run_id, kind, payload)
}

/// Holds a gate before `name` on another thread; returns the thread and the `exec.paused`.
fn hold(
    session: &Session,
    dbg: &MemoryDebugger,
    run: &Run,
    name: &str,
) -> (std::thread::JoinHandle<GateDecision>, Value) {
    let node = NodeRef::new(NodeKind::Tool, name).gate_node();
    let gate = session.gate(
        Some(&run.run_id),
        PausePoint::Before,
        &node,
        GateOptions::default(),
    );
    assert!(matches!(gate, Gate::Held(_)), "step mode holds");
    let waiter = std::thread::spawn(move || gate.wait());
    let paused = dbg.next_of("exec.paused", WAIT);
    (waiter, paused)
}

#[test]
fn attach_sends_hello_then_the_ring_in_seq_order() {
    let dbg = MemoryDebugger::new(r#"{"mode":"run"}"#);
    dbg.accept(false);
    let session = session(&dbg, |_| {});
    let run = session.start_run("sequence", None);
    tool_node(&session, &run, "lookup");
    tool_node(&session, &run, "lookup");
    assert!(session.finish_run(&run, RunOutcome::Ok));
    assert!(session.flush(WAIT), "a refused connection still flushes");
    assert_eq!(
        dbg.connects(),
        1,
        "the flush tried the never-tried connection"
    );
    assert!(!session.is_attached());
    assert_eq!(session.stats().buffered, 6);

    dbg.accept(true);
    assert!(session.ready(WAIT));
    let hello = dbg.next_frame(WAIT).unwrap();
    assert_eq!(kind(&hello), "hello");
    assert_eq!(payload_str(&hello, "app"), Some("unit"));
    let frames = dbg.drain(QUIET);
    let kinds: Vec<&str> = frames.iter().map(kind).collect();
    assert_eq!(
        kinds,
        [
            "run.started",
            "node.started",
            "node.finished",
            "node.started",
            "node.finished",
            "run.finished"
        ]
    );
    let seqs: Vec<i64> = frames.iter().map(seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5], "one seq per event, in order");
    assert!(frames
        .iter()
        .all(|f| f.get("runId").and_then(Value::as_str) == Some(run.run_id.as_str())));
    // Two executions of one node: one node id, two instance ids.
    let ids = |i: usize, key: &str| payload_str(&frames[i], key).map(str::to_string);
    assert_eq!(ids(1, "nodeId"), ids(3, "nodeId"));
    assert_ne!(ids(1, "instanceId"), ids(3, "instanceId"));
    assert_eq!(ids(1, "instanceId"), ids(2, "instanceId"));
    assert_eq!(session.stats().seq, 6);
}

#[test]
fn a_reconnect_after_an_overflow_sends_the_gap_marker_before_the_newest_events() {
    let dbg = MemoryDebugger::new(r#"{"mode":"run"}"#);
    let session = session(&dbg, |o| o.buffer_size = Some(4));
    assert!(session.ready(WAIT));
    let run = session.start_run("gappy", None);
    assert!(session.flush(WAIT));
    assert_eq!(kind(&dbg.next_frame(WAIT).unwrap()), "hello");
    assert_eq!(kind(&dbg.next_frame(WAIT).unwrap()), "run.started");

    dbg.accept(false);
    dbg.drop_link();
    let deadline = Instant::now() + WAIT;
    while session.is_attached() {
        assert!(Instant::now() < deadline, "the broken link is noticed");
        std::thread::sleep(Duration::from_millis(2));
    }
    for i in 0..5 {
        tool_node(&session, &run, &format!("step{i}"));
    }
    assert!(session.flush(WAIT));
    assert_eq!(session.stats().buffered, 4, "the ring keeps the newest 4");

    dbg.accept(true);
    assert!(session.ready(WAIT));
    assert_eq!(kind(&dbg.next_frame(WAIT).unwrap()), "hello");
    let frames = dbg.drain(QUIET);
    let kinds: Vec<&str> = frames.iter().map(kind).collect();
    assert_eq!(
        kinds,
        [
            "graph.hint",
            "node.started",
            "node.finished",
            "node.started",
            "node.finished"
        ]
    );
    let gap = frames[0].get("payload").and_then(|p| p.get("gap")).unwrap();
    let num = |key: &str| gap.get(key).and_then(Value::as_i64).unwrap();
    assert_eq!(num("droppedCount"), 6, "10 events, the newest 4 kept");
    assert_eq!((num("fromSeq"), num("toSeq")), (1, 6));
    assert_eq!(seq(&frames[0]), 11, "the marker takes a fresh seq");
    let replayed: Vec<i64> = frames[1..].iter().map(seq).collect();
    assert_eq!(replayed, [7, 8, 9, 10]);
    assert_eq!(session.stats().lost, 6);
}

#[test]
fn a_gate_is_held_until_the_debugger_resumes_it() {
    let dbg = MemoryDebugger::new(r#"{"mode":"step"}"#);
    let session = session(&dbg, |_| {});
    assert!(session.ready(WAIT));
    let run = session.start_run("gated", None);
    let (waiter, paused) = hold(&session, &dbg, &run, "lookup");
    assert_eq!(payload_str(&paused, "reason"), Some("step"));
    let pause_id = payload_str(&paused, "pauseId").unwrap().to_string();
    std::thread::sleep(QUIET);
    assert!(!waiter.is_finished(), "held until a decision comes");
    assert_eq!(session.stats().held_gates, 1);

    dbg.send(&control(
        &run.run_id,
        "exec.resume",
        &format!(r#"{{"pauseId":"{pause_id}","action":"abort"}}"#),
    ));
    let decision = waiter.join().unwrap();
    assert_eq!(decision.action, ResumeAction::Abort);
    let resumed = dbg.next_of("exec.resumed", WAIT);
    assert_eq!(payload_str(&resumed, "pauseId"), Some(pause_id.as_str()));
    assert_eq!(payload_str(&resumed, "action"), Some("abort"));
    assert_eq!(session.stats().held_gates, 0);

    // A second resume of the same pause is ignored (the first one won).
    dbg.send(&control(
        &run.run_id,
        "exec.resume",
        &format!(r#"{{"pauseId":"{pause_id}","action":"continue"}}"#),
    ));
    dbg.send(&control("*", "mode.set", r#"{"mode":"run"}"#));
    assert!(session.flush(WAIT));
    assert!(dbg.drain(QUIET).iter().all(|f| kind(f) != "exec.resumed"));
    let node = NodeRef::new(NodeKind::Tool, "lookup").gate_node();
    let options = GateOptions::default();
    let after_mode = session.gate(Some(&run.run_id), PausePoint::Before, &node, options);
    assert!(matches!(after_mode, Gate::Continue), "mode.set run disarms");
}

#[test]
fn flush_delivers_everything_emitted_before_it() {
    let dbg = MemoryDebugger::new(r#"{"mode":"run"}"#);
    let session = session(&dbg, |_| {});
    assert!(session.flush(WAIT), "nothing started: done at once");
    assert_eq!(
        dbg.connects(),
        0,
        "constructing and flushing an idle session dials nothing"
    );
    let run = session.start_run("flushed", None);
    for i in 0..50 {
        tool_node(&session, &run, &format!("n{i}"));
    }
    assert!(session.flush(WAIT));
    assert!(session.is_attached());
    assert_eq!(kind(&dbg.next_frame(WAIT).unwrap()), "hello");
    // Everything is out when flush returns: no wait for stragglers.
    let frames = dbg.drain(Duration::ZERO);
    assert_eq!(frames.len(), 101);
    assert_eq!(seq(frames.last().unwrap()), 100);
}

#[test]
fn dispose_during_a_hold_releases_it_as_continue_and_closes() {
    let dbg = MemoryDebugger::new(r#"{"mode":"step"}"#);
    let session = session(&dbg, |_| {});
    assert!(session.ready(WAIT));
    let run = session.start_run("disposed", None);
    let (waiter, paused) = hold(&session, &dbg, &run, "lookup");
    let started = Instant::now();
    session.dispose(WAIT);
    assert!(started.elapsed() < WAIT);
    assert_eq!(waiter.join().unwrap().action, ResumeAction::Continue);
    let resumed = dbg.next_of("exec.resumed", WAIT);
    assert_eq!(
        payload_str(&resumed, "pauseId"),
        payload_str(&paused, "pauseId")
    );
    assert_eq!(payload_str(&resumed, "action"), Some("continue"));
    assert!(session.is_disposed());
    assert!(!session.is_attached());
    // Nothing more is recorded or held, and a second dispose is a no-op.
    assert_eq!(
        session.emit(Some(&run.run_id), "graph.hint", Value::Null),
        None
    );
    let node = NodeRef::new(NodeKind::Tool, "lookup").gate_node();
    let options = GateOptions::default();
    let after = session.gate(Some(&run.run_id), PausePoint::Before, &node, options);
    assert!(matches!(after, Gate::Continue));
    session.dispose(WAIT);
}

#[test]
fn a_broken_link_releases_held_gates_at_once() {
    let dbg = MemoryDebugger::new(r#"{"mode":"step"}"#);
    let session = session(&dbg, |o| o.retry_interval_ms = Some(60_000.0));
    assert!(session.ready(WAIT));
    let run = session.start_run("fail-open", None);
    let (waiter, _) = hold(&session, &dbg, &run, "lookup");
    dbg.accept(false);
    dbg.drop_link();
    assert_eq!(waiter.join().unwrap().action, ResumeAction::Continue);
    assert!(!session.is_attached());
    let node = NodeRef::new(NodeKind::Tool, "lookup").gate_node();
    let options = GateOptions::default();
    let detached = session.gate(Some(&run.run_id), PausePoint::Before, &node, options);
    assert!(
        matches!(detached, Gate::Continue),
        "detached: nothing holds"
    );
}

#[test]
fn dropping_the_last_handle_delivers_and_stops_the_worker() {
    let dbg = MemoryDebugger::new(r#"{"mode":"run"}"#);
    let session = session(&dbg, |_| {});
    assert!(session.ready(WAIT));
    let state = session.downgrade();
    let clone = session.clone();
    let run = session.start_run("dropped", None);
    tool_node(&session, &run, "lookup");
    drop(session);
    std::thread::sleep(QUIET);
    assert!(clone.is_attached(), "a clone keeps the session going");
    drop(clone);
    let deadline = Instant::now() + WAIT;
    while state.is_alive() {
        assert!(
            Instant::now() < deadline,
            "the worker and reader let go of the session"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        kinds(&dbg),
        ONE_NODE,
        "what was queued went out before the worker stopped"
    );
    assert!(state.upgrade().is_none());
}

/// Waits until `done` holds, failing the test after [`WAIT`].
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A session attached to a fresh in-memory debugger whose `hello.ack` sets `mode`.
fn attached(mode: &str) -> (MemoryDebugger, Session) {
    let dbg = MemoryDebugger::new(&format!(r#"{{"mode":"{mode}"}}"#));
    let session = session(&dbg, |_| {});
    assert!(session.ready(WAIT));
    (dbg, session)
}

/// The types of every frame the debugger got (waiting [`QUIET`] for stragglers).
fn kinds(dbg: &MemoryDebugger) -> Vec<String> {
    dbg.drain(QUIET)
        .iter()
        .map(|f| kind(f).to_string())
        .collect()
}

/// What a run with one tool node sends, after the hello.
const ONE_NODE: [&str; 4] = ["hello", "run.started", "node.started", "node.finished"];

/// Fails unless what started at `started` took less than `bound` (plus [`SLACK`]).
fn assert_within(started: Instant, bound: Duration, what: &str) {
    let took = started.elapsed();
    assert!(
        took < bound + SLACK,
        "{what} kept its bound {bound:?}: {took:?}"
    );
}

/// Whether the session's worker thread ended (or was joined already).
fn worker_ended(session: &Session) -> bool {
    let shared = session.inner.shared.lock();
    shared.worker_join.as_ref().is_none_or(|h| h.is_finished())
}

#[test]
fn a_flush_after_n_events_sees_all_n_across_several_worker_batches() {
    let (dbg, session) = attached("run");
    assert_eq!(kind(&dbg.next_frame(WAIT).unwrap()), "hello");
    let run = session.start_run("many", None);
    // Far more than one batch of the worker, queued behind a stalled write: the flush
    // comes while they wait, and the worker takes control messages first.
    dbg.stall(true);
    let nodes = 3 * MAX_BATCH;
    for i in 0..nodes {
        tool_node(&session, &run, &format!("n{}", i % 7));
    }
    let queued = session.inner.shared.lock().outbox.events.len();
    assert!(queued > MAX_BATCH, "only {queued} events queued");
    let unstall = std::thread::spawn({
        let stall = dbg.staller();
        move || {
            std::thread::sleep(QUIET);
            stall(false);
        }
    });
    assert!(session.flush(WAIT));
    // Read at once: a worker still working through the queue would be caught short here.
    let out = dbg.pending();
    unstall.join().unwrap();
    assert_eq!(
        out,
        1 + 2 * nodes,
        "every frame was out when flush returned"
    );
    // Everything is out when flush returns: nothing still queued behind the flush.
    let frames = dbg.drain(Duration::ZERO);
    assert_eq!(frames.len(), 1 + 2 * nodes, "run.started and every node");
    assert!(
        frames.iter().map(seq).eq(0..frames.len() as i64),
        "in seq order"
    );
    assert_eq!(session.stats().lost, 0);
}

#[test]
fn a_shutdown_finds_room_with_the_event_channel_full_and_stops_the_worker() {
    let (dbg, session) = attached("run");
    let run = session.start_run("full", None);
    dbg.stall(true);
    // Ends of nodes may take every slot; the stalled worker takes none after its first
    // batch, so the channel fills.
    let node = NodeRef::new(NodeKind::Tool, "lookup");
    let full = || session.inner.shared.lock().outbox.events.len() == OUTBOX_CAPACITY;
    let mut sent = 0;
    while !full() {
        assert!(sent < 2 * OUTBOX_CAPACITY, "the channel never filled");
        session.node_finished(Some(&run.run_id), &node, Some(Value::Null), 1.0, false);
        sent += 1;
    }
    let started = Instant::now();
    session.dispose(SHORT);
    assert_within(started, SHORT, "dispose");
    assert!(
        !worker_ended(&session),
        "the worker is stuck in the stalled write"
    );
    dbg.stall(false);
    eventually("the worker took the shutdown and ended", || {
        worker_ended(&session)
    });
    session.dispose(WAIT);
    assert!(
        session.inner.shared.lock().worker_join.is_none(),
        "a second dispose joined the ended worker"
    );
    let handed = session.inner.shared.lock().outbox.handed;
    let frames = dbg.drain(QUIET);
    assert_eq!(
        frames.len() as u64,
        1 + handed,
        "hello and every event handed over before the shutdown"
    );
}

#[test]
fn dispose_joins_the_worker() {
    let (dbg, session) = attached("run");
    let run = session.start_run("joined", None);
    tool_node(&session, &run, "lookup");
    session.dispose(WAIT);
    assert!(
        session.inner.shared.lock().worker_join.is_none(),
        "the worker's thread was joined before dispose returned"
    );
    assert_eq!(kinds(&dbg), ONE_NODE);
}

#[test]
fn dropping_the_last_handle_with_a_stalled_link_waits_at_most_drop_wait() {
    let (dbg, session) = attached("run");
    let state = session.downgrade();
    let run = session.start_run("stalled", None);
    dbg.stall(true);
    tool_node(&session, &run, "lookup");
    let started = Instant::now();
    drop(session);
    assert_within(started, DROP_WAIT, "the drop");
    assert!(state.is_alive(), "the stalled worker still holds the state");
    dbg.stall(false);
    eventually(
        "the worker delivered, ended and let go of the state",
        || !state.is_alive(),
    );
    assert_eq!(kinds(&dbg), ONE_NODE);
}

#[test]
fn dispose_during_a_hold_with_a_stalled_link_returns_within_its_timeout() {
    let (dbg, session) = attached("step");
    let run = session.start_run("stuck", None);
    let (waiter, paused) = hold(&session, &dbg, &run, "lookup");
    dbg.stall(true);
    let started = Instant::now();
    session.dispose(SHORT);
    assert_within(started, SHORT, "dispose");
    assert_eq!(waiter.join().unwrap().action, ResumeAction::Continue);
    dbg.stall(false);
    let resumed = dbg.next_of("exec.resumed", WAIT);
    assert_eq!(
        payload_str(&resumed, "pauseId"),
        payload_str(&paused, "pauseId")
    );
    eventually("the worker ended once the link moved", || {
        worker_ended(&session)
    });
}
