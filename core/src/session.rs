//! The session: the one object an SDK talks to.
//!
//! Guarantees (the same for every binding, because they live here):
//! - It never panics into the host and never blocks the host on I/O. Constructing a session
//!   does nothing; the first use starts one named worker thread that owns the socket.
//! - Application threads only assign a `seq` and hand the event to the worker over a
//!   bounded channel (`try_send`: a full channel drops and counts, it never waits). The
//!   worker redacts, shrinks, serializes, buffers for replay and sends.
//! - Fail-open: a debugger that goes away releases every held gate as `continue` within
//!   100 ms (the reader thread sees the socket close and releases at once); a dispose, an
//!   exit or a pause timeout releases the same way; every release emits `exec.resumed`.
//! - A disabled session does nothing at all, yet a run still gets a working context.

use crate::config::Config;
use crate::gate::{
    BreakpointMatcher, GateDecision, GateEngine, GateNode, HeldGate, PauseReason, PausePoint, PendingGate,
    ResumeAction, RunMode,
};
use crate::ids::{new_id, now_ms};
use crate::json::{self, Map, Value};
use crate::transport::{self, LinkReader, LinkWriter};
use crate::warn::{WarnSink, Warner};
use crate::{buffer, edit_input, loop_guard, redact, shrink, wire};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The version this client reports in `hello.versions.client`.
pub const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a client announces in `hello.capabilities`.
pub const CAPABILITIES: [&str; 7] = ["pause", "step", "inject", "retry", "abort", "run-claim", "edit-input"];

/// How many events may wait for the worker before new ones are dropped (and counted).
pub const OUTBOX_CAPACITY: usize = 65_536;

/// The fast reconnect delays after an established link drops, before `retry_interval`.
pub const FAST_RETRY_DELAYS: [Duration; 3] =
    [Duration::from_millis(200), Duration::from_millis(400), Duration::from_millis(800)];

/// How many queued messages the worker handles before it flushes the socket.
const MAX_BATCH: usize = 4096;

/// How long `ready()` waits by default.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_millis(2000);

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RunOutcome {
    /// It returned.
    Ok,
    /// It raised; the error's name, message and optional stack.
    Error(ErrorInfo),
    /// It was aborted (by the debugger, or by the app through its context).
    Aborted,
}

/// An error as the wire carries it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ErrorInfo {
    /// Class or kind of the error (`ValueError`, `TypeError`).
    pub name: String,
    /// Its message.
    pub message: String,
    /// Its stack trace, if any.
    pub stack: Option<String>,
}

impl ErrorInfo {
    fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("name", Value::from(self.name.as_str()));
        map.insert("message", Value::from(self.message.as_str()));
        if let Some(stack) = &self.stack {
            map.insert("stack", Value::from(stack.as_str()));
        }
        Value::Object(map)
    }
}

/// A run's abort signal, shared by the run's context and the session.
#[derive(Debug, Default)]
pub struct RunSignal {
    aborted: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl RunSignal {
    /// Whether the run was aborted.
    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }

    /// Why, when aborted.
    pub fn reason(&self) -> Option<String> {
        self.reason.lock().clone()
    }

    /// Aborts the run (idempotent; the first reason stays).
    pub fn abort(&self, reason: &str) {
        let mut slot = self.reason.lock();
        if slot.is_none() {
            *slot = Some(reason.to_string());
        }
        self.aborted.store(true, Ordering::Release);
    }
}

/// A run: its id, name and abort signal. Finish it with [`Session::finish_run`].
#[derive(Clone, Debug)]
pub struct Run {
    /// The run id (`run_…`).
    pub run_id: String,
    /// Its name.
    pub name: String,
    /// Its abort signal.
    pub signal: Arc<RunSignal>,
}

/// The identity of one node execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRef {
    /// Stable node id (`tool:search`).
    pub node_id: String,
    /// This execution's id.
    pub instance_id: String,
    /// Node kind.
    pub kind: String,
    /// Display name.
    pub name: String,
}

impl NodeRef {
    /// A new execution of the node `kind:name` (the reference's identity convention).
    pub fn new(kind: &str, name: &str) -> NodeRef {
        NodeRef {
            node_id: format!("{kind}:{name}"),
            instance_id: new_id("inst"),
            kind: kind.to_string(),
            name: name.to_string(),
        }
    }

    /// The gate identity of this node.
    pub fn gate_node(&self) -> GateNode {
        GateNode { node_id: self.node_id.clone(), kind: self.kind.clone(), name: self.name.clone() }
    }
}

/// Per-call gate options.
#[derive(Clone, Debug, Default)]
pub struct GateOptions {
    /// The step can run with an edited input here: the pause is offered as `editable`.
    pub editable: bool,
    /// The live input an edit is merged into.
    pub live_input: Option<Value>,
}

/// The outcome of [`Session::gate`].
#[derive(Debug)]
pub enum Gate {
    /// Nothing holds: go on.
    Continue,
    /// A debugger holds the step: wait for the decision.
    Held(PendingGate),
}

impl Gate {
    /// Waits for the decision (a blocking wait; bindings release their interpreter lock
    /// and use [`PendingGate::wait_timeout`] in slices instead).
    pub fn wait(self) -> GateDecision {
        match self {
            Gate::Continue => GateDecision::proceed(),
            Gate::Held(pending) => pending.wait(),
        }
    }
}

/// A diagnostics snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Whether the session records at all.
    pub enabled: bool,
    /// Whether a debugger is attached.
    pub attached: bool,
    /// Events held in the replay buffer.
    pub buffered: u64,
    /// Events evicted from the replay buffer (delivered or not).
    pub dropped: u64,
    /// Events lost before they reached a debugger (gap-marked on the next attach).
    pub lost: u64,
    /// Runs with a gap marker waiting for an attach.
    pub pending_gaps: u64,
    /// Gates held now.
    pub held_gates: u64,
    /// The next `seq`.
    pub seq: u64,
}

