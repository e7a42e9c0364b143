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

use crate::otlp_config::{OtlpConfig, Protocol};
use crate::otlp_map;
use crate::storage::RunRow;
use crossbeam_channel::{bounded, select, Receiver, Sender, TrySendError};
use graphmind_core::json::{self, Value};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
/// The exporter thread's nice value: export is background work, so when the cores are busy
/// the threads that receive and store events (and serve the viewer) get them first, and the
/// exporter catches up from its queue when they are idle.
pub const EXPORT_THREAD_NICE: i32 = 10;

/// Lowers the calling thread's priority to [`EXPORT_THREAD_NICE`] (Linux: nice is per thread).
/// Best effort: where it cannot, the exporter runs at normal priority.
fn lower_this_threads_priority() {
    #[cfg(target_os = "linux")]
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, EXPORT_THREAD_NICE);
    }
}

struct Item {
    run_id: String,
    app: String,
    frame: String,
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
    tx: Sender<Item>,
    flush: Sender<Sender<()>>,
    /// The endpoint URL (for `/api/session`).
    pub url: String,
    /// Counters.
    pub stats: Arc<Stats>,
    queued_bytes: Arc<std::sync::atomic::AtomicUsize>,
}

impl Exporter {
    /// Starts the exporter thread for `cfg`.
    pub fn start(cfg: OtlpConfig) -> std::io::Result<Exporter> {
        let (tx, rx) = bounded(QUEUE_CAPACITY);
        let (ftx, frx) = bounded(1);
        let stats = Arc::new(Stats::default());
        let url = cfg.url.clone();
        let s = stats.clone();
        let queued_bytes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let q = queued_bytes.clone();
        std::thread::Builder::new()
            .name("graphmind-otlp".into())
            .spawn(move || {
                lower_this_threads_priority();
                Worker::new(cfg, s, q).run(rx, frx)
            })?;
        Ok(Exporter {
            tx,
            flush: ftx,
            url,
            stats,
            queued_bytes,
        })
    }

