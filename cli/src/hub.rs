//! The server's hub state: app (ingest) connections, viewer (UI) connections, run
//! ownership and claims, the debug state (breakpoints + mode) and the pause registry, as a
//! plain struct ([`HubState`]) whose methods are short, non-blocking updates (storage and
//! fan-out happen on the writer thread, `writer.rs`). Also [`Shared`], what every task and
//! thread of the server holds.
//!
//! One thread owns the `HubState`: the hub thread (`hub_task.rs`); everyone else reaches it
//! through the [`Hub`] handle in [`Shared::hub`], with commands.

pub(crate) use crate::logging::throttled_log;

use crate::envelope::{MessageType, PROTOCOL_VERSION, WILDCARD_RUN_ID};
use crate::hub_task::Hub;
use crate::logging::LogThrottle;
use crate::tokens::{self, ControlPolicy, Principal, Verifier};
use crate::util::{new_token, now_ms, object, put_opt, text};
use crate::writer::Op;
use crossbeam_channel::{unbounded, Receiver, Sender};
use graphmind_core::json::{self, Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::{Condvar, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How many run claims are remembered; oldest are evicted first (reference: `MAX_RUN_CLAIMS`).
pub const MAX_RUN_CLAIMS: usize = 5_000;
/// Most runs one app connection may have open (written to, not finished) at once. Events
/// of one more run are refused (logged, not stored) until one of its runs finishes: one
/// connection cannot flood the run list (100,000 runs in seconds).
pub const MAX_LIVE_RUNS_PER_CONNECTION: usize = 1_000;
/// Longest `resumeToken` accepted from a client (reference: `MAX_RESUME_TOKEN_LENGTH`).
pub const MAX_RESUME_TOKEN_LENGTH: usize = 128;
pub use crate::logging::LOG_THROTTLE_MS;
/// How long a forwarded resume waits for the app's `exec.resumed` before the pause is
/// reopened and the viewer told `timeout`.
pub const RESOLVING_TIMEOUT_MS: u64 = 30_000;
/// Closed pauses remembered, so a late resume is told `taken` / `no-such-pause`.
pub const MAX_CLOSED_PAUSES: usize = 10_000;
/// The server's version, as `hello.ack`, `welcome` and `/health` report it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The close code every socket gets when the server shuts down (1001, going away), as
/// the reference closes its sockets.
pub const SHUTDOWN_CLOSE_CODE: u16 = 1001;
/// The close reason sent with [`SHUTDOWN_CLOSE_CODE`].
pub const SHUTDOWN_CLOSE_REASON: &str = "server shutting down";

/// Identifies one socket for the life of the process.
pub type ConnId = u64;

/// Something to send on a socket, queued for its connection task.
#[derive(Debug, Clone)]
pub enum Out {
    /// A text frame.
    Text(String),
    /// A close frame with this code and reason; the connection ends after it.
    Close(u16, String),
}

/// Most bytes of live messages a viewer may have queued and unsent. A viewer that falls
/// further behind (a stalled tab, a peer that stopped reading) is closed with 1008 rather
/// than growing the server's memory; it replays the run from storage when it reconnects.
pub const MAX_VIEWER_BACKLOG_BYTES: usize = 64 * 1024 * 1024;
/// Most bytes of live messages all viewers together may have queued and unsent. Past it, a
/// viewer holding more than [`VIEWER_FAIR_SHARE_BYTES`] is closed (1008) the next time a
/// live message is queued for it, so the server's memory is bounded in total, not only per
/// viewer: at most this plus one fair share per viewer (and viewers are capped too).
pub const MAX_VIEWERS_BACKLOG_BYTES: usize = 128 * 1024 * 1024;
/// What a viewer may hold while the total is over [`MAX_VIEWERS_BACKLOG_BYTES`]: a viewer
/// that keeps up holds close to nothing, so only those that stopped reading are closed.
pub const VIEWER_FAIR_SHARE_BYTES: usize = 1024 * 1024;
/// Most viewer sockets open at once; one more is answered 503.
pub const MAX_VIEWERS: usize = 64;
/// Most viewer sockets without a credential open at once (tokenless viewers need no token
/// to open, so they are what a stray local process would open); one more is answered 503.
pub const MAX_ANONYMOUS_VIEWERS: usize = 4;

/// Most breakpoints armed at once. A `breakpoint.set` past it is refused (an `error` to the
/// viewer), so the list every `welcome` and `hello.ack` carries stays small.
pub const MAX_BREAKPOINTS: usize = 256;
/// Longest breakpoint matcher accepted, as JSON text.
pub const MAX_BREAKPOINT_BYTES: usize = 4096;

/// One socket's outbound queue, with its unsent bytes counted.
#[derive(Clone)]
pub struct Outbox {
    tx: Sender<Out>,
    bytes: Arc<AtomicUsize>,
    overflow: Arc<AtomicBool>,
    /// Wakes the socket's task when something is queued (a permit is kept when the task
    /// is busy, so no wake-up is lost).
    wake: Arc<Notify>,
    /// The viewers' total backlog (see [`MAX_VIEWERS_BACKLOG_BYTES`]); `None` for apps.
    total: Option<Arc<AtomicUsize>>,
}

impl Outbox {
    /// A new queue and its receiving end.
    pub fn new() -> (Outbox, Receiver<Out>) {
        let (tx, rx) = unbounded();
        let wake = Arc::new(Notify::new());
        (
            Outbox {
                tx,
                bytes: Arc::new(AtomicUsize::new(0)),
                overflow: Arc::new(AtomicBool::new(false)),
                wake,
                total: None,
            },
            rx,
        )
    }

    /// A viewer's queue: its backlog also counts toward the viewers' `total`.
    pub fn for_viewer(total: Arc<AtomicUsize>) -> (Outbox, Receiver<Out>) {
        let (mut outbox, rx) = Outbox::new();
        outbox.total = Some(total);
        (outbox, rx)
    }

    /// The socket is gone: what it never sent no longer counts toward the total.
    pub fn forget_backlog(&self) {
        let left = self.bytes.swap(0, Ordering::Relaxed);
        if let Some(total) = &self.total {
            let _ = total.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_sub(left))
            });
        }
    }

    /// What wakes this socket's task when something is queued for it.
    pub fn wake(&self) -> &Notify {
        &self.wake
    }

    fn notify(&self) {
        self.wake.notify_one();
    }

    /// Queues a text frame (replies, replays, state): never refused.
    pub fn text(&self, t: String) -> bool {
        self.bytes.fetch_add(t.len(), Ordering::Relaxed);
        if let Some(total) = &self.total {
            total.fetch_add(t.len(), Ordering::Relaxed);
        }
        let ok = self.tx.send(Out::Text(t)).is_ok();
        self.notify();
        ok
    }

    /// Queues a live message unless the backlog is over [`MAX_VIEWER_BACKLOG_BYTES`]; then
    /// the socket is marked overflowed (its task closes it) and nothing more is queued.
    pub fn live(&self, t: String) -> bool {
        if self.overflow.load(Ordering::Relaxed) {
            return false;
        }
        let own = self.bytes.load(Ordering::Relaxed);
        let over_total = self.total.as_ref().is_some_and(|total| {
            total.load(Ordering::Relaxed) + t.len() > MAX_VIEWERS_BACKLOG_BYTES
                && own >= VIEWER_FAIR_SHARE_BYTES
        });
        if own + t.len() > MAX_VIEWER_BACKLOG_BYTES || over_total {
            self.overflow.store(true, Ordering::Relaxed);
            self.notify();
            return false;
        }
        self.text(t)
    }

    /// Queues a close frame.
    pub fn close(&self, code: u16, reason: String) -> bool {
        let ok = self.tx.send(Out::Close(code, reason)).is_ok();
        self.notify();
        ok
    }

    /// The socket's task wrote `n` bytes.
    pub fn sent(&self, n: usize) {
        let n = n.min(self.bytes.load(Ordering::Relaxed));
        self.bytes.fetch_sub(n, Ordering::Relaxed);
        if let Some(total) = &self.total {
            let _ = total.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_sub(n))
            });
        }
    }

    /// The backlog passed its limit.
    pub fn overflowed(&self) -> bool {
        self.overflow.load(Ordering::Relaxed)
    }
}

