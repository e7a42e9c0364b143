//! Live OTLP export (`graphmind serve --otlp-endpoint`, docs/otlp.md).
//!
//! The writer offers each stored event to a bounded queue ([`QUEUE_CAPACITY`]) with a
//! non-blocking send: when the queue is full the event is dropped and counted, so ingest
//! and the viewer never wait for the export. One exporter thread keeps each open run's
//! open node starts (redacted unless `--otlp-no-redact-secrets`), and when a node execution
//! finishes (or the run does) it builds that one span with `otlp_map` (the one mapping,
//! shared with `record --format otlp`) from just the envelopes it needs (its start, its
//! end, its parent's start), so each span costs the same however long the run is. Spans
//! are kept as the typed `opentelemetry-proto` messages and encoded straight to protobuf
//! (or OTLP/JSON when asked): no text in between. Spans go
//! out in batches of at most [`BATCH_MAX_SPANS`], at least every [`BATCH_INTERVAL`], over
//! OTLP/HTTP (protobuf by default, JSON when asked). 429, 5xx and connection errors are
//! retried with exponential backoff, honouring `Retry-After`; while the endpoint is away
//! spans wait (at most [`MAX_PENDING_SPANS`], the oldest dropped and counted beyond that).
//! Drops are logged once on stderr and counted in `/api/session`. At shutdown the thread
//! sends what it holds within [`SHUTDOWN_GRACE`].

use crate::export::SecretKeyMemo;
use crate::otlp_config::{OtlpConfig, Protocol};
use crate::otlp_map;
use crate::storage::RunRow;
use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender};
use graphmind_core::json::{self, Value};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Events the writer may queue for the exporter before new ones are dropped.
pub const QUEUE_CAPACITY: usize = 65_536;
/// Frame bytes the writer may queue for the exporter before new events are dropped.
pub const QUEUE_MAX_BYTES: usize = 64 * 1024 * 1024;
/// The event types spans are made of; the writer offers no other.
pub const EXPORTED_KINDS: [&str; 5] = [
    "run.started",
    "run.finished",
    "node.started",
    "node.finished",
    "node.error",
];
/// The payload members whose values a span shows (as `input.value`, `output.value`, token
/// counts, the exception): what the export redacts.
const SPAN_VALUES: [&str; 4] = ["input", "output", "usage", "error"];
/// Every payload member the span mapping reads (`otlp_map`), and `app` and `status` read
/// here: none is a secret-looking key, so redacting [`SPAN_VALUES`] alone gives the spans
/// that redacting whole payloads gives (a unit test holds the list to that).
#[cfg(test)]
const SPAN_READS: [&str; 11] = [
    "nodeId",
    "instanceId",
    "name",
    "kind",
    "parentId",
    "input",
    "output",
    "usage",
    "error",
    "app",
    "status",
];
/// Most spans in one request.
pub const BATCH_MAX_SPANS: usize = 512;
/// Longest a finished span waits for a batch to fill.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(500);
/// Most spans held while the endpoint is unreachable (the oldest are dropped beyond).
pub const MAX_PENDING_SPANS: usize = 65_536;
/// Most open node executions (and distinct node ids) tracked for one run; beyond, new
/// nodes are not exported (dropped and counted).
pub const MAX_OPEN_NODES: usize = 100_000;
/// Most open runs tracked at once (the oldest is forgotten beyond).
pub const MAX_OPEN_RUNS: usize = 1_024;
/// First retry delay; it doubles up to [`RETRY_MAX`].
pub const RETRY_MIN: Duration = Duration::from_millis(200);
/// Longest delay between two attempts (a larger `Retry-After` is capped to it).
pub const RETRY_MAX: Duration = Duration::from_secs(30);
/// Longest one request may take (a stalled endpoint costs at most this per attempt).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest the shutdown waits for the last spans to go out.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
/// The exporter thread's nice value while it catches up (see [`Priority`]), and all the time
/// where `SCHED_IDLE` is refused.
pub const EXPORT_THREAD_NICE: i32 = 10;
/// How full the queue may get, in percent of its bounds ([`QUEUE_CAPACITY`] events or
/// [`QUEUE_MAX_BYTES`]), before the exporter leaves `SCHED_IDLE` to catch up at nice
/// [`EXPORT_THREAD_NICE`]: a burst of up to three quarters of the queue is taken in idle.
pub const CATCH_UP_PERCENT: usize = 75;
/// How full the queue may still be, in percent of its bounds, when a catching-up exporter
/// goes back to `SCHED_IDLE`.
pub const IDLE_PERCENT: usize = 25;