enum Outgoing {
    Event(OutEvent),
    Kick,
    Detached(u64),
    Flush(Sender<()>),
    Shutdown(Sender<()>),
}

struct OutEvent {
    seq: u64,
    run_id: String,
    event_type: &'static str,
    payload: Value,
    /// The paused node's kind, for `exec.resumed` / `exec.refused` redaction.
    node_kind: Option<String>,
    /// For `exec.resumed`: how long the gate was held, credited to the node's execution.
    held: Option<(String, f64)>,
}

/// State shared by application threads, the reader thread and the worker, behind one
/// lock. The lock is never held across I/O or a wait.
struct Shared {
    seq: u64,
    outbox: Sender<Outgoing>,
    engine: GateEngine,
    /// Whether the engine is armed by an attached debugger.
    engine_attached: bool,
    hub_capabilities: Option<Vec<String>>,
    session_token: Option<String>,
    loop_guard: Option<loop_guard::LoopGuard>,
    implicit_run: Option<Run>,
    runs: HashMap<String, Arc<RunSignal>>,
    /// Editable pauses: the live input an edit merges into.
    editable: HashMap<String, Option<Value>>,
    worker_started: bool,
    /// The reader's link generation, so a stale reader's detach is ignored.
    link_generation: u64,
    disposed: bool,
}

struct Inner {
    config: Config,
    warner: Warner,
    attached: AtomicBool,
    shared: Mutex<Shared>,
    attach_signal: Condvar,
    /// Counters the worker publishes for `stats()`.
    buffered: AtomicU64,
    dropped: AtomicU64,
    lost: AtomicU64,
    pending_gaps: AtomicU64,
    outbox_full: AtomicU64,
    /// The receiving end, taken by the worker when it starts.
    inbox: Mutex<Option<Receiver<Outgoing>>>,
}

/// A GraphMind session. Cheap to clone (all clones are the same session).
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("enabled", &self.is_enabled()).field("attached", &self.is_attached()).finish()
    }
}

impl Session {
    /// A session with a resolved configuration. Does no I/O and starts no thread.
    pub fn new(config: Config, sink: WarnSink) -> Session {
        let (tx, rx) = crossbeam_channel::bounded(OUTBOX_CAPACITY);
        let loop_guard = config.loop_guard.clone().map(loop_guard::LoopGuard::new);
        let warner = Warner::new(config.warn_interval, sink);
        for warning in &config.warnings {
            warner.warn(warning, warning);
        }
        let engine = GateEngine::new(config.pause_timeout);
        let inner = Inner {
            warner,
            attached: AtomicBool::new(false),
            shared: Mutex::new(Shared {
                seq: 0,
                outbox: tx,
                engine,
                engine_attached: false,
                hub_capabilities: None,
                session_token: None,
                loop_guard,
                implicit_run: None,
                runs: HashMap::new(),
                editable: HashMap::new(),
                worker_started: false,
                link_generation: 0,
                disposed: false,
            }),
            attach_signal: Condvar::new(),
            buffered: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            pending_gaps: AtomicU64::new(0),
            outbox_full: AtomicU64::new(0),
            inbox: Mutex::new(Some(rx)),
            config,
        };
        Session { inner: Arc::new(inner) }
    }

    /// The resolved configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Whether this session records (the kill switch's verdict).
    pub fn is_enabled(&self) -> bool {
        self.inner.config.enabled
    }

    /// Whether a debugger is attached now.
    pub fn is_attached(&self) -> bool {
        self.inner.attached.load(Ordering::Acquire)
    }

    fn active(&self) -> bool {
        self.inner.config.enabled && !self.inner.shared.lock().disposed
    }

    /// Connects now (if not yet attached) and waits up to `timeout` for the handshake.
    /// Returns whether a debugger is attached; never fails. Disabled or disposed: `false`
    /// at once.
    pub fn ready(&self, timeout: Duration) -> bool {
        if !self.active() {
            return false;
        }
        let deadline = Instant::now() + timeout;
        let mut shared = self.inner.shared.lock();
        self.ensure_worker(&mut shared);
        let _ = shared.outbox.try_send(Outgoing::Kick);
        while !shared.engine_attached && !shared.disposed {
            if self.inner.attach_signal.wait_until(&mut shared, deadline).timed_out() {
                break;
            }
        }
        shared.engine_attached
    }

    /// Starts a run: emits `run.started` with `meta: {name, ...meta}`.
    pub fn start_run(&self, name: &str, meta: Option<&Map>) -> Run {
        let run = Run { run_id: new_id("run"), name: name.to_string(), signal: Arc::new(RunSignal::default()) };
        if !self.active() {
            return run;
        }
        let payload = self.run_started_payload(name, meta, false);
        let mut shared = self.inner.shared.lock();
        shared.runs.insert(run.run_id.clone(), run.signal.clone());
        self.ensure_worker(&mut shared);
        self.enqueue(&mut shared, &run.run_id, "run.started", payload, None, None);
        run
    }

    fn run_started_payload(&self, name: &str, meta: Option<&Map>, implicit: bool) -> Value {
        let config = &self.inner.config;
        let mut meta_out = Map::new();
        meta_out.insert("name", Value::from(name));
        if implicit {
            meta_out.insert("implicit", Value::Bool(true));
        }
        for source in [config.meta.as_ref(), meta].into_iter().flatten() {
            for (k, v) in source.iter() {
                meta_out.insert(k.clone(), v.clone());
            }
        }
        wire::run_started_payload(&config.app, &config.sdk_name, &config.sdk_version, meta_out)
    }