/// A timer the timer thread fires.
#[derive(Debug, Clone)]
pub enum Timer {
    /// Mark `run` abandoned if generation `gen` is still current and nobody owns it.
    Abandon { run: String, gen: u64 },
    /// Reopen a pause whose forwarded resume `request_id` got no answer.
    Resolving {
        run: String,
        pause: String,
        request_id: String,
    },
}

/// One app connection.
pub struct IngestConn {
    tx: Outbox,
    /// `hello` received and `hello.ack` sent.
    pub attached: bool,
    seq: u64,
    /// `hello.app`.
    pub app: Option<String>,
    source: &'static str,
    owned: HashSet<String>,
    /// Runs this connection opened that have not finished ([`MAX_LIVE_RUNS_PER_CONNECTION`]).
    open_runs: HashSet<String>,
    token: String,
    claim_aware: bool,
    capabilities: Vec<String>,
}

struct UiConn {
    tx: Outbox,
    wildcard: bool,
    principal: Principal,
}

struct Claim {
    token: String,
    strict: bool,
}

/// Who is waiting for the answer to a forwarded resume.
#[derive(Clone, Debug)]
pub enum Responder {
    /// A viewer socket: answered with `resume.result`.
    Ui(ConnId),
    /// An HTTP request (`POST .../resume`): answered with the outcome JSON.
    Http(Sender<Outcome>),
}

/// The answer to one resume: the reference's `ResumeOutcome`.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// `resumed`, `refused`, `taken`, `timeout` or `no-such-pause`.
    pub outcome: &'static str,
    /// Run id.
    pub run_id: String,
    /// Pause id.
    pub pause_id: String,
    /// The resumer's request id, or a minted one.
    pub request_id: String,
    /// Machine-readable reason.
    pub code: Option<String>,
    /// Human text (never quotes a value).
    pub message: Option<String>,
    /// Who resumed (on `resumed`).
    pub principal: Option<Principal>,
}

impl Outcome {
    /// The HTTP status of an outcome (reference: `outcomeStatus`): resumed 200, refused 422
    /// (403 for `forbidden` / `edit-refused`), taken 409, timeout 202, no-such-pause 404.
    pub fn http_status(&self) -> u16 {
        match self.outcome {
            "resumed" => 200,
            "refused" if matches!(self.code.as_deref(), Some("forbidden" | "edit-refused")) => 403,
            "refused" => 422,
            "taken" => 409,
            "timeout" => 202,
            _ => 404,
        }
    }

    /// `{outcome, runId, pauseId, requestId, code?, message?, principal?}`.
    pub fn to_json(&self) -> String {
        let mut m = object([
            ("outcome", self.outcome.into()),
            ("runId", self.run_id.as_str().into()),
            ("pauseId", self.pause_id.as_str().into()),
            ("requestId", self.request_id.as_str().into()),
        ]);
        self.put_reason(&mut m);
        put_opt(&mut m, "principal", self.principal.map(Principal::as_str));
        text(m)
    }

    /// `code?` and `message?`.
    fn put_reason(&self, m: &mut Map) {
        put_opt(m, "code", self.code.as_deref());
        put_opt(m, "message", self.message.as_deref());
    }
}

#[derive(Clone)]
enum PauseState {
    Open,
    Resolving {
        responder: Responder,
        request_id: String,
        principal: Principal,
        operator: Option<String>,
        /// The resumer was already told `timeout` (its own deadline passed).
        gave_up: bool,
    },
}

/// What the hub knows of one held gate (from its `exec.paused`).
#[derive(Clone)]
pub struct PauseInfo {
    /// `payload.nodeId`.
    pub node_id: String,
    /// `before`, `after` or `error`.
    pub point: String,
    /// The `exec.paused` envelope's `ts`.
    pub since: f64,
    /// `payload.reason`.
    pub reason: Option<String>,
    /// `payload.smart`.
    pub smart: Option<Value>,
    /// `payload.loop`.
    pub loop_info: Option<Value>,
    /// `payload.editable`.
    pub editable: Option<bool>,
    /// The owning app's name.
    pub app: Option<String>,
}

struct Pause {
    owner: ConnId,
    state: PauseState,
    info: PauseInfo,
}

#[derive(Clone, Copy, PartialEq)]
enum Closed {
    Resumed,
    Gone,
}

/// What a resume request got right away.
pub enum ResumeStart {
    /// Answered without reaching the app (refused, taken, no such pause...).
    Answered(Outcome),
    /// Forwarded to the app; the timer reopens the pause if it never answers.
    Forwarded { request_id: String, timer: Timer },
}

/// What an app socket needs to store one event, decided by one hub command.
pub struct Admit {
    /// `hello.app` (or `unknown`) for a new run row.
    pub app: String,
    /// `live` or `demo`.
    pub source: &'static str,
    /// This connection just became the run's owner.
    pub owner_changed: bool,
}

/// The state the hub thread owns (reached through [`Shared::hub`]).
pub struct HubState {
    next_id: ConnId,
    ingest: HashMap<ConnId, IngestConn>,
    ui: HashMap<ConnId, UiConn>,
    run_owners: HashMap<String, ConnId>,
    claims: HashMap<String, Claim>,
    claim_order: VecDeque<String>,
    breakpoints: Vec<(String, Value)>,
    mode: String,
    pauses: HashMap<(String, String), Pause>,
    closed: HashMap<(String, String), Closed>,
    closed_order: VecDeque<(String, String)>,
    abandon_gen: HashMap<String, u64>,
    next_gen: u64,
    log_throttle: Arc<LogThrottle>,
    policy: ControlPolicy,
    warned_tokenless: bool,
    /// Viewer sockets admitted but not yet added (their `101` is being written): counted
    /// against [`MAX_VIEWERS`] (all) and [`MAX_ANONYMOUS_VIEWERS`] (anonymous), so two
    /// upgrades at once cannot both take the last slot.
    admitted_viewers: (usize, usize),
    /// The server is going down: sockets get [`SHUTDOWN_CLOSE_CODE`], no run is abandoned.
    shutting_down: bool,
    /// Bumped on every change a long-poll may wait for.
    pub version: u64,
}