/// The exporter thread's scheduling (Linux, per thread; best effort elsewhere).
///
/// Normally `SCHED_IDLE`: it runs only on a core no other thread wants, so ingest, the
/// writer and the viewer keep their wall-clock rate and the exporter catches up from its
/// bounded queue when they are idle. On a machine that stays busy its queue grows; beyond
/// [`CATCH_UP_PERCENT`] of its bounds (and at shutdown, to send what it holds within the grace) it runs at
/// nice [`EXPORT_THREAD_NICE`] instead, below [`IDLE_PERCENT`] it goes back. Such a thread
/// must never hold what ingest waits for: it shares no lock with ingest, and it frees no
/// memory another thread allocated ([`Parcel`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Priority {
    Idle,
    CatchUp,
}

impl Priority {
    /// Applies it to the calling thread; false when the system refused `SCHED_IDLE`.
    fn apply(self) -> bool {
        #[cfg(target_os = "linux")]
        unsafe {
            let param = libc::sched_param { sched_priority: 0 };
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            // Raising nice is always allowed; leaving SCHED_IDLE for SCHED_OTHER is allowed
            // at a nice value RLIMIT_NICE permits, which a raised one is.
            libc::setpriority(libc::PRIO_PROCESS, tid, EXPORT_THREAD_NICE);
            let policy = match self {
                Priority::Idle => libc::SCHED_IDLE,
                Priority::CatchUp => libc::SCHED_OTHER,
            };
            libc::sched_setscheduler(0, policy, &param) == 0
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = self;
            false
        }
    }

    /// What a queue holding `events` (of `bytes`) asks for, from `self`.
    fn for_queue(self, events: usize, bytes: usize) -> Priority {
        let above = |percent: usize| {
            events > QUEUE_CAPACITY / 100 * percent || bytes > QUEUE_MAX_BYTES / 100 * percent
        };
        match self {
            Priority::Idle if above(CATCH_UP_PERCENT) => Priority::CatchUp,
            Priority::CatchUp if !above(IDLE_PERCENT) => Priority::Idle,
            same => same,
        }
    }
}

/// The event types spans are made of.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `run.started`
    RunStarted,
    /// `run.finished`
    RunFinished,
    /// `node.started`
    NodeStarted,
    /// `node.finished`
    NodeFinished,
    /// `node.error`
    NodeError,
}

