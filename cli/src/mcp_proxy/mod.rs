//! `graphmind mcp-proxy [options] -- CMD ARGS...`: sits between an MCP host (our stdin and
//! stdout) and a stdio MCP server (the child), relays newline-delimited JSON-RPC byte for
//! byte and in order, and records one run per host session on the core's `Session`, with
//! each request a gated `Step`.
//!
//! Threads: one relay per direction, one for the child's stderr, the main thread waits for
//! the child. A relay thread only ever blocks on the debugger inside a held gate; every
//! other session call is an enqueue. With `GRAPHMIND_DISABLED` the relays are a plain
//! pipe; a panic while observing a frame forwards that frame unchanged.
//!
//! Forward first, record after: when no gate could hold a frame (no debugger attached, or
//! one attached with nothing armed that could match: [`Session::may_hold`]) the relay
//! writes the frame on before it parses and records it, so neither peer waits on our
//! bookkeeping. Only when something could hold does a frame take the gated path (parse,
//! record, wait at the gate, then write). Frames forwarded first are recorded in the order
//! they were forwarded (a [`Journal`]), so a response is never recorded before its request.

pub mod protocol;

use graphmind_core::config::{
    describe_disabled, resolve, EnvSnapshot, HideSwitches, Options, SdkFlavor, SdkInfo,
};
use graphmind_core::event::{ErrorInfo, GraphNodeHint, NodeKind, TokenChannel};
use graphmind_core::gate::{GateDecision, PausePoint};
use graphmind_core::json::{Map, Value};
use graphmind_core::session::{Gate, NodeRef, Run, RunOutcome, Session};
use graphmind_core::step::{Next, Step};
use protocol::*;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Frame-assembly ceiling per direction (reference: `DEFAULT_MAX_FRAME_BYTES`).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;
/// Smallest accepted `--max-frame-bytes`.
pub const MIN_MAX_FRAME_BYTES: usize = 1024;
/// `--wait-for-attach` budget (reference: `ATTACH_WAIT_MS`).
pub const ATTACH_WAIT_MS: u64 = 3_000;
/// How long a server that failed to start waits for the debugger (reference:
/// `SPAWN_FAILURE_ATTACH_MS`).
pub const SPAWN_FAILURE_ATTACH_MS: u64 = 1_000;
/// Grace after the host hangs up before the server gets SIGTERM.
pub const SHUTDOWN_GRACE_MS: u64 = 5_000;
/// Grace after SIGTERM before SIGKILL.
pub const KILL_GRACE_MS: u64 = 2_000;
/// A hold longer than this is announced on stderr.
pub const HOLD_NOTICE_MS: u64 = 250;
/// Requests awaiting an answer that are remembered (the oldest goes beyond).
pub const MAX_PENDING: usize = 10_000;
/// Default GraphMind port.
pub const DEFAULT_PORT: u16 = 4747;
/// The rules the proxy resolves its settings by: the TypeScript client's, as the spec says
/// (its kill switch reads `NODE_ENV` alone).
pub const PROXY_FLAVOR: SdkFlavor = SdkFlavor::Node;

pub use crate::args::ProxyArgs;

fn log(line: &str) {
    log_raw(&format!("graphmind mcp-proxy: {line}"));
}