/// Everything the connection tasks, the writer and the timer thread share.
pub struct Shared {
    /// The hub thread, which alone owns the [`HubState`].
    pub hub: Hub,
    /// The throttle of repeated log lines (shared with the hub state's own lines).
    pub log_throttle: Arc<LogThrottle>,
    /// The writer thread's queue.
    pub writer: Sender<Op>,
    /// The timer thread's queue: (fire after, what).
    pub timers: Sender<(Duration, Timer)>,
    /// Bound port.
    pub port: u16,
    /// `GRAPHMIND_ABANDON_GRACE_MS`.
    pub grace: Duration,
    /// `GRAPHMIND_ALLOWED_ORIGINS`, parsed.
    pub allowed_origins: graphmind_core::config::AllowedOrigins,
    /// Identifies the viewer and agent tokens.
    pub verifier: Verifier,
    /// `--allow-control` / `--no-edit-input`.
    pub policy: ControlPolicy,
    /// Bumped (and waiters woken) whenever a pause opens, closes or changes state, or a
    /// run ends: the long-polls of `GET /api/pauses` wait on it.
    pub changes: (Mutex<u64>, Condvar),
    /// Long-polls in flight (at most `MAX_CONCURRENT_WAITS`).
    pub active_waits: AtomicUsize,
    /// Plain HTTP requests being answered (their answer not yet written): shutdown waits
    /// for them, so a long-poll it cut short still gets its answer.
    pub http_in_flight: AtomicUsize,
    /// The writer queue's budget (see `writer::Budget`).
    pub budget: crate::writer::Budget,
    /// Path of the database (for read connections).
    pub db_path: std::path::PathBuf,
    /// Bytes queued and unsent for all viewers together ([`MAX_VIEWERS_BACKLOG_BYTES`]).
    pub viewer_backlog: Arc<AtomicUsize>,
    /// Events the writer could not store (a full disk...), shown in `/health`.
    pub storage: crate::storage_health::StorageHealth,
    /// The live OTLP export, when an endpoint is configured.
    pub otlp: Option<crate::otlp_export::Exporter>,
}

/// A stable key for "exact field equality" of breakpoint matchers: the core's canonical
/// JSON (keys sorted in UTF-16 order, as JavaScript sorts, recursively; numbers in one
/// spelling, so `1` and `1.0` are the same matcher, as they are to a JavaScript viewer).
pub fn canonical_key(v: &Value) -> String {
    graphmind_core::canonical::canonical_json_with(v, &[])
}

/// A server -> app envelope, spelled compactly.
pub fn envelope_text(seq: u64, run_id: &str, kind: &str, payload: &str) -> String {
    graphmind_core::wire::encode_envelope(
        graphmind_core::event::PROTOCOL_VERSION,
        seq,
        now_ms() as u64,
        run_id,
        kind,
        payload,
    )
}

fn resume_result(o: &Outcome) -> String {
    let mut m = object([
        ("type", "resume.result".into()),
        ("runId", o.run_id.as_str().into()),
        ("pauseId", o.pause_id.as_str().into()),
        ("requestId", o.request_id.as_str().into()),
        ("outcome", o.outcome.into()),
    ]);
    o.put_reason(&mut m);
    text(m)
}

/// `resume.result` for a viewer.
pub fn resume_result_text(o: &Outcome) -> String {
    resume_result(o)
}

/// A viewer `error` message.
pub fn ui_error(message: &str, run_id: Option<&str>) -> String {
    let mut m = object([("type", "error".into()), ("message", message.into())]);
    put_opt(&mut m, "runId", run_id);
    text(m)
}

/// A viewer `error` message with a `code` (`{type: "error", code, message}`).
pub fn ui_error_code(code: &str, message: &str) -> String {
    text(object([
        ("type", "error".into()),
        ("code", code.into()),
        ("message", message.into()),
    ]))
}

impl HubState {
    /// A fresh hub armed with `breakpoints` (from `--pause-on-error`) in mode `run`.
    pub fn new(breakpoints: Vec<Value>, policy: ControlPolicy) -> Self {
        let mut hub = HubState {
            next_id: 1,
            ingest: HashMap::new(),
            ui: HashMap::new(),
            run_owners: HashMap::new(),
            claims: HashMap::new(),
            claim_order: VecDeque::new(),
            breakpoints: Vec::new(),
            mode: "run".into(),
            pauses: HashMap::new(),
            closed: HashMap::new(),
            closed_order: VecDeque::new(),
            abandon_gen: HashMap::new(),
            next_gen: 1,
            log_throttle: Arc::default(),
            policy,
            warned_tokenless: false,
            admitted_viewers: (0, 0),
            shutting_down: false,
            version: 0,
        };
        for b in breakpoints {
            let _ = hub.set_breakpoint(b);
        }
        hub
    }

    /// The throttle the hub's own repeated lines go through, to share with [`Shared`].
    pub fn log_throttle(&self) -> Arc<LogThrottle> {
        self.log_throttle.clone()
    }

    /// The armed breakpoints as a JSON array.
    pub fn breakpoints_json(&self) -> String {
        json::to_string(&self.breakpoints_value())
    }

    /// The armed breakpoint matchers as a JSON array.
    fn breakpoints_value(&self) -> Value {
        Value::Array(self.breakpoints.iter().map(|(_, v)| v.clone()).collect())
    }

    /// The armed breakpoint matchers.
    pub fn breakpoints(&self) -> impl Iterator<Item = &Value> {
        self.breakpoints.iter().map(|(_, v)| v)
    }

    /// Current mode (`run` / `step`).
    pub fn mode(&self) -> &str {
        &self.mode
    }

    /// Arms `m`; `Ok(false)` when it was armed already, `Err` past the caps.
    fn set_breakpoint(&mut self, m: Value) -> Result<bool, String> {
        let bytes = json::to_string(&m).len();
        if bytes > MAX_BREAKPOINT_BYTES {
            return Err(format!("breakpoint refused: its matcher is {bytes} bytes, over the {MAX_BREAKPOINT_BYTES}-byte limit"));
        }
        let key = canonical_key(&m);
        if self.breakpoints.iter().any(|(k, _)| *k == key) {
            return Ok(false);
        }
        if self.breakpoints.len() >= MAX_BREAKPOINTS {
            return Err(format!("breakpoint refused: {MAX_BREAKPOINTS} are armed already (the limit); clear one first"));
        }
        self.breakpoints.push((key, m));
        Ok(true)
    }

    fn alloc(&mut self) -> ConnId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    // -- ingest -------------------------------------------------------------------------