impl Kind {
    /// The kind of an event type, `None` for types no span is made of.
    pub fn of(event_type: &str) -> Option<Kind> {
        Some(match event_type {
            "run.started" => Kind::RunStarted,
            "run.finished" => Kind::RunFinished,
            "node.started" => Kind::NodeStarted,
            "node.finished" => Kind::NodeFinished,
            "node.error" => Kind::NodeError,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        EXPORTED_KINDS[self as usize]
    }
}

/// One stored event of a [`Parcel`]: where its run id, app and stored frame lie in the
/// parcel's text.
struct Item {
    kind: Kind,
    ts: f64,
    run: Range<usize>,
    app: Range<usize>,
    frame: Range<usize>,
}

/// Stored events handed to the exporter at once, their run ids, apps and stored frames
/// packed in one buffer. The exporter parses the frames on its own thread and sends the
/// emptied parcel back, so the writer's thread reuses or frees it: no memory allocated on
/// one side is freed on the other (glibc's `free` of another thread's chunk takes that
/// thread's arena lock, which a low-priority exporter could then hold while ingest waits).
#[derive(Default)]
struct Parcel {
    text: String,
    items: Vec<Item>,
    /// The items' frame bytes (what [`QUEUE_MAX_BYTES`] counts).
    bytes: usize,
}

impl Parcel {
    fn clear(&mut self) {
        self.text.clear();
        self.items.clear();
        self.bytes = 0;
    }
}

/// Emptied parcels the writer keeps for reuse.
const SPARE_PARCELS: usize = 4;
/// A parcel's (or a request body's) buffer grown beyond this is freed rather than kept for
/// reuse.
const SPARE_MAX_BYTES: usize = 4 * 1024 * 1024;

/// The stored events of one writer batch waiting to be handed to the exporter at once
/// ([`Exporter::hand_over`]): one queue operation and at most one wake-up per batch.
#[derive(Default)]
pub struct Offers {
    parcel: Parcel,
    spare: Vec<Parcel>,
}

impl Offers {
    /// Adds one stored event (copied into the batch's buffer) when its type is one spans are
    /// made of; `frame` is the stored frame (its length is what the queue's byte bound counts).
    pub fn push(&mut self, run_id: &str, app: &str, event_type: &str, ts: f64, frame: &str) {
        let Some(kind) = Kind::of(event_type) else {
            return;
        };
        let p = &mut self.parcel;
        let mut put = |s: &str| {
            let at = p.text.len();
            p.text.push_str(s);
            at..p.text.len()
        };
        let (run, app, frame) = (put(run_id), put(app), put(frame));
        p.items.push(Item {
            kind,
            ts,
            run,
            app,
            frame,
        });
    }
}

/// Export counters, shown in `/api/session`.
#[derive(Default)]
pub struct Stats {
    /// Spans the endpoint accepted.
    pub exported: AtomicU64,
    /// Events dropped because the queue was full.
    pub queue_dropped: AtomicU64,
    /// Spans dropped (too many waiting, refused by the endpoint, or unsent at shutdown).
    pub spans_dropped: AtomicU64,
    /// Failed requests (each retry counts).
    pub failed_requests: AtomicU64,
    reported: AtomicBool,
}

impl Stats {
    fn report_drop(&self, what: &str) {
        if !self.reported.swap(true, Ordering::SeqCst) {
            tracing::warn!("otlp: {what}; dropping from now on is counted in GET /api/session (\"otlp\") and not logged again");
        }
    }
}

/// The writer's side of the export: a bounded queue and the counters.
pub struct Exporter {
    tx: Sender<Parcel>,
    /// Emptied parcels coming back from the exporter thread (reused or freed by the writer).
    back: Receiver<Parcel>,
    flush: Sender<Sender<()>>,
    /// The endpoint URL (for `/api/session`).
    pub url: String,
    /// Counters.
    pub stats: Arc<Stats>,
    queued: Arc<Queued>,
}

/// Events (and their frames' bytes) handed to the exporter and not yet taken in: what
/// [`QUEUE_CAPACITY`] and [`QUEUE_MAX_BYTES`] bound.
#[derive(Default)]
struct Queued {
    events: AtomicUsize,
    bytes: AtomicUsize,
}

impl Exporter {
    /// Starts the exporter thread for `cfg`.
    pub fn start(cfg: OtlpConfig) -> std::io::Result<Exporter> {
        let (tx, rx) = unbounded();
        let (back_tx, back) = unbounded();
        let (ftx, frx) = bounded(1);
        let stats = Arc::new(Stats::default());
        let url = cfg.url.clone();
        let s = stats.clone();
        let queued = Arc::new(Queued::default());
        let q = queued.clone();
        std::thread::Builder::new()
            .name("graphmind-otlp".into())
            .spawn(move || Worker::new(cfg, s, q).run(rx, back_tx, frx))?;
        Ok(Exporter {
            tx,
            back,
            flush: ftx,
            url,
            stats,
            queued,
        })
    }

    /// Hands the batch's stored events to the exporter thread; never blocks. Events beyond
    /// [`QUEUE_CAPACITY`] or [`QUEUE_MAX_BYTES`] still queued are dropped for the export and
    /// counted. Called by the one writer thread (the only one that adds to the queue).
    pub fn hand_over(&self, offers: &mut Offers) {
        // Parcels the exporter is done with: kept for reuse, or freed here, on the thread
        // that allocated them.
        while let Ok(p) = self.back.try_recv() {
            if offers.spare.len() < SPARE_PARCELS && p.text.capacity() <= SPARE_MAX_BYTES {
                offers.spare.push(p);
            }
        }
        if offers.parcel.items.is_empty() {
            offers.parcel.clear();
            return;
        }
        let (mut events, mut bytes) = (
            self.queued.events.load(Ordering::Relaxed),
            self.queued.bytes.load(Ordering::Relaxed),
        );
        let mut dropped = 0u64;
        let parcel = &mut offers.parcel;
        parcel.items.retain(|item| {
            let cost = item.frame.len();
            if events >= QUEUE_CAPACITY || bytes + cost > QUEUE_MAX_BYTES {
                dropped += 1;
                return false;
            }
            events += 1;
            bytes += cost;
            parcel.bytes += cost;
            true
        });
        if !parcel.items.is_empty() {
            self.queued
                .events
                .fetch_add(parcel.items.len(), Ordering::Relaxed);
            self.queued.bytes.fetch_add(parcel.bytes, Ordering::Relaxed);
            let next = offers.spare.pop().unwrap_or_default();
            let _ = self.tx.send(std::mem::replace(&mut offers.parcel, next));
        } else {
            offers.parcel.clear();
        }
        if dropped > 0 {
            self.stats
                .queue_dropped
                .fetch_add(dropped, Ordering::Relaxed);
            self.stats.report_drop(&format!("the export queue is full ({QUEUE_CAPACITY} events or {QUEUE_MAX_BYTES} bytes: export is slower than ingest)"));
        }
    }

    /// Sends what is held, waiting at most [`SHUTDOWN_GRACE`] (plus a little).
    pub fn shutdown_flush(&self) {
        let (tx, rx) = bounded(1);
        if self
            .flush
            .send_timeout(tx, Duration::from_millis(100))
            .is_ok()
        {
            let _ = rx.recv_timeout(SHUTDOWN_GRACE + Duration::from_millis(500));
        }
    }

    /// The `/api/session` member: `{endpoint, exported, dropped, queueDropped, spansDropped,
    /// failedRequests}`.
    pub fn session_value(&self) -> Value {
        let s = &self.stats;
        let (q, d) = (
            s.queue_dropped.load(Ordering::Relaxed),
            s.spans_dropped.load(Ordering::Relaxed),
        );
        Value::Object(crate::util::object([
            ("endpoint", self.url.as_str().into()),
            ("exported", s.exported.load(Ordering::Relaxed).into()),
            ("dropped", (q + d).into()),
            ("queueDropped", q.into()),
            ("spansDropped", d.into()),
            (
                "failedRequests",
                s.failed_requests.load(Ordering::Relaxed).into(),
            ),
        ]))
    }
}

/// What the exporter keeps of an open run: only what the next spans need. For each node id
/// seen, the span id of its latest execution started so far (a later child's parent) and
/// the executions still open, each with its `node.started` payload (redacted) and time.
struct OpenRun {
    row: RunRow,
    /// `row.app`, shared by the run's pending spans.
    app: Rc<str>,
    trace: Vec<u8>,
    root: [u8; otlp_map::SPAN_ID_BYTES],
    nodes: HashMap<String, NodeState>,
    /// Executions open now, over all nodes.
    open: usize,
}

#[derive(Default)]
struct NodeState {
    latest: [u8; otlp_map::SPAN_ID_BYTES],
    open: Vec<OpenExec>,
}

struct OpenExec {
    instance: String,
    span: [u8; otlp_map::SPAN_ID_BYTES],
    start: f64,
    payload: Value,
}

/// A span ready to send, with the app whose resource it goes under.
struct Pending {
    app: Rc<str>,
    span: Span,
}

/// One request's body, encoded once: it waits here while the endpoint is retried, so a
/// retry re-sends the same bytes instead of re-encoding (or keeping copies of) its spans.
struct Batch {
    spans: usize,
    content_type: &'static str,
    body: Vec<u8>,
}

enum Outcome {
    Sent,
    Retry(Option<Duration>),
    Refused(String),
}

struct Worker {
    cfg: OtlpConfig,
    /// The thread's scheduling now; `None` where `SCHED_IDLE` is refused (then nice
    /// [`EXPORT_THREAD_NICE`] throughout).
    priority: Option<Priority>,
    queued: Arc<Queued>,
    secret_keys: SecretKeyMemo,
    stats: Arc<Stats>,
    agent: ureq::Agent,
    runs: HashMap<String, OpenRun>,
    order: VecDeque<String>,
    pending: VecDeque<Pending>,
    inflight: Option<Batch>,
    /// The last sent batch's buffer, encoded into again (no new allocation per request).
    spare_body: Vec<u8>,
    first_pending: Option<Instant>,
    retry_at: Option<Instant>,
    backoff: Duration,
    logged_failure: bool,
}

impl Worker {
    fn new(cfg: OtlpConfig, stats: Arc<Stats>, queued: Arc<Queued>) -> Worker {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build()
            .into();
        let priority = if Priority::Idle.apply() {
            Some(Priority::Idle)
        } else {
            Priority::CatchUp.apply();
            None
        };
        Worker {
            cfg,
            priority,
            queued,
            secret_keys: SecretKeyMemo::default(),
            stats,
            agent,
            runs: HashMap::new(),
            order: VecDeque::new(),
            pending: VecDeque::new(),
            inflight: None,
            spare_body: Vec::new(),
            first_pending: None,
            retry_at: None,
            backoff: RETRY_MIN,
            logged_failure: false,
        }
    }

    fn run(mut self, rx: Receiver<Parcel>, back: Sender<Parcel>, flush: Receiver<Sender<()>>) {
        loop {
            let wait = self.next_wake().map_or(Duration::from_secs(3600), |t| {
                t.saturating_duration_since(Instant::now())
            });
            select! {
                recv(rx) -> items => match items {
                    Ok(items) => {
                        self.ingest_all(items, &back);
                        // Take what else is queued before sending.
                        while let Ok(items) = rx.try_recv() {
                            self.ingest_all(items, &back);
                        }
                    }
                    Err(_) => return,
                },
                recv(flush) -> reply => {
                    self.set_priority(Priority::CatchUp);
                    while let Ok(items) = rx.try_recv() {
                        self.ingest_all(items, &back);
                    }
                    self.drain_until(Instant::now() + SHUTDOWN_GRACE);
                    if let Ok(reply) = reply {
                        let _ = reply.send(());
                    }
                    continue;
                },
                default(wait) => {},
            }
            self.send_due();
        }
    }

    /// When the next batch is due: a batch being retried at its retry time; else full now, or
    /// the oldest span's interval, after any retry delay.
    fn next_wake(&self) -> Option<Instant> {
        if self.inflight.is_some() {
            return Some(self.retry_at.unwrap_or_else(Instant::now));
        }
        let first = self.first_pending?;
        let due = if self.pending.len() >= BATCH_MAX_SPANS {
            Instant::now()
        } else {
            first + BATCH_INTERVAL
        };
        Some(self.retry_at.map_or(due, |r| r.max(due)))
    }

    /// Switches the thread's scheduling to `to` (where `SCHED_IDLE` works at all).
    fn set_priority(&mut self, to: Priority) {
        if self.priority.is_some_and(|now| now != to) {
            to.apply();
            self.priority = Some(to);
        }
    }

    /// Takes in a parcel's events and sends it back emptied (for the writer to reuse).
    fn ingest_all(&mut self, mut parcel: Parcel, back: &Sender<Parcel>) {
        if let Some(now) = self.priority {
            self.set_priority(now.for_queue(
                self.queued.events.load(Ordering::Relaxed),
                self.queued.bytes.load(Ordering::Relaxed),
            ));
        }
        for item in &parcel.items {
            self.ingest(&parcel.text, item);
        }
        self.queued
            .events
            .fetch_sub(parcel.items.len(), Ordering::Relaxed);
        self.queued.bytes.fetch_sub(parcel.bytes, Ordering::Relaxed);
        parcel.clear();
        // Only fails once the writer is gone (shutdown): then it is freed here.
        let _ = back.send(parcel);
    }

    /// Builds what one stored event adds: an open execution, or a finished span.
    fn ingest(&mut self, text: &str, item: &Item) {
        // Parsed here, on the exporter's thread, which also frees it.
        let mut payload = match json::parse_str(&text[item.frame.clone()]) {
            Ok(mut env) => env
                .as_object_mut()
                .and_then(|o| o.remove("payload"))
                .unwrap_or_default(),
            Err(_) => return,
        };
        if self.cfg.redact {
            // Only the members a span shows values from can hold a secret: every other
            // member the mapping reads is a fixed name that is no secret-looking key
            // (`SPAN_READS`), so the span is the same as with the whole payload redacted.
            let memo = &mut self.secret_keys;
            if let Some(obj) = payload.as_object_mut() {
                for (key, value) in obj.iter_mut() {
                    if SPAN_VALUES.contains(&key.as_str().unwrap_or_default()) {
                        crate::export::redact_secrets_with(
                            value,
                            &mut crate::export::Redaction::default(),
                            |k| memo.is_secret(k),
                        );
                    }
                }
            }
        }
        let (kind, ts) = (item.kind, item.ts);
        let run_id = &text[item.run.clone()];
        let run = self.open_run(run_id, &text[item.app.clone()], ts);
        let s = |k: &str| payload.get(k).and_then(Value::as_str);
        let node = s("nodeId").unwrap_or("");
        let instance = s("instanceId").unwrap_or(node);
        let span = match kind {
            Kind::RunStarted => {
                run.row.started_at = ts;
                if let Some(app) = s("app") {
                    run.row.app = app.to_owned();
                    run.app = Rc::from(app);
                }
                return;
            }
            Kind::NodeStarted => {
                if run.open >= MAX_OPEN_NODES || run.nodes.len() >= MAX_OPEN_NODES {
                    self.stats.spans_dropped.fetch_add(1, Ordering::Relaxed);
                    self.stats.report_drop(&format!("run \"{}\" has more than {MAX_OPEN_NODES} open or distinct nodes; later ones are not exported", run_id));
                    return;
                }
                let span = otlp_map::node_span_id_array(run_id, node, instance);
                let instance = instance.to_owned();
                let state = match run.nodes.get_mut(node) {
                    Some(state) => state,
                    None => run.nodes.entry(node.to_owned()).or_default(),
                };
                state.latest = span;
                let exec = OpenExec {
                    instance,
                    span,
                    start: ts,
                    payload,
                };
                // The same execution started again replaces the one open.
                match state.open.iter_mut().find(|x| x.instance == exec.instance) {
                    Some(x) => *x = exec,
                    None => {
                        state.open.push(exec);
                        run.open += 1;
                    }
                }
                return;
            }
            Kind::NodeFinished | Kind::NodeError => {
                let Some(state) = run.nodes.get_mut(node) else {
                    return;
                };
                // Its execution; an end whose instance is not open ends the oldest one open of
                // the same node.
                let Some(i) = state
                    .open
                    .iter()
                    .position(|x| x.instance == instance)
                    .or(if state.open.is_empty() { None } else { Some(0) })
                else {
                    return;
                };
                let exec = state.open.remove(i);
                run.open -= 1;
                // Its parent: the latest execution of `parentId` started so far (itself when it
                // names its own node), else the run.
                let parent = match exec.payload.get("parentId").and_then(Value::as_str) {
                    Some(p) if p == node => exec.span,
                    Some(p) => run.nodes.get(p).map_or(run.root, |n| n.latest),
                    None => run.root,
                };
                let ids = otlp_map::SpanIds {
                    trace: &run.trace,
                    span: exec.span,
                    parent,
                };
                otlp_map::finished_node_span(
                    &ids,
                    &exec.payload,
                    exec.start,
                    kind.name(),
                    &payload,
                    ts,
                )
            }
            Kind::RunFinished => {
                run.row.finished_at = Some(ts);
                run.row.status = s("status").unwrap_or("ok").to_owned();
                otlp_map::root_span_of(&run.row)
            }
        };
        let app = run.app.clone();
        if kind == Kind::RunFinished {
            self.runs.remove(run_id);
            self.order.retain(|r| r != run_id);
        }
        if self.pending.len() + self.inflight.as_ref().map_or(0, |b| b.spans) >= MAX_PENDING_SPANS
            && !self.pending.is_empty()
        {
            self.pending.pop_front();
            self.stats.spans_dropped.fetch_add(1, Ordering::Relaxed);
            self.stats.report_drop(&format!(
                "{MAX_PENDING_SPANS} spans are waiting for the endpoint; the oldest are dropped"
            ));
        }
        self.pending.push_back(Pending { app, span });
        self.first_pending.get_or_insert_with(Instant::now);
    }

    /// The open run `run_id`, tracked from now on if it is new (its first event, at `ts`,
    /// from `app`); the oldest is forgotten beyond [`MAX_OPEN_RUNS`].
    fn open_run(&mut self, run_id: &str, app: &str, ts: f64) -> &mut OpenRun {
        if !self.runs.contains_key(run_id) {
            if self.runs.len() >= MAX_OPEN_RUNS {
                if let Some(old) = self.order.pop_front() {
                    self.runs.remove(&old);
                }
            }
            let row = RunRow {
                id: run_id.to_owned(),
                app: app.to_owned(),
                started_at: ts,
                finished_at: None,
                status: "running".into(),
                schema_version: crate::envelope::PROTOCOL_VERSION,
                source: "live".into(),
                event_count: 0,
                error_count: 0,
            };
            self.order.push_back(run_id.to_owned());
            self.runs.insert(
                run_id.to_owned(),
                OpenRun {
                    row,
                    app: Rc::from(app),
                    trace: otlp_map::trace_id(run_id),
                    root: otlp_map::run_span_id_array(run_id),
                    nodes: HashMap::new(),
                    open: 0,
                },
            );
        }
        self.runs.get_mut(run_id).expect("tracked just above")
    }

    /// Sends batches that are due (not before a retry delay).
    fn send_due(&mut self) {
        while let Some(wake) = self.next_wake() {
            if wake > Instant::now() {
                return;
            }
            if !self.send_one_batch() {
                return;
            }
        }
    }

    /// At shutdown: send everything, retrying, until `deadline`; what is left is dropped.
    fn drain_until(&mut self, deadline: Instant) {
        while (!self.pending.is_empty() || self.inflight.is_some()) && Instant::now() < deadline {
            if let Some(r) = self.retry_at {
                let now = Instant::now();
                if r > now {
                    std::thread::sleep((r - now).min(deadline.saturating_duration_since(now)));
                    continue;
                }
            }
            self.send_one_batch();
        }
        let left = (self.pending.len() + self.inflight.take().map_or(0, |b| b.spans)) as u64;
        if left > 0 {
            self.pending.clear();
            self.first_pending = None;
            self.stats.spans_dropped.fetch_add(left, Ordering::Relaxed);
            tracing::warn!("otlp: {left} span(s) could not be sent before shutdown");
        }
    }

    /// One request with up to [`BATCH_MAX_SPANS`] spans; true when it went out (or was refused for good).
    fn send_one_batch(&mut self) -> bool {
        let batch = match self.inflight.take() {
            Some(b) => b,
            None => {
                let n = self.pending.len().min(BATCH_MAX_SPANS);
                let req = otlp_map::request(self.pending.drain(..n).map(|p| (p.app, p.span)));
                self.first_pending = if self.pending.is_empty() {
                    None
                } else {
                    Some(Instant::now())
                };
                let mut body = std::mem::take(&mut self.spare_body);
                body.clear();
                match self.encode(&req, &mut body) {
                    Ok(content_type) => Batch {
                        spans: n,
                        content_type,
                        body,
                    },
                    Err(why) => {
                        self.stats
                            .spans_dropped
                            .fetch_add(n as u64, Ordering::Relaxed);
                        self.stats.report_drop(&why);
                        return true;
                    }
                }
            }
        };
        let n = batch.spans;
        match self.post(&batch) {
            Outcome::Sent => {
                self.reuse(batch);
                self.stats.exported.fetch_add(n as u64, Ordering::Relaxed);
                self.backoff = RETRY_MIN;
                self.retry_at = None;
                if self.logged_failure {
                    self.logged_failure = false;
                    tracing::info!("otlp: {} accepts spans again", self.cfg.url);
                }
                true
            }
            Outcome::Refused(why) => {
                self.reuse(batch);
                self.stats
                    .spans_dropped
                    .fetch_add(n as u64, Ordering::Relaxed);
                self.stats
                    .report_drop(&format!("{} refused {n} span(s): {why}", self.cfg.url));
                true
            }
            Outcome::Retry(after) => {
                self.stats.failed_requests.fetch_add(1, Ordering::Relaxed);
                let delay = after.unwrap_or(self.backoff).min(RETRY_MAX);
                self.backoff = (self.backoff * 2).min(RETRY_MAX);
                self.retry_at = Some(Instant::now() + delay);
                self.inflight = Some(batch);
                false
            }
        }
    }

    /// Writes the request body in the configured protocol into `body`; its content type.
    fn encode(
        &self,
        req: &ExportTraceServiceRequest,
        body: &mut Vec<u8>,
    ) -> Result<&'static str, String> {
        match self.cfg.protocol {
            Protocol::Json => serde_json::to_writer(&mut *body, req)
                .map(|()| "application/json")
                .map_err(|e| format!("cannot write OTLP/JSON: {e}")),
            Protocol::Protobuf => {
                body.reserve(req.encoded_len());
                req.encode(body)
                    .map(|()| "application/x-protobuf")
                    .map_err(|e| format!("cannot write OTLP protobuf: {e}"))
            }
        }
    }

    /// Keeps a sent (or refused) batch's buffer for the next request.
    fn reuse(&mut self, batch: Batch) {
        if batch.body.capacity() <= SPARE_MAX_BYTES {
            self.spare_body = batch.body;
        }
    }

    fn post(&mut self, batch: &Batch) -> Outcome {
        let mut req = self
            .agent
            .post(&self.cfg.url)
            .header("Content-Type", batch.content_type);
        for (k, v) in &self.cfg.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let mut why = String::new();
        let outcome = match req.send(&batch.body[..]) {
            Ok(mut resp) => {
                let code = resp.status().as_u16();
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()));
                let _ = resp.body_mut().read_to_vec();
                match code {
                    200..=299 => Outcome::Sent,
                    429 | 500..=599 => {
                        why = format!("HTTP {code}");
                        Outcome::Retry(retry_after)
                    }
                    other => Outcome::Refused(format!("HTTP {other}")),
                }
            }
            Err(e) => {
                why = e.to_string();
                Outcome::Retry(None)
            }
        };
        if let Outcome::Retry(_) = &outcome {
            if !self.logged_failure {
                self.logged_failure = true;
                tracing::warn!("otlp: cannot export to {} yet: {why} (retrying with backoff; recording is unaffected)", self.cfg.url);
            }
        }
        outcome
    }
}

