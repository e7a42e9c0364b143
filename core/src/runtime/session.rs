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

mod attach;
mod control;
mod emit;
mod fork_hooks;
mod gates;
mod handoff;
mod lifecycle;
mod loop_glue;
mod nodes;
mod payload;
mod runs;
mod spooler;
mod worker;

use control::*;
use gates::*;
use handoff::*;
use loop_glue::*;
use worker::*;

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
use crate::transport::{self, Connector, LinkReader, LinkWriter};
use crate::warn::{WarnSink, Warner};
use crate::{buffer, config, edit_input, event, redact, shrink, smart, wire};
use crossbeam_channel::{Receiver, RecvTimeoutError, Select, Sender, TryRecvError, TrySendError};
use payload::Payload;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::CLIENT_VERSION;

/// How many events may wait for the worker before new ones are dropped (and counted).
pub const OUTBOX_CAPACITY: usize = 65_536;

/// How many queued messages the worker handles before it flushes the socket: with the one
/// that woke it, the most frames a link failure can leave counted as undelivered although
/// the server had read them (docs/protocol.md, gap markers).
pub const MAX_BATCH: usize = 4096;

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

/// Slots of the worker's control channel ([`Control`]: flush, stats sync, connect-now,
/// link-gone): a few callers at once; a full one is waited on by a flush (with its
/// deadline), and a dropped connect-now or link-gone is harmless (see [`Control`]).
const CONTROL_CAPACITY: usize = 64;

/// The most the drop of an app's last handle waits for the worker to deliver what was
/// queued and end (see [`AppHandles`]); past it the worker finishes on its own. Short, as a
/// drop may run on a host's garbage collector with the host's global lock held.
pub const DROP_WAIT: Duration = Duration::from_millis(100);

/// How often a dispose that waits for the worker's thread to end looks again.
const JOIN_POLL: Duration = Duration::from_micros(200);

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

/// What goes to the worker on the event channel ([`OUTBOX_CAPACITY`] slots).
enum Outgoing {
    Event(OutEvent),
    /// A dropped node event whose loop-guard update the worker still makes, in order
    /// (its `input` / `output` already stripped).
    LoopOnly(OutEvent),
}

/// What goes to the worker on its own small channel ([`CONTROL_CAPACITY`] slots), so a
/// flush never queues behind, or waits for room among, 65,536 events. The worker takes
/// control messages before events; a flush or a sync first handles every event handed over
/// before it (its [`Barrier`]).
enum Control {
    /// Connect now (`ready`). Dropped when the channel is full: one is already pending.
    Kick,
    /// The link of this generation is gone (its reader saw it close). Dropped when the
    /// channel is full: the worker's next write on the dead link fails the same way.
    Detached(u64),
    /// Deliver everything handed over before it, then reply (`flush`).
    Flush(Barrier),
    /// Publish the counters once everything handed over before it is handled (`stats()`).
    Sync(Barrier),
}

/// A request that covers the events handed over before it: how many had been handed to the
/// event channel when it was made (under the session lock, as every hand-off), and where
/// to say it is done. The worker handles events up to that count first, so the request
/// sees exactly what came before it, however full the event channel was.
struct Barrier {
    handed: u64,
    reply: Sender<()>,
}

/// The application side of the worker's channels: the events ([`OUTBOX_CAPACITY`]), the
/// control messages ([`CONTROL_CAPACITY`]) and the shutdown, a channel of one slot that
/// only the one `dispose` sends on, so a shutdown always finds room.
struct Outbox {
    events: Sender<Outgoing>,
    /// Messages handed to `events` so far (the [`Barrier`] count).
    handed: u64,
    control: Sender<Control>,
    shutdown: Sender<Barrier>,
}

/// The worker's receiving ends of an [`Outbox`].
struct Inbox {
    events: Receiver<Outgoing>,
    control: Receiver<Control>,
    shutdown: Receiver<Barrier>,
}

/// A worker's fresh channels.
fn open_outbox() -> (Outbox, Inbox) {
    open_outbox_of(OUTBOX_CAPACITY, CONTROL_CAPACITY, 1)
}