    /// Registers a new app socket.
    pub fn add_ingest(&mut self, tx: Outbox) -> ConnId {
        let id = self.alloc();
        tracing::debug!("ingest: an app socket connected (its hello names it)");
        if self.shutting_down {
            let _ = tx.close(SHUTDOWN_CLOSE_CODE, SHUTDOWN_CLOSE_REASON.into());
        }
        self.ingest.insert(
            id,
            IngestConn {
                tx,
                attached: false,
                seq: 0,
                app: None,
                source: "live",
                owned: HashSet::new(),
                open_runs: HashSet::new(),
                token: String::new(),
                claim_aware: false,
                capabilities: Vec::new(),
            },
        );
        id
    }

    /// Whether the app socket has completed the handshake.
    pub fn is_attached(&self, conn: ConnId) -> bool {
        self.ingest.get(&conn).is_some_and(|c| c.attached)
    }

    /// Handles `hello`: records the app, mints (or re-uses) its claim token and queues
    /// `hello.ack` with the current breakpoints and mode.
    pub fn hello(&mut self, conn: ConnId, payload: &Value) {
        let breakpoints = self.breakpoints_value();
        let mode = self.mode.clone();
        let hub_caps = self.policy.hub_capabilities_value();
        let Some(c) = self.ingest.get_mut(&conn) else {
            return;
        };
        c.attached = true;
        if let Some(app) = payload.get("app").and_then(Value::as_str) {
            c.app = Some(app.to_owned());
        }
        if payload.get("source").and_then(Value::as_str) == Some("demo") {
            c.source = "demo";
        }
        let caps: Vec<Value> = payload
            .get("capabilities")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        c.claim_aware = caps.iter().any(|v| v.as_str() == Some("run-claim"));
        c.capabilities = caps
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        c.token = match payload.get("resumeToken").and_then(Value::as_str) {
            Some(t) if !t.is_empty() && t.encode_utf16().count() <= MAX_RESUME_TOKEN_LENGTH => {
                t.to_owned()
            }
            _ => new_token(),
        };
        // The fields of the core's `HelloAck`, with the app's capabilities echoed as sent.
        let ack = text(object([
            ("versions", versions("viewer")),
            ("capabilities", Value::Array(caps)),
            ("breakpoints", breakpoints),
            ("mode", mode.into()),
            ("sessionToken", c.token.as_str().into()),
            ("hubCapabilities", hub_caps),
        ]));
        let seq = c.seq;
        c.seq += 1;
        let _ = c.tx.text(envelope_text(
            seq,
            WILDCARD_RUN_ID,
            MessageType::HelloAck.as_str(),
            &ack,
        ));
        match &c.app {
            Some(a) => tracing::info!("app attached: {a}"),
            None => tracing::info!("app attached"),
        }
    }

    fn describe(&self, conn: ConnId) -> String {
        match self.ingest.get(&conn).and_then(|c| c.app.as_deref()) {
            Some(a) => format!("app \"{a}\""),
            None => "an unnamed app".into(),
        }
    }

    /// May `conn` write to `run`, and does it become its owner? `None` refuses the frame
    /// (the run is claimed by another connection). On an ownership change any pending
    /// abandon timer is cancelled.
    pub fn admit(&mut self, conn: ConnId, run: &str) -> Option<Admit> {
        let (token, strict) = {
            let c = self.ingest.get(&conn)?;
            if !c.open_runs.contains(run) && c.open_runs.len() >= MAX_LIVE_RUNS_PER_CONNECTION {
                let who = self.describe(conn);
                crate::hub::throttled_log!(tracing::Level::WARN, self.log_throttle, "ingest-live-runs", "ingest: refusing run \"{run}\" from {who}: it has {MAX_LIVE_RUNS_PER_CONNECTION} runs open (the limit); finish one first");
                return None;
            }
            (c.token.clone(), c.claim_aware)
        };
        match self.claims.get(run) {
            None => {
                if self.claims.len() >= MAX_RUN_CLAIMS {
                    if let Some(old) = self.claim_order.pop_front() {
                        self.claims.remove(&old);
                    }
                }
                self.claims.insert(run.to_owned(), Claim { token, strict });
                self.claim_order.push_back(run.to_owned());
            }
            Some(claim) if claim.token == token => {}
            Some(claim) => {
                if claim.strict || self.run_owners.contains_key(run) {
                    let who = self.describe(conn);
                    crate::hub::throttled_log!(tracing::Level::WARN, self.log_throttle, "ingest-claim", "ingest: refusing a frame for run \"{run}\" from {who} — that run belongs to another connection");
                    return None;
                }
                let who = self.describe(conn);
                crate::hub::throttled_log!(tracing::Level::WARN, self.log_throttle, "ingest-claim-takeover", "ingest: run \"{run}\" re-claimed by {who}, which cannot prove it is the original app (SDK predates the run-claim capability)");
                self.claims.insert(run.to_owned(), Claim { token, strict });
            }
        }
        let previous = self.run_owners.get(run).copied();
        let owner_changed = previous != Some(conn);
        if owner_changed {
            if let Some(p) = previous.and_then(|p| self.ingest.get_mut(&p)) {
                p.owned.remove(run);
            }
            self.run_owners.insert(run.to_owned(), conn);
            self.abandon_gen.remove(run);
        }
        let c = self.ingest.get_mut(&conn)?;
        if owner_changed {
            c.owned.insert(run.to_owned());
        }
        c.open_runs.insert(run.to_owned());
        Some(Admit {
            app: c.app.clone().unwrap_or_else(|| "unknown".into()),
            source: c.source,
            owner_changed,
        })
    }

    /// Queues an envelope to an app socket, numbering it with that socket's own counter.
    fn send_ingest(&mut self, conn: ConnId, run_id: &str, kind: &str, payload: &str) -> bool {
        let Some(c) = self.ingest.get_mut(&conn) else {
            return false;
        };
        let seq = c.seq;
        c.seq += 1;
        c.tx.text(envelope_text(seq, run_id, kind, payload))
    }

    /// An app socket closed: its pauses close, its runs lose their owner and get an abandon
    /// timer. Returns the runs whose `live` flag changed and the timers to arm.
    pub fn remove_ingest(
        &mut self,
        conn: ConnId,
        next_gen_out: &mut Vec<(String, u64)>,
    ) -> Vec<String> {
        let Some(c) = self.ingest.remove(&conn) else {
            return Vec::new();
        };
        self.close_pauses(
            |_, p| p.owner == conn,
            "app-disconnected",
            "the app holding this pause disconnected; it releases its gates on its own",
        );
        let mut changed = Vec::new();
        for run in c.owned {
            if self.run_owners.get(&run) == Some(&conn) {
                self.run_owners.remove(&run);
                let gen = self.next_gen;
                self.next_gen += 1;
                self.abandon_gen.insert(run.clone(), gen);
                next_gen_out.push((run.clone(), gen));
                changed.push(run);
            }
        }
        if c.attached {
            match &c.app {
                Some(a) => tracing::info!("app detached: {a}"),
                None => tracing::info!("app detached"),
            }
        }
        changed
    }