    /// Finishes a run with its outcome (`run.finished`). An aborted signal wins over `Ok`
    /// and `Error`, as in the reference.
    pub fn finish_run(&self, run: &Run, outcome: RunOutcome) {
        let mut shared = self.inner.shared.lock();
        shared.runs.remove(&run.run_id);
        if !self.inner.config.enabled || shared.disposed {
            return;
        }
        let (status, error) = match (&outcome, run.signal.is_aborted()) {
            (_, true) | (RunOutcome::Aborted, _) => ("aborted", None),
            (RunOutcome::Ok, false) => ("ok", None),
            (RunOutcome::Error(e), false) => ("error", Some(e.to_value())),
        };
        let mut payload = Map::new();
        payload.insert("status", Value::from(status));
        if let Some(error) = error {
            payload.insert("error", error);
        }
        self.enqueue(&mut shared, &run.run_id, "run.finished", Value::Object(payload), None, None);
    }

    /// The implicit run that events outside any run share (started on first use).
    pub fn implicit_run(&self) -> Run {
        let mut shared = self.inner.shared.lock();
        self.implicit_run_locked(&mut shared)
    }

    fn implicit_run_locked(&self, shared: &mut Shared) -> Run {
        if let Some(run) = &shared.implicit_run {
            return run.clone();
        }
        let run = Run { run_id: new_id("run"), name: "implicit".into(), signal: Arc::new(RunSignal::default()) };
        shared.implicit_run = Some(run.clone());
        shared.runs.insert(run.run_id.clone(), run.signal.clone());
        if self.inner.config.enabled && !shared.disposed {
            let payload = self.run_started_payload("implicit", None, true);
            self.ensure_worker(shared);
            self.enqueue(shared, &run.run_id, "run.started", payload, None, None);
        }
        run
    }

    fn run_id_or_implicit(&self, shared: &mut Shared, run_id: Option<&str>) -> String {
        match run_id {
            Some(id) => id.to_string(),
            None => self.implicit_run_locked(shared).run_id,
        }
    }

    /// Emits one event of a known type (`node.started`, `node.token`, `node.finished`,
    /// `node.error`, `graph.hint`, ...) into `run_id` (or the implicit run). Events of
    /// unknown types are ignored with a warning. Returns the event's `seq`, or `None` when
    /// nothing was emitted.
    pub fn emit(&self, run_id: Option<&str>, event_type: &str, payload: Value) -> Option<u64> {
        if !self.inner.config.enabled {
            return None;
        }
        let Some(event_type) = wire::event_type(event_type) else {
            self.inner.warner.warn(
                &format!("emit-type:{event_type}"),
                &format!("ignored an event of unknown type {event_type:?}"),
            );
            return None;
        };
        let mut shared = self.inner.shared.lock();
        if shared.disposed {
            return None;
        }
        self.ensure_worker(&mut shared);
        let run_id = self.run_id_or_implicit(&mut shared, run_id);
        let started = (event_type == "node.started").then(|| loop_fields(&payload));
        let ended = matches!(event_type, "node.finished" | "node.error").then(|| loop_end_fields(event_type, &payload));
        let seq = self.enqueue(&mut shared, &run_id, event_type, payload, None, None);
        if let Some(fields) = started {
            self.note_loop_start(&mut shared, &run_id, fields, seq);
        }
        if let Some(fields) = ended {
            if let Some(guard) = shared.loop_guard.as_mut() {
                guard.note_ended(&run_id, fields, seq);
            }
        }
        seq
    }

    /// `node.started` for `node` with `input`, in `run_id` (or the implicit run).
    pub fn node_started(&self, run_id: Option<&str>, node: &NodeRef, parent_id: Option<&str>, input: Option<Value>) {
        let payload = wire::node_started_payload(&node.node_id, &node.instance_id, &node.kind, &node.name, parent_id, input);
        self.emit(run_id, "node.started", payload);
    }

    /// `node.finished` for `node`.
    pub fn node_finished(&self, run_id: Option<&str>, node: &NodeRef, output: Option<Value>, duration_ms: f64, status: &str) {
        let payload = wire::node_finished_payload(&node.node_id, &node.instance_id, output, duration_ms, status);
        self.emit(run_id, "node.finished", payload);
    }

    /// `node.error` for `node`.
    pub fn node_error(&self, run_id: Option<&str>, node: &NodeRef, error: &ErrorInfo) {
        let payload = wire::node_error_payload(&node.node_id, &node.instance_id, error.to_value());
        self.emit(run_id, "node.error", payload);
    }

    /// `node.token` with one text delta for `node`.
    pub fn node_token(&self, run_id: Option<&str>, node: &NodeRef, delta_type: &str, text: &str) {
        let payload = wire::node_token_payload(&node.node_id, &node.instance_id, delta_type, text);
        self.emit(run_id, "node.token", payload);
    }

