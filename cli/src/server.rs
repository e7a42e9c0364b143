//! `graphmind serve`: one port on 127.0.0.1 for HTTP and the two WebSocket endpoints.
//! Connections are tasks on a small tokio runtime ([`crate::sockets`]); a writer thread
//! for SQLite and fan-out; a timer thread. What a frame means is decided here.

use crate::envelope::{self, MessageType as M, Parsed, WILDCARD_RUN_ID};
use crate::hub::{ConnId, HubState, Outbox, Responder, ResumeStart, Shared, Timer, VERSION};
use crate::hub_task::Hub;
use crate::payload_guard::stored_frame;
use crate::storage;
use crate::tokens::{self, ControlPolicy, Tokens, Verifier};
use crate::util::{object, text};
use crate::writer::{self, EventWrite, Op};
use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError};
use graphmind_core::event::{Direction, ResumeAction, RunMode, RunStatus};
use graphmind_core::json::{self, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often an idle socket is pinged; a peer that sent nothing (not even a pong) for a
/// whole interval after a ping is dropped (reference: the 30 s stale-socket reaper).
pub const PING_INTERVAL: Duration = Duration::from_secs(30);
/// Initial read buffer of each WebSocket (it grows for a large frame).
pub const SOCKET_BUFFER_BYTES: usize = 8 * 1024;
/// How long a write to a WebSocket peer may block before the peer is dropped.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a socket may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// What `graphmind serve` was asked for.
pub struct ServeConfig {
    /// 0 picks a free port.
    pub port: u16,
    /// Database file.
    pub db_path: PathBuf,
    /// Breakpoints armed at start.
    pub breakpoints: Vec<Value>,
    /// Abandon grace.
    pub grace: Duration,
    /// `GRAPHMIND_ALLOWED_ORIGINS`.
    pub allowed_origins: graphmind_core::config::AllowedOrigins,
    /// `--allow-control` / `--no-edit-input`.
    pub policy: ControlPolicy,
    /// The control tokens minted for this process.
    pub tokens: Tokens,
    /// `--otlp-endpoint` / `OTEL_EXPORTER_OTLP_*`, resolved.
    pub otlp: Option<crate::otlp_config::OtlpConfig>,
}

/// A listening server (not yet accepting).
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    /// Opens the database, binds 127.0.0.1, starts the writer and timer threads and queues
    /// the startup sweep of runs no process owns.
    pub fn bind(cfg: ServeConfig) -> Result<Server, String> {
        let db = storage::open(&cfg.db_path)
            .map_err(|e| storage::open_error_message(&cfg.db_path, &e))?;
        let listener = TcpListener::bind(("127.0.0.1", cfg.port)).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                format!(
                    "port {} is already in use — is another graphmind running? Pick a different port with --port (e.g. graphmind --port {}).",
                    cfg.port,
                    cfg.port.saturating_add(1)
                )
            } else {
                format!("cannot listen on 127.0.0.1:{}: {e}", cfg.port)
            }
        })?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let otlp = match cfg.otlp {
            Some(c) => Some(
                crate::otlp_export::Exporter::start(c)
                    .map_err(|e| format!("cannot start the OTLP exporter: {e}"))?,
            ),
            None => None,
        };
        let (wtx, wrx) = unbounded::<Op>();
        let (ttx, trx) = unbounded::<(Duration, Timer)>();
        let state = HubState::new(cfg.breakpoints, cfg.policy);
        let log_throttle = state.log_throttle();
        let hub = Hub::start(state).map_err(|e| e.to_string())?;
        let shared = Arc::new(Shared {
            hub,
            log_throttle,
            writer: wtx,
            timers: ttx,
            port,
            grace: cfg.grace,
            allowed_origins: cfg.allowed_origins,
            verifier: Verifier::new(&cfg.tokens),
            policy: cfg.policy,
            changes: (Mutex::new(0), Condvar::new()),
            active_waits: AtomicUsize::new(0),
            http_in_flight: AtomicUsize::new(0),
            budget: Default::default(),
            db_path: cfg.db_path,
            viewer_backlog: Default::default(),
            storage: Default::default(),
            otlp,
        });
        let _ = shared.writer.send(Op::ReconcileOrphans);
        let s = shared.clone();
        std::thread::Builder::new()
            .name("graphmind-writer".into())
            .spawn(move || writer::run(s, db, wrx))
            .map_err(|e| e.to_string())?;
        let s = shared.clone();
        std::thread::Builder::new()
            .name("graphmind-timers".into())
            .spawn(move || timer_loop(s, trx))
            .map_err(|e| e.to_string())?;
        Ok(Server { listener, shared })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// The shared state (for the shutdown path: flushing the writer).
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// The armed breakpoints (for the banner).
    pub fn breakpoints(&self) -> Vec<Value> {
        self.shared
            .hub
            .call(|h| h.breakpoints().cloned().collect())
            .unwrap_or_default()
    }

    /// Accepts connections forever on the server's runtime (see [`crate::sockets`]).
    pub fn run(self) {
        crate::sockets::run(self.listener, self.shared);
    }
}