    /// The server is going down: every app and viewer socket (and any that connects from
    /// now on) is sent close [`SHUTDOWN_CLOSE_CODE`], and no run is marked abandoned by
    /// this process any more (the next start does that for the runs nobody re-claims).
    pub fn begin_shutdown(&mut self) {
        self.shutting_down = true;
        for c in self.ingest.values() {
            let _ =
                c.tx.close(SHUTDOWN_CLOSE_CODE, SHUTDOWN_CLOSE_REASON.into());
        }
        for u in self.ui.values() {
            let _ =
                u.tx.close(SHUTDOWN_CLOSE_CODE, SHUTDOWN_CLOSE_REASON.into());
        }
    }

    /// Whether [`HubState::begin_shutdown`] ran: long-polls answer 503 `shutting-down`.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// App and viewer sockets still registered.
    pub fn socket_count(&self) -> usize {
        self.ingest.len() + self.ui.len()
    }

    /// An abandon timer fired: true when it is still current and nobody owns the run.
    pub fn abandon_due(&mut self, run: &str, gen: u64) -> bool {
        if self.shutting_down || self.abandon_gen.get(run) != Some(&gen) {
            return false;
        }
        self.abandon_gen.remove(run);
        !self.run_owners.contains_key(run)
    }

    /// Whether an app connection currently owns `run`.
    pub fn is_live(&self, run: &str) -> bool {
        self.run_owners.contains_key(run)
    }

    // -- viewers ------------------------------------------------------------------------

    /// Registers a viewer socket (authenticated at the upgrade as `principal`) and queues
    /// `welcome`, which tells it what it may do.
    pub fn add_ui(&mut self, tx: Outbox, principal: Principal) -> ConnId {
        self.release_viewer(principal);
        let id = self.alloc();
        if self.shutting_down {
            let _ = tx.close(SHUTDOWN_CLOSE_CODE, SHUTDOWN_CLOSE_REASON.into());
        }
        tracing::debug!("ui: a viewer connected ({})", principal.as_str());
        if principal == Principal::Anonymous && !self.warned_tokenless {
            self.warned_tokenless = true;
            tracing::warn!("ui: a viewer connected without a credential. Tokenless viewer sockets are deprecated: they can still continue, retry and abort, but never inject, edit inputs, or change breakpoints or step mode. Open the viewer from the #token= link or the redirect file `graphmind serve` prints.");
        }
        let control = object([
            ("principal", principal.as_str().into()),
            ("agentLevel", self.policy.agent_level.as_str().into()),
            ("editInput", self.policy.edit_input.into()),
            ("hubCapabilities", self.policy.hub_capabilities_value()),
        ]);
        let welcome = text(object([
            ("type", "welcome".into()),
            ("versions", versions("server")),
            ("breakpoints", self.breakpoints_value()),
            ("mode", self.mode.as_str().into()),
            ("control", control.into()),
        ]));
        let _ = tx.text(welcome);
        self.ui.insert(
            id,
            UiConn {
                tx,
                wildcard: false,
                principal,
            },
        );
        id
    }

    /// How a viewer socket authenticated.
    pub fn ui_principal(&self, conn: ConnId) -> Principal {
        self.ui
            .get(&conn)
            .map(|u| u.principal)
            .unwrap_or(Principal::Anonymous)
    }

    /// The `state` frame (what is really armed).
    pub fn state_frame(&self) -> String {
        text(object([
            ("type", "state".into()),
            ("breakpoints", self.breakpoints_value()),
            ("mode", self.mode.as_str().into()),
        ]))
    }

    /// Admits one more viewer (authenticated as `principal`), holding its slot until
    /// [`Hub::add_ui`] (or [`Hub::release_viewer`] when its upgrade fails); or why it may not
    /// open now: [`MAX_VIEWERS`] in all, [`MAX_ANONYMOUS_VIEWERS`] without a credential.
    pub fn admit_viewer(&mut self, principal: Principal) -> Result<(), String> {
        let (all, anon) = self.admitted_viewers;
        if self.ui.len() + all >= MAX_VIEWERS {
            return Err(format!(
                "{MAX_VIEWERS} viewer sockets are open already (the limit)"
            ));
        }
        let anonymous = self
            .ui
            .values()
            .filter(|u| u.principal == Principal::Anonymous)
            .count()
            + anon;
        if principal == Principal::Anonymous && anonymous >= MAX_ANONYMOUS_VIEWERS {
            return Err(format!(
                "{MAX_ANONYMOUS_VIEWERS} viewer sockets without a credential are open already (the limit); open the viewer from the #token= link `graphmind serve` prints"
            ));
        }
        self.admitted_viewers.0 += 1;
        if principal == Principal::Anonymous {
            self.admitted_viewers.1 += 1;
        }
        Ok(())
    }

    /// Gives back the slot [`Hub::admit_viewer`] held for a viewer of `principal`.
    pub fn release_viewer(&mut self, principal: Principal) {
        self.admitted_viewers.0 = self.admitted_viewers.0.saturating_sub(1);
        if principal == Principal::Anonymous {
            self.admitted_viewers.1 = self.admitted_viewers.1.saturating_sub(1);
        }
    }

    /// A viewer socket closed.
    pub fn remove_ui(&mut self, conn: ConnId) {
        if self.ui.remove(&conn).is_some() {
            tracing::debug!("ui: a viewer disconnected");
        }
    }

    /// Marks a viewer as a run-list (`*`) subscriber.
    pub fn set_wildcard(&mut self, conn: ConnId) {
        if let Some(u) = self.ui.get_mut(&conn) {
            u.wildcard = true;
        }
    }

    /// Sends a message to one viewer.
    pub fn send_ui(&self, conn: ConnId, msg: String) {
        if let Some(u) = self.ui.get(&conn) {
            let _ = u.tx.text(msg);
        }
    }

    /// Sends `run.update` (already rendered) to every run-list subscriber.
    pub fn send_run_update(&self, run: Value) {
        let msg = text(object([("type", "run.update".into()), ("run", run)]));
        for u in self.ui.values().filter(|u| u.wildcard) {
            let _ = u.tx.live(msg.clone());
        }
    }

    fn broadcast(&self, msg: String) {
        for u in self.ui.values() {
            let _ = u.tx.live(msg.clone());
        }
    }

    fn relay_to_all_ingest(&mut self, kind: &str, payload: &Value) {
        let payload = json::to_string(payload);
        let conns: Vec<ConnId> = self
            .ingest
            .iter()
            .filter(|(_, c)| c.attached)
            .map(|(id, _)| *id)
            .collect();
        for id in conns {
            self.send_ingest(id, WILDCARD_RUN_ID, kind, &payload);
        }
    }