    /// The gate at `point` of `node`: [`Gate::Continue`] at once when nothing holds (the fast
    /// path: detached, or attached with nothing matching), else a held gate to wait on.
    pub fn gate(&self, run_id: Option<&str>, point: PausePoint, node: &GateNode, options: GateOptions) -> Gate {
        if !self.inner.config.enabled || !self.inner.attached.load(Ordering::Acquire) {
            return Gate::Continue;
        }
        let mut shared = self.inner.shared.lock();
        if !shared.engine_attached || shared.disposed {
            return Gate::Continue;
        }
        let run_id = self.run_id_or_implicit(&mut shared, run_id);
        let loop_hold = if point == PausePoint::Before {
            shared.loop_guard.as_mut().and_then(|g| g.consult_before(&run_id, &node.kind, &node.node_id, &node.name))
        } else {
            None
        };
        if loop_hold.is_none() && !shared.engine.should_pause(point, node) {
            return Gate::Continue;
        }
        let reason = if loop_hold.is_some() { PauseReason::Loop } else { shared.engine.reason_for(point, node) };
        let editable = options.editable && self.edits_honoured(&shared);
        let pending = shared.engine.hold(point, node.clone(), &run_id, editable);
        if editable {
            shared.editable.insert(pending.pause_id().to_string(), options.live_input);
        }
        let mut payload = Map::new();
        payload.insert("pauseId", Value::from(pending.pause_id()));
        payload.insert("nodeId", Value::from(node.node_id.as_str()));
        payload.insert("point", Value::from(point.as_str()));
        payload.insert("reason", Value::from(reason.as_str()));
        if let Some(hold) = loop_hold {
            let hidden = self.inner.config.hide.covers_input(&node.kind);
            payload.insert("loop", hold.to_wire(hidden));
        }
        if editable {
            payload.insert("editable", Value::Bool(true));
        }
        self.enqueue(&mut shared, &run_id, "exec.paused", Value::Object(payload), Some(node.kind.clone()), None);
        Gate::Held(pending)
    }

    fn edits_honoured(&self, shared: &Shared) -> bool {
        self.inner.config.edit_input
            && shared.hub_capabilities.as_ref().is_some_and(|caps| caps.iter().any(|c| c == "edit-input"))
    }

    /// A diagnostics snapshot.
    pub fn stats(&self) -> SessionStats {
        let shared = self.inner.shared.lock();
        SessionStats {
            enabled: self.inner.config.enabled,
            attached: self.is_attached(),
            buffered: self.inner.buffered.load(Ordering::Relaxed),
            dropped: self.inner.dropped.load(Ordering::Relaxed),
            lost: self.inner.lost.load(Ordering::Relaxed) + self.inner.outbox_full.load(Ordering::Relaxed),
            pending_gaps: self.inner.pending_gaps.load(Ordering::Relaxed),
            held_gates: shared.engine.held_count() as u64,
            seq: shared.seq,
        }
    }