fn timer_loop(shared: Arc<Shared>, rx: Receiver<(Duration, Timer)>) {
    let mut heap: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut pending: std::collections::HashMap<u64, Timer> = Default::default();
    let mut next = 0u64;
    loop {
        let wait = heap
            .peek()
            .map(|Reverse((at, _))| at.saturating_duration_since(Instant::now()));
        let got = match wait {
            Some(w) => rx.recv_timeout(w),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match got {
            Ok((after, t)) => {
                next += 1;
                heap.push(Reverse((Instant::now() + after, next)));
                pending.insert(next, t);
            }
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {}
        }
        while let Some(Reverse((at, id))) = heap.peek().copied() {
            if at > Instant::now() {
                break;
            }
            heap.pop();
            match pending.remove(&id) {
                Some(Timer::Abandon { run, gen }) => {
                    let writer = shared.writer.clone();
                    shared.hub.tell(move |h| {
                        if h.abandon_due(&run, gen) {
                            // Sent from the hub: a re-claim queues its event after this.
                            let _ = writer.send(Op::Abandon(run));
                        }
                    });
                }
                Some(Timer::Resolving {
                    run,
                    pause,
                    request_id,
                }) => {
                    shared
                        .hub
                        .tell(move |h| h.resolving_timed_out(&run, &pause, &request_id));
                    // A long-poll woken now queues its look after the command above.
                    shared.notify();
                }
                None => {}
            }
        }
    }
}

/// How long a closing app socket waits for the writer to store what it sent.
const DISCONNECT_FLUSH_WAIT: Duration = Duration::from_secs(2);

/// An app socket ended (blocking: it waits for the writer). Lets the writer store what
/// this app sent before it left (an `exec.resumed` among it answers a pending resume as
/// `resumed`), and only then closes its pauses and arms the abandon timers of its runs.
pub(crate) fn ingest_gone(shared: &Shared, conn: ConnId) {
    let (flushed_tx, flushed_rx) = crossbeam_channel::bounded(1);
    if shared.writer.send(Op::Flush(flushed_tx)).is_ok() {
        let _ = flushed_rx.recv_timeout(DISCONNECT_FLUSH_WAIT);
    }
    let (changed, timers) = shared
        .hub
        .call(move |h| {
            let mut timers = Vec::new();
            let changed = h.remove_ingest(conn, &mut timers);
            (changed, timers)
        })
        .unwrap_or_default();
    for run in changed {
        let _ = shared.writer.send(Op::RunChanged(run));
    }
    for (run, gen) in timers {
        shared.arm(shared.grace, Timer::Abandon { run, gen });
    }
    shared.notify();
}

/// One text frame from an app socket.
pub(crate) fn ingest_frame(
    shared: &Shared,
    conn: ConnId,
    tx: &Outbox,
    owned_here: &mut HashSet<String>,
    text: &str,
) {
    let env = match envelope::parse_envelope(text.as_bytes()) {
        Parsed::Ok(e) => e,
        Parsed::Invalid(reason) => {
            crate::hub::throttled_log!(
                tracing::Level::WARN,
                shared.log_throttle,
                "ingest-invalid",
                "ingest: dropping invalid frame ({reason})"
            );
            return;
        }
        Parsed::VersionMismatch(v) => {
            tracing::warn!(
                "ingest: app speaks protocol v{v}, this server speaks v{}; closing",
                envelope::PROTOCOL_VERSION
            );
            let _ = tx.close(1002, format!("unsupported protocol version {v}"));
            return;
        }
    };
    if env.message == Some(M::Hello) {
        let payload = env.payload;
        // Waited for: `hello.ack` leaves once this frame is handled, after the attach (and
        // its log line) is done.
        let _ = shared.hub.call(move |h| h.hello(conn, &payload));
        return;
    }
    if env.run_id == WILDCARD_RUN_ID
        || env
            .message
            .is_some_and(|m| m.direction() != Direction::Event)
    {
        return;
    }
    let mut env = env;
    let restamped = if env.kind.starts_with("exec.") {
        restamp(shared, &mut env)
    } else {
        false
    };
    let frame = if restamped {
        rewrite_frame(text, &env)
    } else {
        stored_frame(text, &env).into_owned()
    };
    let payload = &env.payload;
    let text_field = |k: &str| payload.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut write = EventWrite {
        conn,
        run_id: env.run_id.clone(),
        seq: env.seq as i64,
        ts: env.ts,
        node_id: text_field("nodeId"),
        frame,
        app: String::new(),
        source: "live",
        owner_changed: false,
        started_app: None,
        finished_status: text_field("status")
            .filter(|s| env.message == Some(M::RunFinished) && RunStatus::parse(s).is_some()),
        pause_id: text_field("pauseId").filter(|_| {
            matches!(
                env.message,
                Some(M::ExecPaused | M::ExecResumed | M::ExecRefused)
            )
        }),
        pause_payload: matches!(env.message, Some(M::ExecPaused | M::ExecRefused))
            .then(|| env.payload.clone()),
        cost: 0,
        kind: env.kind,
    };
    let started_app = (write.kind == M::RunStarted.as_str())
        .then(|| text_field("app"))
        .flatten();
    // A queue slot first, before any hub command: this is where a full queue pushes back.
    write.cost = write.frame.len();
    shared.budget.acquire(write.cost);
    if owned_here.contains(&env.run_id) {
        // Owned by this live connection: nobody else can take it while we are connected.
        if write.kind == M::RunStarted.as_str() {
            write.started_app = Some(started_app.unwrap_or_else(|| "unknown".into()));
        }
        let _ = shared.writer.send(Op::Event(Box::new(write)));
        return;
    }
    let cost = write.cost;
    let writer = shared.writer.clone();
    let run = env.run_id.clone();
    let admitted = shared.hub.call(move |h| {
        if !h.is_attached(conn) {
            return false; // anything before `hello` is ignored
        }
        let Some(admit) = h.admit(conn, &run) else {
            return false;
        };
        write.app = admit.app.clone();
        write.source = admit.source;
        write.owner_changed = admit.owner_changed;
        if write.kind == M::RunStarted.as_str() {
            write.started_app = Some(started_app.unwrap_or(admit.app));
        }
        // Queued from the hub so that an abandon decided before this re-claim is stored first.
        let _ = writer.send(Op::Event(Box::new(write)));
        true
    });
    if admitted == Ok(true) {
        owned_here.insert(env.run_id);
    } else {
        shared.budget.release(1, cost);
    }
}

/// Keys on a stored `exec.*` event that only the hub may write: who released a gate.
const HUB_STAMPED_KEYS: [&str; 2] = ["principal", "operator"];

/// Removes the [`HUB_STAMPED_KEYS`] an app wrote into an `exec.*` payload; true when any was
/// there (the stored frame must then be rewritten).
pub fn strip_hub_stamps(payload: &mut Value) -> bool {
    let mut stripped = false;
    if let Some(obj) = payload.as_object_mut() {
        for k in HUB_STAMPED_KEYS {
            stripped |= obj.remove(k).is_some();
        }
    }
    stripped
}

/// `principal` and `operator` on a stored `exec.*` event are the hub's word: any an app
/// wrote are removed, and an `exec.resumed` answering a resume the hub forwarded gets the
/// principal (and operator) of that resume. True when the payload changed.
fn restamp(shared: &Shared, env: &mut crate::envelope::Envelope) -> bool {
    let mut changed = strip_hub_stamps(&mut env.payload);
    if env.message == Some(M::ExecResumed) {
        let pause = env
            .payload
            .get("pauseId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let request = env
            .payload
            .get("requestId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(pause) = pause {
            let run = env.run_id.clone();
            let who = shared
                .hub
                .call(move |h| h.attribution(&run, &pause, request.as_deref()))
                .ok()
                .flatten();
            if let (Some((principal, operator)), Some(obj)) = (who, env.payload.as_object_mut()) {
                obj.insert("principal", Value::from(principal.as_str()));
                if let Some(op) = operator {
                    obj.insert("operator", Value::from(op.as_str()));
                }
                changed = true;
            }
        }
    }
    changed
}

/// The frame written again around a changed payload (other top-level fields kept).
pub(crate) fn rewrite_frame(text: &str, env: &crate::envelope::Envelope) -> String {
    match json::parse_str(text) {
        Ok(Value::Object(mut m)) => {
            m.insert("payload", env.payload.clone());
            json::to_string(&Value::Object(m))
        }
        _ => text.to_owned(),
    }
}

/// One text frame from a viewer socket.
pub(crate) fn ui_frame(shared: &Shared, conn: ConnId, tx: &Outbox, text: &str) {
    let say = |msg: String| {
        let _ = tx.text(msg);
    };
    let error = |m: &str| crate::hub::ui_error(m, None);
    let Ok(msg) = json::parse_str(text) else {
        return say(error("frame is not valid JSON"));
    };
    let Some(kind) = msg
        .get("type")
        .and_then(Value::as_str)
        .filter(|_| msg.as_object().is_some())
    else {
        return say(error("message must be an object with a \"type\""));
    };
    match kind {
        "subscribe" => {
            let Some(run_id) = msg
                .get("runId")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
            else {
                return say(error("subscribe requires a string \"runId\""));
            };
            let op = if run_id == WILDCARD_RUN_ID {
                let cursor = match msg
                    .get("cursor")
                    .map(|c| c.as_str().and_then(crate::storage::RunCursor::parse))
                {
                    None => None,
                    Some(Some(c)) => Some(c),
                    Some(None) => {
                        return say(error(
                            "subscribe \"*\": cursor must be a nextCursor from a previous page",
                        ))
                    }
                };
                Op::SubscribeAll {
                    conn,
                    tx: tx.clone(),
                    cursor,
                }
            } else {
                Op::Subscribe {
                    conn,
                    tx: tx.clone(),
                    run_id: run_id.to_owned(),
                }
            };
            let _ = shared.writer.send(op);
        }
        "unsubscribe" => {
            if let Some(run_id) = msg.get("runId").and_then(Value::as_str) {
                let _ = shared.writer.send(Op::Unsubscribe {
                    conn,
                    run_id: run_id.to_owned(),
                });
            }
        }
        "control" => control(
            shared,
            conn,
            msg.get("envelope").cloned().unwrap_or_default(),
            &say,
        ),
        other => say(error(&format!("unknown message type \"{other}\""))),
    }
}

fn control(shared: &Shared, conn: ConnId, envelope: Value, say: &dyn Fn(String)) {
    let error = |m: String| say(crate::hub::ui_error(&m, None));
    let env = match envelope::envelope_from_value(envelope) {
        Parsed::Ok(e) => e,
        Parsed::Invalid(reason) => return error(format!("invalid control envelope: {reason}")),
        Parsed::VersionMismatch(_) => {
            return error("invalid control envelope (version-mismatch)".into())
        }
    };
    let Some(message) = env.message else {
        return error("invalid control envelope (unknown-type)".into());
    };
    let p = &env.payload;
    let s = |k: &str| p.get(k).and_then(Value::as_str);
    match message {
        M::ExecResume => {
            if p.as_object().is_none() || s("pauseId").is_none() {
                return error("invalid control envelope: payload.pauseId must be a string".into());
            }
            if s("action").and_then(ResumeAction::parse).is_none() {
                return error("invalid control envelope: payload.action must be one of continue, retry, inject, abort".into());
            }
            let (run, payload) = (env.run_id.clone(), p.clone());
            let timers = shared.timers.clone();
            // Told, not waited for: the gate's round trip is then one hop to the hub
            // thread, which answers the viewer (or forwards to the app) itself.
            shared.hub.tell(move |h| {
                let principal = h.ui_principal(conn);
                match h.request_resume(Responder::Ui(conn), &run, &payload, principal) {
                    ResumeStart::Answered(o) => h.send_ui(conn, crate::hub::resume_result_text(&o)),
                    ResumeStart::Forwarded { timer, .. } => {
                        let after = Duration::from_millis(crate::hub::RESOLVING_TIMEOUT_MS);
                        let _ = timers.send((after, timer));
                    }
                }
            });
            // A long-poll woken now queues its look after the command above.
            shared.notify();
        }
        M::BreakpointSet | M::BreakpointClear | M::ModeSet
            if refuse_debug_state(shared, conn, say) => {}
        M::BreakpointSet | M::BreakpointClear => {
            if p.get("matcher").and_then(Value::as_object).is_none() {
                return error("invalid control envelope: payload.matcher must be an object".into());
            }
            let (kind, payload) = (env.kind.clone(), p.clone());
            let refused = shared
                .hub
                .call(move |h| {
                    h.debug_control(&kind, &payload)
                        .err()
                        .map(|why| (why, h.state_frame()))
                })
                .ok()
                .flatten();
            if let Some((why, state)) = refused {
                // The viewer toggled optimistically: the refusal, then what is really armed.
                say(crate::hub::ui_error_code("breakpoint-limit", &why));
                say(state);
            }
        }
        M::ModeSet => {
            if s("mode").and_then(RunMode::parse).is_none() {
                return error("invalid control envelope: payload.mode must be run or step".into());
            }
            let (kind, payload) = (env.kind.clone(), p.clone());
            shared.hub.tell(move |h| {
                let _ = h.debug_control(&kind, &payload);
            });
        }
        other => error(format!("\"{other}\" is not a control type")),
    }
}

/// Breakpoints and step mode need the viewer token (or the agent token at `resume`): a
/// refusal is an `error` with its code, followed by the real `state` (the viewer toggles
/// optimistically). True when refused.
fn refuse_debug_state(shared: &Shared, conn: ConnId, say: &dyn Fn(String)) -> bool {
    let policy = shared.policy;
    let refusal = shared.hub.call(move |h| {
        tokens::authorize_debug_state(h.ui_principal(conn), &policy)
            .map(|r| (r.code, r.message, h.state_frame()))
    });
    match refusal {
        Ok(None) => false,
        Ok(Some((code, message, state))) => {
            say(crate::hub::ui_error_code(code, &message));
            say(state);
            true
        }
        Err(e) => {
            say(crate::hub::ui_error(&e.to_string(), None));
            true
        }
    }
}

/// How long shutdown waits for the sockets to answer their close frame (the reference
/// waits 500 ms, then drops the stragglers).
pub const SHUTDOWN_CLOSE_GRACE: Duration = Duration::from_millis(500);

/// Shutdown, first step: sends every app and viewer socket close 1001 (going away), wakes
/// the long-polls (which answer 503 `shutting-down`), and waits up to `grace` for the
/// sockets' threads to finish the closing handshake (an app's thread first lets the writer
/// store what it sent) and for every HTTP answer to be written. Returns the sockets still
/// open after it.
pub fn close_sockets(shared: &Shared, grace: Duration) -> usize {
    let _ = shared.hub.call(|h| h.begin_shutdown());
    shared.notify();
    let deadline = Instant::now() + grace;
    loop {
        let open = shared.hub.call(|h| h.socket_count()).unwrap_or(0);
        let answering = shared.http_in_flight.load(Ordering::SeqCst);
        if (open == 0 && answering == 0) || Instant::now() >= deadline {
            return open;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The one line `--json` prints once listening.
pub fn json_line(port: u16) -> String {
    text(object([
        ("port", u64::from(port).into()),
        ("url", format!("http://127.0.0.1:{port}").into()),
        ("pid", u64::from(std::process::id()).into()),
        ("version", VERSION.into()),
    ]))
}