    /// `breakpoint.set` / `breakpoint.clear` / `mode.set` from a viewer (payload already
    /// checked): update the server state, relay to every app, and tell every viewer what
    /// changed: a `state` frame carrying the change (`set` or `cleared` with the matcher,
    /// `breakpointCount`, `mode`), never the whole list again, so a flood of sets costs
    /// each viewer the size of one matcher per set. A change that changes nothing (a set of
    /// an armed matcher, a clear of one not armed) is relayed to no one. `Err` is the
    /// refusal to show the viewer (past [`MAX_BREAKPOINTS`] or [`MAX_BREAKPOINT_BYTES`]).
    pub fn debug_control(&mut self, kind: &str, payload: &Value) -> Result<(), String> {
        let change = match (MessageType::parse(kind), payload.get("matcher")) {
            (Some(MessageType::BreakpointSet), Some(m)) => {
                if !self.set_breakpoint(m.clone())? {
                    return Ok(());
                }
                Some(("set", m.clone()))
            }
            (Some(MessageType::BreakpointClear), Some(m)) => {
                let key = canonical_key(m);
                let before = self.breakpoints.len();
                self.breakpoints.retain(|(k, _)| *k != key);
                if self.breakpoints.len() == before {
                    return Ok(());
                }
                Some(("cleared", m.clone()))
            }
            (Some(MessageType::ModeSet), _) => {
                let Some(m) = payload.get("mode").and_then(Value::as_str) else {
                    return Ok(());
                };
                if self.mode == m {
                    return Ok(());
                }
                self.mode = m.to_owned();
                None
            }
            _ => return Ok(()),
        };
        self.relay_to_all_ingest(kind, payload);
        let mut state = object([("type", "state".into())]);
        if let Some((what, matcher)) = change {
            state.push_unique(what.into(), matcher);
        }
        state.push_unique(
            "breakpointCount".into(),
            (self.breakpoints.len() as u64).into(),
        );
        state.push_unique("mode".into(), self.mode.as_str().into());
        self.broadcast(text(state));
        Ok(())
    }

    // -- pauses and the resume race -----------------------------------------------------

    fn bump(&mut self) {
        self.version = self.version.wrapping_add(1);
    }

    fn remember_closed(&mut self, key: (String, String), how: Closed) {
        if self.closed.insert(key.clone(), how).is_none() {
            self.closed_order.push_back(key);
            if self.closed_order.len() > MAX_CLOSED_PAUSES {
                if let Some(old) = self.closed_order.pop_front() {
                    self.closed.remove(&old);
                }
            }
        }
    }

    fn answer(&self, responder: &Responder, outcome: Outcome) {
        match responder {
            Responder::Ui(ui) => self.send_ui(*ui, resume_result(&outcome)),
            Responder::Http(tx) => {
                // Never blocks the hub thread: a resume is answered once, into one slot.
                let _ = tx.try_send(outcome);
            }
        }
    }