/// A `Retry-After` value (RFC 9110): whole seconds, or an HTTP date, read against `now`
/// (a date in the past means at once). `None` when it is neither.
pub fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_payload_member_a_span_reads_is_a_secret_looking_key() {
        for key in SPAN_READS {
            assert!(!crate::export::is_secret_key(key), "{key}");
        }
        assert!(SPAN_VALUES.iter().all(|k| SPAN_READS.contains(k)));
    }

    #[test]
    fn the_exporter_catches_up_beyond_three_quarters_of_its_queue_and_idles_again_below_a_quarter()
    {
        use Priority::*;
        let events = |p: usize| QUEUE_CAPACITY / 100 * p;
        assert_eq!(Idle.for_queue(0, 0), Idle);
        assert_eq!(Idle.for_queue(events(CATCH_UP_PERCENT), 0), Idle);
        assert_eq!(Idle.for_queue(events(CATCH_UP_PERCENT) + 1, 0), CatchUp);
        assert_eq!(
            Idle.for_queue(1, QUEUE_MAX_BYTES / 100 * CATCH_UP_PERCENT + 1),
            CatchUp
        );
        // Between the two it keeps what it has (no flapping around one bound).
        assert_eq!(CatchUp.for_queue(events(50), 0), CatchUp);
        assert_eq!(Idle.for_queue(events(50), 0), Idle);
        assert_eq!(CatchUp.for_queue(events(IDLE_PERCENT), 0), Idle);
        assert_eq!(
            CatchUp.for_queue(1, QUEUE_MAX_BYTES / 100 * IDLE_PERCENT + 1),
            CatchUp
        );
    }

    #[test]
    fn retry_after_takes_seconds_or_an_http_date() {
        let now = httpdate::parse_http_date("Sat, 05 Dec 2026 02:30:00 GMT").unwrap();
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Sat, 05 Dec 2026 02:30:12 GMT", now),
            Some(Duration::from_secs(12))
        );
        assert_eq!(
            parse_retry_after("Sat, 05 Dec 2026 02:29:00 GMT", now),
            Some(Duration::ZERO),
            "past: at once"
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }
}
