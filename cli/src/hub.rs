//! The server's shared state: app (ingest) connections, viewer (UI) connections, run
//! ownership and claims, the debug state (breakpoints + mode) and the pause registry.
//!
//! Everything here sits behind one mutex ([`Shared::hub`]) and is only touched for short,
//! non-blocking updates: storage and fan-out happen on the writer thread (`writer.rs`).

use crate::envelope::{PROTOCOL_VERSION, WILDCARD_RUN_ID};
use crate::util::{js, new_token, now_ms, num};
use crate::writer::Op;
use crossbeam_channel::Sender;
use graphmind_core::json::{self, cmp_utf16_bytes, Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How many run claims are remembered; oldest are evicted first (reference: `MAX_RUN_CLAIMS`).
pub const MAX_RUN_CLAIMS: usize = 5_000;
/// Longest `resumeToken` accepted from a client (reference: `MAX_RESUME_TOKEN_LENGTH`).
pub const MAX_RESUME_TOKEN_LENGTH: usize = 128;
/// Minimum gap between two identical log lines (reference: `LOG_THROTTLE_MS`).
pub const LOG_THROTTLE_MS: u64 = 1_000;
/// How long a forwarded resume waits for the app's `exec.resumed` before the pause is
/// reopened and the viewer told `timeout`.
pub const RESOLVING_TIMEOUT_MS: u64 = 30_000;
/// Closed pauses remembered, so a late resume is told `taken` / `no-such-pause`.
pub const MAX_CLOSED_PAUSES: usize = 10_000;
/// The server's version, as `hello.ack`, `welcome` and `/health` report it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Identifies one socket for the life of the process.
pub type ConnId = u64;

/// Something to send on a socket, queued for its connection thread.
#[derive(Debug, Clone)]
pub enum Out {
    /// A text frame.
    Text(String),
    /// A close frame with this code and reason; the connection ends after it.
    Close(u16, String),
}

/// A timer the timer thread fires.
#[derive(Debug, Clone)]
pub enum Timer {
    /// Mark `run` abandoned if generation `gen` is still current and nobody owns it.
    Abandon { run: String, gen: u64 },
    /// Reopen a pause whose forwarded resume `request_id` got no answer.
    Resolving { run: String, pause: String, request_id: String },
}

/// One app connection.
pub struct IngestConn {
    tx: Sender<Out>,
    /// `hello` received and `hello.ack` sent.
    pub attached: bool,
    seq: u64,
    /// `hello.app`.
    pub app: Option<String>,
    source: &'static str,
    owned: HashSet<String>,
    token: String,
    claim_aware: bool,
}

struct UiConn {
    tx: Sender<Out>,
    wildcard: bool,
}

struct Claim {
    token: String,
    strict: bool,
}

#[derive(Clone)]
enum PauseState {
    Open,
    Resolving { ui: ConnId, request_id: String },
}

struct Pause {
    owner: ConnId,
    state: PauseState,
}

#[derive(Clone, Copy, PartialEq)]
enum Closed {
    Resumed,
    Gone,
}

/// What the ingest thread needs to store one event, decided under the hub lock.
pub struct Admit {
    /// `hello.app` (or `unknown`) for a new run row.
    pub app: String,
    /// `live` or `demo`.
    pub source: &'static str,
    /// This connection just became the run's owner.
    pub owner_changed: bool,
}

/// The mutable state behind [`Shared::hub`].
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
    throttle: HashMap<&'static str, (Instant, u64)>,
}

/// Everything the connection threads, the writer and the timer thread share.
pub struct Shared {
    /// The hub state.
    pub hub: Mutex<HubState>,
    /// The writer thread's queue.
    pub writer: Sender<Op>,
    /// The timer thread's queue: (fire after, what).
    pub timers: Sender<(Duration, Timer)>,
    /// Bound port.
    pub port: u16,
    /// `GRAPHMIND_ABANDON_GRACE_MS`.
    pub grace: Duration,
    /// `GRAPHMIND_ALLOWED_ORIGINS`, parsed.
    pub allowed_origins: Vec<String>,
    /// Path of the database (for read connections).
    pub db_path: std::path::PathBuf,
}

/// Writes one server log line (stderr; stdout carries only the banner or `--json`).
pub fn log(msg: &str) {
    eprintln!("{msg}");
}