    /// Waits up to `timeout` until every event emitted so far has been handed to the socket
    /// (or buffered, when detached). Returns whether it finished in time.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        {
            let shared = self.inner.shared.lock();
            if !shared.worker_started {
                return true;
            }
            if shared.outbox.try_send(Outgoing::Flush(reply_tx)).is_err() {
                return false;
            }
        }
        reply_rx.recv_timeout(timeout).is_ok()
    }

    /// Releases every held gate (`continue`), finishes the implicit run, flushes and closes
    /// the link, waiting at most `deadline`. Idempotent; never hangs the app.
    pub fn dispose(&self, deadline: Duration) {
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        let gates;
        let started;
        {
            let mut shared = self.inner.shared.lock();
            if shared.disposed {
                return;
            }
            gates = shared.engine.take_all();
            shared.engine.disarm();
            for gate in &gates {
                self.announce_release(&mut shared, gate, ResumeAction::Continue, None, None);
            }
            if let Some(run) = shared.implicit_run.clone() {
                if self.inner.config.enabled {
                    let mut payload = Map::new();
                    payload.insert("status", Value::from("ok"));
                    self.enqueue(&mut shared, &run.run_id, "run.finished", Value::Object(payload), None, None);
                }
            }
            shared.disposed = true;
            shared.engine_attached = false;
            started = shared.worker_started;
            if started {
                let _ = shared.outbox.try_send(Outgoing::Shutdown(reply_tx));
            }
            self.inner.attach_signal.notify_all();
        }
        for gate in gates {
            gate.release(GateDecision::proceed());
        }
        if started {
            let _ = reply_rx.recv_timeout(deadline);
        }
        self.inner.attached.store(false, Ordering::Release);
    }

    /// Fork protocol, before `fork()`: takes the session lock so that no other thread
    /// holds it at the moment of the fork. Must be followed by [`Session::after_fork_parent`]
    /// or [`Session::after_fork_child`] in the same thread.
    pub fn before_fork(&self) {
        std::mem::forget(self.inner.shared.lock());
    }

    /// Fork protocol, in the parent after `fork()`: releases the lock taken by
    /// [`Session::before_fork`].
    pub fn after_fork_parent(&self) {
        // SAFETY: before_fork locked it on this thread and forgot the guard.
        unsafe { self.inner.shared.force_unlock() };
    }

    /// Fork protocol, in the child after `fork()`: the parent's worker and socket do not
    /// exist here. The child gets a fresh channel and, on its next event, a fresh worker
    /// that reconnects and records; it never believes itself attached.
    pub fn after_fork_child(&self) {
        // SAFETY: before_fork locked it on the forking thread, which is this thread.
        unsafe { self.inner.shared.force_unlock() };
        let (tx, rx) = crossbeam_channel::bounded(OUTBOX_CAPACITY);
        let mut shared = self.inner.shared.lock();
        shared.outbox = tx;
        shared.worker_started = false;
        shared.engine_attached = false;
        shared.engine.disarm();
        // Gates held by the parent's other threads do not exist in the child.
        drop(shared.engine.take_all());
        shared.editable.clear();
        shared.hub_capabilities = None;
        shared.session_token = None;
        shared.implicit_run = None;
        shared.link_generation += 1;
        drop(shared);
        *self.inner.inbox.lock() = Some(rx);
        self.inner.attached.store(false, Ordering::Release);
        for counter in [&self.inner.buffered, &self.inner.pending_gaps] {
            counter.store(0, Ordering::Relaxed);
        }
    }

    // -- internals ----------------------------------------------------------------------

    fn ensure_worker(&self, shared: &mut Shared) {
        if shared.worker_started || shared.disposed {
            return;
        }
        let Some(rx) = self.inner.inbox.lock().take() else { return };
        shared.worker_started = true;
        let inner = self.inner.clone();
        let spawned = std::thread::Builder::new()
            .name("graphmind-worker".into())
            .spawn(move || Worker::new(inner, rx).run());
        if let Err(e) = spawned {
            shared.worker_started = false;
            self.inner.warner.warn("worker-spawn", &format!("could not start the worker thread ({e}); staying detached"));
        }
    }

    /// Assigns the next seq and hands the event to the worker. Never blocks: a full outbox
    /// drops the event and counts it as lost.
    fn enqueue(
        &self,
        shared: &mut Shared,
        run_id: &str,
        event_type: &'static str,
        payload: Value,
        node_kind: Option<String>,
        held: Option<(String, f64)>,
    ) -> Option<u64> {
        let seq = shared.seq;
        let event = OutEvent { seq, run_id: run_id.to_string(), event_type, payload, node_kind, held };
        match shared.outbox.try_send(Outgoing::Event(event)) {
            Ok(()) => {
                shared.seq += 1;
                Some(seq)
            }
            Err(TrySendError::Full(_)) => {
                self.inner.outbox_full.fetch_add(1, Ordering::Relaxed);
                self.inner.warner.warn(
                    "outbox-full",
                    "dropped events because the GraphMind worker fell behind; the recorded run is incomplete",
                );
                None
            }
            Err(TrySendError::Disconnected(_)) => None,
        }
    }

    fn note_loop_start(&self, shared: &mut Shared, run_id: &str, fields: LoopStart, seq: Option<u64>) {
        let attached = shared.engine_attached;
        let Some(guard) = shared.loop_guard.as_mut() else { return };
        if let Some(warning) = guard.note_started(run_id, fields, seq, attached) {
            self.inner.warner.warn(&warning.key, &warning.message);
        }
    }

    /// Emits `exec.resumed` for a gate about to be released (the caller releases it after
    /// dropping the lock).
    fn announce_release(
        &self,
        shared: &mut Shared,
        gate: &HeldGate,
        action: ResumeAction,
        request_id: Option<&str>,
        edited: Option<Value>,
    ) {
        shared.editable.remove(&gate.pause_id);
        let mut payload = Map::new();
        payload.insert("pauseId", Value::from(gate.pause_id.as_str()));
        payload.insert("action", Value::from(action.as_str()));
        if let Some(after) = edited {
            let mut e = Map::new();
            e.insert("after", after);
            payload.insert("edited", Value::Object(e));
        }
        if let Some(id) = request_id {
            payload.insert("requestId", Value::from(id));
        }
        let held = Some((gate.node.node_id.clone(), gate.held_ms(Instant::now())));
        self.enqueue(shared, &gate.run_id, "exec.resumed", Value::Object(payload), Some(gate.node.kind.clone()), held);
    }

    fn emit_refused(&self, shared: &mut Shared, pause_id: &str, run_id: &str, kind: &str, code: &str, message: &str, request_id: Option<&str>) {
        let mut payload = Map::new();
        payload.insert("pauseId", Value::from(pause_id));
        payload.insert("code", Value::from(code));
        payload.insert("message", Value::from(message));
        if let Some(id) = request_id {
            payload.insert("requestId", Value::from(id));
        }
        self.enqueue(shared, run_id, "exec.refused", Value::Object(payload), Some(kind.to_string()), None);
    }

    /// An `exec.resume` from the debugger (reader thread).
    fn handle_resume(&self, payload: &Value) {
        let Some(pause_id) = payload.get("pauseId").and_then(Value::as_str) else { return };
        let Some(action) = payload.get("action").and_then(Value::as_str).and_then(ResumeAction::parse) else { return };
        let request_id = payload.get("requestId").and_then(Value::as_str);
        let output = payload.get("output");
        let input = payload.get("input");
        let mut shared = self.inner.shared.lock();
        let Some(gate) = shared.engine.peek(pause_id) else { return };
        let (run_id, kind, point) = (gate.run_id.clone(), gate.node.kind.clone(), gate.point);
        let mut decision = GateDecision { action, output: None, input: None };
        let mut edited = None;
        if let Some(proposed) = input {
            let refusal = self.edit_refusal(&shared, pause_id, action, point).or_else(|| {
                let live = shared.editable.get(pause_id).cloned().flatten();
                match edit_input::accept_edit(live.as_ref(), proposed) {
                    Ok(merged) => {
                        edited = Some(merged.clone());
                        decision.input = Some(merged);
                        None
                    }
                    Err(refusal) => Some((refusal.code.to_string(), refusal.message)),
                }
            });
            if let Some((code, message)) = refusal {
                self.emit_refused(&mut shared, pause_id, &run_id, &kind, &code, &message, request_id);
                return;
            }
        } else if action == ResumeAction::Inject {
            let value = output.cloned().unwrap_or(Value::Null);
            if let Some(refusal) = edit_input::proposed_value_refusal(&value) {
                let message = format!("refused an injected value: {}", refusal.message());
                self.emit_refused(&mut shared, pause_id, &run_id, &kind, refusal.code(), &message, request_id);
                return;
            }
            decision.output = Some(value);
        }
        let Some(gate) = shared.engine.take(pause_id) else { return };
        self.announce_release(&mut shared, &gate, action, request_id, edited);
        if action == ResumeAction::Abort {
            if let Some(signal) = shared.runs.get(&gate.run_id) {
                signal.abort("aborted from the debugger");
            }
        }
        drop(shared);
        gate.release(decision);
    }

    fn edit_refusal(&self, shared: &Shared, pause_id: &str, action: ResumeAction, point: PausePoint) -> Option<(String, String)> {
        if !self.inner.config.edit_input {
            return Some(("disabled".into(), "input edits are turned off in this app (GRAPHMIND_DISABLE_EDIT_INPUT)".into()));
        }
        if !self.edits_honoured(shared) {
            return Some(("disabled".into(), "this debugger has not enabled input edits".into()));
        }
        if !shared.editable.contains_key(pause_id) {
            return Some(("unsupported".into(), "this pause cannot run with an edited input".into()));
        }
        let fits = (action == ResumeAction::Continue && point == PausePoint::Before)
            || (action == ResumeAction::Retry && point != PausePoint::Before);
        if !fits {
            return Some((
                "shape".into(),
                "an edited input needs continue at a before gate, or retry at an after or error gate".into(),
            ));
        }
        None
    }

    /// A control frame from the debugger (reader thread).
    fn handle_control(&self, text: &str) {
        let envelope = match wire::parse_envelope(text.as_bytes()) {
            wire::ParseOutcome::Ok(envelope) => envelope,
            wire::ParseOutcome::Invalid(reason) => {
                self.inner.warner.warn("transport-invalid", &format!("ignoring invalid frame: {reason}"));
                return;
            }
            _ => return, // unknown types and stray versions: tolerated
        };
        match envelope.event_type.as_str() {
            "exec.resume" => self.handle_resume(&envelope.payload),
            "breakpoint.set" => {
                if let Some(m) = envelope.payload.get("matcher").and_then(BreakpointMatcher::from_value) {
                    self.inner.shared.lock().engine.add_breakpoint(m);
                }
            }
            "breakpoint.clear" => {
                if let Some(m) = envelope.payload.get("matcher").and_then(BreakpointMatcher::from_value) {
                    self.inner.shared.lock().engine.remove_breakpoint(&m);
                }
            }
            "mode.set" => {
                if let Some(mode) = envelope.payload.get("mode").and_then(Value::as_str).and_then(RunMode::parse) {
                    self.inner.shared.lock().engine.set_mode(mode);
                }
            }
            _ => {}
        }
    }

    /// The link with generation `generation` is gone (reader thread): fail open.
    fn handle_detached(&self, generation: u64) {
        let gates;
        {
            let mut shared = self.inner.shared.lock();
            if shared.link_generation != generation || !shared.engine_attached {
                return;
            }
            shared.engine_attached = false;
            self.inner.attached.store(false, Ordering::Release);
            shared.hub_capabilities = None;
            shared.engine.disarm();
            gates = shared.engine.take_all();
            for gate in &gates {
                self.announce_release(&mut shared, gate, ResumeAction::Continue, None, None);
            }
            let _ = shared.outbox.try_send(Outgoing::Detached(generation));
        }
        for gate in gates {
            gate.release(GateDecision::proceed());
        }
    }

    /// Releases the gates whose pause timeout passed (worker thread).
    fn release_expired(&self) {
        let gates;
        {
            let mut shared = self.inner.shared.lock();
            gates = shared.engine.take_expired(Instant::now());
            for gate in &gates {
                self.announce_release(&mut shared, gate, ResumeAction::Continue, None, None);
            }
        }
        for gate in gates {
            gate.release(GateDecision::proceed());
        }
    }

    fn next_pause_deadline(&self) -> Option<Instant> {
        self.inner.shared.lock().engine.next_deadline()
    }
}