fn log_raw(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Whether `raw` could be a failed response (a JSON-RPC `error` or a result with
/// `isError`): both need the letters `rror` in a key, unless a key is spelled with a
/// `\u` escape. A byte scan, no parse; `false` is certain.
fn may_be_error(raw: &[u8]) -> bool {
    raw.windows(4).any(|w| w == b"rror") || raw.windows(2).any(|w| w == b"\\u")
}

/// A frame's length without its newline, as `--trace` reports it.
fn frame_body_len(raw: &[u8]) -> usize {
    raw.strip_suffix(b"\n").unwrap_or(raw).len()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which way a frame travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Host -> server (our stdin -> the child's stdin).
    HostToServer,
    /// Server -> host (the child's stdout -> our stdout).
    ServerToHost,
}

impl Direction {
    fn other(self) -> Direction {
        match self {
            Direction::HostToServer => Direction::ServerToHost,
            Direction::ServerToHost => Direction::HostToServer,
        }
    }
    fn side(self) -> &'static str {
        match self {
            Direction::HostToServer => "client",
            Direction::ServerToHost => "server",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Direction::HostToServer => "client->server",
            Direction::ServerToHost => "server->client",
        }
    }
}

/// The two ends frames are written to, each written whole under its own lock.
pub struct Sinks {
    to_server: Mutex<Option<Box<dyn Write + Send>>>,
    to_host: Mutex<Box<dyn Write + Send>>,
    server_gone: AtomicUsize,
}

impl Sinks {
    fn write(&self, dir: Direction, bytes: &[u8]) {
        match dir {
            Direction::HostToServer => {
                let mut g = lock(&self.to_server);
                let ok = match g.as_mut() {
                    Some(w) => w.write_all(bytes).and_then(|_| w.flush()).is_ok(),
                    None => false,
                };
                if !ok {
                    *g = None;
                    if self.server_gone.fetch_add(1, Ordering::Relaxed) == 0 {
                        log("the server stopped reading its stdin");
                    }
                }
            }
            Direction::ServerToHost => {
                let mut g = lock(&self.to_host);
                let _ = g.write_all(bytes).and_then(|_| g.flush());
            }
        }
    }

    fn close_server(&self) {
        lock(&self.to_server).take();
    }
}

/// The frames forwarded before they were recorded, in forwarding order. A relay appends
/// its frame before it writes it (so whatever the frame causes on the other side, a
/// response or the host's next request, is appended after it), writes, then records the
/// journal up to its end unless the other relay is already doing so, in which case that
/// one records this frame too. Nobody waits for anybody on this path.
struct Journal {
    state: Mutex<JournalState>,
    idle: std::sync::Condvar,
}

#[derive(Default)]
struct JournalState {
    queue: std::collections::VecDeque<(Direction, Vec<u8>)>,
    /// A relay is recording the queue.
    busy: bool,
    /// Relays waiting in [`Recorder::settle`].
    waiters: usize,
}

impl Journal {
    fn new() -> Journal {
        Journal {
            state: Mutex::new(JournalState::default()),
            idle: std::sync::Condvar::new(),
        }
    }
}

/// Our stdout as the bare file descriptor: a frame is one `write(2)` (std's `Stdout` adds
/// a line buffer and a reentrant lock we do not need; frames are written whole under the
/// sink's lock). Never closes fd 1.
struct RawStdout(std::mem::ManuallyDrop<std::fs::File>);

impl RawStdout {
    fn new() -> RawStdout {
        use std::os::fd::FromRawFd;
        // SAFETY: fd 1 stays open for the life of the process; ManuallyDrop never closes it.
        RawStdout(std::mem::ManuallyDrop::new(unsafe {
            std::fs::File::from_raw_fd(1)
        }))
    }
}

impl Write for RawStdout {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Pending {
    step: Step,
    method: String,
    frame: Value,
    raw: Vec<u8>,
    params: Option<Value>,
    retries: u32,
}

/// The recording half: one per host session, shared by the relay threads.
pub struct Recorder {
    session: Session,
    run_id: String,
    hide: HideSwitches,
    viewer_url: String,
    /// `--trace`: one stderr line per frame.
    trace: bool,
    session_node: NodeRef,
    pending: Mutex<HashMap<String, Pending>>,
    order: Mutex<std::collections::VecDeque<String>>,
    counter: AtomicU64,
    noise_recorded: AtomicUsize,
    noise_dropped: AtomicU64,
    unmatched: AtomicU64,
    /// Lines in either direction that were not JSON (reported at the end).
    unparseable: AtomicU64,
    ring: Mutex<StderrRing>,
    /// Frames forwarded and not yet recorded.
    journal: Journal,
    /// A direction went raw (a frame over `--max-frame-bytes`): from then on answers pass
    /// unread, so a request still pending at exit may well have been answered.
    degraded: AtomicBool,
}

enum Action {
    Forward,
    Replace(Vec<u8>),
    Drop,
}

impl Recorder {
    fn node(&self, method: &str, params: Option<&Value>) -> NodeRef {
        let (node_id, kind, name) = map_method(method, params);
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        NodeRef {
            node_id,
            instance_id: format!("mcp_{n}"),
            kind,
            name,
        }
    }

    /// `--trace`: `[client->server] <message>` on stderr, as the reference prints it.
    fn trace(&self, dir: Direction, message: impl FnOnce() -> String) {
        if self.trace {
            let _ = writeln!(std::io::stderr(), "{}", trace_line(dir.label(), &message()));
        }
    }

    fn wait(&self, gate: Gate, what: &str, point: &str) -> GateDecision {
        match gate {
            Gate::Continue => GateDecision::proceed(),
            Gate::Held(p) => match p.wait_timeout(Duration::from_millis(HOLD_NOTICE_MS)) {
                Some(d) => d,
                None => {
                    log(&format!(
                        "HOLDING {what} at the {point} gate — resume it in {} (the MCP client is waiting; it will time out on its own if you do not)",
                        self.viewer_url
                    ));
                    let d = p.wait();
                    log(&format!("released {what} ({})", d.action.as_str()));
                    d
                }
            },
        }
    }

    /// Whether the frame `raw` may be forwarded before it is recorded: no gate could hold
    /// it (recording off, no debugger attached, or nothing armed that a request, a
    /// notification or a response could match). Attached, the frames forwarded earlier
    /// are recorded first, so the loop guard judges with the history as it is.
    ///
    /// The `error` gate (armed by default: the debugger's pause-on-error) only sees failed
    /// responses, so a frame that cannot be one ([`may_be_error`]) passes it by.
    fn forward_first(&self, raw: &[u8]) -> bool {
        if !self.session.is_enabled() || !self.session.is_attached() {
            return true;
        }
        self.settle();
        let may = |p| self.session.may_hold(&self.run_id, p);
        !(may(PausePoint::Before)
            || may(PausePoint::After)
            || (may_be_error(raw) && may(PausePoint::Error)))
    }

    /// Appends a frame about to be forwarded to the journal.
    fn log(&self, dir: Direction, raw: &[u8]) {
        lock(&self.journal.state)
            .queue
            .push_back((dir, raw.to_vec()));
    }

    /// Records the journal in order up to its end, unless another relay is recording it
    /// (that one then records whatever was appended, before it stops).
    fn drain(&self) {
        let mut st = lock(&self.journal.state);
        if st.busy {
            return;
        }
        st.busy = true;
        while let Some((dir, raw)) = st.queue.pop_front() {
            drop(st);
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.observe(dir, &raw)))
                .is_err()
            {
                log(&format!(
                    "internal error observing a {} frame (it was relayed unchanged)",
                    dir.side()
                ));
            }
            st = lock(&self.journal.state);
        }
        st.busy = false;
        if st.waiters > 0 {
            self.journal.idle.notify_all();
        }
    }

    /// Returns once every frame in the journal is recorded (before a frame takes the gated
    /// path, or before the gates are judged): records them, or waits for the relay that
    /// is recording them (it only enqueues to the session, so it finishes).
    fn settle(&self) {
        let mut st = lock(&self.journal.state);
        loop {
            if !st.busy {
                if st.queue.is_empty() {
                    return;
                }
                drop(st);
                self.drain();
                st = lock(&self.journal.state);
                continue;
            }
            st.waiters += 1;
            st = self
                .journal
                .idle
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
            st.waiters -= 1;
        }
    }

    /// Records a frame already forwarded: the events the gated path records when every
    /// gate continues (a request opens its node and is remembered, a notification is a
    /// finished node, a response closes its request's node), and the same `--trace` lines.
    fn observe(&self, dir: Direction, raw: &[u8]) {
        let Some((frame, value)) = classify(raw) else {
            self.unparseable.fetch_add(1, Ordering::Relaxed);
            self.trace(dir, || {
                format!(
                    "non-JSON frame ({} bytes), relayed verbatim",
                    frame_body_len(raw)
                )
            });
            if dir == Direction::ServerToHost {
                self.note_noise(raw);
            }
            return;
        };
        match frame {
            Frame::Request { id, method, params } => {
                let node = self.node(&method, params.as_ref());
                let editable = method == "tools/call";
                self.trace(dir, || format!("-> {method} #{}", id_text(&id)));
                let step = Step::start(
                    &self.session,
                    Some(&self.run_id),
                    node,
                    Some(SESSION_NODE_ID),
                    params.clone(),
                    editable,
                );
                self.remember(
                    id_key(&id),
                    dir,
                    Pending {
                        step,
                        method,
                        frame: value,
                        raw: raw.to_vec(),
                        params,
                        retries: 0,
                    },
                );
            }
            Frame::Notification { method, params } => {
                let node = self.node(&method, params.as_ref());
                self.trace(dir, || format!("~> {method} (notification)"));
                let mut step = Step::start(
                    &self.session,
                    Some(&self.run_id),
                    node,
                    Some(SESSION_NODE_ID),
                    params,
                    false,
                );
                step.on_after(GateDecision::proceed(), None);
            }
            Frame::Response { id, result, error } => {
                let key = format!("{}|{}", dir.other().label(), id_key(&id));
                let Some(mut entry) = lock(&self.pending).remove(&key) else {
                    self.unmatched.fetch_add(1, Ordering::Relaxed);
                    self.trace(dir, || {
                        format!("<- response #{} with no pending request", id_text(&id))
                    });
                    return;
                };
                let failed = error.is_some() || is_error_result(result.as_ref());
                self.trace(dir, || {
                    format!(
                        "<- {} #{} {}",
                        entry.method,
                        id_text(&id),
                        if failed { "ERROR" } else { "ok" }
                    )
                });
                if failed {
                    let hide = self.hide.outputs || self.hide.tool_results;
                    let (name, message) =
                        describe_failure(&entry.method, error.as_ref(), result.as_ref(), hide);
                    self.session.node_error(
                        Some(&self.run_id),
                        entry.step.node(),
                        ErrorInfo::new(name.as_str(), message.as_str()),
                    );
                    entry.step.on_ungated_error(false);
                } else {
                    entry.step.on_after(GateDecision::proceed(), result);
                }
            }
            Frame::Batch => {
                let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
                self.trace(dir, || {
                    format!("batch of {} (observed, not gated)", items.len())
                });
                self.observe_batch(dir, items);
            }
            Frame::Other => self.trace(dir, || {
                "unrecognised JSON-RPC frame, relayed verbatim".to_owned()
            }),
        }
    }

    fn handle(&self, sinks: &Sinks, dir: Direction, raw: &[u8]) -> Action {
        let Some((frame, value)) = classify(raw) else {
            self.unparseable.fetch_add(1, Ordering::Relaxed);
            self.trace(dir, || {
                format!(
                    "non-JSON frame ({} bytes), relayed verbatim",
                    frame_body_len(raw)
                )
            });
            if dir == Direction::ServerToHost {
                self.note_noise(raw);
            }
            return Action::Forward;
        };
        match frame {
            Frame::Request { id, method, params } => {
                self.on_request(sinks, dir, raw, id, method, params, value)
            }
            Frame::Notification { method, params } => self.on_notification(dir, method, params),
            Frame::Response { id, result, error } => {
                self.on_response(sinks, dir, raw, id, result, error)
            }
            Frame::Batch => {
                let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
                self.trace(dir, || {
                    format!("batch of {} (observed, not gated)", items.len())
                });
                self.observe_batch(dir, items);
                Action::Forward
            }
            Frame::Other => {
                self.trace(dir, || {
                    "unrecognised JSON-RPC frame, relayed verbatim".to_owned()
                });
                Action::Forward
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_request(
        &self,
        sinks: &Sinks,
        dir: Direction,
        raw: &[u8],
        id: Value,
        method: String,
        params: Option<Value>,
        frame: Value,
    ) -> Action {
        let node = self.node(&method, params.as_ref());
        let editable = method == "tools/call";
        let mut step = Step::start(
            &self.session,
            Some(&self.run_id),
            node,
            Some(SESSION_NODE_ID),
            params.clone(),
            editable,
        );
        let what = format!("{method} #{}", id_text(&id));
        self.trace(dir, || format!("-> {what}"));
        let decision = self.wait(step.before(), &what, "before");
        match step.on_before(decision) {
            Next::ReturnInjected(v) => {
                let out = coerce_injected(&method, params.as_ref(), v);
                sinks.write(dir.other(), &result_frame(&id, out));
                Action::Drop
            }
            Next::Abort => {
                let msg = format!("{method} aborted by the GraphMind debugger");
                sinks.write(dir.other(), &error_frame(&id, GRAPHMIND_ABORTED_CODE, &msg));
                Action::Drop
            }
            Next::Run { input } => {
                let (raw, params, action) = match input {
                    Some(edited) => {
                        let edited = edited_params(&method, params.as_ref(), edited);
                        let bytes = with_params(&frame, edited.clone());
                        (bytes.clone(), Some(edited), Action::Replace(bytes))
                    }
                    None => (raw.to_vec(), params, Action::Forward),
                };
                self.remember(
                    id_key(&id),
                    dir,
                    Pending {
                        step,
                        method,
                        frame,
                        raw,
                        params,
                        retries: 0,
                    },
                );
                action
            }
            // Replay's answers are not produced for the proxy's session (config::REPLAY_FLAVORS).
            Next::ReturnResult | Next::Reraise | Next::Raise(_) | Next::Stream(_) => {
                self.remember(
                    id_key(&id),
                    dir,
                    Pending {
                        step,
                        method,
                        frame,
                        raw: raw.to_vec(),
                        params,
                        retries: 0,
                    },
                );
                Action::Forward
            }
        }
    }

    fn remember(&self, id: String, origin: Direction, p: Pending) {
        let key = format!("{}|{id}", origin.label());
        let mut pending = lock(&self.pending);
        let mut order = lock(&self.order);
        while pending.len() >= MAX_PENDING {
            match order.pop_front() {
                Some(old) => {
                    pending.remove(&old);
                }
                None => break,
            }
        }
        if pending.insert(key.clone(), p).is_none() {
            order.push_back(key);
        }
    }

    fn on_response(
        &self,
        sinks: &Sinks,
        dir: Direction,
        raw: &[u8],
        id: Value,
        result: Option<Value>,
        error: Option<Value>,
    ) -> Action {
        let origin = dir.other();
        let key = format!("{}|{}", origin.label(), id_key(&id));
        let Some(mut entry) = lock(&self.pending).remove(&key) else {
            self.unmatched.fetch_add(1, Ordering::Relaxed);
            self.trace(dir, || {
                format!("<- response #{} with no pending request", id_text(&id))
            });
            return Action::Forward;
        };
        let failed = error.is_some() || is_error_result(result.as_ref());
        let what = format!("{} #{}", entry.method, id_text(&id));
        self.trace(dir, || {
            format!("<- {what} {}", if failed { "ERROR" } else { "ok" })
        });
        let next = if failed {
            let hide = self.hide.outputs || self.hide.tool_results;
            let (name, message) =
                describe_failure(&entry.method, error.as_ref(), result.as_ref(), hide);
            let d = self.wait(
                entry
                    .step
                    .error(ErrorInfo::new(name.as_str(), message.as_str())),
                &what,
                "error",
            );
            entry.step.on_error(d)
        } else {
            match entry.step.after() {
                Gate::Continue => {
                    // Nothing holds it: the host gets the answer first, the graph after.
                    sinks.write(dir, raw);
                    entry.step.on_after(GateDecision::proceed(), result);
                    return Action::Drop;
                }
                held => {
                    let d = self.wait(held, &what, "after");
                    entry.step.on_after(d, result)
                }
            }
        };
        match next {
            Next::ReturnResult | Next::Reraise | Next::Raise(_) | Next::Stream(_) => {
                Action::Forward
            }
            Next::ReturnInjected(v) => Action::Replace(result_frame(
                &id,
                coerce_injected(&entry.method, entry.params.as_ref(), v),
            )),
            Next::Abort => {
                let msg = format!("{} aborted by the GraphMind debugger", entry.method);
                Action::Replace(error_frame(&id, GRAPHMIND_ABORTED_CODE, &msg))
            }
            Next::Run { input } => {
                if let Some(edited) = input {
                    let edited = edited_params(&entry.method, entry.params.as_ref(), edited);
                    entry.raw = with_params(&entry.frame, edited.clone());
                    entry.params = Some(edited);
                }
                entry.retries += 1;
                let (retries, method) = (entry.retries, entry.method.clone());
                self.trace(dir, || format!("retry #{retries} of {method} re-sent"));
                let raw = entry.raw.clone();
                self.remember(id_key(&id), origin, entry);
                sinks.write(origin, &raw);
                Action::Drop
            }
        }
    }

    fn on_notification(&self, dir: Direction, method: String, params: Option<Value>) -> Action {
        let node = self.node(&method, params.as_ref());
        let mut step = Step::start(
            &self.session,
            Some(&self.run_id),
            node,
            Some(SESSION_NODE_ID),
            params,
            false,
        );
        self.trace(dir, || format!("~> {method} (notification)"));
        let d = self.wait(step.before(), &format!("{method} (notification)"), "before");
        match step.on_before(d) {
            Next::Abort => Action::Drop,
            Next::ReturnInjected(v) => {
                match v {
                    Value::Object(_) => {
                        let mut bytes = graphmind_core::json::to_string(&v).into_bytes();
                        bytes.push(b'\n');
                        Action::Replace(bytes)
                    }
                    _ => {
                        log(&format!("inject on a notification needs a JSON object; relaying {method} unchanged"));
                        Action::Forward
                    }
                }
            }
            _ => {
                step.on_after(GateDecision::proceed(), None);
                Action::Forward
            }
        }
    }

    /// A batch (JSON-RPC arrays, gone since MCP 2025-06-18) is relayed whole and never
    /// gated, but each member is recorded like a lone frame, so the graph keeps the whole
    /// conversation: a request opens its node (answered later, alone or in a batch), a
    /// notification is a finished node, a response closes its request's node.
    fn observe_batch(&self, dir: Direction, items: &[Value]) {
        for item in items {
            match classify_value(item) {
                Frame::Request { id, method, params } => {
                    let node = self.node(&method, params.as_ref());
                    let step = Step::start(
                        &self.session,
                        Some(&self.run_id),
                        node,
                        Some(SESSION_NODE_ID),
                        params.clone(),
                        false,
                    );
                    let mut raw = graphmind_core::json::to_string(item).into_bytes();
                    raw.push(b'\n');
                    self.remember(
                        id_key(&id),
                        dir,
                        Pending {
                            step,
                            method,
                            frame: item.clone(),
                            raw,
                            params,
                            retries: 0,
                        },
                    );
                }
                Frame::Notification { method, params } => {
                    let node = self.node(&method, params.as_ref());
                    let mut step = Step::start(
                        &self.session,
                        Some(&self.run_id),
                        node,
                        Some(SESSION_NODE_ID),
                        params,
                        false,
                    );
                    step.on_after(GateDecision::proceed(), None);
                }
                Frame::Response { id, result, error } => {
                    let key = format!("{}|{}", dir.other().label(), id_key(&id));
                    let Some(mut entry) = lock(&self.pending).remove(&key) else {
                        self.unmatched.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    if error.is_some() || is_error_result(result.as_ref()) {
                        let hide = self.hide.outputs || self.hide.tool_results;
                        let (name, message) =
                            describe_failure(&entry.method, error.as_ref(), result.as_ref(), hide);
                        self.session.node_error(
                            Some(&self.run_id),
                            entry.step.node(),
                            ErrorInfo::new(name.as_str(), message.as_str()),
                        );
                        entry.step.on_ungated_error(false);
                    } else {
                        entry.step.on_after(GateDecision::proceed(), result);
                    }
                }
                Frame::Batch | Frame::Other => {}
            }
        }
    }

    fn note_noise(&self, raw: &[u8]) {
        if frame_body(raw).iter().all(u8::is_ascii_whitespace) {
            return;
        }
        if self.noise_recorded.fetch_add(1, Ordering::Relaxed) >= STDOUT_NOISE_MAX_RECORDED {
            self.noise_recorded.fetch_sub(1, Ordering::Relaxed);
            self.noise_dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let (quote, cut) = quote_bytes(raw, STDOUT_NOISE_QUOTE_BYTES);
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let node = NodeRef {
            node_id: "mcp:stdout".into(),
            instance_id: format!("mcp_{n}"),
            kind: NodeKind::Custom,
            name: "stdout (not JSON-RPC)".into(),
        };
        let mut input = Map::new();
        input.insert("line", Value::from(quote));
        input.insert("bytes", Value::from(frame_body(raw).len() as u64));
        if cut {
            input.insert("truncated", Value::Bool(true));
        }
        self.session.node_started(
            Some(&self.run_id),
            &node,
            Some(SESSION_NODE_ID),
            Some(Value::Object(input)),
        );
        self.session
            .node_finished(Some(&self.run_id), &node, None, 0.0, false);
    }

    fn note_stderr(&self, chunk: &[u8]) {
        lock(&self.ring).push(chunk);
        let text = String::from_utf8_lossy(chunk);
        self.session.node_token(
            Some(&self.run_id),
            &self.session_node,
            TokenChannel::Text,
            &text,
        );
    }
}

/// Reads `src` frame by frame (lines), hands each to the recorder (when there is one) and
/// writes the result to `dir`'s sink. Past `max_frame` bytes without a newline the
/// direction becomes a raw pipe for the rest of the session.
fn relay(
    mut src: impl Read,
    dir: Direction,
    sinks: &Sinks,
    recorder: Option<&Recorder>,
    max_frame: usize,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut frame: Vec<u8> = Vec::new();
    let degrade = |pending: &[u8], src: &mut dyn Read, buf: &mut [u8]| {
        if let Some(rec) = recorder {
            rec.degraded.store(true, Ordering::Release);
        }
        log(&format!(
            "a {} frame exceeded {max_frame} bytes ({} buffered); relaying raw from here on — the graph will stop updating but the session keeps working (raise --max-frame-bytes)",
            dir.side(),
            pending.len()
        ));
        sinks.write(dir, pending);
        loop {
            match src.read(buf) {
                Ok(0) => return,
                Ok(n) => sinks.write(dir, &buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    };
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut start = 0;
        while let Some(pos) = buf[start..n].iter().position(|&b| b == b'\n') {
            let end = start + pos + 1;
            // A frame that arrived whole is relayed from the read buffer (no copy); one
            // that spanned reads is assembled in `frame`.
            if !frame.is_empty() {
                frame.extend_from_slice(&buf[start..end]);
            }
            let len = if frame.is_empty() {
                end - start
            } else {
                frame.len()
            };
            if len > max_frame {
                let mut pending = if frame.is_empty() {
                    buf[start..end].to_vec()
                } else {
                    std::mem::take(&mut frame)
                };
                pending.extend_from_slice(&buf[end..n]);
                if let Some(rec) = recorder {
                    rec.drain();
                }
                degrade(&pending, &mut src, &mut buf);
                return;
            }
            if frame.is_empty() {
                deliver(dir, sinks, recorder, &buf[start..end]);
            } else {
                deliver(dir, sinks, recorder, &frame);
                frame.clear();
                if frame.capacity() > 1 << 20 {
                    frame = Vec::new(); // one huge frame does not pin its buffer
                }
            }
            start = end;
        }
        // Every frame of this read is forwarded: now record the ones forwarded first.
        if let Some(rec) = recorder {
            rec.drain();
        }
        frame.extend_from_slice(&buf[start..n]);
        if frame.len() > max_frame {
            let pending = std::mem::take(&mut frame);
            degrade(&pending, &mut src, &mut buf);
            return;
        }
    }
    if !frame.is_empty() {
        sinks.write(dir, &frame);
    }
}

fn deliver(dir: Direction, sinks: &Sinks, recorder: Option<&Recorder>, line: &[u8]) {
    let Some(rec) = recorder else {
        sinks.write(dir, line);
        return;
    };
    let fast = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rec.forward_first(line)))
        .unwrap_or(true);
    if fast {
        // Recorded by `drain` once the whole chunk read with it is forwarded.
        rec.log(dir, line);
        sinks.write(dir, line);
        return;
    }
    // The gated path records before it writes; what was forwarded earlier comes first.
    rec.settle();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rec.handle(sinks, dir, line)
    }));
    match outcome {
        Ok(Action::Forward) => sinks.write(dir, line),
        Ok(Action::Replace(bytes)) => sinks.write(dir, &bytes),
        Ok(Action::Drop) => {}
        Err(_) => {
            log(&format!(
                "internal error observing a {} frame; relayed unchanged",
                dir.side()
            ));
            sinks.write(dir, line);
        }
    }
}

/// The child's pid, for the signal handler that forwards SIGTERM / SIGINT to it.
static CHILD_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// Set once the host has closed our stdin.
static HOST_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn forward_signal(sig: libc::c_int) {
    // Only async-signal-safe calls here: an atomic load and kill(2).
    let pid = CHILD_PID.load(Ordering::Relaxed);
    if pid > 0 {
        unsafe { libc::kill(pid, sig) };
    }
}

fn exit_code(status: &std::process::ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(s)) => (128 + s, Some(s)),
        _ => (1, None),
    }
}

fn join_within(handle: std::thread::JoinHandle<()>, within: Duration) {
    let deadline = Instant::now() + within;
    while !handle.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    if handle.is_finished() {
        let _ = handle.join();
    }
}

/// Runs `graphmind mcp-proxy` with its parsed arguments (`crate::args`); returns the exit code.
pub fn main(args: ProxyArgs) -> i32 {
    let Some(command) = args.command.clone() else {
        // stderr, never stdout: a host may already be reading our stdout as the protocol.
        eprint!(
            "{}",
            crate::args::help_text(Some("mcp-proxy"), args.port.unwrap_or(DEFAULT_PORT))
        );
        return 2;
    };
    let port = args.port.unwrap_or(DEFAULT_PORT);
    if let Ok(c) = crate::config::resolve(&graphmind_core::config::ServerFlags::default()) {
        crate::telemetry::record_command("mcp-proxy", &c);
    }
    let env = EnvSnapshot::from_process();
    let mut options = Options {
        sdk: Some(SdkInfo {
            name: "mcp-proxy".into(),
            version: crate::hub::VERSION.into(),
        }),
        ..Default::default()
    };
    if let Some(p) = args.port {
        options.url = Some(format!("ws://127.0.0.1:{p}/ingest"));
    }
    // The proxy follows the TypeScript client (the spec): only NODE_ENV=production switches
    // it off, unless GRAPHMIND=1; Python's ENV / APP_ENV list does not apply.
    let mut config = resolve(&options, &env, PROXY_FLAVOR);
    let disabled_because = describe_disabled(config.enabled_reason, &env, PROXY_FLAVOR);
    let hide = config.hide;
    let label = if hide.inputs {
        hidden_command_label(&command, &args.args)
    } else {
        command_label(&command, &args.args)
    };
    let mut meta = Map::new();
    meta.insert("transport", Value::from("stdio"));
    if hide.inputs {
        meta.insert(
            "command",
            Value::from(label.split(' ').next().unwrap_or("")),
        );
    } else {
        meta.insert("command", Value::from(command.as_str()));
        meta.insert(
            "args",
            Value::Array(args.args.iter().map(|a| Value::from(a.as_str())).collect()),
        );
    }
    config.app_name = label.clone();
    config.meta = Some(meta);
    let reporting_to = config.url.clone();
    let session = Session::new(config, Arc::new(|line: &str| eprintln!("{line}")));
    let enabled = session.is_enabled();
    let mut shown = vec![command.clone()];
    shown.extend(args.args.iter().cloned());
    log_raw(&format!(
        "graphmind mcp-proxy v{}: proxying {}",
        crate::hub::VERSION,
        shown.join(" ")
    ));
    if enabled {
        log(&format!("reporting to {reporting_to} (run `graphmind` to watch; nothing breaks if it is not up)"));
    } else {
        let why = disabled_because.as_deref().unwrap_or("recording is off");
        log(&format!("{why}: relaying only, nothing is recorded"));
    }
    let viewer_url = format!("http://127.0.0.1:{port}");
    let session_node = NodeRef {
        node_id: SESSION_NODE_ID.into(),
        instance_id: SESSION_NODE_ID.into(),
        kind: NodeKind::Server,
        name: label.clone(),
    };
    let session_input = {
        let mut m = Map::new();
        m.insert("command", Value::from(command.as_str()));
        m.insert(
            "args",
            Value::Array(args.args.iter().map(|a| Value::from(a.as_str())).collect()),
        );
        Value::Object(m)
    };
    let start_run = |session: &Session| -> Run {
        let run = session.start_run(&format!("mcp-proxy: {label}"), None);
        session.graph_hint(
            Some(&run.run_id),
            vec![GraphNodeHint::new(
                SESSION_NODE_ID,
                NodeKind::Server,
                label.as_str(),
            )],
        );
        session.node_started(
            Some(&run.run_id),
            &session_node,
            None,
            Some(session_input.clone()),
        );
        run
    };

    let mut cmd = Command::new(&command);
    cmd.args(&args.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    cmd.stderr(if args.inherit_stderr {
        Stdio::inherit()
    } else {
        Stdio::piped()
    });
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            log(&format!("cannot run \"{command}\": {e}"));
            if enabled {
                // So that the failure reaches the graph: the attach budget, or a short one.
                let wait = if args.wait_for_attach {
                    ATTACH_WAIT_MS
                } else {
                    SPAWN_FAILURE_ATTACH_MS
                };
                session.ready(Duration::from_millis(wait));
                let run = start_run(&session);
                let info = ErrorInfo::new(
                    "McpServerSpawnFailed",
                    format!("cannot run \"{command}\": {e}").as_str(),
                );
                session.node_error(Some(&run.run_id), &session_node, info.clone());
                session.finish_run(&run, RunOutcome::Error(info));
                if session.is_attached() {
                    session.flush(Duration::from_millis(1000));
                }
                session.dispose(Duration::from_millis(500));
            }
            return 127;
        }
    };
    let pid = child.id() as i32;
    // A host that ends the session with SIGTERM (the Python SDK does, after closing stdin)
    // stops the server; we then record the end and exit with the server.
    CHILD_PID.store(pid, Ordering::Relaxed);
    unsafe {
        libc::signal(
            libc::SIGTERM,
            forward_signal as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGINT,
            forward_signal as *const () as libc::sighandler_t,
        );
    }
    let child_stdin: ChildStdin = child.stdin.take().expect("piped stdin");
    let child_stdout = child.stdout.take().expect("piped stdout");
    let child_stderr = child.stderr.take();

    // The server starts at once; its first frames wait in the pipe until the relays run.
    if enabled && args.wait_for_attach {
        session.ready(Duration::from_millis(ATTACH_WAIT_MS));
    }
    // `--trace` needs the frames parsed even when recording is off (a disabled session
    // records nothing and never holds).
    let run = if enabled || args.trace {
        Some(start_run(&session))
    } else {
        None
    };
    let recorder: Option<Arc<Recorder>> = run.as_ref().map(|run| {
        Arc::new(Recorder {
            session: session.clone(),
            run_id: run.run_id.clone(),
            hide,
            viewer_url: viewer_url.clone(),
            trace: args.trace,
            session_node: session_node.clone(),
            pending: Mutex::new(HashMap::new()),
            order: Mutex::new(Default::default()),
            counter: AtomicU64::new(0),
            noise_recorded: AtomicUsize::new(0),
            noise_dropped: AtomicU64::new(0),
            degraded: AtomicBool::new(false),
            unmatched: AtomicU64::new(0),
            unparseable: AtomicU64::new(0),
            ring: Mutex::new(StderrRing::new()),
            journal: Journal::new(),
        })
    });
    let sinks = Arc::new(Sinks {
        to_server: Mutex::new(Some(Box::new(child_stdin))),
        to_host: Mutex::new(Box::new(RawStdout::new())),
        server_gone: AtomicUsize::new(0),
    });
    let max = args.max_frame_bytes;

    let stderr_thread = child_stderr.map(|mut err| {
        let rec = recorder.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match err.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let _ = std::io::stderr().write_all(&buf[..n]);
                        if let Some(r) = &rec {
                            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                r.note_stderr(&buf[..n])
                            }));
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
        })
    });
    let server_to_host = {
        let (sinks, rec) = (sinks.clone(), recorder.clone());
        std::thread::spawn(move || {
            relay(
                child_stdout,
                Direction::ServerToHost,
                &sinks,
                rec.as_deref(),
                max,
            )
        })
    };
    {
        let (sinks, rec) = (sinks.clone(), recorder.clone());
        std::thread::spawn(move || {
            relay(
                std::io::stdin(),
                Direction::HostToServer,
                &sinks,
                rec.as_deref(),
                max,
            );
            // The host hung up: pass the EOF on, then make sure the server goes too.
            sinks.close_server();
            HOST_CLOSED.store(true, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(SHUTDOWN_GRACE_MS));
            log("client disconnected; asking the server to stop");
            unsafe { libc::kill(pid, libc::SIGTERM) };
            std::thread::sleep(Duration::from_millis(KILL_GRACE_MS));
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
    }

    let status = child.wait();
    let (code, signal) = match &status {
        Ok(s) => exit_code(s),
        Err(_) => (1, None),
    };
    join_within(server_to_host, Duration::from_secs(2));
    if let Some(t) = stderr_thread {
        join_within(t, Duration::from_secs(1));
    }

    if let (Some(rec), Some(run)) = (recorder.as_ref(), run.as_ref()) {
        let reason = match signal {
            Some(s) => format!("the MCP server was killed by signal {s}"),
            None => format!("the MCP server exited with code {code}"),
        };
        lock(&rec.ring).finish();
        rec.settle();
        let unanswered: Vec<Pending> = lock(&rec.pending).drain().map(|(_, p)| p).collect();
        let mut first_method = None;
        let count = unanswered.len();
        // After a raw relay the answers were not read: "unanswered" would be a guess.
        let degraded = rec.degraded.load(Ordering::Acquire);
        for mut p in unanswered {
            let (kind, message) = if degraded {
                ("McpAnswerUnrecorded", format!("the relay went raw (a frame over --max-frame-bytes) while {} was pending: its answer, if any, was relayed unread", p.method))
            } else {
                (
                    "McpServerExited",
                    format!("{reason} before answering {}", p.method),
                )
            };
            session.node_error(
                Some(&run.run_id),
                p.step.node(),
                ErrorInfo::new(kind, message.as_str()),
            );
            p.step.on_ungated_error(false);
            first_method.get_or_insert(p.method);
        }
        let ring = lock(&rec.ring);
        if degraded {
            // Nothing to claim about the pending requests (see above).
            first_method = None;
        }
        if let Some(method) = first_method {
            let mut err = std::io::stderr().lock();
            for line in exit_notice(&reason, &method, count, &ring) {
                let _ = writeln!(err, "{line}");
            }
        }
        let mut output = Map::new();
        output.insert(
            "exitCode",
            if signal.is_some() {
                Value::Null
            } else {
                Value::from(code as i64)
            },
        );
        output.insert(
            "signal",
            signal.map(|s| Value::from(s as i64)).unwrap_or(Value::Null),
        );
        output.insert(
            "stderr",
            Value::from(ring.lines().collect::<Vec<_>>().join("\n")),
        );
        output.insert("stderrLinesDropped", Value::from(ring.dropped));
        output.insert(
            "stdoutNoiseRecorded",
            Value::from(rec.noise_recorded.load(Ordering::Relaxed) as u64),
        );
        output.insert(
            "stdoutNoiseDropped",
            Value::from(rec.noise_dropped.load(Ordering::Relaxed)),
        );
        drop(ring);
        // Stopped by a signal after the host hung up is how a session normally ends.
        let stopped = HOST_CLOSED.load(Ordering::Relaxed)
            && matches!(signal, Some(libc::SIGTERM | libc::SIGINT | libc::SIGKILL));
        let ok = (signal.is_none() && code == 0) || stopped;
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        if ok {
            session.node_finished(
                Some(&run.run_id),
                &session_node,
                Some(Value::Object(output)),
                elapsed,
                false,
            );
            session.finish_run(run, RunOutcome::Ok);
        } else {
            let info = ErrorInfo::new("McpServerExited", reason.as_str());
            session.node_error(Some(&run.run_id), &session_node, info.clone());
            let mut finished = Map::new();
            finished.insert("nodeId", Value::from(SESSION_NODE_ID));
            finished.insert("instanceId", Value::from(SESSION_NODE_ID));
            finished.insert("output", Value::Object(output));
            finished.insert("durationMs", Value::from(elapsed));
            finished.insert("status", Value::from("error"));
            session.emit(Some(&run.run_id), "node.finished", Value::Object(finished));
            session.finish_run(run, RunOutcome::Error(info));
        }
        let unmatched = rec.unmatched.load(Ordering::Relaxed);
        if unmatched > 0 {
            log(&format!(
                "{unmatched} response(s) arrived with no matching request id"
            ));
        }
        let unparseable = rec.unparseable.load(Ordering::Relaxed);
        if unparseable > 0 {
            log(&format!(
                "{unparseable} frame(s) were not JSON-RPC (relayed verbatim)"
            ));
        }
        if session.is_attached() {
            session.flush(Duration::from_millis(1000));
        }
    }
    session.dispose(Duration::from_millis(500));
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_frames_spelling_rror_or_an_escape_may_be_errors() {
        assert!(!may_be_error(
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}"#
        ));
        assert!(may_be_error(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}"#
        ));
        assert!(may_be_error(
            br#"{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[]}}"#
        ));
        // Keys spelled with escapes still decode to `error` / `isError`.
        for frame in [
            &br#"{"jsonrpc":"2.0","id":1,"e\u0072ror":{"code":1,"message":"x"}}"#[..],
            br#"{"id":2,"result":{"isE\u0072ror":true}}"#,
        ] {
            let Some((Frame::Response { error, result, .. }, _)) = classify(frame) else {
                panic!("a response")
            };
            assert!(error.is_some() || is_error_result(result.as_ref()));
            assert!(may_be_error(frame));
        }
    }

    #[test]
    fn relays_bytes_and_degrades_past_the_ceiling() {
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                lock(&self.0).extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let out = Arc::new(Mutex::new(Vec::new()));
        let sinks = Sinks {
            to_server: Mutex::new(None),
            to_host: Mutex::new(Box::new(Buf(out.clone()))),
            server_gone: AtomicUsize::new(0),
        };
        let mut input = b"{\"a\": 1}\r\nnoise\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 3000));
        input.extend_from_slice(b"\n{\"b\":2}\ntail");
        relay(&input[..], Direction::ServerToHost, &sinks, None, 1024);
        assert_eq!(*lock(&out), input);
    }
}

