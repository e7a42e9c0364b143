//! The session: the one object an SDK talks to.
//!
//! Guarantees (the same for every binding, because they live here):
//! - It never panics into the host and never blocks the host on I/O. Constructing a session
//!   does nothing; the first use starts one named worker thread that owns the socket.
//! - Application threads only assign a `seq` and hand the event to the worker over a
//!   bounded channel. While a debugger is attached a full channel makes the thread wait for
//!   room, at most [`BACKPRESSURE_DEADLINE`] per congestion, and only then drops; detached it
//!   drops at once (the ring keeps only the newest anyway). A dropped event keeps its `seq`
//!   and is counted per run ([`buffer::HandoffLoss`]), so the gap marker names it. The ends
//!   of runs and nodes have slots of their own ([`END_RESERVE`]). The worker redacts,
//!   shrinks, serializes, buffers for replay and sends.
//! - `flush`, `dispose` (and so every SDK's exit) deliver what the ring holds: a connection
//!   never tried is tried then, bounded by the connect and handshake timeouts
//!   ([`Session::exit_deadline`]).
//! - Fail-open: a debugger that goes away releases every held gate as `continue` at once
//!   (the reader thread sees the socket close); a dispose or a pause timeout releases the
//!   same way; every release emits `exec.resumed`.
//! - A disabled session does nothing at all, yet a run still gets a working context.

mod payload;
mod spooler;

use crate::config::Config;
use crate::event::{
    ErrorInfo, ExecPaused, ExecRefused, ExecResumed, GraphHint, GraphNodeHint, Hello, Message,
    MessageType, NodeError, NodeFinished, NodeKind, NodeStarted, NodeToken, RunFinished,
    RunStarted, RunStatus, SdkInfo, SmartInfo, TokenChannel, TokenDelta, KNOWN_CAPABILITIES,
    PROTOCOL_VERSION, WILDCARD_RUN_ID,
};
use crate::gate::{
    BreakpointMatcher, GateDecision, GateEngine, GateNode, HeldGate, PausePoint, PauseReason,
    PendingGate, ResumeAction, RunMode,
};
use crate::host_value::{HostValue, INVALID_TEXT_WARNING};
use crate::json::{JsStr, Map, Value};
use crate::loop_guard::{
    FinishKey, LoopGuard, LoopHide, LoopKeyer, LoopMode, LoopValue, LoopVerdict, LoopWarning,
    NodeStart, OutputTicket, StartFingerprint,
};
use crate::sync::{Condvar, ForkHold, Mutex, MutexGuard};
use crate::transport::{self, LinkReader, LinkWriter};
use crate::warn::{WarnSink, Warner};
use crate::{buffer, config, edit_input, event, redact, shrink, smart, wire};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use payload::Payload;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::CLIENT_VERSION;

/// How many events may wait for the worker before new ones are dropped (and counted).
pub const OUTBOX_CAPACITY: usize = 65_536;

/// How many queued messages the worker handles before it flushes the socket.
const MAX_BATCH: usize = 4096;

/// After a busy pass, the worker sleeps this long before it looks at the queue again, so a
/// burst of events is handed over in batches: an application thread then enqueues without
/// waking anybody (no syscall per event). Gate traffic, flushes and a filling queue wake it
/// at once.
pub const WORKER_LINGER: Duration = Duration::from_millis(1);

/// How long the first loop-guard update after an attach waits for the worker to apply the
/// ones it deferred while detached.
const LOOP_BACKLOG_WAIT: Duration = Duration::from_millis(100);

/// The fewest events queued for the worker before a detached session drops new ones (see
/// [`Session::send_event`]); a larger `bufferSize` raises it.
const MIN_DETACHED_QUEUE: usize = 1024;

/// While a debugger is attached and the hand-off to the worker is full, an application
/// thread waits this long for room before events are dropped (and counted). Long enough
/// for a worker that merely fell behind to catch up; short enough that an app whose
/// debugger stalled (a stopped server) never looks hung: it is delayed at most this much,
/// once, and then sheds events without waiting until the hand-off has drained.
pub const BACKPRESSURE_DEADLINE: Duration = Duration::from_millis(250);

/// How often a thread waiting for room in the hand-off looks again.
const ROOM_POLL: Duration = Duration::from_micros(200);

/// Hand-off slots only the ends of runs and nodes (`run.finished`, `node.finished`,
/// `node.error`) and gate events may use, so shedding regular events never loses how a
/// run or a started node ended.
pub const END_RESERVE: usize = 4096;

/// After a wait for room timed out, regular events are dropped without waiting until the
/// hand-off holds no more than this.
const SHED_UNTIL: usize = OUTBOX_CAPACITY / 4;

/// How long `stats()` waits for the worker to reach the events emitted so far.
pub const STATS_SYNC_WAIT: Duration = Duration::from_millis(500);

/// On top of the connect and handshake timeouts: the time `dispose()` and the exit hooks
/// allow for sending what the ring holds ([`Session::exit_deadline`]).
pub const EXIT_DELIVERY_MARGIN: Duration = Duration::from_millis(700);

/// A queue this full wakes a lingering worker at once.
const WAKE_BACKLOG: usize = OUTBOX_CAPACITY / 8;

/// The fast reconnect delays after an established link drops, before `retry_interval`.
pub const FAST_RETRY_DELAYS: [Duration; 3] = [
    Duration::from_millis(config::FAST_RETRY_STEPS[0]),
    Duration::from_millis(config::FAST_RETRY_STEPS[1]),
    Duration::from_millis(config::FAST_RETRY_STEPS[2]),
];

/// Why [`Session::emit`] refuses an event.
#[derive(Debug, thiserror::Error)]
pub enum EmitRefused {
    /// The type is not one an app sends.
    #[error("ignored emit() of {0:?}: not an event an app sends")]
    NotAnAppEvent(String),
    /// The payload does not match the type's wire schema (the server would drop the frame).
    #[error("ignored emit() of {event_type:?}: {invalid}")]
    InvalidPayload {
        /// The event type.
        event_type: String,
        /// What the schema says is wrong.
        invalid: crate::wire::Invalid,
    },
}

/// What [`Session::emit`] accepts: an event type an app sends, with a payload its wire schema
/// allows. A binding that reports refusals as errors (the C ABI) asks this first.
pub fn check_emit(event_type: &str, payload: &Value) -> Result<MessageType, EmitRefused> {
    let kind = match MessageType::parse(event_type) {
        Some(t) if t.direction() == event::Direction::Event && !is_gate_event(t) => t,
        _ => return Err(EmitRefused::NotAnAppEvent(event_type.to_string())),
    };
    crate::wire::check_payload(kind, payload).map_err(|invalid| EmitRefused::InvalidPayload {
        event_type: event_type.to_string(),
        invalid,
    })?;
    Ok(kind)
}

/// How long `ready()` waits by default.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_millis(config::DEFAULT_READY_TIMEOUT_MS);

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RunOutcome {
    /// It returned.
    Ok,
    /// It raised.
    Error(ErrorInfo),
    /// It was aborted (by the debugger, or by the app through its context).
    Aborted,
}

/// A run's abort signal, shared by the run's context and the session.
#[derive(Debug, Default)]
pub struct RunSignal {
    aborted: AtomicBool,
    /// The first abort's reason, set without a lock: the signal outlives its run in the
    /// app's hands, out of the fork protocol's reach, and a child forked while another
    /// thread held a lock here would have waited for it forever.
    reason: once_cell::race::OnceBox<String>,
    finished: AtomicBool,
}

impl RunSignal {
    /// Whether the run was aborted.
    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }

    /// Why, when aborted.
    pub fn reason(&self) -> Option<String> {
        self.reason.get().cloned()
    }

    /// Whether [`Session::finish_run`] finished the run.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Marks the run finished; `true` only for the first call.
    fn mark_finished(&self) -> bool {
        !self.finished.swap(true, Ordering::AcqRel)
    }

    /// Aborts the run (idempotent; the first reason stays).
    pub fn abort(&self, reason: &str) {
        let _ = self.reason.set(Box::new(reason.to_string()));
        self.aborted.store(true, Ordering::Release);
    }
}

/// The reason a run aborted from the debugger carries.
pub const ABORTED_FROM_DEBUGGER: &str = "aborted from the GraphMind debugger";

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

impl Run {
    fn new(name: &str) -> Run {
        Run {
            run_id: event::new_id("run"),
            name: name.to_string(),
            signal: Arc::new(RunSignal::default()),
        }
    }
}

/// The identity of one node execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRef {
    /// Stable node id (`tool:search`).
    pub node_id: String,
    /// This execution's id.
    pub instance_id: String,
    /// Node kind.
    pub kind: NodeKind,
    /// Display name.
    pub name: String,
}

impl NodeRef {
    /// A new execution of the node `kind:name` (the reference's identity convention).
    pub fn new(kind: NodeKind, name: &str) -> NodeRef {
        NodeRef {
            node_id: event::node_id(kind, name),
            instance_id: event::new_id("inst"),
            kind,
            name: name.to_string(),
        }
    }

    /// A new execution of a node with an explicit id.
    pub fn with_id(kind: NodeKind, name: &str, node_id: &str) -> NodeRef {
        NodeRef {
            node_id: node_id.to_string(),
            instance_id: event::new_id("inst"),
            kind,
            name: name.to_string(),
        }
    }

    /// The gate identity of this node.
    pub fn gate_node(&self) -> GateNode {
        GateNode {
            node_id: self.node_id.clone(),
            kind: self.kind.as_str().to_string(),
            name: self.name.clone(),
        }
    }
}

/// Per-call gate options.
#[derive(Clone, Debug, Default)]
pub struct GateOptions {
    /// The step can run with an edited input here: the pause is offered as `editable`.
    pub editable: bool,
    /// The live input an edit is merged into.
    pub live_input: Option<Value>,
    /// The tool's input schema an edit must match after the merge (else `schema`, held).
    pub input_schema: Option<crate::edit_schema::InputSchema>,
    /// The call's result, for the smart breakpoints ([`crate::smart`]): at `after` a
    /// tool's output or an LLM step's normalised output, at `error` a tool's result when
    /// the adapter has one. `None` (or detached) consults no rule.
    pub result: Option<Value>,
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
    /// Waits for the decision (bindings release their interpreter lock and use
    /// [`PendingGate::wait_timeout`] in slices instead).
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
    /// Events kept in the on-disk spool for the next attach (`spoolDir`).
    pub spooled: u64,
    /// Gates held now.
    pub held_gates: u64,
    /// The next `seq`.
    pub seq: u64,
}

enum Outgoing {
    Event(OutEvent),
    /// A dropped node event whose loop-guard update the worker still makes, in order
    /// (its `input` / `output` already stripped).
    LoopOnly(OutEvent),
    Kick,
    Detached(u64),
    Flush(Sender<()>),
    /// Publish the counters once everything queued before it is handled (`stats()`).
    Sync(Sender<()>),
    Shutdown(Sender<()>),
}

struct OutEvent {
    seq: u64,
    run_id: String,
    event_type: MessageType,
    payload: Payload,
    /// The paused node's kind, for `exec.resumed` / `exec.refused` redaction.
    node_kind: Option<NodeKind>,
    /// For `exec.resumed`: how long the gate was held, credited to the node's execution.
    held: Option<(String, f64)>,
    /// The worker feeds this event to the loop guard (no debugger was attached).
    loop_deferred: bool,
    /// The worker keys this finish's output for the loop guard, which has its call.
    loop_output: Option<OutputTicket>,
    /// A payload member still in JSON text, parsed by the worker before anything else.
    deferred_member: Option<DeferredMember>,
}

/// What became of an event handed to the worker.
enum Handed {
    /// Queued with this seq.
    Sent(u64),
    /// Dropped (the worker is behind), given back when it still exists.
    Dropped(Option<Box<OutEvent>>),
}

/// A member of an event's payload (a node's `input` or `output`) handed over as JSON text
/// or packed while no debugger was attached: the worker reads it into the placeholder at
/// `key`.
struct DeferredMember {
    key: &'static str,
    value: HostValue,
}

/// A deferred member sent verbatim ([`Worker::take_verbatim`]).
struct DeferredText {
    key: &'static str,
    text: Vec<u8>,
}