/// What the loop guard reads from a `node.started` payload.
fn loop_fields(payload: &Value) -> LoopStart {
    LoopStart {
        kind: payload.get("kind").and_then(Value::as_str).map(str::to_string),
        node_id: payload.get("nodeId").and_then(Value::as_str).map(str::to_string),
        name: payload.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
        instance_id: payload.get("instanceId").and_then(Value::as_str).map(str::to_string),
        input: payload.get("input").cloned(),
    }
}

fn loop_end_fields(event_type: &str, payload: &Value) -> loop_guard::NodeEnd {
    loop_guard::NodeEnd::from_payload(event_type, payload)
}

use loop_guard::NodeStart as LoopStart;

/// Bookkeeping of held time per node execution, so `node.finished` / `node.error` carry
/// `heldMs` (held time is not run time).
#[derive(Default)]
struct HeldLedger {
    /// Open executions per (run, node id), most recent last, with the held ms so far.
    open: HashMap<(String, String), Vec<(String, f64)>>,
}

impl HeldLedger {
    fn started(&mut self, run_id: &str, node_id: &str, instance_id: &str) {
        self.open.entry((run_id.to_string(), node_id.to_string())).or_default().push((instance_id.to_string(), 0.0));
    }

    fn credit(&mut self, run_id: &str, node_id: &str, held_ms: f64) {
        if let Some(stack) = self.open.get_mut(&(run_id.to_string(), node_id.to_string())) {
            if let Some(last) = stack.last_mut() {
                last.1 += held_ms;
            }
        }
    }

    fn ended(&mut self, run_id: &str, node_id: &str, instance_id: Option<&str>) -> Option<f64> {
        let key = (run_id.to_string(), node_id.to_string());
        let stack = self.open.get_mut(&key)?;
        let index = match instance_id {
            Some(id) => stack.iter().rposition(|(i, _)| i == id)?,
            None => stack.len().checked_sub(1)?,
        };
        let (_, held) = stack.remove(index);
        if stack.is_empty() {
            self.open.remove(&key);
        }
        (held > 0.0).then_some((held * 100.0).round() / 100.0)
    }
}