#[cfg(test)]
mod cost {
    use super::*;

    fn detached_recorder() -> (Session, Run, Recorder) {
        let env = EnvSnapshot::new();
        let options = Options {
            url: Some("ws://127.0.0.1:9/ingest".into()),
            ..Default::default()
        };
        let config = resolve(&options, &env, SdkFlavor::Native);
        let session = Session::new(config, Arc::new(|_: &str| {}));
        let run = session.start_run("bench", None);
        let rec = Recorder {
            session: session.clone(),
            run_id: run.run_id.clone(),
            hide: HideSwitches::default(),
            viewer_url: String::new(),
            trace: false,
            session_node: NodeRef {
                node_id: SESSION_NODE_ID.into(),
                instance_id: SESSION_NODE_ID.into(),
                kind: NodeKind::Server,
                name: "x".into(),
            },
            pending: Mutex::new(HashMap::new()),
            order: Mutex::new(Default::default()),
            counter: AtomicU64::new(0),
            noise_recorded: AtomicUsize::new(0),
            noise_dropped: AtomicU64::new(0),
            degraded: AtomicBool::new(false),
            unmatched: AtomicU64::new(0),
            unparseable: AtomicU64::new(0),
            ring: Mutex::new(StderrRing::new()),
            journal: Journal::new(),
        };
        (session, run, rec)
    }