    fn close_pauses(
        &mut self,
        which: impl Fn(&(String, String), &Pause) -> bool,
        code: &str,
        message: &str,
    ) {
        let keys: Vec<_> = self
            .pauses
            .iter()
            .filter(|(k, p)| which(k, p))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            if let Some(p) = self.pauses.remove(&key) {
                if let PauseState::Resolving {
                    responder,
                    request_id,
                    gave_up: false,
                    ..
                } = &p.state
                {
                    let outcome = outcome_of(
                        &key.0,
                        &key.1,
                        request_id,
                        "no-such-pause",
                        Some(code),
                        Some(message),
                    );
                    self.answer(responder, outcome);
                }
                self.remember_closed(key, Closed::Gone);
            }
        }
        self.bump();
    }

    /// A stored `exec.paused`: the pause is open and owned by `conn`.
    pub fn pause_opened(&mut self, conn: ConnId, run: &str, pause: &str, ts: f64, payload: &Value) {
        let key = (run.to_owned(), pause.to_owned());
        self.closed.remove(&key);
        let text = |k: &str| payload.get(k).and_then(Value::as_str).map(str::to_owned);
        let info = PauseInfo {
            node_id: text("nodeId").unwrap_or_default(),
            point: text("point").unwrap_or_default(),
            since: ts,
            reason: text("reason"),
            smart: payload.get("smart").cloned(),
            loop_info: payload.get("loop").cloned(),
            editable: payload.get("editable").and_then(Value::as_bool),
            app: self.ingest.get(&conn).and_then(|c| c.app.clone()),
        };
        self.pauses.insert(
            key,
            Pause {
                owner: conn,
                state: PauseState::Open,
                info,
            },
        );
        self.bump();
    }

    /// Who released this pause, for the stored `exec.resumed`: the principal (and operator)
    /// of the resume it is resolving on, when the app's answer is to that resume (its
    /// `requestId` matches, or it gave none).
    pub fn attribution(
        &self,
        run: &str,
        pause: &str,
        request_id: Option<&str>,
    ) -> Option<(Principal, Option<String>)> {
        let p = self.pauses.get(&(run.to_owned(), pause.to_owned()))?;
        match &p.state {
            PauseState::Resolving {
                request_id: r,
                principal,
                operator,
                ..
            } if request_id.is_none_or(|given| given == r) => Some((*principal, operator.clone())),
            _ => None,
        }
    }

    /// A stored `exec.resumed`: the pause is released; the resume that won it (if any)
    /// hears `resumed`.
    pub fn pause_resumed(&mut self, run: &str, pause: &str) {
        let key = (run.to_owned(), pause.to_owned());
        if let Some(Pause {
            state:
                PauseState::Resolving {
                    responder,
                    request_id,
                    principal,
                    gave_up: false,
                    ..
                },
            ..
        }) = self.pauses.remove(&key)
        {
            let mut o = outcome_of(run, pause, &request_id, "resumed", None, None);
            o.principal = Some(principal);
            self.answer(&responder, o);
        }
        self.remember_closed(key, Closed::Resumed);
        self.bump();
    }

    /// A stored `exec.refused`: the app would not run the resume it was sent (an edit it
    /// could not apply). The pause stays held; the resumer hears `refused` with the app's
    /// code and message.
    pub fn pause_refused(&mut self, run: &str, pause: &str, payload: &Value) {
        let key = (run.to_owned(), pause.to_owned());
        let Some(p) = self.pauses.get_mut(&key) else {
            return;
        };
        let given = payload.get("requestId").and_then(Value::as_str);
        if let PauseState::Resolving {
            responder,
            request_id,
            gave_up,
            ..
        } = p.state.clone()
        {
            if given.is_some_and(|g| g != request_id) {
                return;
            }
            p.state = PauseState::Open;
            if !gave_up {
                let code = payload
                    .get("code")
                    .and_then(Value::as_str)
                    .unwrap_or("refused")
                    .to_owned();
                let message =
                    graphmind_core::edit_input::sanitize_short_text(payload.get("message"))
                        .map(|m| m.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "the app refused the resume".into());
                let o = outcome_of(
                    run,
                    pause,
                    &request_id,
                    "refused",
                    Some(&code),
                    Some(&message),
                );
                self.answer(&responder, o);
            }
            self.bump();
        }
    }

    /// A stored `run.finished`: every pause of the run is closed.
    pub fn run_finished(&mut self, run: &str) {
        if let Some(owner) = self.run_owners.get(run).copied() {
            if let Some(c) = self.ingest.get_mut(&owner) {
                c.open_runs.remove(run);
            }
        }
        self.close_pauses(|k, _| k.0 == run, "run-finished", "the run finished");
    }

    /// Open and resolving pauses, oldest first (optionally of one run), as JSON objects.
    pub fn list_pauses(&self, run: Option<&str>) -> Vec<Value> {
        let mut items: Vec<(&(String, String), &Pause)> = self
            .pauses
            .iter()
            .filter(|(k, _)| run.is_none_or(|r| r == k.0))
            .collect();
        items.sort_by(|a, b| {
            a.1.info
                .since
                .total_cmp(&b.1.info.since)
                .then_with(|| a.0.cmp(b.0))
        });
        items
            .into_iter()
            .map(|(k, p)| pause_json(&k.0, &k.1, &p.info, Some(p.state_name())).into())
            .collect()
    }

    /// Whether a pause is open (optionally in one run).
    pub fn has_open(&self, run: Option<&str>) -> bool {
        self.pauses
            .iter()
            .any(|(k, p)| run.is_none_or(|r| r == k.0) && matches!(p.state, PauseState::Open))
    }

    /// One pause the hub holds: its info and state.
    pub fn pause_state(&self, run: &str, pause: &str) -> Option<(PauseInfo, &'static str)> {
        self.pauses
            .get(&(run.to_owned(), pause.to_owned()))
            .map(|p| (p.info.clone(), p.state_name()))
    }

    /// One resume, from a viewer socket or `POST .../resume`. In order: the credential and
    /// its level; the content (no placeholder, no truncation marker); the edit gates
    /// (`--no-edit-input`, the owner's `edit-input`, the pause's `editable`); then first
    /// writer wins, and the forward. Anything refused before the forward is answered at
    /// once and nothing reaches the app.
    pub fn request_resume(
        &mut self,
        responder: Responder,
        run: &str,
        payload: &Value,
        principal: Principal,
    ) -> ResumeStart {
        let pause = payload
            .get("pauseId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let action = payload
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let has_input = payload.get("input").is_some();
        let given = tokens::acceptable_request_id(payload.get("requestId")).map(str::to_owned);
        let request_id = given.clone().unwrap_or_else(new_token);
        let answered = |outcome: &'static str, code: &str, message: String| {
            ResumeStart::Answered(outcome_of(
                run,
                &pause,
                &request_id,
                outcome,
                Some(code),
                Some(&message),
            ))
        };
        if let Some(r) = tokens::authorize_resume(principal, &self.policy, &action, has_input) {
            return answered("refused", r.code, r.message);
        }
        let content = payload
            .get("input")
            .and_then(|v| tokens::content_refusal(v, true))
            .or_else(|| {
                if action == "inject" {
                    payload
                        .get("output")
                        .and_then(|v| tokens::content_refusal(v, false))
                } else {
                    None
                }
            });
        if let Some(r) = content {
            return answered("refused", r.code, r.message);
        }
        if has_input && !self.policy.edit_input {
            return answered(
                "refused",
                "edit-refused",
                "input edits are disabled on this server (started with --no-edit-input)".into(),
            );
        }
        let key = (run.to_owned(), pause.clone());
        match self.pauses.get(&key) {
            None if self.closed.contains_key(&key) => {
                return answered(
                    "no-such-pause",
                    "no-such-pause",
                    format!("pause \"{pause}\" in run \"{run}\" is no longer held"),
                );
            }
            Some(Pause {
                state: PauseState::Resolving { gave_up, .. },
                ..
            }) => {
                if *gave_up {
                    return answered(
                        "timeout",
                        "still-resolving",
                        format!(
                            "the app has not answered an earlier resume of this pause yet; it reopens within {} s if the app never does — run it again then",
                            RESOLVING_TIMEOUT_MS / 1000
                        ),
                    );
                }
                return answered(
                    "taken",
                    "pause-taken",
                    "another resume for this pause is already being answered".into(),
                );
            }
            _ => {}
        }
        let owner = self
            .pauses
            .get(&key)
            .map(|p| p.owner)
            .or_else(|| self.run_owners.get(run).copied());
        let Some(owner) = owner.filter(|o| self.is_attached(*o)) else {
            return answered(
                "no-such-pause",
                "no-owner",
                format!("no connected app owns run \"{run}\""),
            );
        };
        if has_input {
            let announced = self.ingest.get(&owner).is_some_and(|c| {
                c.capabilities
                    .iter()
                    .any(|x| x == tokens::HUB_CAPABILITY_EDIT_INPUT)
            });
            if !announced {
                return answered("refused", "not-editable", "the app holding this pause did not announce edit-input (its SDK cannot apply an edited input)".into());
            }
            if self.pauses.get(&key).and_then(|p| p.info.editable) != Some(true) {
                return answered("refused", "not-editable", "this pause is not editable (the adapter cannot apply an edited input at this gate)".into());
            }
        }
        let operator = tokens::sanitize_operator(payload.get("operator"));
        let state = PauseState::Resolving {
            responder,
            request_id: request_id.clone(),
            principal,
            operator,
            gave_up: false,
        };
        match self.pauses.get_mut(&key) {
            Some(p) => p.state = state,
            None => {
                // A pause the hub never saw (its exec.paused predates this process): track it.
                let info = PauseInfo {
                    node_id: String::new(),
                    point: String::new(),
                    since: now_ms(),
                    reason: None,
                    smart: None,
                    loop_info: None,
                    editable: None,
                    app: None,
                };
                self.pauses
                    .insert(key.clone(), Pause { owner, state, info });
            }
        }
        let mut fwd = Map::new();
        fwd.insert("pauseId", Value::from(pause.as_str()));
        fwd.insert("action", Value::from(action.as_str()));
        fwd.insert("requestId", Value::from(request_id.as_str()));
        if action == "inject" {
            if let Some(out) = payload.get("output") {
                fwd.insert("output", out.clone());
            }
        }
        if let Some(input) = payload.get("input") {
            fwd.insert("input", input.clone());
        }
        let text = json::to_string(&Value::Object(fwd));
        if !self.send_ingest(owner, run, "exec.resume", &text) {
            if let Some(p) = self.pauses.get_mut(&key) {
                p.state = PauseState::Open;
            }
            return ResumeStart::Answered(outcome_of(
                run,
                &pause,
                &request_id,
                "timeout",
                Some("app-disconnected"),
                Some("the app holding this pause is disconnecting; a detached app releases its gates on its own (fail-open)"),
            ));
        }
        if has_input {
            tracing::info!(
                "edit: {} resumed pause \"{pause}\" in run \"{run}\" with an edited input",
                principal.as_str()
            );
        }
        self.bump();
        ResumeStart::Forwarded {
            request_id: request_id.clone(),
            timer: Timer::Resolving {
                run: run.to_owned(),
                pause,
                request_id,
            },
        }
    }

    /// The HTTP resumer stopped waiting (its deadline passed) and was told `timeout`: a
    /// later answer goes to nobody, and a new resume hears `still-resolving`.
    pub fn resume_gave_up(&mut self, run: &str, pause: &str, request_id: &str) {
        if let Some(p) = self.pauses.get_mut(&(run.to_owned(), pause.to_owned())) {
            if let PauseState::Resolving {
                request_id: r,
                gave_up,
                ..
            } = &mut p.state
            {
                if r == request_id {
                    *gave_up = true;
                }
            }
        }
    }

    /// A forwarded resume got no answer in time: reopen the pause, tell the resumer.
    pub fn resolving_timed_out(&mut self, run: &str, pause: &str, request_id: &str) {
        let key = (run.to_owned(), pause.to_owned());
        let Some(p) = self.pauses.get_mut(&key) else {
            return;
        };
        if let PauseState::Resolving {
            responder,
            request_id: r,
            gave_up,
            ..
        } = p.state.clone()
        {
            if r == request_id {
                p.state = PauseState::Open;
                if !gave_up {
                    let o = outcome_of(
                        run,
                        pause,
                        request_id,
                        "timeout",
                        Some("no-answer"),
                        Some("the app did not answer the resume in time; the pause is open again"),
                    );
                    self.answer(&responder, o);
                }
                self.bump();
            }
        }
    }
}