/// Splits an optional host value into what goes into the payload now (the value, or a
/// `null` placeholder keeping the member's place) and the text left for later.
fn split_host_value(
    value: Option<HostValue>,
    key: &'static str,
) -> (Option<Value>, Option<DeferredMember>) {
    match value {
        None => (None, None),
        Some(HostValue::Built(value)) => (Some(value), None),
        Some(value) => (Some(Value::Null), Some(DeferredMember { key, value })),
    }
}

/// Deltas of one node execution collected for at most `tokenIntervalMs`, then sent as one
/// `node.token` (the reference's token batching: a streamed answer is a few frames a
/// second, not one per token).
struct TokenBatch {
    run_id: String,
    node_id: String,
    instance_id: String,
    deltas: Vec<TokenDelta>,
    opened: Instant,
}

/// State shared by application threads, the reader thread and the worker, behind one
/// lock that is never held across I/O or a wait.
struct Shared {
    seq: u64,
    /// Streamed deltas of one node execution waiting to go out as one `node.token`.
    pending_tokens: Option<TokenBatch>,
    outbox: Sender<Outgoing>,
    engine: GateEngine,
    /// Whether the engine is armed by an attached debugger.
    engine_attached: bool,
    hub_capabilities: Option<Vec<String>>,
    session_token: Option<String>,
    implicit_run: Option<Run>,
    runs: HashMap<String, Arc<RunSignal>>,
    /// Editable pauses: the live input an edit merges into.
    editable: HashMap<String, Option<Value>>,
    /// The input schema of an editable pause whose tool declared one.
    edit_schemas: HashMap<String, crate::edit_schema::InputSchema>,
    worker_started: bool,
    /// A forked child's outbox is the parent's: the next worker start opens a fresh one.
    outbox_reopen: bool,
    /// The worker thread, unparked when something must go out now (see [`WORKER_LINGER`]).
    worker: Option<std::thread::Thread>,
    /// The current link's generation, so a stale reader's detach is ignored.
    link_generation: u64,
    disposed: bool,
    /// A wait for room timed out: regular events are dropped without waiting until the
    /// hand-off is back under [`SHED_UNTIL`].
    shedding: bool,
    /// Events dropped at the hand-off, not yet taken over by the worker.
    handoff_loss: buffer::HandoffLoss,
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
    spooled: AtomicU64,
    /// Set when `Shared::handoff_loss` has something for the worker to take over.
    handoff_lost: AtomicBool,
    /// The receiving end, taken by the worker when it starts.
    inbox: Mutex<Option<Receiver<Outgoing>>>,
    /// The loop guard. Lock order: `shared` before `loop_guard`; the worker takes only this.
    loop_guard: Mutex<LoopGuard>,
    /// Keys calls for the loop guard without its lock (see [`Session::emit_with`]).
    loop_keyer: LoopKeyer,
    /// Whether the loop guard watches anything at all (mode not off, threshold > 0).
    loop_watch: bool,
    /// Whether it may hold a call (mode pause): only then, and only while a debugger is
    /// attached, does it run on the application thread.
    loop_holds: bool,
    /// Successful outputs the loop guard waits for the worker to key (see
    /// [`Session::emit_with`]).
    loop_outputs_pending: AtomicU64,
    /// Loop-guard updates handed to the worker and not yet applied (see
    /// [`Session::emit_typed`]).
    loop_backlog: AtomicU64,
    /// What the model calls taught (see [`crate::llm_step`]). A leaf lock.
    llm_memory: Mutex<crate::llm_step::LlmMemory>,
    /// The replay, when one runs (see [`crate::replay`]); taken before the warner's lock.
    replay: Mutex<Option<crate::replay::Replayer>>,
}

/// A GraphMind session. Cheap to clone (all clones are the same session).
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("enabled", &self.is_enabled())
            .field("attached", &self.is_attached())
            .finish()
    }
}

/// A weak handle to a [`Session`]: see [`Session::downgrade`].
#[derive(Clone)]
pub struct WeakSession {
    inner: std::sync::Weak<Inner>,
}

impl WeakSession {
    /// The session, while any strong handle to it exists.
    pub fn upgrade(&self) -> Option<Session> {
        self.inner.upgrade().map(|inner| Session { inner })
    }

    /// Whether the session still exists.
    pub fn is_alive(&self) -> bool {
        self.inner.strong_count() > 0
    }

    /// Whether this is a handle to `session`.
    pub fn is(&self, session: &Session) -> bool {
        std::ptr::eq(self.inner.as_ptr(), Arc::as_ptr(&session.inner))
    }
}

/// The root node of `run`: `agent:<name>`, instance id the run id.
fn agent_node(run: &Run) -> NodeRef {
    NodeRef {
        instance_id: run.run_id.clone(),
        ..NodeRef::new(NodeKind::Agent, &run.name)
    }
}

fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Session {
    /// A session with a resolved configuration; warnings go to `sink`. Does no I/O and
    /// starts no thread.
    pub fn new(config: Config, sink: WarnSink) -> Session {
        let (tx, rx) = crossbeam_channel::bounded(OUTBOX_CAPACITY);
        let warner = Warner::new(millis(config.warn_interval_ms), sink);
        for warning in &config.warnings {
            warner.warn(warning, warning);
        }
        let engine = GateEngine::new(config.pause_timeout_ms.map(millis));
        let loop_guard = LoopGuard::new(config.loop_guard.clone());
        let loop_watch = loop_guard.enabled();
        let loop_keyer = loop_guard.keyer().clone();
        let loop_holds = loop_watch && loop_guard.config().mode == LoopMode::Pause;
        let inner = Inner {
            warner,
            attached: AtomicBool::new(false),
            shared: Mutex::new(Shared {
                seq: 0,
                pending_tokens: None,
                outbox: tx,
                engine,
                engine_attached: false,
                hub_capabilities: None,
                session_token: None,
                implicit_run: None,
                runs: HashMap::new(),
                editable: HashMap::new(),
                edit_schemas: HashMap::new(),
                worker_started: false,
                outbox_reopen: false,
                worker: None,
                link_generation: 0,
                disposed: false,
                shedding: false,
                handoff_loss: buffer::HandoffLoss::default(),
            }),
            attach_signal: Condvar::new(),
            buffered: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            pending_gaps: AtomicU64::new(0),
            spooled: AtomicU64::new(0),
            handoff_lost: AtomicBool::new(false),
            inbox: Mutex::new(Some(rx)),
            loop_guard: Mutex::new(loop_guard),
            loop_keyer,
            loop_watch,
            loop_holds,
            loop_outputs_pending: AtomicU64::new(0),
            loop_backlog: AtomicU64::new(0),
            llm_memory: Mutex::default(),
            replay: Mutex::new(None),
            config,
        };
        Session {
            inner: Arc::new(inner),
        }
    }

    /// The resolved configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Whether `other` is a handle to this same session (all clones are the same session).
    pub fn same_as(&self, other: &Session) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A handle that does not keep the session alive (the process's fork registry).
    pub fn downgrade(&self) -> WeakSession {
        WeakSession {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Whether this session records (the kill switch's verdict).
    pub fn is_enabled(&self) -> bool {
        self.inner.config.enabled
    }

    /// Whether a debugger is attached now.
    pub fn is_attached(&self) -> bool {
        self.inner.attached.load(Ordering::Acquire)
    }

    /// Writes one rate-limited warning to the session's log sink.
    pub fn warn(&self, key: &str, message: &str) {
        self.inner.warner.warn(key, message);
    }

    /// Whether [`Session::dispose`] ran: the session records nothing more.
    pub fn is_disposed(&self) -> bool {
        self.inner.shared.lock().disposed
    }

    fn active(&self) -> bool {
        self.inner.config.enabled && !self.inner.shared.lock().disposed
    }

    /// Connects now (if not attached) and waits up to `timeout` for the handshake. Returns
    /// whether a debugger is attached; never fails. Disabled or disposed: `false` at once.
    pub fn ready(&self, timeout: Duration) -> bool {
        if !self.active() {
            return false;
        }
        let deadline = Instant::now() + timeout;
        let mut shared = self.inner.shared.lock();
        self.ensure_worker(&mut shared);
        Self::send_control(&shared, Outgoing::Kick);
        while !shared.engine_attached && !shared.disposed {
            let (next, timed_out) = self.inner.attach_signal.wait_until(shared, deadline);
            shared = next;
            if timed_out {
                break;
            }
        }
        shared.engine_attached
    }

    /// Starts a run: emits `run.started` with `meta: {name, ...session meta, ...meta}`.
    pub fn start_run(&self, name: &str, meta: Option<&Map>) -> Run {
        let run = Run::new(name);
        if !self.active() {
            return run;
        }
        // A replay binds to the run it answers and links it to the recorded one.
        let linked = crate::replay::on_run_start(self, &run.run_id, name).map(|mut extra| {
            for (k, v) in meta.into_iter().flat_map(Map::iter) {
                extra.insert(k.clone(), v.clone());
            }
            extra
        });
        let payload = self.run_started_payload(name, linked.as_ref().or(meta), false);
        let mut shared = self.lock_with_room(false);
        shared.runs.insert(run.run_id.clone(), run.signal.clone());
        self.ensure_worker(&mut shared);
        self.enqueue(
            &mut shared,
            &run.run_id,
            MessageType::RunStarted,
            payload,
            None,
            None,
        );
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
        let mut started = RunStarted::new(
            config.app_name.as_str(),
            SdkInfo::new(config.sdk.name.as_str(), config.sdk.version.as_str()),
        );
        started.meta = Some(meta_out);
        started.to_value()
    }

    /// Finishes a run (`run.finished`). An aborted signal wins over `Ok` and `Error`, as in
    /// the reference. The first finish wins: a second one records nothing and returns
    /// `false` (the C ABI answers it `GM_INVALID_STATE`).
    pub fn finish_run(&self, run: &Run, outcome: RunOutcome) -> bool {
        if !run.signal.mark_finished() {
            return false;
        }
        let mut shared = self.lock_with_room(true);
        shared.runs.remove(&run.run_id);
        // The guard forgets the run once it has seen all of it: now when no update is
        // deferred, else when the worker reaches `run.finished` (forgetting it here ahead of
        // the worker lost the warnings of a fast run's last calls).
        if self.inner.loop_backlog.load(Ordering::Acquire) == 0 {
            self.inner.loop_guard.lock().forget(&run.run_id);
        }
        if !self.inner.config.enabled || shared.disposed {
            return true;
        }
        self.flush_tokens_locked(&mut shared);
        let mut finished = match (outcome, run.signal.is_aborted()) {
            (_, true) | (RunOutcome::Aborted, _) => RunFinished::new(RunStatus::Aborted),
            (RunOutcome::Ok, false) => RunFinished::new(RunStatus::Ok),
            (RunOutcome::Error(error), false) => {
                let mut f = RunFinished::new(RunStatus::Error);
                f.error = Some(error);
                f
            }
        };
        finished.extra = Map::new();
        self.enqueue(
            &mut shared,
            &run.run_id,
            MessageType::RunFinished,
            finished.to_value(),
            None,
            None,
        );
        true
    }

    /// The run's root node started: `agent:<name>` (kind `agent`), its instance id the run
    /// id, no input. Every SDK's run scope records it (the reference's clients do), so a
    /// run's graph has one root its calls hang under.
    pub fn agent_node_started(&self, run: &Run) -> Option<u64> {
        self.node_started(Some(&run.run_id), &agent_node(run), None, None)
    }

    /// The run's root node finished after `duration_ms`: `node.error` first when the run
    /// raised (`error`), then `node.finished` with the run's status (an aborted signal wins).
    pub fn agent_node_finished(&self, run: &Run, duration_ms: f64, outcome: &RunOutcome) {
        let node = agent_node(run);
        let run_id = Some(run.run_id.as_str());
        let status = match (outcome, run.signal.is_aborted()) {
            (_, true) | (RunOutcome::Aborted, _) => RunStatus::Aborted,
            (RunOutcome::Ok, false) => RunStatus::Ok,
            (RunOutcome::Error(error), false) => {
                self.node_error(run_id, &node, error.clone());
                RunStatus::Error
            }
        };
        let mut finished = NodeFinished::new(
            node.node_id.as_str(),
            normalize_duration(duration_ms),
            status,
        );
        finished.instance_id = Some(node.instance_id.as_str().into());
        self.emit_typed(run_id, MessageType::NodeFinished, finished.into_value());
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
        let run = Run::new("implicit");
        shared.implicit_run = Some(run.clone());
        shared.runs.insert(run.run_id.clone(), run.signal.clone());
        if self.inner.config.enabled && !shared.disposed {
            let payload = self.run_started_payload("implicit", None, true);
            self.ensure_worker(shared);
            self.enqueue(
                shared,
                &run.run_id,
                MessageType::RunStarted,
                payload,
                None,
                None,
            );
        }
        run
    }

    fn run_id_or_implicit(&self, shared: &mut Shared, run_id: Option<&str>) -> String {
        match run_id {
            Some(id) => id.to_string(),
            None => self.implicit_run_locked(shared).run_id,
        }
    }

    /// How many watched calls of `run_id` the loop guard holds open (started, not finished):
    /// diagnostics, e.g. to check that dropped events do not leak them.
    pub fn loop_open_calls(&self, run_id: &str) -> usize {
        self.inner.loop_guard.lock().open_calls(run_id)
    }

    /// The abort signal of a live run (`None` when it is unknown or finished).
    pub fn run_signal(&self, run_id: &str) -> Option<Arc<RunSignal>> {
        self.inner.shared.lock().runs.get(run_id).cloned()
    }

    /// Emits one event that an app sends (`node.started`, `node.token`, `node.finished`,
    /// `node.error`, `graph.hint`, `run.started`, `run.finished`) into `run_id` (or the
    /// implicit run). Other types are ignored with a warning. Returns the event's `seq`, or
    /// `None` when nothing was emitted.
    pub fn emit(&self, run_id: Option<&str>, event_type: &str, payload: Value) -> Option<u64> {
        if !self.inner.config.enabled {
            return None;
        }
        let kind = match check_emit(event_type, &payload) {
            Ok(kind) => kind,
            Err(refused) => {
                self.inner
                    .warner
                    .warn(&format!("emit-type:{event_type}"), &refused.to_string());
                return None;
            }
        };
        self.emit_typed(run_id, kind, payload)
    }

    /// Hands an app event to the worker. `node.started`, `node.finished` and `node.error`
    /// also feed the loop guard: at once while a debugger is attached and the guard may hold
    /// (its before-gate may hold this very call), else on the worker (then a loop can only be
    /// warned about, and keying a kilobyte of input and output twice per node is most of
    /// what a node would cost the application thread). Order is kept across the switch: the
    /// first update made at once waits (briefly, never holding the session lock) for the
    /// worker to apply the deferred ones.
    fn emit_typed(
        &self,
        run_id: Option<&str>,
        event_type: MessageType,
        payload: Value,
    ) -> Option<u64> {
        self.emit_with(run_id, event_type, Payload::Built(payload), None, None)
    }

    /// [`Session::emit_typed`] with one payload member possibly still in JSON text. It stays
    /// text (parsed by the worker) while no debugger is attached; attached, it is parsed here
    /// first, since the loop guard and the gates read it on this thread. `node` is the node
    /// of a `node.started` / `node.finished`: when the guard runs here, a start's input is
    /// keyed before any lock is taken, so the locks are held only for the books (the worker,
    /// which takes them too, is not kept waiting for a kilobyte's walk). A successful
    /// output is keyed by the worker instead: only a cycle compares outputs, and a start
    /// that could close one first waits for the keys it compares
    /// ([`Session::await_loop_outputs`]).
    fn emit_with(
        &self,
        run_id: Option<&str>,
        event_type: MessageType,
        mut payload: Payload,
        mut deferred_member: Option<DeferredMember>,
        node: Option<&NodeRef>,
    ) -> Option<u64> {
        let attached = self.inner.attached.load(Ordering::Acquire);
        if deferred_member.is_some() && attached {
            self.resolve_member(&mut payload, deferred_member.take());
        }
        let loop_event = self.inner.loop_watch
            && matches!(
                event_type,
                MessageType::NodeStarted | MessageType::NodeFinished | MessageType::NodeError
            );
        let mut loop_keys = None;
        if loop_event && attached && self.inner.loop_holds {
            if let Some(node) = node {
                loop_keys = key_loop_event(&self.inner.loop_keyer, event_type, node, &payload);
                if let Some(LoopKeys::Start(node, fp)) = loop_keys {
                    self.await_loop_outputs(run_id, node, fp);
                }
            }
            self.wait_loop_backlog();
        }
        let mut shared = self.recording(event_type)?;
        if deferred_member.is_some() && shared.engine_attached {
            // Attached between the check above and the lock: rare, parse under the lock.
            self.resolve_member(&mut payload, deferred_member.take());
        }
        self.flush_tokens_locked(&mut shared);
        let run_id = self.run_id_or_implicit(&mut shared, run_id);
        let seq = shared.seq;
        let defer = loop_event && !(shared.engine_attached && self.inner.loop_holds);
        let mut loop_output = None;
        if loop_event && !defer && loop_keys.is_none() {
            // Attached between the check above and the lock: key here.
            if let Some(node) = node {
                loop_keys = key_loop_event(&self.inner.loop_keyer, event_type, node, &payload);
            }
        }
        if loop_event && !defer {
            let (warning, ticket) = note_loop(
                &mut self.inner.loop_guard.lock(),
                &run_id,
                event_type,
                &payload,
                seq,
                true,
                loop_keys,
            );
            if let Some(w) = warning {
                self.inner.warner.warn(&w.key, &w.message);
            }
            if ticket.is_some() {
                self.inner
                    .loop_outputs_pending
                    .fetch_add(1, Ordering::AcqRel);
                loop_output = ticket;
            }
        }
        if defer {
            self.inner.loop_backlog.fetch_add(1, Ordering::AcqRel);
        }
        let event = OutEvent {
            seq: shared.seq,
            run_id: run_id.clone(),
            event_type,
            payload,
            node_kind: None,
            held: None,
            loop_deferred: defer,
            loop_output,
            deferred_member,
        };
        let handed = self.send_or_return(&mut shared, event);
        if let (Handed::Dropped(_), Some(ticket)) = (&handed, loop_output) {
            // Its output will never be keyed: the call equals nothing.
            self.inner
                .loop_guard
                .lock()
                .fill_output(&run_id, ticket, None);
            self.inner
                .loop_outputs_pending
                .fetch_sub(1, Ordering::AcqRel);
        }
        match handed {
            Handed::Sent(seq) => Some(seq),
            Handed::Dropped(Some(event)) if defer => {
                self.defer_dropped(&mut shared, *event);
                None
            }
            Handed::Dropped(returned) => {
                if defer {
                    self.inner.loop_backlog.fetch_sub(1, Ordering::AcqRel);
                }
                if let Some(mut event) =
                    returned.filter(|_| loop_event && event_type == MessageType::NodeStarted)
                {
                    // Never reached the wire: it is not "the call right before" the next
                    // one of its kind (the same books as a dropped deferred start).
                    note_dropped(&mut self.inner.loop_guard.lock(), &mut event);
                }
                None
            }
        }
    }

    /// A node event dropped while its loop-guard update was deferred: the update still has
    /// to happen, after the updates queued before it (a dropped finish whose start is still
    /// queued would otherwise find nothing to close, and leak an open call). The worker
    /// makes it from the event's head (its input or output stripped, so the queue keeps no
    /// payload of a dropped event); with the queue itself full, this thread makes it.
    fn defer_dropped(&self, shared: &mut Shared, mut event: OutEvent) {
        if let Some(map) = event.payload.built().as_object_mut() {
            map.remove("input");
            map.remove("output");
        }
        event.deferred_member = None;
        match shared.outbox.try_send(Outgoing::LoopOnly(event)) {
            Ok(()) => {}
            Err(TrySendError::Full(Outgoing::LoopOnly(mut event)))
            | Err(TrySendError::Disconnected(Outgoing::LoopOnly(mut event))) => {
                self.inner.loop_backlog.fetch_sub(1, Ordering::AcqRel);
                note_dropped(&mut self.inner.loop_guard.lock(), &mut event);
            }
            Err(_) => {
                self.inner.loop_backlog.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Before the loop guard records a start that could close a cycle: waits until the worker
    /// keyed the successful outputs the cycle check would compare (at most
    /// [`LOOP_BACKLOG_WAIT`]; those still unkeyed then count as different). Nothing to wait
    /// for unless the calls before this one repeat, node by node and input by input.
    fn await_loop_outputs(&self, run_id: Option<&str>, node: &NodeRef, fp: StartFingerprint) {
        if self.inner.loop_outputs_pending.load(Ordering::Acquire) == 0 {
            return;
        }
        let run_id = match run_id {
            Some(id) => std::borrow::Cow::Borrowed(id),
            None => match &self.inner.shared.lock().implicit_run {
                Some(run) => std::borrow::Cow::Owned(run.run_id.clone()),
                None => return,
            },
        };
        let awaits = || {
            self.inner.loop_guard.lock().awaits_output(
                &run_id,
                node.kind.as_str(),
                &node.node_id,
                fp,
            )
        };
        if !awaits() {
            return;
        }
        // The keys come from the worker, which may be lingering before its next batch.
        Self::wake_worker(&self.inner.shared.lock());
        let deadline = Instant::now() + LOOP_BACKLOG_WAIT;
        while awaits() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Waits until the worker applied every deferred loop-guard update (at most
    /// [`LOOP_BACKLOG_WAIT`]; only right after an attach is there anything to wait for).
    fn wait_loop_backlog(&self) {
        if self.inner.loop_backlog.load(Ordering::Acquire) == 0 {
            return;
        }
        let deadline = Instant::now() + LOOP_BACKLOG_WAIT;
        while self.inner.loop_backlog.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// The core value of `value`, warning (rate-limited) when it was text that is not JSON.
    pub(crate) fn resolve(&self, value: HostValue) -> Value {
        let resolved = value.into_value();
        if resolved.invalid_text {
            self.inner.warner.warn("json-text", INVALID_TEXT_WARNING);
        }
        resolved.value
    }

    /// Parses a deferred member into its placeholder (on the application thread when a
    /// debugger is attached, else on the worker).
    fn resolve_member(&self, payload: &mut Payload, member: Option<DeferredMember>) {
        let Some(member) = member else {
            return;
        };
        let value = self.resolve(member.value);
        payload.set_member(member.key, value);
    }

    /// `node.started` for `node` with `input`, in `run_id` (or the implicit run).
    pub fn node_started(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        parent_id: Option<&str>,
        input: Option<Value>,
    ) -> Option<u64> {
        self.node_started_host(run_id, node, parent_id, input.map(HostValue::Built))
    }

    /// [`Session::node_started`] with the input as a binding hands it over: JSON text is
    /// parsed by the worker while no debugger is attached (see [`HostValue`]).
    pub fn node_started_host(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        parent_id: Option<&str>,
        input: Option<HostValue>,
    ) -> Option<u64> {
        self.node_started_extra(run_id, node, parent_id, input, Map::new())
    }

    /// [`Session::node_started_host`] with further fields (a replay's `replayed` /
    /// `replayLive`, see [`crate::replay`]).
    pub fn node_started_extra(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        parent_id: Option<&str>,
        input: Option<HostValue>,
        extra: Map,
    ) -> Option<u64> {
        let mut started = NodeStarted::new(
            node.node_id.as_str(),
            node.kind,
            node.name.as_str(),
            node.instance_id.as_str(),
        );
        started.parent_id = parent_id.map(JsStr::from);
        started.extra = extra;
        let (input, deferred) = split_host_value(input, "input");
        started.input = input;
        self.emit_with(
            run_id,
            MessageType::NodeStarted,
            Payload::Started(Box::new(started)),
            deferred,
            Some(node),
        )
    }

    /// `node.finished` for `node`.
    pub fn node_finished(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        output: Option<Value>,
        duration_ms: f64,
        injected: bool,
    ) -> Option<u64> {
        self.node_finished_host(
            run_id,
            node,
            output.map(HostValue::Built),
            duration_ms,
            injected,
        )
    }

    /// [`Session::node_finished`] with the output as a binding hands it over (JSON text is
    /// parsed by the worker while no debugger is attached).
    pub fn node_finished_host(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        output: Option<HostValue>,
        duration_ms: f64,
        injected: bool,
    ) -> Option<u64> {
        let mut finished = NodeFinished::new(
            node.node_id.as_str(),
            normalize_duration(duration_ms),
            RunStatus::Ok,
        );
        finished.instance_id = Some(node.instance_id.as_str().into());
        if injected {
            finished.injected = Some(true);
        }
        self.emit_finished(run_id, node, finished, output)
    }

    /// Emits `finished` of `node` with its `output` as a binding handed it over (JSON text
    /// parsed by the worker while no debugger is attached).
    pub(crate) fn emit_finished(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        mut finished: NodeFinished,
        output: Option<HostValue>,
    ) -> Option<u64> {
        let (output, deferred) = split_host_value(output, "output");
        finished.output = output;
        self.emit_with(
            run_id,
            MessageType::NodeFinished,
            Payload::Finished(Box::new(finished)),
            deferred,
            Some(node),
        )
    }

    /// `node.error` for `node`.
    pub fn node_error(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        error: ErrorInfo,
    ) -> Option<u64> {
        let mut failed = NodeError::new(node.node_id.as_str(), error);
        failed.instance_id = Some(node.instance_id.as_str().into());
        self.emit_typed(run_id, MessageType::NodeError, failed.to_value())
    }

    /// A streamed delta of `node`. Deltas of the same execution are batched for up to
    /// `tokenIntervalMs` (default 34 ms) into one `node.token`; any other event of the
    /// session sends the batch first, so order is kept. Returns the seq when this call sent
    /// a frame.
    pub fn node_token(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        channel: TokenChannel,
        text: &str,
    ) -> Option<u64> {
        let mut shared = self.recording(MessageType::NodeToken)?;
        let run_id = self.run_id_or_implicit(&mut shared, run_id);
        let interval = millis(self.inner.config.token_interval_ms);
        let delta = TokenDelta::new(channel, text);
        if let Some(batch) = shared.pending_tokens.as_mut() {
            let same = batch.run_id == run_id
                && batch.node_id == node.node_id
                && batch.instance_id == node.instance_id;
            if same && batch.opened.elapsed() < interval {
                batch.deltas.push(delta);
                return None;
            }
        }
        let sent = self.flush_tokens_locked(&mut shared);
        shared.pending_tokens = Some(TokenBatch {
            run_id,
            node_id: node.node_id.clone(),
            instance_id: node.instance_id.clone(),
            deltas: vec![delta],
            opened: Instant::now(),
        });
        if interval.is_zero() {
            return self.flush_tokens_locked(&mut shared);
        }
        sent
    }

    /// Sends the pending token batch, if any.
    fn flush_tokens_locked(&self, shared: &mut Shared) -> Option<u64> {
        let batch = shared.pending_tokens.take()?;
        let mut token = NodeToken::new(batch.node_id.as_str(), batch.deltas);
        token
            .extra
            .insert("instanceId", Value::from(batch.instance_id.as_str()));
        self.enqueue(
            shared,
            &batch.run_id,
            MessageType::NodeToken,
            token.to_value(),
            None,
            None,
        )
    }

    /// When the pending token batch is due (worker thread).
    fn token_deadline(&self) -> Option<Instant> {
        let shared = self.inner.shared.lock();
        let batch = shared.pending_tokens.as_ref()?;
        Some(batch.opened + millis(self.inner.config.token_interval_ms))
    }

    /// Sends the pending token batch when it is due (worker thread).
    fn flush_due_tokens(&self) {
        let mut shared = self.inner.shared.lock();
        let due = shared
            .pending_tokens
            .as_ref()
            .is_some_and(|b| b.opened.elapsed() >= millis(self.inner.config.token_interval_ms));
        if due {
            self.flush_tokens_locked(&mut shared);
        }
    }

    /// `graph.hint` announcing nodes ahead of running.
    pub fn graph_hint(&self, run_id: Option<&str>, nodes: Vec<GraphNodeHint>) -> Option<u64> {
        self.emit_typed(
            run_id,
            MessageType::GraphHint,
            GraphHint::new(nodes).to_value(),
        )
    }

    /// The gate at `point` of `node`: [`Gate::Continue`] at once when nothing holds (the fast
    /// path: detached, or attached with nothing matching), else a held gate to wait on.
    /// Whoever waits applies the decision; an `abort` has already aborted the run's signal.
    pub fn gate(
        &self,
        run_id: Option<&str>,
        point: PausePoint,
        node: &GateNode,
        options: GateOptions,
    ) -> Gate {
        if !self.inner.config.enabled || !self.inner.attached.load(Ordering::Acquire) {
            return Gate::Continue;
        }
        let mut shared = self.inner.shared.lock();
        if !shared.engine_attached || shared.disposed {
            return Gate::Continue;
        }
        let run_id = self.run_id_or_implicit(&mut shared, run_id);
        let loop_hold = if point == PausePoint::Before {
            let hide = self.loop_hide(&node.kind);
            match self.inner.loop_guard.lock().consult_before(
                &run_id,
                &node.kind,
                &node.node_id,
                &node.name,
                true,
                hide,
            ) {
                LoopVerdict::Hold(info) => Some(info),
                _ => None,
            }
        } else {
            None
        };
        let smart = options
            .result
            .as_ref()
            .and_then(|result| self.smart_hold(point, &node.kind, result));
        if loop_hold.is_none() && smart.is_none() && !shared.engine.should_pause(point, node) {
            return Gate::Continue;
        }
        self.flush_tokens_locked(&mut shared);
        let reason = if loop_hold.is_some() {
            PauseReason::Loop
        } else if smart.is_some() {
            PauseReason::Breakpoint
        } else {
            shared.engine.reason_for(point, node)
        };
        let editable = options.editable && self.edits_honoured(&shared);
        let pending = shared.engine.hold(point, node.clone(), &run_id, editable);
        if editable {
            if let Some(schema) = options.input_schema {
                shared
                    .edit_schemas
                    .insert(pending.pause_id().to_string(), schema);
            }
            shared
                .editable
                .insert(pending.pause_id().to_string(), options.live_input);
        }
        let mut paused = ExecPaused::new(pending.pause_id(), node.node_id.as_str(), point);
        paused.reason = Some(reason);
        paused.loop_info = loop_hold.map(|info| info.to_event());
        if paused.loop_info.is_none() {
            paused.smart =
                smart.map(|info| smart::on_wire(info, &node.kind, &self.inner.config.hide));
        }
        if editable {
            paused.editable = Some(true);
        }
        let kind = NodeKind::parse(&node.kind);
        self.enqueue(
            &mut shared,
            &run_id,
            MessageType::ExecPaused,
            paused.to_value(),
            kind,
            None,
        );
        Gate::Held(pending)
    }

    /// Whether a gate at `point` in `run_id` could hold now, for any node: `false` means
    /// that with the session as it is (detached; or attached with no step mode, no
    /// breakpoint at `point` and, before a call, no loop-guard rule the next start could
    /// trip) [`Session::gate`] returns [`Gate::Continue`] for a gate given no
    /// [`GateOptions::result`] (a result can raise a smart hold). Conservative (`true` does
    /// not mean it will hold); for a caller that forwards a message before recording it.
    pub fn may_hold(&self, run_id: &str, point: PausePoint) -> bool {
        if !self.inner.config.enabled || !self.inner.attached.load(Ordering::Acquire) {
            return false;
        }
        let watch = point == PausePoint::Before && self.inner.loop_holds;
        if watch && self.inner.loop_backlog.load(Ordering::Acquire) > 0 {
            return true;
        }
        let shared = self.inner.shared.lock();
        if !shared.engine_attached || shared.disposed {
            return false;
        }
        if shared.engine.mode() == RunMode::Step && point != PausePoint::After {
            return true;
        }
        if shared
            .engine
            .breakpoints()
            .iter()
            .any(|m| m.point.unwrap_or(PausePoint::Before) == point)
        {
            return true;
        }
        watch && self.inner.loop_guard.lock().may_hold_next(run_id, true)
    }

    /// The smart breakpoint a gate at `point` raises for a node of `kind` with `result`.
    fn smart_hold(&self, point: PausePoint, kind: &str, result: &Value) -> Option<SmartInfo> {
        let on = self.smart_switches();
        match point {
            PausePoint::After => smart::detect_after(kind, result, on),
            PausePoint::Error => smart::detect_at_error(kind, result, on),
            PausePoint::Before => None,
        }
    }

    /// The smart breakpoints this session has on.
    pub fn smart_switches(&self) -> smart::SmartSwitches {
        smart::SmartSwitches {
            error_result: self.inner.config.break_on_error_result,
            truncated: self.inner.config.break_on_truncated,
        }
    }

    fn loop_hide(&self, kind: &str) -> LoopHide {
        let h = self.inner.config.hide;
        LoopHide::for_node(
            h.inputs,
            h.outputs,
            h.tool_args,
            h.tool_results,
            kind == "tool",
        )
    }

    fn edits_honoured(&self, shared: &Shared) -> bool {
        self.inner.config.edit_input
            && shared
                .hub_capabilities
                .as_ref()
                .is_some_and(|caps| caps.iter().any(|c| c == "edit-input"))
    }

    /// Aborts `run` (the app aborted it; a debugger's abort of one gate does the same):
    /// its signal, and every gate of the run still held, released as `abort` and announced
    /// so (each waiter then ends its call as aborted, nothing of the run runs on). The rule
    /// every binding's abort goes through. Returns how many held gates it released.
    pub fn abort_run(&self, run: &Run, reason: &str) -> usize {
        run.signal.abort(reason);
        let gates = {
            let mut shared = self.inner.shared.lock();
            self.take_aborted_run_gates(&mut shared, &run.run_id)
        };
        let released = gates.len();
        release_abort(gates);
        released
    }

    /// Takes the still-held gates of an aborted run and announces each as `abort`.
    fn take_aborted_run_gates(&self, shared: &mut Shared, run_id: &str) -> Vec<HeldGate> {
        let gates = shared.engine.take_run(run_id);
        for gate in &gates {
            self.announce_release(shared, gate, ResumeAction::Abort, None, None);
        }
        gates
    }

    /// Releases a held gate whose waiter went away (a cancelled task): `continue`, announced
    /// like any other release. Returns whether it was still held.
    pub fn discard_gate(&self, pause_id: &str) -> bool {
        let gate = {
            let mut shared = self.inner.shared.lock();
            let Some(gate) = shared.engine.take(pause_id) else {
                return false;
            };
            self.announce_release(&mut shared, &gate, ResumeAction::Continue, None, None);
            gate
        };
        gate.release(GateDecision::proceed());
        true
    }

    /// A diagnostics snapshot.
    /// The counters describe every event emitted before the call: it waits (at most
    /// [`STATS_SYNC_WAIT`]) for the worker to reach them.
    pub fn stats(&self) -> SessionStats {
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        let handoff = {
            let shared = self.inner.shared.lock();
            if shared.worker_started && !shared.disposed {
                Self::offer_control(&shared, Outgoing::Sync(reply_tx))
            } else {
                Handoff::Closed
            }
        };
        let deadline = Instant::now() + STATS_SYNC_WAIT;
        if handoff.by(deadline) {
            let _ = reply_rx.recv_deadline(deadline);
        }
        let shared = self.inner.shared.lock();
        SessionStats {
            enabled: self.inner.config.enabled,
            attached: self.is_attached(),
            buffered: self.inner.buffered.load(Ordering::Relaxed),
            dropped: self.inner.dropped.load(Ordering::Relaxed),
            lost: self.inner.lost.load(Ordering::Relaxed) + shared.handoff_loss.total,
            pending_gaps: self.inner.pending_gaps.load(Ordering::Relaxed),
            spooled: self.inner.spooled.load(Ordering::Relaxed),
            held_gates: shared.engine.held_count() as u64,
            seq: shared.seq,
        }
    }

    /// How long `dispose()` and the SDKs' exit hooks wait by default: the connect and
    /// handshake timeouts (a connection in flight, or never tried, is waited for) plus
    /// [`EXIT_DELIVERY_MARGIN`] to send what the ring holds.
    pub fn exit_deadline(&self) -> Duration {
        let config = &self.inner.config;
        millis(
            config
                .connect_timeout_ms
                .saturating_add(config.handshake_timeout_ms),
        ) + EXIT_DELIVERY_MARGIN
    }

    /// Waits up to `timeout` until every event emitted so far has been handed to the socket
    /// (or buffered, when no debugger could be reached: a connection never tried is tried
    /// first). Returns whether it finished in time.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        let mut shared = self.inner.shared.lock();
        if !shared.worker_started {
            return true;
        }
        self.flush_tokens_locked(&mut shared);
        let handoff = Self::offer_control(&shared, Outgoing::Flush(reply_tx));
        drop(shared);
        handoff.by(deadline) && reply_rx.recv_deadline(deadline).is_ok()
    }

    /// Releases every held gate (`continue`), finishes the implicit run, flushes and closes
    /// the link, waiting at most `deadline`. Idempotent; never hangs the app.
    pub fn dispose(&self, deadline: Duration) {
        let deadline = Instant::now() + deadline;
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        let gates;
        let mut shutdown = Handoff::Closed;
        {
            let mut shared = self.inner.shared.lock();
            if shared.disposed {
                return;
            }
            self.flush_tokens_locked(&mut shared);
            gates = shared.engine.take_all();
            shared.engine.disarm();
            self.announce_continues(&mut shared, &gates);
            if let Some(run) = shared.implicit_run.clone() {
                if self.inner.config.enabled {
                    let finished = RunFinished::new(RunStatus::Ok).to_value();
                    self.enqueue(
                        &mut shared,
                        &run.run_id,
                        MessageType::RunFinished,
                        finished,
                        None,
                        None,
                    );
                }
            }
            shared.disposed = true;
            shared.engine_attached = false;
            if shared.worker_started {
                shutdown = Self::offer_control(&shared, Outgoing::Shutdown(reply_tx));
            }
            self.inner.attach_signal.notify_all();
        }
        release_continue(gates);
        // A full outbox is waited on only now, with the gates released.
        if shutdown.by(deadline) {
            let _ = reply_rx.recv_deadline(deadline);
        }
        self.inner.attached.store(false, Ordering::Release);
    }

    /// Fork protocol, before `fork()`: takes every lock of the session (`shared`, then the
    /// outbox receiver's, the loop guard's, the replay's, the model-call memory's and the
    /// warner's) so that no other thread holds one mid-update at the moment of the fork.
    /// Every lock a session's calls take must be one of these: a lock outside the session
    /// (a process-wide table) may be held at the fork by a thread the child does not have,
    /// and the child's first wait for it never ends. Must be followed, on the same thread, by
    /// [`Session::after_fork_parent`] or [`Session::after_fork_child`]. A program that forks
    /// from several threads at once, or calls this twice, gets what it asked for: a wait.
    pub fn before_fork(&self) {
        let mut hold = ForkHold::new(self.fork_owner());
        // SAFETY: every lock lives inside `self.inner`, which the hold keeps alive.
        unsafe {
            hold.lock(&self.inner.shared);
            hold.lock(&self.inner.inbox);
            hold.lock(&self.inner.loop_guard);
            hold.lock(&self.inner.replay);
            hold.lock(&self.inner.llm_memory);
            hold.lock(self.inner.warner.rate_lock());
        }
        hold.keep();
    }

    /// What the session's model calls taught (see [`crate::llm_step`]).
    pub(crate) fn llm_memory(&self) -> &Mutex<crate::llm_step::LlmMemory> {
        &self.inner.llm_memory
    }

    /// The session's replay, when one runs (see [`crate::replay`]).
    pub(crate) fn replay_slot(&self) -> &Mutex<Option<crate::replay::Replayer>> {
        &self.inner.replay
    }

    /// Fork protocol, in the parent after `fork()`: lets go of the locks taken by
    /// [`Session::before_fork`] on this thread.
    pub fn after_fork_parent(&self) {
        self.release_fork_hold();
    }

    /// What a [`ForkHold`] of this session is keyed by: its shared allocation.
    fn fork_owner(&self) -> Arc<dyn std::any::Any + Send + Sync> {
        self.inner.clone()
    }

    fn release_fork_hold(&self) {
        crate::sync::release(&self.fork_owner());
    }

    /// Fork protocol, in the child after `fork()`: the parent's worker and socket do not
    /// exist here. The child gets a fresh channel and, on its next event, a fresh worker
    /// that reconnects and records; it never believes itself attached.
    pub fn after_fork_child(&self) {
        // The locks are std's: their waiters live in the kernel, which the child does not
        // inherit, so unlocking them here wakes nobody who is not here (see `crate::sync`).
        self.release_fork_hold();
        // The parent's queue, with its deferred loop-guard updates and the outputs its
        // worker was to key, does not exist here.
        self.inner.loop_backlog.store(0, Ordering::Release);
        self.inner.loop_outputs_pending.store(0, Ordering::Release);
        self.inner.loop_guard.lock().drop_later_outputs();
        event::reseed_ids();
        let mut shared = self.inner.shared.lock();
        // The parent's worker holds the receiving end in the parent; dropping the sender
        // here would run channel code over the parent's waiters, so it is let go unrun. A
        // fresh outbox is opened when the child first records (most children exec first).
        let (placeholder, _) = crossbeam_channel::bounded(0);
        std::mem::forget(std::mem::replace(&mut shared.outbox, placeholder));
        shared.outbox_reopen = true;
        shared.worker_started = false;
        shared.worker = None;
        shared.engine_attached = false;
        shared.engine.disarm();
        // Gates held by the parent's other threads do not exist in the child.
        drop(shared.engine.take_all());
        shared.editable.clear();
        shared.edit_schemas.clear();
        shared.hub_capabilities = None;
        shared.session_token = None;
        shared.implicit_run = None;
        shared.link_generation += 1;
        drop(shared);
        if let Some(inherited) = self.inner.inbox.lock().take() {
            std::mem::forget(inherited);
        }
        self.inner.attached.store(false, Ordering::Release);
        self.inner.buffered.store(0, Ordering::Relaxed);
        self.inner.pending_gaps.store(0, Ordering::Relaxed);
        self.inner.spooled.store(0, Ordering::Relaxed);
    }

    // -- internals ----------------------------------------------------------------------

    /// The locked shared state of a session that records (enabled, not disposed), with its
    /// worker started; `None` when nothing may be recorded.
    fn recording(&self, event_type: MessageType) -> Option<MutexGuard<'_, Shared>> {
        if !self.inner.config.enabled {
            return None;
        }
        let mut shared = self.lock_with_room(is_end_event(event_type));
        if shared.disposed {
            return None;
        }
        self.ensure_worker(&mut shared);
        Some(shared)
    }

    /// The session lock, once the hand-off has room for one more event. While a debugger is
    /// attached a full hand-off is waited on, the lock let go, for up to
    /// [`BACKPRESSURE_DEADLINE`]; when that passes, regular events are shed without waiting
    /// (and counted) until the worker has drained it to [`SHED_UNTIL`]. An `end` (see
    /// [`is_end_event`]) may use the [`END_RESERVE`] and waits, attached or not, only when
    /// even that is full, never while shedding stops regular events.
    fn lock_with_room(&self, end: bool) -> MutexGuard<'_, Shared> {
        let mut shared = self.inner.shared.lock();
        if shared.shedding && shared.outbox.len() <= SHED_UNTIL {
            shared.shedding = false;
        }
        let full = |shared: &Shared| {
            if end {
                shared.outbox.len() >= OUTBOX_CAPACITY
            } else {
                shared.engine_attached && shared.outbox.len() >= OUTBOX_CAPACITY - END_RESERVE
            }
        };
        if !full(&shared) || (shared.shedding && !end) || !shared.worker_started {
            return shared;
        }
        let deadline = Instant::now() + BACKPRESSURE_DEADLINE;
        loop {
            Self::wake_worker(&shared);
            drop(shared);
            std::thread::sleep(ROOM_POLL);
            shared = self.inner.shared.lock();
            if !full(&shared) || shared.disposed {
                return shared;
            }
            if Instant::now() >= deadline {
                if !end {
                    shared.shedding = true;
                }
                return shared;
            }
        }
    }

    /// Announces every gate in `gates` as released with `continue` (under the lock); the
    /// caller wakes them with [`release_continue`] once the lock is dropped.
    fn announce_continues(&self, shared: &mut Shared, gates: &[HeldGate]) {
        for gate in gates {
            self.announce_release(shared, gate, ResumeAction::Continue, None, None);
        }
    }

    fn ensure_worker(&self, shared: &mut Shared) {
        if shared.worker_started || shared.disposed {
            return;
        }
        let rx = if shared.outbox_reopen {
            let (tx, rx) = crossbeam_channel::bounded(OUTBOX_CAPACITY);
            shared.outbox = tx;
            shared.outbox_reopen = false;
            rx
        } else {
            let Some(rx) = self.inner.inbox.lock().take() else {
                return;
            };
            rx
        };
        shared.worker_started = true;
        let inner = self.inner.clone();
        let spawned = std::thread::Builder::new()
            .name("graphmind-worker".into())
            .spawn(move || Worker::new(inner, rx).run());
        match spawned {
            Ok(handle) => shared.worker = Some(handle.thread().clone()),
            Err(e) => {
                shared.worker_started = false;
                self.inner.warner.warn(
                    "worker-spawn",
                    &format!("could not start the worker thread ({e}); staying detached"),
                );
            }
        }
    }

    /// Hands a control message to the worker and wakes it; false when the outbox is full.
    fn send_control(shared: &Shared, message: Outgoing) -> bool {
        matches!(Self::offer_control(shared, message), Handoff::Sent)
    }

    /// Offers a control message to the worker and wakes it. A full outbox is waited on with
    /// [`Handoff::by`], once the caller has let go of the lock (the worker is draining it).
    fn offer_control(shared: &Shared, message: Outgoing) -> Handoff {
        let handoff = match shared.outbox.try_send(message) {
            Ok(()) => Handoff::Sent,
            Err(TrySendError::Full(message)) => Handoff::Full(shared.outbox.clone(), message),
            Err(TrySendError::Disconnected(_)) => Handoff::Closed,
        };
        Self::wake_worker(shared);
        handoff
    }

    /// Wakes a lingering worker (cheap when it is not parked).
    fn wake_worker(shared: &Shared) {
        if let Some(worker) = &shared.worker {
            worker.unpark();
        }
    }

    /// Assigns the next seq and hands the event to the worker. Never blocks: a full outbox
    /// drops the event and counts it as lost.
    fn enqueue(
        &self,
        shared: &mut Shared,
        run_id: &str,
        event_type: MessageType,
        payload: Value,
        node_kind: Option<NodeKind>,
        held: Option<(String, f64)>,
    ) -> Option<u64> {
        let event = OutEvent {
            seq: shared.seq,
            run_id: run_id.to_string(),
            event_type,
            payload: Payload::Built(payload),
            node_kind,
            held,
            loop_deferred: false,
            loop_output: None,
            deferred_member: None,
        };
        self.send_event(shared, event)
    }

    /// Hands `event` (built with `shared.seq`) to the worker and advances the seq: the one place
    /// every event goes through.
    fn send_event(&self, shared: &mut Shared, event: OutEvent) -> Option<u64> {
        match self.send_or_return(shared, event) {
            Handed::Sent(seq) => Some(seq),
            Handed::Dropped(_) => None,
        }
    }

    /// [`Session::send_event`], handing a dropped event back (`None` once the worker is
    /// gone) so the caller can still account for it.
    fn send_or_return(&self, shared: &mut Shared, event: OutEvent) -> Handed {
        let (seq, event_type) = (event.seq, event.event_type);
        // Detached, the replay buffer keeps only the newest `bufferSize` events: a worker
        // more than that far behind would only queue events (and their memory) that the
        // buffer then pushes out again. Drop here instead, counted like a full queue, so an
        // app that outpaces its worker with no debugger attached keeps a bounded footprint.
        // Attached, regular events leave the last END_RESERVE slots to the ends of runs
        // and nodes, and are shed while a wait for room timed out.
        let end = is_end_event(event_type);
        let len = shared.outbox.len();
        let refused = if end {
            false
        } else if shared.engine_attached {
            shared.shedding || len >= OUTBOX_CAPACITY - END_RESERVE
        } else if self.inner.config.spool_dir.is_some() {
            // With a spool, what the ring pushes out is kept on disk: the worker must see
            // every event, so only a worker that fell far behind drops (as attached).
            len >= OUTBOX_CAPACITY - END_RESERVE
        } else {
            len >= self.inner.config.buffer_size.max(MIN_DETACHED_QUEUE)
        };
        let sent = if refused {
            Err(TrySendError::Full(Outgoing::Event(event)))
        } else {
            shared.outbox.try_send(Outgoing::Event(event))
        };
        match sent {
            Ok(()) => {
                shared.seq += 1;
                if is_gate_event(event_type) || shared.outbox.len() >= WAKE_BACKLOG {
                    Self::wake_worker(shared);
                }
                Handed::Sent(seq)
            }
            Err(TrySendError::Full(returned)) => {
                // Lost, but not silently: it keeps its seq, and the worker takes the count
                // over into the run's gap marker (and the warning's total).
                shared.seq += 1;
                match returned {
                    Outgoing::Event(event) => {
                        shared.handoff_loss.record(&event.run_id, seq);
                        self.inner.handoff_lost.store(true, Ordering::Release);
                        Handed::Dropped(Some(Box::new(event)))
                    }
                    _ => Handed::Dropped(None),
                }
            }
            Err(TrySendError::Disconnected(_)) => Handed::Dropped(None),
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
        shared.edit_schemas.remove(&gate.pause_id);
        let mut resumed = ExecResumed::new(gate.pause_id.as_str(), action);
        resumed.edited_after = edited;
        resumed.request_id = request_id.map(JsStr::from);
        let held = Some((gate.node.node_id.clone(), gate.held_ms(Instant::now())));
        let kind = NodeKind::parse(&gate.node.kind);
        self.enqueue(
            shared,
            &gate.run_id,
            MessageType::ExecResumed,
            resumed.to_value(),
            kind,
            held,
        );
    }

    fn emit_refused(
        &self,
        shared: &mut Shared,
        gate: (&str, &str, &str),
        refusal: &edit_input::EditRefusal,
        request_id: Option<&str>,
    ) {
        let (pause_id, run_id, kind) = gate;
        let mut refused = ExecRefused::new(pause_id, refusal.code);
        refused.message = Some(refusal.message.as_str().into());
        refused.request_id = request_id.map(JsStr::from);
        self.enqueue(
            shared,
            run_id,
            MessageType::ExecRefused,
            refused.to_value(),
            NodeKind::parse(kind),
            None,
        );
    }

    /// An `exec.resume` from the debugger (reader thread). Unknown pauses are ignored (the
    /// first resume won); a refused edit or inject leaves the gate held and says why.
    fn handle_resume(&self, payload: &Value) {
        let Some(pause_id) = payload.get("pauseId").and_then(Value::as_str) else {
            return;
        };
        let Some(action) = payload
            .get("action")
            .and_then(Value::as_str)
            .and_then(ResumeAction::parse)
        else {
            return;
        };
        let request_id = payload.get("requestId").and_then(Value::as_str);
        let mut shared = self.inner.shared.lock();
        let Some(gate) = shared.engine.peek(pause_id) else {
            return;
        };
        let (run_id, kind, point) = (gate.run_id.clone(), gate.node.kind.clone(), gate.point);
        let mut decision = GateDecision {
            action,
            output: None,
            input: None,
        };
        let mut edited = None;
        let refusal = if let Some(proposed) = payload.get("input") {
            match self.accept_edit(&shared, pause_id, action, point, &kind, proposed) {
                Ok(merged) => {
                    edited = Some(merged.clone());
                    decision.input = Some(merged);
                    None
                }
                Err(refusal) => Some(refusal),
            }
        } else if action == ResumeAction::Inject {
            let value = payload.get("output").cloned().unwrap_or(Value::Null);
            match edit_input::check_proposed_value(&value) {
                Ok(()) => {
                    decision.output = Some(value);
                    None
                }
                Err(refusal) => Some(refusal),
            }
        } else {
            None
        };
        if let Some(refusal) = refusal {
            self.emit_refused(
                &mut shared,
                (pause_id, &run_id, &kind),
                &refusal,
                request_id,
            );
            return;
        }
        let Some(gate) = shared.engine.take(pause_id) else {
            return;
        };
        self.announce_release(&mut shared, &gate, action, request_id, edited);
        let mut others = Vec::new();
        if action == ResumeAction::Abort {
            if let Some(signal) = shared.runs.get(&gate.run_id) {
                signal.abort(ABORTED_FROM_DEBUGGER);
            }
            others = self.take_aborted_run_gates(&mut shared, &gate.run_id);
        }
        drop(shared);
        gate.release(decision);
        release_abort(others);
    }

    /// The edit conditions in the reference's order, then the inject guard on the input, the
    /// pollution check, and the merge into the live input.
    fn accept_edit(
        &self,
        shared: &Shared,
        pause_id: &str,
        action: ResumeAction,
        point: PausePoint,
        kind: &str,
        proposed: &Value,
    ) -> Result<Value, edit_input::EditRefusal> {
        use crate::event::RefusalCode;
        let refuse = |code, message: &str| {
            Err(edit_input::EditRefusal {
                code,
                message: message.to_string(),
            })
        };
        if !self.inner.config.edit_input {
            return refuse(
                RefusalCode::Disabled,
                "input edits are turned off in this app (GRAPHMIND_DISABLE_EDIT_INPUT)",
            );
        }
        if !self.edits_honoured(shared) {
            return refuse(
                RefusalCode::Disabled,
                "this debugger has not enabled input edits",
            );
        }
        let Some(live) = shared.editable.get(pause_id) else {
            return refuse(
                RefusalCode::Unsupported,
                "this pause cannot run with an edited input",
            );
        };
        let fits = (action == ResumeAction::Continue && point == PausePoint::Before)
            || (action == ResumeAction::Retry && point != PausePoint::Before);
        if !fits {
            return refuse(
                RefusalCode::Shape,
                "an edited input needs continue at a before gate, or retry at an after or error gate",
            );
        }
        let hidden = self.inner.config.hide.covers_pause_input(Some(kind));
        crate::tool_edit::check_edit(
            live.as_ref(),
            Some(proposed),
            hidden,
            shared.edit_schemas.get(pause_id),
        )
    }

    /// A control frame from the debugger (reader thread).
    fn handle_control(&self, text: &str) {
        let envelope = match wire::parse_envelope(text.as_bytes()) {
            wire::ParseOutcome::Ok(envelope) => envelope,
            wire::ParseOutcome::Invalid(invalid) => {
                self.inner.warner.warn(
                    "transport-invalid",
                    &format!("ignoring invalid frame: {}", invalid.reason),
                );
                return;
            }
            _ => return, // unknown types and stray versions: tolerated
        };
        let Some(payload) = envelope.payload() else {
            return;
        };
        match envelope.message_type {
            Some(MessageType::ExecResume) => self.handle_resume(payload),
            Some(MessageType::BreakpointSet) => {
                if let Some(m) = payload
                    .get("matcher")
                    .and_then(BreakpointMatcher::from_value)
                {
                    self.inner.shared.lock().engine.add_breakpoint(m);
                }
            }
            Some(MessageType::BreakpointClear) => {
                if let Some(m) = payload
                    .get("matcher")
                    .and_then(BreakpointMatcher::from_value)
                {
                    self.inner.shared.lock().engine.remove_breakpoint(&m);
                }
            }
            Some(MessageType::ModeSet) => {
                if let Some(mode) = payload
                    .get("mode")
                    .and_then(Value::as_str)
                    .and_then(RunMode::parse)
                {
                    self.inner.shared.lock().engine.set_mode(mode);
                }
            }
            _ => {}
        }
    }

    /// The link with generation `generation` is gone: fail open. Every held gate continues,
    /// breakpoints and mode are forgotten until the next `hello.ack`.
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
            self.announce_continues(&mut shared, &gates);
            Self::send_control(&shared, Outgoing::Detached(generation));
        }
        release_continue(gates);
    }

    /// Releases the gates whose pause timeout passed (worker thread).
    fn release_expired(&self) {
        let gates;
        {
            let mut shared = self.inner.shared.lock();
            gates = shared.engine.take_expired(Instant::now());
            self.announce_continues(&mut shared, &gates);
        }
        release_continue(gates);
    }

    fn next_pause_deadline(&self) -> Option<Instant> {
        self.inner.shared.lock().engine.next_deadline()
    }
}

/// A control message offered to the worker ([`Session::offer_control`]).
enum Handoff {
    /// In the outbox.
    Sent,
    /// The outbox was full: the message, and the outbox to wait on.
    Full(Sender<Outgoing>, Outgoing),
    /// No worker receives (or none was started).
    Closed,
}

impl Handoff {
    /// Whether the message is in the outbox, waiting for room until `deadline` when it was
    /// full. Call without the session lock.
    fn by(self, deadline: Instant) -> bool {
        match self {
            Handoff::Sent => true,
            Handoff::Full(outbox, message) => outbox.send_deadline(message, deadline).is_ok(),
            Handoff::Closed => false,
        }
    }
}

/// Wakes every gate in `gates` with `abort` (after their release was announced).
fn release_abort(gates: Vec<HeldGate>) {
    for gate in gates {
        gate.release(GateDecision {
            action: ResumeAction::Abort,
            output: None,
            input: None,
        });
    }
}

/// Wakes every gate in `gates` with `continue` (after their release was announced).
fn release_continue(gates: Vec<HeldGate>) {
    for gate in gates {
        gate.release(GateDecision::proceed());
    }
}

/// The events a run's record cannot do without: how a run or a started node ended, and the
/// gate's own events. They may use the hand-off's [`END_RESERVE`].
fn is_end_event(t: MessageType) -> bool {
    is_gate_event(t)
        || matches!(
            t,
            MessageType::RunFinished | MessageType::NodeFinished | MessageType::NodeError
        )
}

/// `exec.*` events are the gate engine's own; an app never emits them by hand.
fn is_gate_event(t: MessageType) -> bool {
    matches!(
        t,
        MessageType::ExecPaused | MessageType::ExecResumed | MessageType::ExecRefused
    )
}

/// Durations on the wire: finite, >= 0, 0.01 ms resolution.
pub fn normalize_duration(ms: f64) -> f64 {
    if !ms.is_finite() || ms < 0.0 {
        0.0
    } else {
        (ms * 100.0).round() / 100.0
    }
}

/// A node event of a known node as the loop guard takes it, keyed before the guard's lock
/// is taken: a watched start with its input's key, a watched finish with its outcome's keys
/// (a successful output's left to the worker), or a node the guard does not watch.
enum LoopKeys<'a> {
    Start(&'a NodeRef, StartFingerprint),
    Finish(&'a NodeRef, FinishKey),
    Unwatched,
}

/// [`LoopKeys`] of `node`'s `node.started` or `node.finished`.
fn key_loop_event<'a>(
    keyer: &LoopKeyer,
    event_type: MessageType,
    node: &'a NodeRef,
    payload: &Payload,
) -> Option<LoopKeys<'a>> {
    if !keyer.applies_to(node.kind.as_str(), &node.node_id, &node.name) {
        return Some(LoopKeys::Unwatched);
    }
    match event_type {
        MessageType::NodeStarted => Some(LoopKeys::Start(
            node,
            keyer.fingerprint_start(&node.node_id, LoopValue::Read(payload.member("input"))),
        )),
        MessageType::NodeFinished => Some(LoopKeys::Finish(
            node,
            keyer.key_finish_later(payload.status(), LoopValue::Read(payload.member("output"))),
        )),
        _ => None,
    }
}

/// Applies one node event to the loop guard (`attached`: whether a debugger would hold),
/// with its keys when they were computed beforehand. Returns the warning to print once the
/// guard's lock is released (a binding's warning sink may need its interpreter lock), and
/// the ticket of a finish whose output the worker is to key.
fn note_loop(
    guard: &mut LoopGuard,
    run_id: &str,
    event_type: MessageType,
    payload: &Payload,
    seq: u64,
    attached: bool,
    keys: Option<LoopKeys<'_>>,
) -> (Option<LoopWarning>, Option<OutputTicket>) {
    match (event_type, keys, payload.as_built()) {
        (_, Some(LoopKeys::Unwatched), _) => (None, None),
        (_, Some(LoopKeys::Start(node, fp)), _) => {
            let start = NodeStart::new(
                run_id,
                &node.node_id,
                node.kind.as_str(),
                LoopValue::Read(payload.member("input")),
                seq,
            )
            .name(&node.name)
            .instance(&node.instance_id);
            (
                warning_of(guard.record_start(&start, fp, attached).verdict),
                None,
            )
        }
        (_, Some(LoopKeys::Finish(node, key)), _) => (
            None,
            guard.record_finish(run_id, &node.node_id, Some(&node.instance_id), key),
        ),
        // Unkeyed events arrive built: the worker builds before it notes, and a typed event
        // noted on the application thread was keyed first.
        (MessageType::NodeStarted, None, Some(payload)) => {
            (note_loop_start(guard, run_id, payload, seq, attached), None)
        }
        (MessageType::NodeFinished, None, Some(payload)) => {
            note_loop_finish(guard, run_id, payload);
            (None, None)
        }
        (MessageType::NodeError, None, Some(payload)) => {
            note_loop_error(guard, run_id, payload);
            (None, None)
        }
        _ => (None, None),
    }
}

fn warning_of(verdict: LoopVerdict) -> Option<LoopWarning> {
    match verdict {
        LoopVerdict::Warn(warning) => Some(warning),
        _ => None,
    }
}

/// Keeps the loop guard's books for a watched event that was dropped (the worker fell
/// behind): a start that never reached the wire is not "the call right before" the next
/// one; a finish closes its open call as a call that equals nothing (without keying its
/// output: dropping must stay cheap); an error still marks its open call.
fn note_dropped(guard: &mut LoopGuard, event: &mut OutEvent) {
    let payload = &*event.payload.built();
    let run_id = event.run_id.as_str();
    let text = |key: &str| payload.get(key).and_then(Value::as_str);
    match event.event_type {
        MessageType::NodeStarted => {
            guard.on_unidentified_start(run_id, text("kind").unwrap_or("tool"), event.seq)
        }
        MessageType::NodeFinished => {
            if let Some(node_id) = text("nodeId") {
                guard.on_node_finished(
                    run_id,
                    node_id,
                    text("instanceId"),
                    text("status"),
                    LoopValue::Unreadable,
                    false,
                );
            }
        }
        MessageType::NodeError => note_loop_error(guard, run_id, payload),
        _ => {}
    }
}

fn note_loop_start(
    guard: &mut LoopGuard,
    run_id: &str,
    payload: &Value,
    seq: u64,
    attached: bool,
) -> Option<LoopWarning> {
    let text = |key: &str| payload.get(key).and_then(Value::as_str);
    let (Some(kind), Some(node_id)) = (text("kind"), text("nodeId")) else {
        if let Some(kind) = text("kind") {
            guard.on_unidentified_start(run_id, kind, seq);
        }
        return None;
    };
    let mut start = NodeStart::new(
        run_id,
        node_id,
        kind,
        LoopValue::Read(payload.get("input")),
        seq,
    );
    if let Some(name) = text("name") {
        start = start.name(name);
    }
    if let Some(instance) = text("instanceId") {
        start = start.instance(instance);
    }
    warning_of(guard.observe_start(&start, attached).verdict)
}

fn note_loop_finish(guard: &mut LoopGuard, run_id: &str, payload: &Value) {
    let Some(node_id) = payload.get("nodeId").and_then(Value::as_str) else {
        return;
    };
    let instance = payload.get("instanceId").and_then(Value::as_str);
    let status = payload.get("status").and_then(Value::as_str);
    guard.on_node_finished(
        run_id,
        node_id,
        instance,
        status,
        LoopValue::Read(payload.get("output")),
        true,
    );
}

fn note_loop_error(guard: &mut LoopGuard, run_id: &str, payload: &Value) {
    let Some(node_id) = payload.get("nodeId").and_then(Value::as_str) else {
        return;
    };
    let instance = payload.get("instanceId").and_then(Value::as_str);
    let error = payload.get("error");
    let name = error.and_then(|e| e.get("name")).and_then(Value::as_js_str);
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_js_str);
    guard.on_node_error(run_id, node_id, instance, name, message);
}

/// Held time per node execution, so `node.finished` / `node.error` carry `heldMs` (held
/// time is not run time: "ran" is `durationMs - heldMs`).
#[derive(Default)]
struct HeldLedger {
    /// Open executions per (run, node id), most recent last, with the held ms so far.
    open: HashMap<(String, String), Vec<(String, f64)>>,
}

impl HeldLedger {
    fn started(&mut self, run_id: &str, node_id: &str, instance_id: &str) {
        self.open
            .entry((run_id.to_string(), node_id.to_string()))
            .or_default()
            .push((instance_id.to_string(), 0.0));
    }

    fn credit(&mut self, run_id: &str, node_id: &str, held_ms: f64) {
        if let Some(stack) = self
            .open
            .get_mut(&(run_id.to_string(), node_id.to_string()))
        {
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
        (held > 0.0).then_some(normalize_duration(held))
    }

    /// The held ms of an execution still open (a `node.error` that its `node.finished` may
    /// follow), leaving it open.
    fn so_far(&self, run_id: &str, node_id: &str, instance_id: Option<&str>) -> Option<f64> {
        let stack = self.open.get(&(run_id.to_string(), node_id.to_string()))?;
        let held = match instance_id {
            Some(id) => stack.iter().rev().find(|(i, _)| i == id)?.1,
            None => stack.last()?.1,
        };
        (held > 0.0).then_some(normalize_duration(held))
    }

    /// Drops what is left of a finished run (executions that ended with a `node.error` and
    /// no `node.finished`, as adapters without an `error` gate emit them).
    fn forget_run(&mut self, run_id: &str) {
        self.open.retain(|(run, _), _| run != run_id);
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
    /// A connection was tried at least once.
    tried: bool,
    /// Envelopes queued on the link since its last successful flush: if the link fails
    /// before the next one, they count as never delivered.
    unflushed: usize,
    /// The on-disk spool, when `spoolDir` is set.
    spooler: spooler::Spooler,
}

impl Worker {
    fn new(inner: Arc<Inner>, rx: Receiver<Outgoing>) -> Worker {
        let config = &inner.config;
        let redactor = redact::Redactor::new(config.hide);
        let mut buffer = buffer::ReplayBuffer::new(config.buffer_size, config.max_buffer_bytes);
        let spooler = spooler::Spooler::new(config);
        buffer.set_spill(spooler.active());
        Worker {
            session: Session { inner },
            rx,
            redactor,
            shrink_warnings: shrink::ShrinkWarnings::new(),
            buffer,
            ledger: HeldLedger::default(),
            link: None,
            next_attempt: Some(Instant::now()),
            fast_retry: FAST_RETRY_DELAYS.len(),
            tried: false,
            unflushed: 0,
            spooler,
        }
    }

    fn inner(&self) -> &Inner {
        &self.session.inner
    }

    fn run(mut self) {
        loop {
            let now = Instant::now();
            let mut wake = self.next_attempt.filter(|_| self.link.is_none());
            if let Some(due) = self.session.token_deadline() {
                wake = Some(wake.map_or(due, |w| w.min(due)));
            }
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
            let busy = first.is_ok();
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
            self.take_handoff_loss();
            self.flush_link();
            self.spooler
                .flush(&mut self.buffer, &self.session.inner.warner);
            if stop {
                self.finish_spool();
            }
            self.publish_stats();
            if stop {
                return;
            }
            self.session.flush_due_tokens();
            if self.link.is_some() {
                self.session.release_expired();
            } else if self.next_attempt.is_some_and(|at| at <= Instant::now()) {
                self.attempt();
                self.publish_stats();
            }
            if busy {
                // More is probably on its way: collect it for a moment instead of being
                // woken once per event (unparked at once for gates and flushes).
                std::thread::park_timeout(WORKER_LINGER);
            }
        }
    }

    /// Handles one message; returns true when the worker must stop.
    fn handle(&mut self, message: Outgoing) -> bool {
        match message {
            Outgoing::Event(event) => self.process(event),
            Outgoing::LoopOnly(mut event) => {
                let inner = self.inner();
                note_dropped(&mut inner.loop_guard.lock(), &mut event);
                inner.loop_backlog.fetch_sub(1, Ordering::AcqRel);
            }
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
                    self.buffer.mark_undelivered_newest(self.unflushed);
                    self.unflushed = 0;
                    self.schedule_retry(true);
                }
            }
            Outgoing::Flush(reply) => {
                self.connect_to_deliver();
                self.take_handoff_loss();
                self.flush_link();
                self.publish_stats();
                let _ = reply.send(());
            }
            Outgoing::Sync(reply) => {
                self.take_handoff_loss();
                self.publish_stats();
                let _ = reply.send(());
            }
            Outgoing::Shutdown(reply) => {
                self.connect_to_deliver();
                while let Ok(message) = self.rx.try_recv() {
                    match message {
                        Outgoing::Event(event) => self.process(event),
                        Outgoing::Flush(r) | Outgoing::Sync(r) | Outgoing::Shutdown(r) => {
                            let _ = r.send(());
                        }
                        _ => {}
                    }
                }
                self.take_handoff_loss();
                self.flush_link();
                self.finish_spool();
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
        let verbatim = self.take_verbatim(&mut event);
        self.session
            .resolve_member(&mut event.payload, event.deferred_member.take());
        // A node event queued typed is built here, off the application thread.
        event.payload.built();
        if event.loop_deferred {
            // Before redaction: the guard compares values as the integration handed them over.
            let inner = self.inner();
            // Keyed in full here, so no ticket comes back.
            let (warning, _) = note_loop(
                &mut inner.loop_guard.lock(),
                &event.run_id,
                event.event_type,
                &event.payload,
                event.seq,
                false,
                None,
            );
            inner.loop_backlog.fetch_sub(1, Ordering::AcqRel);
            if let Some(w) = warning {
                inner.warner.warn(&w.key, &w.message);
            }
        }
        if event.event_type == MessageType::RunFinished {
            // After every deferred update of the run (see `Session::finish_run`).
            self.inner().loop_guard.lock().forget(&event.run_id);
        }
        if let Some(ticket) = event.loop_output.take() {
            // Keyed outside the guard's lock, before redaction, like the rest of the call.
            let inner = self.inner();
            let key = inner.loop_keyer.key_output(event.payload.member("output"));
            inner
                .loop_guard
                .lock()
                .fill_output(&event.run_id, ticket, Some(key));
            inner.loop_outputs_pending.fetch_sub(1, Ordering::AcqRel);
        }
        let type_name = event.event_type.as_str();
        let context = redact::EventContext {
            run_id: &event.run_id,
            node_kind: event.node_kind.map(NodeKind::as_str),
        };
        let outcome = self
            .redactor
            .redact_in(&context, type_name, event.payload.built());
        if let Some(warning) = outcome.warning() {
            self.inner().warner.warn(warning.key, &warning.message);
        }
        if !outcome.keep() {
            return;
        }
        self.stamp_held_time(&mut event);
        let spliced = verbatim.and_then(|member| {
            let text = std::str::from_utf8(&member.text).ok()?;
            let json = shrink::serialize_with_verbatim(
                event.payload.built(),
                member.key,
                text,
                shrink::MAX_PAYLOAD_BYTES,
            );
            if json.is_none() {
                // Too big to go out whole: read it, and shrink the payload as usual.
                let value = self.session.resolve(HostValue::Text(member.text));
                event.payload.set_member(member.key, value);
            }
            json
        });
        let serialized = match spliced {
            Some(json) => shrink::Serialized {
                original_bytes: json.len(),
                json,
                truncated: false,
            },
            None => shrink::serialize_payload(
                event.payload.built(),
                shrink::MAX_PAYLOAD_BYTES,
                Some(type_name),
            ),
        };
        if serialized.truncated {
            let frame =
                wire::encode_envelope(PROTOCOL_VERSION, 0, 0, "r", type_name, &serialized.json);
            let valid = matches!(
                wire::parse_envelope(frame.as_bytes()),
                wire::ParseOutcome::Ok(_)
            );
            let warning = if valid {
                self.shrink_warnings
                    .shrunk(type_name, serialized.original_bytes)
            } else {
                self.shrink_warnings
                    .invalid(type_name, serialized.original_bytes)
            };
            if let Some(message) = warning {
                self.inner()
                    .warner
                    .warn(&format!("payload-budget:{type_name}"), &message);
            }
        }
        let frame = wire::encode_envelope(
            PROTOCOL_VERSION,
            event.seq,
            epoch_ms(),
            &event.run_id,
            type_name,
            &serialized.json,
        );
        let delivered = match self.link.as_mut() {
            Some(link) => match link.queue(frame.clone()) {
                Ok(()) => {
                    self.unflushed += 1;
                    true
                }
                Err(_) => {
                    self.link_failed();
                    false
                }
            },
            None => false,
        };
        let pushed = self
            .buffer
            .push_with(&event.run_id, event.seq, frame, delivered);
        if let Some(warning) = pushed.warning {
            self.inner().warner.warn("buffer-overflow", &warning);
        }
        if self.buffer.has_spilled() {
            self.spill();
        }
    }

    /// Writes what the ring spilled to the spool (gap markers for a dropped segment take
    /// fresh seqs).
    fn spill(&mut self) {
        let items = self.buffer.take_spilled();
        let inner = self.session.inner.clone();
        let mut next_seq = || {
            let mut shared = inner.shared.lock();
            shared.seq += 1;
            shared.seq - 1
        };
        self.spooler.write(
            items,
            &mut self.buffer,
            &mut next_seq,
            epoch_ms(),
            &inner.warner,
        );
    }

    /// The session ends: the spool keeps what never reached a debugger, or goes.
    fn finish_spool(&mut self) {
        let inner = self.session.inner.clone();
        let mut next_seq = || {
            let mut shared = inner.shared.lock();
            shared.seq += 1;
            shared.seq - 1
        };
        let attached = self.link.is_some();
        self.spooler.finish(
            attached,
            &mut self.buffer,
            &mut next_seq,
            epoch_ms(),
            &inner.warner,
        );
    }

    /// The event's deferred member, taken when it can go out exactly as the host wrote it
    /// ([`HostValue::Stringified`]): nothing reads the value (no hide switch is on, the loop
    /// guard is not keying this event), it fits the payload budget, and it nests less deeply
    /// than [`shrink::depth::MAX_VALUE_DEPTH`] (deeper parts would be cut). Its grammar is
    /// `JSON.stringify`'s, so only its brackets are read: parsing it only to write the same
    /// bytes again was about half the worker's time for a 1 KB tool call.
    fn take_verbatim(&self, event: &mut OutEvent) -> Option<DeferredText> {
        if self.redactor.active() || event.loop_deferred || event.loop_output.is_some() {
            return None;
        }
        let forwardable = |m: &mut DeferredMember| {
            matches!(&m.value, HostValue::Stringified(text)
                if text.len() <= shrink::MAX_PAYLOAD_BYTES
                    && crate::json::nests_less_than(text, shrink::depth::MAX_VALUE_DEPTH))
        };
        let member = event.deferred_member.take_if(forwardable)?;
        match member.value {
            HostValue::Stringified(text) => Some(DeferredText {
                key: member.key,
                text,
            }),
            _ => None,
        }
    }

    fn stamp_held_time(&mut self, event: &mut OutEvent) {
        let payload = event.payload.built();
        match event.event_type {
            MessageType::NodeStarted => {
                if let (Some(node), Some(instance)) = (
                    payload.get("nodeId").and_then(Value::as_str),
                    payload.get("instanceId").and_then(Value::as_str),
                ) {
                    self.ledger.started(&event.run_id, node, instance);
                }
            }
            MessageType::ExecResumed => {
                if let Some((node_id, held_ms)) = &event.held {
                    self.ledger.credit(&event.run_id, node_id, *held_ms);
                }
            }
            MessageType::NodeFinished | MessageType::NodeError => {
                let ends = event.event_type == MessageType::NodeFinished;
                let Some(node) = payload
                    .get("nodeId")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                else {
                    return;
                };
                let instance = payload
                    .get("instanceId")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                // A `node.error` stamps the held time so far but leaves the execution open:
                // its `error` gate may still hold, and the `node.finished` that follows a
                // continue, retry, inject or abort carries that time too.
                let held = if ends {
                    self.ledger.ended(&event.run_id, &node, instance.as_deref())
                } else {
                    self.ledger
                        .so_far(&event.run_id, &node, instance.as_deref())
                };
                if let (Some(held), Some(map)) = (held, payload.as_object_mut()) {
                    if !map.contains_key("heldMs") {
                        map.insert("heldMs", Value::from(held));
                    }
                }
            }
            MessageType::RunFinished => self.ledger.forget_run(&event.run_id),
            _ => {}
        }
    }

    /// Before a flush or the last delivery: a debugger never tried (the app ended before the
    /// first attempt) or due for a retry is tried now, so a short script's ring is not
    /// given up on. Bounded by the connect and handshake timeouts.
    fn connect_to_deliver(&mut self) {
        let due = !self.tried || self.next_attempt.is_some_and(|at| at <= Instant::now());
        if self.link.is_none() && due {
            self.attempt();
        }
    }

    /// Takes over the events dropped at the hand-off into the ring's loss accounting, warns
    /// with the real total, and, attached, sends the gap markers at once.
    fn take_handoff_loss(&mut self) {
        if !self.inner().handoff_lost.swap(false, Ordering::AcqRel) {
            return;
        }
        let loss = std::mem::take(&mut self.session.inner.shared.lock().handoff_loss);
        if loss.is_empty() {
            return;
        }
        self.buffer.absorb_loss(loss);
        let lost = self.buffer.stats().lost;
        self.inner().warner.warn(
            "handoff-loss",
            &format!(
                "dropped events because the app outran the GraphMind worker ({lost} lost so far in this session); \
                 the recorded run is incomplete and its gap marker says which seqs are missing"
            ),
        );
        if self.link.is_some() {
            self.send_gap_markers();
        }
    }

    /// The end of a dark period, in the host's log with the real count: the first loss only
    /// warned "dropped 1 event", the markers just sent name every one.
    fn warn_gaps_sent(&self, gaps: &[buffer::PendingGap]) {
        let lost: u64 = gaps.iter().map(|g| g.dropped_count).sum();
        if lost == 0 {
            return;
        }
        let ranges: Vec<String> = gaps
            .iter()
            .take(3)
            .map(|g| {
                format!(
                    "{}: {} (seq {}-{})",
                    g.run_id, g.dropped_count, g.from_seq, g.to_seq
                )
            })
            .collect();
        let more = if gaps.len() > 3 {
            format!(" and {} more runs", gaps.len() - 3)
        } else {
            String::new()
        };
        self.inner().warner.warn(
            &format!("gaps-sent:{}", epoch_ms()),
            &format!(
                "{lost} event{} never reached the debugger; the gap markers just sent name them ({}{more})",
                if lost == 1 { "" } else { "s" },
                ranges.join(", ")
            ),
        );
    }

    /// Sends one gap marker per run that lost events, each with a fresh seq (attached).
    fn send_gap_markers(&mut self) {
        let gaps = self.buffer.take_gaps();
        if gaps.is_empty() {
            return;
        }
        let markers: Vec<String> = {
            let mut shared = self.session.inner.shared.lock();
            gaps.iter()
                .map(|gap| {
                    let frame = gap.marker(shared.seq, epoch_ms());
                    shared.seq += 1;
                    frame
                })
                .collect()
        };
        let Some(link) = self.link.as_mut() else {
            self.buffer.restore_gaps(gaps);
            return;
        };
        if markers.into_iter().all(|frame| link.queue(frame).is_ok()) {
            self.warn_gaps_sent(&gaps);
        } else {
            self.buffer.restore_gaps(gaps);
            self.link_failed();
        }
    }

    fn flush_link(&mut self) {
        if let Some(link) = self.link.as_mut() {
            if link.flush().is_err() {
                self.link_failed();
            } else {
                self.unflushed = 0;
            }
        }
    }

    fn link_failed(&mut self) {
        // What the failed link never flushed is replayed (or, evicted, counted as lost).
        self.buffer.mark_undelivered_newest(self.unflushed);
        self.unflushed = 0;
        let generation = self.session.inner.shared.lock().link_generation;
        if let Some(link) = self.link.take() {
            link.abort();
        }
        self.session.handle_detached(generation);
        self.schedule_retry(true);
    }

    fn schedule_retry(&mut self, was_attached: bool) {
        let interval = millis(self.inner().config.retry_interval_ms);
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
        let token = self.session.inner.shared.lock().session_token.clone();
        let config = &self.inner().config;
        let capabilities: Vec<JsStr> = KNOWN_CAPABILITIES
            .iter()
            .filter(|c| config.edit_input || **c != "edit-input")
            .map(|c| JsStr::from(*c))
            .collect();
        let mut hello = Hello::new(CLIENT_VERSION, capabilities);
        hello.app = Some(config.app_name.as_str().into());
        hello.sdk = Some(SdkInfo::new(
            config.sdk.name.as_str(),
            config.sdk.version.as_str(),
        ));
        hello.resume_token = token.map(JsStr::from);
        hello.encode(0, epoch_ms(), WILDCARD_RUN_ID)
    }

    fn attempt(&mut self) {
        self.tried = true;
        let hello = self.hello();
        let config = &self.inner().config;
        let result = transport::connect(
            &config.url,
            millis(config.connect_timeout_ms),
            millis(config.handshake_timeout_ms),
            &hello,
            PROTOCOL_VERSION,
        );
        match result {
            Ok(link) => self.attached(link),
            Err(error) => {
                let key = match &error {
                    transport::TransportError::VersionMismatch { .. } => "transport-version",
                    _ => "transport-connect",
                };
                let message = format!(
                    "not attached to the debugger at {} ({error}); staying detached, retrying in the background",
                    config.url
                );
                self.inner().warner.warn(key, &message);
                self.schedule_retry(false);
            }
        }
    }

    fn attached(&mut self, link: transport::Link) {
        let transport::Link {
            reader,
            mut writer,
            ack,
        } = link;
        let breakpoints: Vec<BreakpointMatcher> = ack
            .get("breakpoints")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(BreakpointMatcher::from_value)
                    .collect()
            })
            .unwrap_or_default();
        let mode = ack
            .get("mode")
            .and_then(Value::as_str)
            .and_then(RunMode::parse)
            .unwrap_or_default();
        let hub = ack
            .get("hubCapabilities")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect::<Vec<_>>()
            });
        let mut generation = 0;
        self.take_handoff_loss();
        let gaps = self.buffer.take_gaps();
        let mut markers = Vec::with_capacity(gaps.len());
        let disposed;
        {
            let mut shared = self.session.inner.shared.lock();
            // A disposed session attaches only for its last delivery (see
            // `connect_to_deliver`): gap markers and the ring go out, nothing is armed and no
            // reader listens.
            disposed = shared.disposed;
            if !disposed {
                if let Some(token) = ack
                    .get("sessionToken")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                {
                    shared.session_token = Some(token.to_string());
                }
                shared.hub_capabilities = hub;
                shared.engine.arm(breakpoints, mode);
                shared.engine_attached = true;
                shared.link_generation += 1;
                generation = shared.link_generation;
            }
            // Gap markers take fresh seqs, ahead of the replay (what they describe is older).
            for gap in &gaps {
                markers.push(gap.marker(shared.seq, epoch_ms()));
                shared.seq += 1;
            }
            if !disposed {
                self.session.inner.attached.store(true, Ordering::Release);
                self.session.inner.attach_signal.notify_all();
            }
        }
        let mut ok = markers.into_iter().all(|frame| writer.queue(frame).is_ok());
        let spooled = if ok {
            self.spooler.pending(&self.session.inner.warner)
        } else {
            Vec::new()
        };
        let had_spool = !spooled.is_empty();
        if ok && had_spool {
            ok = spooled.into_iter().all(|r| writer.queue(r.frame).is_ok());
        }
        let replayed = self.buffer.frames().len();
        if ok {
            ok = self
                .buffer
                .frames()
                .map(str::to_string)
                .collect::<Vec<_>>()
                .into_iter()
                .all(|f| writer.queue(f).is_ok());
        }
        ok = ok && writer.flush().is_ok();
        if !ok {
            self.buffer.restore_gaps(gaps);
            writer.abort();
            if disposed {
                return;
            }
            self.session.handle_detached(generation);
            self.schedule_retry(true);
            return;
        }
        self.buffer.mark_delivered(replayed);
        if had_spool {
            self.spooler
                .replayed(&mut self.buffer, &self.session.inner.warner);
        }
        self.warn_gaps_sent(&gaps);
        self.link = Some(writer);
        self.fast_retry = FAST_RETRY_DELAYS.len();
        self.next_attempt = None;
        if disposed {
            return;
        }
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
        inner
            .buffered
            .store(stats.buffered as u64, Ordering::Relaxed);
        inner.dropped.store(stats.dropped, Ordering::Relaxed);
        inner.lost.store(stats.lost, Ordering::Relaxed);
        inner
            .pending_gaps
            .store(stats.pending_gaps as u64, Ordering::Relaxed);
        inner.spooled.store(self.spooler.len(), Ordering::Relaxed);
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