    /// Offers one stored event of type `kind`; never blocks (a full queue drops it and
    /// counts it). Types no span is made of are not queued.
    pub fn offer(&self, run_id: &str, app: &str, kind: &str, frame: &str) {
        if !EXPORTED_KINDS.contains(&kind) {
            return;
        }
        let full = self.queued_bytes.load(Ordering::Relaxed) + frame.len() > QUEUE_MAX_BYTES;
        let item = Item {
            run_id: run_id.to_owned(),
            app: app.to_owned(),
            frame: frame.to_owned(),
        };
        let len = frame.len();
        let sent = if full {
            Err(TrySendError::Full(item))
        } else {
            self.tx.try_send(item)
        };
        if sent.is_ok() {
            self.queued_bytes.fetch_add(len, Ordering::Relaxed);
        } else if let Err(TrySendError::Full(_)) = sent {
            self.stats.queue_dropped.fetch_add(1, Ordering::Relaxed);
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

    /// The `/api/session` member: `{endpoint, exported, dropped, queueDropped, failedRequests}`.
    pub fn session_json(&self) -> String {
        let s = &self.stats;
        let (q, d) = (
            s.queue_dropped.load(Ordering::Relaxed),
            s.spans_dropped.load(Ordering::Relaxed),
        );
        format!(
            "{{\"endpoint\":{},\"exported\":{},\"dropped\":{},\"queueDropped\":{q},\"spansDropped\":{d},\"failedRequests\":{}}}",
            crate::util::js(&self.url),
            s.exported.load(Ordering::Relaxed),
            q + d,
            s.failed_requests.load(Ordering::Relaxed)
        )
    }
}

/// What the exporter keeps of an open run: only what the next spans need (the `node.started`
/// of executions still open, and the latest one of each node id, for parentage; shared,
/// not copied).
struct OpenRun {
    row: RunRow,
    open: HashMap<(String, String), Rc<Value>>,
    latest_started: HashMap<String, Rc<Value>>,
}

/// A span ready to send, with the app whose resource it goes under.
struct Pending {
    app: String,
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
    queued_bytes: Arc<std::sync::atomic::AtomicUsize>,
    stats: Arc<Stats>,
    agent: ureq::Agent,
    runs: HashMap<String, OpenRun>,
    order: VecDeque<String>,
    pending: VecDeque<Pending>,
    inflight: Option<Batch>,
    first_pending: Option<Instant>,
    retry_at: Option<Instant>,
    backoff: Duration,
    logged_failure: bool,
}

impl Worker {
    fn new(
        cfg: OtlpConfig,
        stats: Arc<Stats>,
        queued_bytes: Arc<std::sync::atomic::AtomicUsize>,
    ) -> Worker {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build()
            .into();
        Worker {
            cfg,
            queued_bytes,
            stats,
            agent,
            runs: HashMap::new(),
            order: VecDeque::new(),
            pending: VecDeque::new(),
            inflight: None,
            first_pending: None,
            retry_at: None,
            backoff: RETRY_MIN,
            logged_failure: false,
        }
    }

    fn run(mut self, rx: Receiver<Item>, flush: Receiver<Sender<()>>) {
        loop {
            let wait = self.next_wake().map_or(Duration::from_secs(3600), |t| {
                t.saturating_duration_since(Instant::now())
            });
            select! {
                recv(rx) -> item => match item {
                    Ok(item) => {
                        self.ingest(item);
                        // Take what else is queued before sending.
                        while let Ok(item) = rx.try_recv() {
                            self.ingest(item);
                        }
                    }
                    Err(_) => return,
                },
                recv(flush) -> reply => {
                    while let Ok(item) = rx.try_recv() {
                        self.ingest(item);
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

    fn ingest(&mut self, item: Item) {
        self.queued_bytes
            .fetch_sub(item.frame.len(), Ordering::Relaxed);
        let Ok(mut env) = json::parse_str(&item.frame) else {
            return;
        };
        if self.cfg.redact {
            if let Some(p) = env.as_object_mut().and_then(|o| o.get_mut("payload")) {
                crate::export::redact_secrets(p, &mut crate::export::Redaction::default());
            }
        }
        let kind = env
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let ts = env.get("ts").and_then(Value::as_f64).unwrap_or(0.0);
        if !self.runs.contains_key(&item.run_id) {
            if self.runs.len() >= MAX_OPEN_RUNS {
                if let Some(old) = self.order.pop_front() {
                    self.runs.remove(&old);
                }
            }
            let row = RunRow {
                id: item.run_id.clone(),
                app: item.app.clone(),
                started_at: ts,
                finished_at: None,
                status: "running".into(),
                schema_version: crate::envelope::PROTOCOL_VERSION,
                source: "live".into(),
                event_count: 0,
                error_count: 0,
            };
            self.order.push_back(item.run_id.clone());
            self.runs.insert(
                item.run_id.clone(),
                OpenRun {
                    row,
                    open: HashMap::new(),
                    latest_started: HashMap::new(),
                },
            );
        }
        let Some(run) = self.runs.get_mut(&item.run_id) else {
            return;
        };
        let payload = env.get("payload");
        let s = |k: &str| {
            payload
                .and_then(|p| p.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let node = s("nodeId").unwrap_or_default();
        let instance = s("instanceId").unwrap_or_else(|| node.clone());
        let span = match kind.as_str() {
            "run.started" => {
                run.row.started_at = ts;
                if let Some(app) = s("app") {
                    run.row.app = app;
                }
                return;
            }
            "node.started" => {
                if run.open.len() >= MAX_OPEN_NODES || run.latest_started.len() >= MAX_OPEN_NODES {
                    self.stats.spans_dropped.fetch_add(1, Ordering::Relaxed);
                    self.stats.report_drop(&format!("run \"{}\" has more than {MAX_OPEN_NODES} open or distinct nodes; later ones are not exported", item.run_id));
                    return;
                }
                let env = Rc::new(env);
                run.latest_started.insert(node.clone(), env.clone());
                run.open.insert((node, instance), env);
                return;
            }
            "node.finished" | "node.error" => {
                let key = (node.clone(), instance.clone());
                let key = if run.open.contains_key(&key) {
                    Some(key)
                } else {
                    run.open.keys().find(|k| k.0 == node).cloned()
                };
                let Some(key) = key else { return };
                let Some(started) = run.open.remove(&key) else {
                    return;
                };
                let mut envs: Vec<&Value> = Vec::with_capacity(3);
                let parent = started
                    .get("payload")
                    .and_then(|p| p.get("parentId"))
                    .and_then(Value::as_str);
                if let Some(p) = parent
                    .and_then(|p| run.latest_started.get(p))
                    .filter(|_| parent != Some(key.0.as_str()))
                {
                    envs.push(p);
                }
                envs.push(&started);
                envs.push(&env);
                // The one mapping, on just the envelopes this span needs.
                let Some(span) = otlp_map::node_span_of(&run.row, &envs, &key.0, &key.1) else {
                    return;
                };
                span
            }
            "run.finished" => {
                run.row.finished_at = Some(ts);
                run.row.status = s("status").unwrap_or_else(|| "ok".into());
                otlp_map::root_span_of(&run.row)
            }
            _ => return,
        };
        let app = run.row.app.clone();
        if kind == "run.finished" {
            self.runs.remove(&item.run_id);
            self.order.retain(|r| r != &item.run_id);
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
                match self.encode(&req) {
                    Ok((content_type, body)) => Batch {
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

    /// The request body in the configured protocol, and its content type.
    fn encode(&self, req: &ExportTraceServiceRequest) -> Result<(&'static str, Vec<u8>), String> {
        match self.cfg.protocol {
            Protocol::Json => serde_json::to_vec(req)
                .map(|b| ("application/json", b))
                .map_err(|e| format!("cannot write OTLP/JSON: {e}")),
            Protocol::Protobuf => Ok(("application/x-protobuf", req.encode_to_vec())),
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