impl Pause {
    fn state_name(&self) -> &'static str {
        match self.state {
            PauseState::Open => "open",
            PauseState::Resolving { .. } => "resolving",
        }
    }
}

fn outcome_of(
    run: &str,
    pause: &str,
    request_id: &str,
    outcome: &'static str,
    code: Option<&str>,
    message: Option<&str>,
) -> Outcome {
    Outcome {
        outcome,
        run_id: run.to_owned(),
        pause_id: pause.to_owned(),
        request_id: request_id.to_owned(),
        code: code.map(str::to_owned),
        message: message.map(str::to_owned),
        principal: None,
    }
}

/// A pause as `GET /api/pauses` lists it: `{runId, pauseId, nodeId, point, since,
/// reason?, smart?, loop?, editable?, state, app?}` (`state` left out when `None`).
pub fn pause_json(run: &str, pause: &str, info: &PauseInfo, state: Option<&str>) -> Map {
    let mut m = object([
        ("runId", run.into()),
        ("pauseId", pause.into()),
        ("nodeId", info.node_id.as_str().into()),
        ("point", info.point.as_str().into()),
        ("since", info.since.into()),
    ]);
    put_opt(&mut m, "reason", info.reason.as_deref());
    put_opt(&mut m, "smart", info.smart.clone());
    put_opt(&mut m, "loop", info.loop_info.clone());
    put_opt(&mut m, "editable", info.editable);
    put_opt(&mut m, "state", state);
    put_opt(&mut m, "app", info.app.as_deref());
    m
}

/// `versions: {protocol, <side>}` of the handshake and the viewer's `welcome`.
fn versions(side: &str) -> Value {
    object([
        ("protocol", PROTOCOL_VERSION.into()),
        (side, VERSION.into()),
    ])
    .into()
}

impl Shared {
    /// Arms a timer.
    pub fn arm(&self, after: Duration, t: Timer) {
        let _ = self.timers.send((after, t));
    }

    /// Wakes every long-poll: something it may wait for changed.
    pub fn notify(&self) {
        let (m, c) = &self.changes;
        let mut n = m.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.wrapping_add(1);
        c.notify_all();
    }

    /// Blocks until [`Shared::notify`] is called after `seen` or `timeout` passes; returns
    /// the change counter.
    pub fn wait_change(&self, seen: u64, timeout: Duration) -> u64 {
        let (m, c) = &self.changes;
        let guard = m.lock().unwrap_or_else(|e| e.into_inner());
        if *guard != seen {
            return *guard;
        }
        let (guard, _) = c
            .wait_timeout(guard, timeout)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }

    /// The current change counter.
    pub fn change_count(&self) -> u64 {
        *self.changes.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphmind_core::json::parse_str;

    #[test]
    fn canonical_keys_ignore_order() {
        let a = parse_str(r#"{"point":"error","kind":"tool"}"#).unwrap();
        let b = parse_str(r#"{"kind":"tool","point":"error"}"#).unwrap();
        assert_eq!(canonical_key(&a), canonical_key(&b));
        assert_ne!(
            canonical_key(&a),
            canonical_key(&parse_str(r#"{"kind":"tool"}"#).unwrap())
        );
        // One number, one matcher, as a JavaScript viewer sees it.
        let whole = parse_str(r#"{"kind":"tool","input":{"n":[1,{"b":2,"a":1}]}}"#).unwrap();
        let float = parse_str(r#"{"input":{"n":[1.0,{"a":1,"b":2.0}]},"kind":"tool"}"#).unwrap();
        assert_eq!(canonical_key(&whole), canonical_key(&float));
    }

    #[test]
    fn breakpoints_dedupe_and_clear() {
        let mut hub = HubState::new(
            crate::config::breakpoints_for(&graphmind_core::config::PauseOnError::On),
            ControlPolicy::default(),
        );
        hub.debug_control(
            "breakpoint.set",
            &parse_str(r#"{"matcher":{"kind":"tool","name":"x"}}"#).unwrap(),
        )
        .unwrap();
        hub.debug_control(
            "breakpoint.set",
            &parse_str(r#"{"matcher":{"name":"x","kind":"tool"}}"#).unwrap(),
        )
        .unwrap();
        assert_eq!(
            hub.breakpoints_json(),
            r#"[{"point":"error"},{"kind":"tool","name":"x"}]"#
        );
        hub.debug_control(
            "breakpoint.clear",
            &parse_str(r#"{"matcher":{"point":"error"}}"#).unwrap(),
        )
        .unwrap();
        assert_eq!(hub.breakpoints_json(), r#"[{"kind":"tool","name":"x"}]"#);
    }

    #[test]
    fn breakpoints_are_capped_in_count_and_size() {
        let mut hub = HubState::new(Vec::new(), ControlPolicy::default());
        for i in 0..MAX_BREAKPOINTS {
            let set =
                parse_str(&format!(r#"{{"matcher":{{"kind":"tool","name":"t{i}"}}}}"#)).unwrap();
            hub.debug_control("breakpoint.set", &set).unwrap();
        }
        let one_more = parse_str(r#"{"matcher":{"kind":"tool","name":"over"}}"#).unwrap();
        assert!(hub
            .debug_control("breakpoint.set", &one_more)
            .unwrap_err()
            .contains("256 are armed"));
        assert_eq!(hub.breakpoints().count(), MAX_BREAKPOINTS);
        hub.debug_control(
            "breakpoint.clear",
            &parse_str(r#"{"matcher":{"kind":"tool","name":"t0"}}"#).unwrap(),
        )
        .unwrap();
        let big = parse_str(&format!(
            r#"{{"matcher":{{"name":"{}"}}}}"#,
            "x".repeat(MAX_BREAKPOINT_BYTES)
        ))
        .unwrap();
        assert!(hub
            .debug_control("breakpoint.set", &big)
            .unwrap_err()
            .contains("byte limit"));
        hub.debug_control("breakpoint.set", &one_more).unwrap();
        assert_eq!(hub.breakpoints().count(), MAX_BREAKPOINTS);
    }
}