/// Channels of the given sizes (all 0: a forked child's placeholder, which allocates
/// nothing and is replaced before anything is sent).
fn open_outbox_of(events: usize, control: usize, shutdown: usize) -> (Outbox, Inbox) {
    let (events, events_rx) = crossbeam_channel::bounded(events);
    let (control, control_rx) = crossbeam_channel::bounded(control);
    let (shutdown, shutdown_rx) = crossbeam_channel::bounded(shutdown);
    let outbox = Outbox {
        events,
        handed: 0,
        control,
        shutdown,
    };
    let inbox = Inbox {
        events: events_rx,
        control: control_rx,
        shutdown: shutdown_rx,
    };
    (outbox, inbox)
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
    outbox: Outbox,
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
    /// The worker's thread, joined by [`Session::dispose`] and by the drop of the app's last
    /// handle, each within its bound.
    worker_join: Option<std::thread::JoinHandle<()>>,
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
    /// The receiving ends, taken by the worker when it starts.
    inbox: Mutex<Option<Inbox>>,
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
    /// How the worker reaches the debugger (the WebSocket one, or an in-memory one in the
    /// unit tests).
    connector: Box<dyn Connector>,
}

/// A GraphMind session. Cheap to clone (all clones are the same session). When the last
/// clone an app holds is dropped, the session is disposed, waiting at most [`DROP_WAIT`]
/// (see [`AppHandles`]): its worker delivers what was queued and stops.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
    /// Shared by every handle the app holds; `None` in the session's own threads (the
    /// worker, the reader) and the fork registry's, which must not keep it alive. Held
    /// for its `Drop`.
    _app_handles: Option<Arc<AppHandles>>,
}

/// The app's handles to a session, counted by their `Arc`: dropping the last one disposes
/// the session, so its worker stops instead of outliving every handle (the worker and
/// reader hold only the shared state, never an app handle). The drop waits at most
/// [`DROP_WAIT`] for the worker to deliver and end (then joins its thread); a worker still
/// busy then (a connection being tried) finishes on its own.
struct AppHandles {
    inner: std::sync::Weak<Inner>,
}

impl Drop for AppHandles {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            Session::internal(inner).dispose(DROP_WAIT);
        }
    }
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
    /// The session, while its state exists. The handle returned does not count as one of
    /// the app's: dropping it never disposes the session (the fork hooks drop theirs inside
    /// `fork()`).
    pub fn upgrade(&self) -> Option<Session> {
        self.inner.upgrade().map(Session::internal)
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
        let connector = transport::WebSocketConnector {
            url: config.url.clone(),
            connect_timeout: millis(config.connect_timeout_ms),
            handshake_timeout: millis(config.handshake_timeout_ms),
            protocol_version: PROTOCOL_VERSION,
        };
        Session::with_connector(config, sink, Box::new(connector))
    }

    /// [`Session::new`] with the way to reach the debugger given: the unit tests' in-memory
    /// link instead of the WebSocket one.
    pub(crate) fn with_connector(
        config: Config,
        sink: WarnSink,
        connector: Box<dyn Connector>,
    ) -> Session {
        let (outbox, inbox) = open_outbox();
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
                outbox,
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
                worker_join: None,
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
            inbox: Mutex::new(Some(inbox)),
            loop_guard: Mutex::new(loop_guard),
            loop_keyer,
            loop_watch,
            loop_holds,
            loop_outputs_pending: AtomicU64::new(0),
            loop_backlog: AtomicU64::new(0),
            llm_memory: Mutex::default(),
            replay: Mutex::new(None),
            connector,
            config,
        };
        let inner = Arc::new(inner);
        Session {
            _app_handles: Some(Arc::new(AppHandles {
                inner: Arc::downgrade(&inner),
            })),
            inner,
        }
    }

    /// A handle for the session's own threads: it keeps the state alive but is not one of
    /// the app's handles ([`AppHandles`]).
    fn internal(inner: Arc<Inner>) -> Session {
        Session {
            inner,
            _app_handles: None,
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
        Self::send_control(&shared, Control::Kick);
        while !shared.engine_attached && !shared.disposed {
            let (next, timed_out) = self.inner.attach_signal.wait_until(shared, deadline);
            shared = next;
            if timed_out {
                break;
            }
        }
        shared.engine_attached
    }
}

/// Durations on the wire: finite, >= 0, 0.01 ms resolution.
pub fn normalize_duration(ms: f64) -> f64 {
    if !ms.is_finite() || ms < 0.0 {
        0.0
    } else {
        (ms * 100.0).round() / 100.0
    }
}

#[cfg(test)]
mod memory_link;
#[cfg(test)]
mod tests;