/// The worker thread: owns the socket's writing half, the replay buffer, the redactor and
/// the shrinker.
struct Worker {
    session: Session,
    rx: Receiver<Outgoing>,
    redactor: redact::Redactor,
    shrink_warnings: shrink::ShrinkWarnings,
    buffer: buffer::ReplayBuffer,
    ledger: HeldLedger,
    link: Option<LinkWriter>,
    next_attempt: Option<Instant>,
    fast_retry: usize,
}

impl Worker {
    fn new(inner: Arc<Inner>, rx: Receiver<Outgoing>) -> Worker {
        let config = &inner.config;
        let redactor = redact::Redactor::new(config.hide);
        let buffer = buffer::ReplayBuffer::new(config.buffer_size, config.max_buffer_bytes);
        Worker {
            session: Session { inner },
            rx,
            redactor,
            shrink_warnings: shrink::ShrinkWarnings::default(),
            buffer,
            ledger: HeldLedger::default(),
            link: None,
            next_attempt: Some(Instant::now()),
            fast_retry: FAST_RETRY_DELAYS.len(),
        }
    }

    fn inner(&self) -> &Inner {
        &self.session.inner
    }

    fn run(mut self) {
        loop {
            let now = Instant::now();
            let mut wake = self.next_attempt.filter(|_| self.link.is_none());
            if self.link.is_some() {
                if let Some(deadline) = self.session.next_pause_deadline() {
                    wake = Some(wake.map_or(deadline, |w| w.min(deadline)));
                }
            }
            let first = match wake {
                Some(at) if at <= now => Err(RecvTimeoutError::Timeout),
                Some(at) => self.rx.recv_timeout(at - now),
                None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            let mut stop = match first {
                Ok(message) => self.handle(message),
                Err(RecvTimeoutError::Timeout) => false,
                Err(RecvTimeoutError::Disconnected) => true,
            };
            // Batch whatever else is already queued, then flush the socket once.
            for _ in 0..MAX_BATCH {
                if stop {
                    break;
                }
                match self.rx.try_recv() {
                    Ok(message) => stop = self.handle(message),
                    Err(_) => break,
                }
            }
            self.flush_link();
            self.publish_stats();
            if stop {
                return;
            }
            if self.link.is_some() {
                self.session.release_expired();
            } else if self.next_attempt.is_some_and(|at| at <= Instant::now()) {
                self.attempt();
                self.publish_stats();
            }
        }
    }

    /// Handles one message; returns true when the worker must stop.
    fn handle(&mut self, message: Outgoing) -> bool {
        match message {
            Outgoing::Event(event) => self.process(event),
            Outgoing::Kick => {
                if self.link.is_none() {
                    self.next_attempt = Some(Instant::now());
                }
            }
            Outgoing::Detached(generation) => {
                if self.session.inner.shared.lock().link_generation == generation {
                    if let Some(link) = self.link.take() {
                        link.abort();
                    }
                    self.schedule_retry(true);
                }
            }
            Outgoing::Flush(reply) => {
                self.flush_link();
                let _ = reply.send(());
            }
            Outgoing::Shutdown(reply) => {
                while let Ok(message) = self.rx.try_recv() {
                    if let Outgoing::Event(event) = message {
                        self.process(event);
                    }
                }
                self.flush_link();
                if let Some(link) = self.link.take() {
                    link.close("session disposed");
                }
                self.publish_stats();
                let _ = reply.send(());
                return true;
            }
        }
        false
    }

    /// Redacts, stamps held time, shrinks, serializes, buffers and (when attached) sends one
    /// event.
    fn process(&mut self, mut event: OutEvent) {
        if !self.redactor.redact(event.event_type, &mut event.payload, &event.run_id, event.node_kind.as_deref()) {
            return;
        }
        self.stamp_held_time(&mut event);
        let serialized = shrink::serialize_payload(&event.payload, shrink::MAX_PAYLOAD_BYTES, Some(event.event_type));
        if serialized.truncated {
            if let Some(message) = self.shrink_warnings.warning(event.event_type, serialized.original_bytes) {
                self.inner().warner.warn(&format!("payload-budget:{}", event.event_type), &message);
            }
        }
        let frame = wire::encode_envelope(event.seq, now_ms(), &event.run_id, event.event_type, &serialized.json);
        let sent = match self.link.as_mut() {
            Some(link) => match link.queue(frame.clone()) {
                Ok(()) => true,
                Err(_) => {
                    self.link_failed();
                    false
                }
            },
            None => false,
        };
        if let Some(warning) = self.buffer.push(&event.run_id, event.seq, frame, sent) {
            self.inner().warner.warn("buffer-overflow", &warning);
        }
    }

    fn stamp_held_time(&mut self, event: &mut OutEvent) {
        let payload = &mut event.payload;
        match event.event_type {
            "node.started" => {
                if let (Some(node), Some(instance)) =
                    (payload.get("nodeId").and_then(Value::as_str), payload.get("instanceId").and_then(Value::as_str))
                {
                    self.ledger.started(&event.run_id, node, instance);
                }
            }
            "exec.resumed" => {
                if let Some((node_id, held_ms)) = &event.held {
                    self.ledger.credit(&event.run_id, node_id, *held_ms);
                }
            }
            "node.finished" | "node.error" => {
                let Some(node) = payload.get("nodeId").and_then(Value::as_str).map(str::to_string) else { return };
                let instance = payload.get("instanceId").and_then(Value::as_str).map(str::to_string);
                let held = self.ledger.ended(&event.run_id, &node, instance.as_deref());
                if let (Some(held), Some(map)) = (held, payload.as_object_mut()) {
                    if !map.contains_key("heldMs") {
                        map.insert("heldMs", Value::from(held));
                    }
                }
            }
            _ => {}
        }
    }

    fn flush_link(&mut self) {
        if let Some(link) = self.link.as_mut() {
            if link.flush().is_err() {
                self.link_failed();
            }
        }
    }

    fn link_failed(&mut self) {
        let generation = self.session.inner.shared.lock().link_generation;
        if let Some(link) = self.link.take() {
            link.abort();
        }
        self.session.handle_detached(generation);
        self.schedule_retry(true);
    }

    fn schedule_retry(&mut self, was_attached: bool) {
        let interval = self.inner().config.retry_interval;
        if was_attached {
            self.fast_retry = 0;
        }
        let delay = if self.fast_retry < FAST_RETRY_DELAYS.len() {
            let d = FAST_RETRY_DELAYS[self.fast_retry].min(interval);
            self.fast_retry += 1;
            d
        } else {
            interval
        };
        self.next_attempt = Some(Instant::now() + delay);
    }

    fn hello(&self) -> String {
        let shared = self.session.inner.shared.lock();
        let config = &self.inner().config;
        let capabilities: Vec<&str> =
            CAPABILITIES.iter().copied().filter(|c| config.edit_input || *c != "edit-input").collect();
        let payload = wire::hello_payload(
            CLIENT_VERSION,
            &capabilities,
            &config.app,
            &config.sdk_name,
            &config.sdk_version,
            shared.session_token.as_deref(),
        );
        wire::encode_envelope(0, now_ms(), wire::WILDCARD_RUN_ID, "hello", &json::to_string(&payload))
    }

    fn attempt(&mut self) {
        let config = &self.inner().config;
        let hello = self.hello();
        let result = transport::connect(
            &config.url,
            config.connect_timeout,
            config.handshake_timeout,
            &hello,
            wire::PROTOCOL_VERSION,
        );
        match result {
            Ok(link) => self.attached(link),
            Err(error) => {
                let key = match &error {
                    transport::TransportError::VersionMismatch { .. } => "transport-version",
                    _ => "transport-connect",
                };
                self.inner().warner.warn(key, &format!("not attached to the debugger at {} ({error}); staying detached, retrying in the background", config.url));
                self.schedule_retry(false);
            }
        }
    }

    fn attached(&mut self, link: transport::Link) {
        let transport::Link { reader, mut writer, ack } = link;
        let breakpoints: Vec<BreakpointMatcher> = ack
            .get("breakpoints")
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(BreakpointMatcher::from_value).collect())
            .unwrap_or_default();
        let mode = ack.get("mode").and_then(Value::as_str).and_then(RunMode::parse).unwrap_or_default();
        let hub = ack.get("hubCapabilities").and_then(Value::as_array).map(|items| {
            items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect::<Vec<_>>()
        });
        let generation;
        let markers;
        {
            let mut shared = self.session.inner.shared.lock();
            if shared.disposed {
                writer.close("session disposed");
                return;
            }
            if let Some(token) = ack.get("sessionToken").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                shared.session_token = Some(token.to_string());
            }
            shared.hub_capabilities = hub;
            shared.engine.arm(breakpoints, mode);
            shared.engine_attached = true;
            shared.link_generation += 1;
            generation = shared.link_generation;
            // Gap markers take fresh seqs, before the replay (what they describe is older).
            let gaps = self.buffer.take_gaps();
            markers = gaps
                .into_iter()
                .map(|gap| {
                    let seq = shared.seq;
                    shared.seq += 1;
                    let payload = json::to_string(&gap.to_hint_payload());
                    (gap, wire::encode_envelope(seq, now_ms(), &gap.run_id, "graph.hint", &payload))
                })
                .collect::<Vec<_>>();
            self.session.inner.attached.store(true, Ordering::Release);
            self.session.inner.attach_signal.notify_all();
        }
        let mut ok = true;
        for (_, frame) in &markers {
            ok = ok && writer.queue(frame.clone()).is_ok();
        }
        if ok {
            for frame in self.buffer.replay_frames() {
                if writer.queue(frame).is_err() {
                    ok = false;
                    break;
                }
            }
        }
        ok = ok && writer.flush().is_ok();
        if !ok {
            for (gap, _) in markers {
                self.buffer.restore_gap(gap);
            }
            writer.abort();
            self.session.handle_detached(generation);
            self.schedule_retry(true);
            return;
        }
        self.buffer.mark_all_sent();
        self.link = Some(writer);
        self.fast_retry = FAST_RETRY_DELAYS.len();
        self.next_attempt = None;
        let session = self.session.clone();
        let spawned = std::thread::Builder::new()
            .name("graphmind-reader".into())
            .spawn(move || read_loop(session, reader, generation));
        if spawned.is_err() {
            self.link_failed();
        }
    }

    fn publish_stats(&self) {
        let stats = self.buffer.stats();
        let inner = self.inner();
        inner.buffered.store(stats.buffered as u64, Ordering::Relaxed);
        inner.dropped.store(stats.dropped, Ordering::Relaxed);
        inner.lost.store(stats.lost, Ordering::Relaxed);
        inner.pending_gaps.store(stats.pending_gaps as u64, Ordering::Relaxed);
    }
}

/// The reader thread: control frames in, until the link closes; then fail open at once.
fn read_loop(session: Session, mut reader: LinkReader, generation: u64) {
    loop {
        match reader.next_text() {
            Ok(text) => session.handle_control(&text),
            Err(_) => {
                session.handle_detached(generation);
                return;
            }
        }
    }
}