    fn null_sinks() -> Sinks {
        Sinks {
            to_server: Mutex::new(Some(Box::new(std::io::sink()))),
            to_host: Mutex::new(Box::new(std::io::sink())),
            server_gone: AtomicUsize::new(0),
        }
    }

    #[test]
    fn stdout_noise_is_recorded_up_to_the_limit_then_counted() {
        let (_session, _run, rec) = detached_recorder();
        let sinks = null_sinks();
        for i in 0..30 {
            let line = format!("debug print {i} {}\n", "y".repeat(300));
            assert!(
                matches!(
                    rec.handle(&sinks, Direction::ServerToHost, line.as_bytes()),
                    Action::Forward
                ),
                "noise is relayed"
            );
        }
        assert!(matches!(
            rec.handle(&sinks, Direction::ServerToHost, b"   \n"),
            Action::Forward
        ));
        assert_eq!(
            rec.noise_recorded.load(Ordering::Relaxed),
            STDOUT_NOISE_MAX_RECORDED
        );
        assert_eq!(rec.noise_dropped.load(Ordering::Relaxed), 5);
        // A response with no matching request is relayed and counted.
        assert!(matches!(
            rec.handle(
                &sinks,
                Direction::ServerToHost,
                b"{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n"
            ),
            Action::Forward
        ));
        assert_eq!(rec.unmatched.load(Ordering::Relaxed), 1);
        // A request is remembered under its origin and matched by its answer.
        let req = b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}\n";
        assert!(matches!(
            rec.handle(&sinks, Direction::HostToServer, req),
            Action::Forward
        ));
        assert_eq!(lock(&rec.pending).len(), 1);
        assert!(matches!(
            rec.handle(
                &sinks,
                Direction::ServerToHost,
                b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}\n"
            ),
            Action::Drop | Action::Forward
        ));
        assert_eq!(lock(&rec.pending).len(), 0);
        assert_eq!(rec.unmatched.load(Ordering::Relaxed), 1);
        // A batch is relayed whole; its requests are remembered and its responses close them.
        let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t"}}]"#;
        assert!(matches!(
            rec.handle(&sinks, Direction::HostToServer, batch),
            Action::Forward
        ));
        assert_eq!(lock(&rec.pending).len(), 2);
        let answers =
            br#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":7,"result":{}}]"#;
        assert!(matches!(
            rec.handle(&sinks, Direction::ServerToHost, answers),
            Action::Forward
        ));
        assert_eq!(lock(&rec.pending).len(), 1, "#1 answered, #2 still open");
        assert_eq!(
            rec.unmatched.load(Ordering::Relaxed),
            2,
            "#7 matched nothing"
        );
        // The open batched request can still be answered alone.
        assert!(matches!(
            rec.handle(
                &sinks,
                Direction::ServerToHost,
                b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n"
            ),
            Action::Drop | Action::Forward
        ));
        assert_eq!(lock(&rec.pending).len(), 0);
    }

    /// Two relays forwarding first: each response is appended after its request (the host
    /// side appends before it "writes"), whichever thread records, so none is unmatched.
    #[test]
    fn the_journal_records_in_forwarding_order_across_threads() {
        let (_session, _run, rec) = detached_recorder();
        let rec = Arc::new(rec);
        let (to_server, server_reads) = std::sync::mpsc::channel::<u32>();
        let server = {
            let rec = rec.clone();
            std::thread::spawn(move || {
                for i in server_reads {
                    let resp = format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"result\":{{}}}}\n");
                    rec.log(Direction::ServerToHost, resp.as_bytes());
                    rec.drain();
                }
            })
        };
        for i in 0..2000u32 {
            let req = format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\"}}}}\n");
            rec.log(Direction::HostToServer, req.as_bytes());
            to_server.send(i).unwrap(); // the write: the server answers from now on
            rec.drain();
        }
        drop(to_server);
        server.join().unwrap();
        rec.settle();
        assert_eq!(rec.unmatched.load(Ordering::Relaxed), 0);
        assert_eq!(lock(&rec.pending).len(), 0);
        assert!(lock(&rec.journal.state).queue.is_empty());
    }

    /// Frames read together are all forwarded, then recorded (none left in the journal).
    #[test]
    fn a_chunk_of_frames_is_forwarded_then_recorded() {
        let (_session, _run, rec) = detached_recorder();
        let sinks = null_sinks();
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\nnot json\n";
        relay(
            &input[..],
            Direction::HostToServer,
            &sinks,
            Some(&rec),
            1 << 20,
        );
        assert!(lock(&rec.journal.state).queue.is_empty());
        assert_eq!(lock(&rec.pending).len(), 2);
        assert_eq!(rec.unparseable.load(Ordering::Relaxed), 1);
    }

    /// The CPU cost of recording one request/response pair on the relay threads, detached.
    #[test]
    #[ignore]
    fn recording_cost_per_pair() {
        let (session, run, rec) = detached_recorder();
        let sinks = null_sinks();
        let n = 20_000;
        let t = Instant::now();
        for i in 0..n {
            let req = format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"bench {i}"}}}}}}"#
            );
            let resp = format!(
                r#"{{"result":{{"content":[{{"type":"text","text":"Echo: bench {i}"}}]}},"jsonrpc":"2.0","id":{i}}}"#
            );
            let t0 = Instant::now();
            rec.handle(&sinks, Direction::HostToServer, req.as_bytes());
            let t1 = t0.elapsed();
            rec.handle(&sinks, Direction::ServerToHost, resp.as_bytes());
            if i == n - 1 {
                eprintln!("last pair: request {:?}, total {:?}", t1, t0.elapsed());
            }
        }
        eprintln!(
            "recording cost per pair (detached): {:.2} µs",
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        );
        let t = Instant::now();
        for i in 0..n {
            let req = format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"bench {i}"}}}}}}"#
            );
            std::hint::black_box(classify(req.as_bytes()));
        }
        eprintln!(
            "classify only: {:.2} µs",
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        );
        let t = Instant::now();
        for i in 0..n {
            let node = rec.node("tools/call", None);
            let mut step = Step::start(
                &session,
                Some(&run.run_id),
                node,
                None,
                Some(Value::from(i as i64)),
                true,
            );
            let _ = step.on_after(GateDecision::proceed(), None);
        }
        eprintln!(
            "step start+finish only: {:.2} µs",
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        );
    }
}