/// A stable key for "exact field equality" of breakpoint matchers: keys sorted (UTF-16
/// order, as JavaScript sorts), recursively.
pub fn canonical_key(v: &Value) -> String {
    match v {
        Value::Array(items) => format!("[{}]", items.iter().map(canonical_key).collect::<Vec<_>>().join(",")),
        Value::Object(m) => {
            let mut entries: Vec<_> = m.iter().collect();
            entries.sort_by(|a, b| cmp_utf16_bytes(a.0.as_bytes(), b.0.as_bytes()));
            let parts: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| {
                    let mut s = String::new();
                    json::write_string(k, &mut s);
                    format!("{s}:{}", canonical_key(v))
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        other => json::to_string(other),
    }
}

/// A server -> app envelope, spelled compactly.
pub fn envelope_text(seq: u64, run_id: &str, kind: &str, payload: &str) -> String {
    format!(
        "{{\"gm\":{PROTOCOL_VERSION},\"seq\":{seq},\"ts\":{},\"runId\":{},\"type\":{},\"payload\":{payload}}}",
        num(now_ms()),
        js(run_id),
        js(kind)
    )
}

fn resume_result(run: &str, pause: &str, request_id: &str, outcome: &str, code: Option<&str>, message: Option<&str>) -> String {
    let mut s = format!(
        "{{\"type\":\"resume.result\",\"runId\":{},\"pauseId\":{},\"requestId\":{},\"outcome\":{}",
        js(run),
        js(pause),
        js(request_id),
        js(outcome)
    );
    if let Some(c) = code {
        s.push_str(&format!(",\"code\":{}", js(c)));
    }
    if let Some(m) = message {
        s.push_str(&format!(",\"message\":{}", js(m)));
    }
    s.push('}');
    s
}

/// A viewer `error` message.
pub fn ui_error(message: &str, run_id: Option<&str>) -> String {
    match run_id {
        Some(r) => format!("{{\"type\":\"error\",\"message\":{},\"runId\":{}}}", js(message), js(r)),
        None => format!("{{\"type\":\"error\",\"message\":{}}}", js(message)),
    }
}

impl HubState {
    /// A fresh hub armed with `breakpoints` (from `--pause-on-error`) in mode `run`.
    pub fn new(breakpoints: Vec<Value>) -> Self {
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
            throttle: HashMap::new(),
        };
        for b in breakpoints {
            hub.set_breakpoint(b);
        }
        hub
    }

    /// Logs at most one line per `key` per [`LOG_THROTTLE_MS`], counting what it swallowed.
    pub fn throttled_log(&mut self, key: &'static str, msg: impl FnOnce() -> String) {
        let now = Instant::now();
        match self.throttle.get_mut(key) {
            Some((last, suppressed)) if now.duration_since(*last) < Duration::from_millis(LOG_THROTTLE_MS) => {
                *suppressed += 1;
            }
            entry => {
                let suppressed = entry.map(|e| e.1).unwrap_or(0);
                self.throttle.insert(key, (now, 0));
                if suppressed == 0 {
                    log(&msg());
                } else {
                    log(&format!("{} (+{suppressed} more)", msg()));
                }
            }
        }
    }

    /// The armed breakpoints as a JSON array.
    pub fn breakpoints_json(&self) -> String {
        format!("[{}]", self.breakpoints.iter().map(|(_, v)| json::to_string(v)).collect::<Vec<_>>().join(","))
    }

    /// The armed breakpoint matchers.
    pub fn breakpoints(&self) -> impl Iterator<Item = &Value> {
        self.breakpoints.iter().map(|(_, v)| v)
    }

    /// Current mode (`run` / `step`).
    pub fn mode(&self) -> &str {
        &self.mode
    }

    fn set_breakpoint(&mut self, m: Value) {
        let key = canonical_key(&m);
        if !self.breakpoints.iter().any(|(k, _)| *k == key) {
            self.breakpoints.push((key, m));
        }
    }

    fn alloc(&mut self) -> ConnId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    // -- ingest -------------------------------------------------------------------------

    /// Registers a new app socket.
    pub fn add_ingest(&mut self, tx: Sender<Out>) -> ConnId {
        let id = self.alloc();
        self.ingest.insert(
            id,
            IngestConn { tx, attached: false, seq: 0, app: None, source: "live", owned: HashSet::new(), token: String::new(), claim_aware: false },
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
        let breakpoints = self.breakpoints_json();
        let mode = self.mode.clone();
        let Some(c) = self.ingest.get_mut(&conn) else { return };
        c.attached = true;
        if let Some(app) = payload.get("app").and_then(Value::as_str) {
            c.app = Some(app.to_owned());
        }
        if payload.get("source").and_then(Value::as_str) == Some("demo") {
            c.source = "demo";
        }
        let caps: Vec<Value> = payload.get("capabilities").and_then(Value::as_array).cloned().unwrap_or_default();
        c.claim_aware = caps.iter().any(|v| v.as_str() == Some("run-claim"));
        c.token = match payload.get("resumeToken").and_then(Value::as_str) {
            Some(t) if !t.is_empty() && t.encode_utf16().count() <= MAX_RESUME_TOKEN_LENGTH => t.to_owned(),
            _ => new_token(),
        };
        let ack = format!(
            "{{\"versions\":{{\"protocol\":{PROTOCOL_VERSION},\"viewer\":{}}},\"capabilities\":{},\"breakpoints\":{breakpoints},\"mode\":{},\"sessionToken\":{}}}",
            js(VERSION),
            json::to_string(&Value::Array(caps)),
            js(&mode),
            js(&c.token)
        );
        let seq = c.seq;
        c.seq += 1;
        let _ = c.tx.send(Out::Text(envelope_text(seq, WILDCARD_RUN_ID, "hello.ack", &ack)));
        log(&match &c.app {
            Some(a) => format!("app attached: {a}"),
            None => "app attached".into(),
        });
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
                    self.throttled_log("ingest-claim", || {
                        format!("ingest: refusing a frame for run \"{run}\" from {who} — that run belongs to another connection")
                    });
                    return None;
                }
                let who = self.describe(conn);
                self.throttled_log("ingest-claim-takeover", || {
                    format!("ingest: run \"{run}\" re-claimed by {who}, which cannot prove it is the original app (SDK predates the run-claim capability)")
                });
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
        Some(Admit { app: c.app.clone().unwrap_or_else(|| "unknown".into()), source: c.source, owner_changed })
    }

    /// Queues an envelope to an app socket, numbering it with that socket's own counter.
    fn send_ingest(&mut self, conn: ConnId, run_id: &str, kind: &str, payload: &str) -> bool {
        let Some(c) = self.ingest.get_mut(&conn) else { return false };
        let seq = c.seq;
        c.seq += 1;
        c.tx.send(Out::Text(envelope_text(seq, run_id, kind, payload))).is_ok()
    }

    /// An app socket closed: its pauses close, its runs lose their owner and get an abandon
    /// timer. Returns the runs whose `live` flag changed and the timers to arm.
    pub fn remove_ingest(&mut self, conn: ConnId, next_gen_out: &mut Vec<(String, u64)>) -> Vec<String> {
        let Some(c) = self.ingest.remove(&conn) else { return Vec::new() };
        self.close_pauses(|p| p.owner == conn, "app-disconnected", "the app holding this pause disconnected; it releases its gates on its own");
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
            log(&match &c.app {
                Some(a) => format!("app detached: {a}"),
                None => "app detached".into(),
            });
        }
        changed
    }

    /// An abandon timer fired: true when it is still current and nobody owns the run.
    pub fn abandon_due(&mut self, run: &str, gen: u64) -> bool {
        if self.abandon_gen.get(run) != Some(&gen) {
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

    /// Registers a viewer socket and queues `welcome`.
    pub fn add_ui(&mut self, tx: Sender<Out>) -> ConnId {
        let id = self.alloc();
        let welcome = format!(
            "{{\"type\":\"welcome\",\"versions\":{{\"protocol\":{PROTOCOL_VERSION},\"server\":{}}},\"breakpoints\":{},\"mode\":{}}}",
            js(VERSION),
            self.breakpoints_json(),
            js(&self.mode)
        );
        let _ = tx.send(Out::Text(welcome));
        self.ui.insert(id, UiConn { tx, wildcard: false });
        id
    }

    /// A viewer socket closed.
    pub fn remove_ui(&mut self, conn: ConnId) {
        self.ui.remove(&conn);
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
            let _ = u.tx.send(Out::Text(msg));
        }
    }

    /// Sends `run.update` (already rendered) to every run-list subscriber.
    pub fn send_run_update(&self, run_json: &str) {
        let msg = format!("{{\"type\":\"run.update\",\"run\":{run_json}}}");
        for u in self.ui.values().filter(|u| u.wildcard) {
            let _ = u.tx.send(Out::Text(msg.clone()));
        }
    }

    fn broadcast_state(&self) {
        let msg = format!("{{\"type\":\"state\",\"breakpoints\":{},\"mode\":{}}}", self.breakpoints_json(), js(&self.mode));
        for u in self.ui.values() {
            let _ = u.tx.send(Out::Text(msg.clone()));
        }
    }

    fn relay_to_all_ingest(&mut self, kind: &str, payload: &Value) {
        let payload = json::to_string(payload);
        let conns: Vec<ConnId> = self.ingest.iter().filter(|(_, c)| c.attached).map(|(id, _)| *id).collect();
        for id in conns {
            self.send_ingest(id, WILDCARD_RUN_ID, kind, &payload);
        }
    }

    /// `breakpoint.set` / `breakpoint.clear` / `mode.set` from a viewer (payload already
    /// checked): update the server state, relay to every app, broadcast `state`.
    pub fn debug_control(&mut self, kind: &str, payload: &Value) {
        match kind {
            "breakpoint.set" => {
                if let Some(m) = payload.get("matcher") {
                    self.set_breakpoint(m.clone());
                }
            }
            "breakpoint.clear" => {
                if let Some(m) = payload.get("matcher") {
                    let key = canonical_key(m);
                    self.breakpoints.retain(|(k, _)| *k != key);
                }
            }
            "mode.set" => {
                if let Some(m) = payload.get("mode").and_then(Value::as_str) {
                    self.mode = m.to_owned();
                }
            }
            _ => return,
        }
        self.relay_to_all_ingest(kind, payload);
        self.broadcast_state();
    }

    // -- pauses and the resume race -----------------------------------------------------

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

    fn close_pauses(&mut self, which: impl Fn(&Pause) -> bool, code: &str, message: &str) {
        let keys: Vec<_> = self.pauses.iter().filter(|(_, p)| which(p)).map(|(k, _)| k.clone()).collect();
        for key in keys {
            if let Some(p) = self.pauses.remove(&key) {
                if let PauseState::Resolving { ui, request_id } = p.state {
                    self.send_ui(ui, resume_result(&key.0, &key.1, &request_id, "no-such-pause", Some(code), Some(message)));
                }
                self.remember_closed(key, Closed::Gone);
            }
        }
    }

    /// A stored `exec.paused`: the pause is open and owned by `conn`.
    pub fn pause_opened(&mut self, conn: ConnId, run: &str, pause: &str) {
        let key = (run.to_owned(), pause.to_owned());
        self.closed.remove(&key);
        self.pauses.insert(key, Pause { owner: conn, state: PauseState::Open });
    }

    /// A stored `exec.resumed`: the pause is released; the resume that won it (if any)
    /// hears `resume.result {outcome: "resumed"}`.
    pub fn pause_resumed(&mut self, run: &str, pause: &str) {
        let key = (run.to_owned(), pause.to_owned());
        if let Some(Pause { state: PauseState::Resolving { ui, request_id }, .. }) = self.pauses.remove(&key) {
            self.send_ui(ui, resume_result(run, pause, &request_id, "resumed", None, None));
        }
        self.remember_closed(key, Closed::Resumed);
    }

    /// A stored `run.finished`: every pause of the run is closed.
    pub fn run_finished(&mut self, run: &str) {
        let keys: Vec<_> = self.pauses.keys().filter(|k| k.0 == run).cloned().collect();
        for key in keys {
            if let Some(p) = self.pauses.remove(&key) {
                if let PauseState::Resolving { ui, request_id } = p.state {
                    self.send_ui(ui, resume_result(&key.0, &key.1, &request_id, "no-such-pause", Some("run-finished"), Some("the run finished")));
                }
                self.remember_closed(key, Closed::Gone);
            }
        }
    }

    /// `exec.resume` from viewer `ui` (payload checked: `pauseId` and `action` are valid).
    /// First writer wins: the first resume of an open pause is forwarded to the app that
    /// owns it and answered with `resume.result` when the app reports `exec.resumed`; any
    /// other is answered at once. Returns the timer to arm for a forwarded resume.
    pub fn request_resume(&mut self, ui: ConnId, run: &str, payload: &Value) -> Option<Timer> {
        let pause = payload.get("pauseId").and_then(Value::as_str).unwrap_or_default().to_owned();
        let action = payload.get("action").and_then(Value::as_str).unwrap_or_default().to_owned();
        let given = payload.get("requestId").and_then(Value::as_str).filter(|r| !r.is_empty() && r.len() <= MAX_RESUME_TOKEN_LENGTH);
        let request_id = given.map(str::to_owned).unwrap_or_else(new_token);
        let key = (run.to_owned(), pause.clone());
        let answer = |hub: &Self, outcome: &str, code: &str, message: String| {
            hub.send_ui(ui, resume_result(run, &pause, &request_id, outcome, Some(code), Some(&message)));
            None
        };
        if let Some(p) = self.pauses.get(&key) {
            if matches!(p.state, PauseState::Resolving { .. }) {
                return answer(self, "taken", "pause-taken", "another resume for this pause is already being answered".into());
            }
        } else {
            match self.closed.get(&key) {
                Some(Closed::Resumed) => {
                    return answer(self, "taken", "pause-taken", "this pause was already resumed".into());
                }
                Some(Closed::Gone) => {
                    return answer(self, "no-such-pause", "no-such-pause", format!("pause \"{pause}\" in run \"{run}\" is no longer held"));
                }
                None => {}
            }
        }
        let owner = self.pauses.get(&key).map(|p| p.owner).or_else(|| self.run_owners.get(run).copied());
        let Some(owner) = owner.filter(|o| self.is_attached(*o)) else {
            return answer(self, "no-such-pause", "no-owner", format!("no connected app owns run \"{run}\""));
        };
        self.pauses.insert(key, Pause { owner, state: PauseState::Resolving { ui, request_id: request_id.clone() } });
        let mut fwd = Map::new();
        fwd.insert("pauseId", Value::from(pause.as_str()));
        fwd.insert("action", Value::from(action.as_str()));
        fwd.insert("requestId", Value::from(request_id.as_str()));
        if action == "inject" {
            if let Some(out) = payload.get("output") {
                fwd.insert("output", out.clone());
            }
        }
        let text = json::to_string(&Value::Object(fwd));
        if !self.send_ingest(owner, run, "exec.resume", &text) {
            self.pauses.remove(&(run.to_owned(), pause.clone()));
            return answer(self, "no-such-pause", "app-disconnected", "the app holding this pause is disconnecting; it releases its gates on its own".into());
        }
        Some(Timer::Resolving { run: run.to_owned(), pause, request_id })
    }

    /// A forwarded resume got no `exec.resumed` in time: reopen the pause, tell the viewer.
    pub fn resolving_timed_out(&mut self, run: &str, pause: &str, request_id: &str) {
        let key = (run.to_owned(), pause.to_owned());
        let Some(p) = self.pauses.get_mut(&key) else { return };
        if let PauseState::Resolving { ui, request_id: r } = p.state.clone() {
            if r == request_id {
                p.state = PauseState::Open;
                self.send_ui(ui, resume_result(run, pause, request_id, "timeout", Some("no-answer"), Some("the app did not answer the resume in time; the pause is open again")));
            }
        }
    }
}

impl Shared {
    /// Locks the hub (a poisoned lock is recovered: the state stays usable).
    pub fn lock(&self) -> MutexGuard<'_, HubState> {
        self.hub.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Arms a timer.
    pub fn arm(&self, after: Duration, t: Timer) {
        let _ = self.timers.send((after, t));
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
        assert_ne!(canonical_key(&a), canonical_key(&parse_str(r#"{"kind":"tool"}"#).unwrap()));
    }

    #[test]
    fn breakpoints_dedupe_and_clear() {
        let mut hub = HubState::new(crate::config::parse_pause_on_error(None).unwrap());
        hub.debug_control("breakpoint.set", &parse_str(r#"{"matcher":{"kind":"tool","name":"x"}}"#).unwrap());
        hub.debug_control("breakpoint.set", &parse_str(r#"{"matcher":{"name":"x","kind":"tool"}}"#).unwrap());
        assert_eq!(hub.breakpoints_json(), r#"[{"point":"error"},{"kind":"tool","name":"x"}]"#);
        hub.debug_control("breakpoint.clear", &parse_str(r#"{"matcher":{"point":"error"}}"#).unwrap());
        assert_eq!(hub.breakpoints_json(), r#"[{"kind":"tool","name":"x"}]"#);
    }
}
