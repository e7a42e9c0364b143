//! The HTTP half of the control plane (the reference's 0.6 agent-facing API):
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /api/session` | who a Bearer token is: `{principal, agentLevel, editInput, hubCapabilities, version, otlp}` (401 for an unknown token; `otlp`: the live export's counters or null) |
//! | `GET /api/pauses[?runId=][&wait=S]` | open and resolving pauses; `wait` long-polls (at most 120 s) for an open one or the run's end |
//! | `GET /api/runs/:runId/pauses/:pauseId` | one pause, rebuilt from the stored run, with the held node's input |
//! | `POST /api/runs/:runId/pauses/:pauseId/resume` | release it (Bearer, JSON body, first writer wins) |
//! | `POST /api/demo/start` | replay the demo recording into this server (viewer token only; one at a time): 202 `{runId}` |
//!
//! Every non-GET request under `/api/` needs `Authorization: Bearer <token>` (401 with
//! `WWW-Authenticate: Bearer` otherwise). The resume route answers only POST (other
//! methods 405, `Allow: POST`), takes only `Content-Type: application/json` (415), and
//! never sends a CORS header: a page cannot reach it without a preflight nobody answers.
//!
//! The routing and the Bearer guard are axum's ([`crate::routes`], [`crate::guards`]);
//! these functions compute the answers and run on tokio's blocking pool (they read SQLite
//! and long-poll).

use crate::http::{percent_decode, query_param};
use crate::hub::{
    pause_json, Outcome, PauseInfo, Responder, ResumeStart, Shared, RESOLVING_TIMEOUT_MS, VERSION,
};
use crate::storage::{self, MAX_FRAME_BYTES};
use crate::tokens::{self, Credential, Principal};
use crate::util::{object, or_null, put_opt, text};
use axum::http::{HeaderMap, Method};
use crossbeam_channel::RecvTimeoutError;
use graphmind_core::json::{self, Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long `POST .../resume` waits for the app's answer by default.
pub const DEFAULT_RESUME_WAIT_MS: u64 = 30_000;
/// Longest wait a caller may ask for, on either long-poll.
pub const MAX_WAIT_MS: u64 = 120_000;
/// Long-polls (resume waits and `GET /api/pauses?wait=`) in flight at once.
pub const MAX_CONCURRENT_WAITS: usize = 16;

const JSON_TYPE: &str = "application/json; charset=utf-8";

/// (status, content type, body, an extra header).
pub type Answer = (
    u16,
    &'static str,
    String,
    Option<(&'static str, &'static str)>,
);

fn answer(status: u16, body: String) -> Option<Answer> {
    Some((status, JSON_TYPE, body, None))
}

/// How often a resume waiting for the app's answer checks whether the server is going down.
const SHUTDOWN_CHECK: Duration = Duration::from_millis(100);

/// The answer to a long-poll cut short by the server going down.
fn shutting_down() -> Option<Answer> {
    error(
        503,
        "shutting-down",
        "the GraphMind server is shutting down",
    )
}

/// Whether the server is going down (or its hub has gone); if so the waiting resume
/// `request_id` gives up in the same hub command, so a later answer goes to nobody.
fn shut_down_giving_up(shared: &Shared, run: &str, pause: &str, request_id: &str) -> bool {
    let (run, pause, request_id) = (run.to_owned(), pause.to_owned(), request_id.to_owned());
    shared
        .hub
        .call(move |h| {
            let down = h.is_shutting_down();
            if down {
                h.resume_gave_up(&run, &pause, &request_id);
            }
            down
        })
        .unwrap_or(true)
}

fn error(status: u16, code: &str, message: &str) -> Option<Answer> {
    answer(
        status,
        text(object([
            ("error", code.into()),
            ("message", message.into()),
        ])),
    )
}

/// 401 with `WWW-Authenticate: Bearer`.
pub fn unauthorized(message: &str) -> Option<Answer> {
    Some((
        401,
        JSON_TYPE,
        text(object([
            ("error", "unauthorized".into()),
            ("message", message.into()),
        ])),
        Some(("www-authenticate", "Bearer")),
    ))
}

/// The first value of header `name` (its bytes read as UTF-8, lossily).
pub fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// The Bearer credential of a request (never `?token=`, never a cookie).
pub fn credential_of(headers: &HeaderMap, shared: &Shared) -> Credential {
    match tokens::bearer_token(header(headers, "authorization").as_deref()) {
        None => Credential::None,
        Some(t) => tokens::resolve_credential(&[t], &shared.verifier),
    }
}

/// Whether `path` is `/api/runs/:runId/pauses/:pauseId/resume`.
pub fn is_resume_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/api/runs/") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    matches!(parts.as_slice(), [run, "pauses", pause, "resume"] if !run.is_empty() && !pause.is_empty())
}

/// The Bearer check (401 with `WWW-Authenticate: Bearer`): every non-GET request under
/// `/api/` needs a known token. A resume path asked with another method than POST is
/// let through: it answers 405 first.
pub fn bearer_refusal(
    shared: &Shared,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Option<Answer> {
    let api = path == "/api" || path.starts_with("/api/");
    let get = method == Method::GET || method == Method::HEAD;
    if !api || get || (is_resume_path(path) && method != Method::POST) {
        return None;
    }
    match credential_of(headers, shared) {
        Credential::Ok(_) => None,
        Credential::None => unauthorized(
            "this route needs \"Authorization: Bearer <token>\" (the agent token is in $GRAPHMIND_HOME/run/serve-<port>.json; graphmind resume reads it for you)",
        ),
        Credential::Invalid(m) => unauthorized(m),
    }
}

/// A resume asked with another method than POST: 405, `Allow: POST`.
pub fn resume_not_allowed() -> Answer {
    (
        405,
        JSON_TYPE,
        "{\"error\":\"method-not-allowed\",\"message\":\"use POST with a JSON body\"}".into(),
        Some(("allow", "POST")),
    )
}

/// `GET /api/session`: who the Bearer token is.
pub fn session(shared: &Shared, headers: &HeaderMap) -> Option<Answer> {
    let principal = match credential_of(headers, shared) {
        Credential::Invalid(m) => return unauthorized(m),
        Credential::Ok(p) => p,
        Credential::None => Principal::Anonymous,
    };
    answer(
        200,
        text(object([
            ("principal", principal.as_str().into()),
            ("agentLevel", shared.policy.agent_level.as_str().into()),
            ("editInput", shared.policy.edit_input.into()),
            ("hubCapabilities", shared.policy.hub_capabilities_value()),
            ("version", VERSION.into()),
            (
                "otlp",
                shared
                    .otlp
                    .as_ref()
                    .map(|x| x.session_value())
                    .unwrap_or_default(),
            ),
        ])),
    )
}

/// `POST /api/demo/start` (viewer token only): replays the demo recording into this server,
/// one demo at a time; answers 202 `{runId}`.
pub fn demo_start(shared: &Shared, method: &Method, headers: &HeaderMap) -> Option<Answer> {
    if method != Method::POST {
        return Some((
            405,
            JSON_TYPE,
            "{\"error\":\"method-not-allowed\",\"message\":\"use POST\"}".into(),
            Some(("allow", "POST")),
        ));
    }
    if credential_of(headers, shared) != Credential::Ok(Principal::Viewer) {
        return error(
            403,
            "forbidden",
            "starting the demo needs the viewer token: open the viewer with `graphmind open`",
        );
    }
    match crate::demo::agent::start_for_viewer(shared.port) {
        Ok(run) => answer(202, text(object([("runId", run.into())]))),
        Err(e) if e.starts_with("a demo run is already") => error(409, "conflict", &e),
        Err(e) => error(500, "demo-failed", &e),
    }
}

/// A run's status and liveness, when stored.
fn run_state(shared: &Shared, run: &str) -> Option<(String, bool)> {
    let conn = storage::open(&shared.db_path).ok()?;
    let row = storage::get_run(&conn, run).ok()??;
    let run_id = run.to_owned();
    let live = shared.hub.call(move |h| h.is_live(&run_id)).ok()?;
    Some((row.status, live))
}

/// Takes a long-poll slot; `None` when all are busy.
struct Slot<'a>(&'a Shared);

impl<'a> Slot<'a> {
    fn take(shared: &'a Shared) -> Option<Slot<'a>> {
        let prev = shared.active_waits.fetch_add(1, Ordering::SeqCst);
        if prev >= MAX_CONCURRENT_WAITS {
            shared.active_waits.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Slot(shared))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.active_waits.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `GET /api/pauses[?runId=][&wait=S]`. `caller_gone` is set when the HTTP client hung
/// up (hyper dropped the request's handler): the long-poll then stops and answers nothing.
pub fn list_pauses(shared: &Shared, query: &str, caller_gone: &AtomicBool) -> Option<Answer> {
    let run = query_param(query, "runId")
        .map(percent_decode)
        .filter(|r| !r.is_empty());
    let run = run.as_deref();
    let mut wait_ms = 0u64;
    if let Some(raw) = query_param(query, "wait").filter(|w| !w.is_empty()) {
        match percent_decode(raw).trim().parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => {
                wait_ms = ((s * 1000.0).round() as u64).min(MAX_WAIT_MS)
            }
            _ => {
                return error(
                    400,
                    "bad-request",
                    "\"wait\" must be a number of seconds >= 0",
                )
            }
        }
    }
    let ended = || {
        run.and_then(|r| run_state(shared, r))
            .is_some_and(|(status, _)| status != "running")
    };
    let ready = || {
        let run = run.map(str::to_owned);
        shared
            .hub
            .call(move |h| h.has_open(run.as_deref()))
            .unwrap_or(false)
            || ended()
    };
    let mut timed_out = false;
    if wait_ms > 0 && !ready() {
        let Some(_slot) = Slot::take(shared) else {
            return error(
                429,
                "too-many-requests",
                &format!("at most {MAX_CONCURRENT_WAITS} long-polls at once"),
            );
        };
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let mut seen = shared.change_count();
        loop {
            if ready() {
                break;
            }
            if shared.hub.call(|h| h.is_shutting_down()).unwrap_or(true) {
                return shutting_down();
            }
            let now = Instant::now();
            if now >= deadline {
                timed_out = true;
                break;
            }
            if caller_gone.load(Ordering::SeqCst) {
                return None; // nobody to answer; the slot is freed now, not at the deadline
            }
            // Re-check at least every 250 ms: a run can end on the writer without a pause change.
            seen = shared.wait_change(seen, (deadline - now).min(Duration::from_millis(250)));
        }
    }
    let asked = run.map(str::to_owned);
    let Ok(pauses) = shared.hub.call(move |h| h.list_pauses(asked.as_deref())) else {
        return shutting_down();
    };
    let mut body = object([("pauses", Value::Array(pauses))]);
    if let Some(r) = run {
        let state = run_state(shared, r).map(|(status, live)| {
            object([
                ("id", r.into()),
                ("status", status.into()),
                ("live", live.into()),
            ])
        });
        body.push_unique("run".into(), or_null(state));
    }
    if timed_out {
        body.push_unique("timedOut".into(), true.into());
    }
    answer(200, text(body))
}

/// One pause rebuilt from the stored run: the `exec.paused`, the latest `node.started` of
/// that node before it (the held execution: its input), a `node.error` / `node.finished`
/// of that execution before the hold, and the `exec.resumed` that released it, if any.
pub fn describe_pause(
    frames: &[Value],
    run: &str,
    pause: &str,
    live: Option<(PauseInfo, &'static str)>,
) -> Option<String> {
    describe_pause_object(frames, run, pause, live).map(text)
}

/// [`describe_pause`] as a JSON object.
fn describe_pause_object(
    frames: &[Value],
    run: &str,
    pause: &str,
    live: Option<(PauseInfo, &'static str)>,
) -> Option<Map> {
    let field = |v: &Value, k: &str| v.get(k).cloned();
    let payload = |v: &Value| v.get("payload").cloned().unwrap_or_default();
    let kind = |v: &Value| {
        v.get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let seq = |v: &Value| v.get("seq").and_then(Value::as_f64).unwrap_or(0.0);
    let paused = frames.iter().rev().find(|f| {
        kind(f) == "exec.paused" && payload(f).get("pauseId").and_then(Value::as_str) == Some(pause)
    })?;
    let p = payload(paused);
    let node_id = p
        .get("nodeId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let started = frames.iter().rev().find(|f| {
        seq(f) < seq(paused)
            && kind(f) == "node.started"
            && payload(f).get("nodeId").and_then(Value::as_str) == Some(node_id.as_str())
    });
    let s = started.map(payload).unwrap_or_default();
    let instance = s
        .get("instanceId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut node = Map::new();
    for k in ["kind", "name"] {
        if let Some(v) = s.get(k).filter(|v| v.as_str().is_some()) {
            node.insert(k, v.clone());
        }
    }
    if let Some(i) = &instance {
        node.insert("instanceId", Value::from(i.as_str()));
    }
    if let Some(input) = started.and_then(|_| s.get("input")) {
        node.insert("input", input.clone());
    }
    let mut resumed = None;
    for f in frames {
        let fp = payload(f);
        if let Some(st) = started {
            let same_node = fp.get("nodeId").and_then(Value::as_str) == Some(node_id.as_str());
            if seq(f) > seq(st) && seq(f) < seq(paused) && same_node {
                let fi = fp.get("instanceId").and_then(Value::as_str);
                let same_instance = instance.is_none() || fi.is_none() || fi == instance.as_deref();
                if same_instance && kind(f) == "node.error" {
                    node.insert("error", fp.get("error").cloned().unwrap_or_default());
                }
                if same_instance && kind(f) == "node.finished" {
                    if let Some(o) = fp.get("output") {
                        node.insert("output", o.clone());
                    }
                }
            }
        }
        if seq(f) > seq(paused)
            && kind(f) == "exec.resumed"
            && fp.get("pauseId").and_then(Value::as_str) == Some(pause)
        {
            let mut r = Map::new();
            r.insert("action", fp.get("action").cloned().unwrap_or_default());
            if let Some(pr) = fp.get("principal") {
                r.insert("principal", pr.clone());
            }
            if let Some(op) = fp.get("operator") {
                r.insert("operator", op.clone());
            }
            r.insert("ts", field(f, "ts").unwrap_or_default());
            resumed = Some(Value::Object(r));
        }
    }
    let info = PauseInfo {
        node_id,
        point: p
            .get("point")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        since: paused.get("ts").and_then(Value::as_f64).unwrap_or(0.0),
        reason: p.get("reason").and_then(Value::as_str).map(str::to_owned),
        smart: p.get("smart").cloned(),
        loop_info: p.get("loop").cloned(),
        editable: p.get("editable").and_then(Value::as_bool),
        app: live.as_ref().and_then(|(i, _)| i.app.clone()),
    };
    let state = live.map(|(_, s)| s).unwrap_or("closed");
    let mut body = pause_json(run, pause, &info, Some(state));
    body.insert("node", Value::Object(node));
    put_opt(&mut body, "resumed", resumed);
    Some(body)
}

/// `GET /api/runs/:runId/pauses/:pauseId`: one pause rebuilt from the stored run.
pub fn pause_detail(shared: &Shared, run: &str, pause: &str) -> Option<Answer> {
    let conn = match storage::open(&shared.db_path) {
        Ok(c) => c,
        Err(e) => return error(500, "storage", &e.to_string()),
    };
    if !matches!(storage::get_run(&conn, run), Ok(Some(_))) {
        return error(404, "no-such-run", &format!("run \"{run}\" not found"));
    }
    let events = storage::list_events(&conn, run, -1, None)
        .map(|p| p.events)
        .unwrap_or_default();
    let frames: Vec<Value> = events
        .iter()
        .filter_map(|e| json::parse_str(&e.frame).ok())
        .collect();
    let (run_id, pause_id) = (run.to_owned(), pause.to_owned());
    let live = shared
        .hub
        .call(move |h| h.pause_state(&run_id, &pause_id))
        .ok()
        .flatten();
    match describe_pause_object(&frames, run, pause, live) {
        Some(body) => answer(200, text(object([("pause", body.into())]))),
        None => error(
            404,
            "no-such-pause",
            &format!("pause \"{pause}\" not found in run \"{run}\""),
        ),
    }
}

/// Why a resume's body cannot be read, before reading it: a `Content-Length` above
/// `MAX_FRAME_BYTES` (413) or a body sent without one (400). Returns the length to read.
pub fn body_length(headers: &HeaderMap) -> Result<usize, Option<Answer>> {
    let len: usize = match header(headers, "content-length") {
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| error(400, "bad-request", "bad Content-Length"))?,
        None if headers.contains_key("transfer-encoding") => {
            return Err(error(
                400,
                "bad-request",
                "send the body with a Content-Length",
            ))
        }
        None => 0,
    };
    if len > MAX_FRAME_BYTES {
        return Err(error(413, "too-large", "request body too large"));
    }
    Ok(len)
}

/// A resume's body ended before its `Content-Length` (or took longer than the bound).
pub fn body_ended_early() -> Option<Answer> {
    error(400, "bad-request", "the body ended early")
}

/// `POST .../resume`, first half (before its body is read): the caller's principal, or
/// the refusal (401, 415).
pub fn resume_caller(shared: &Shared, headers: &HeaderMap) -> Result<Principal, Option<Answer>> {
    let principal = match credential_of(headers, shared) {
        Credential::Ok(p) => p,
        _ => return Err(unauthorized("missing or unknown token")),
    };
    let ctype = header(headers, "content-type").unwrap_or_default();
    if !ctype
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .eq_ignore_ascii_case("application/json")
    {
        return Err(error(
            415,
            "unsupported-media-type",
            "Content-Type must be application/json",
        ));
    }
    Ok(principal)
}

/// `POST .../resume`, second half: the body read, forwards the resume and waits for the
/// app's answer (blocking).
pub fn resume(
    shared: &Shared,
    principal: Principal,
    body: &[u8],
    run: &str,
    pause: &str,
) -> Option<Answer> {
    let Ok(parsed) = json::parse(body) else {
        return error(400, "bad-request", "body is not valid JSON");
    };
    let Value::Object(mut obj) = parsed else {
        return error(400, "bad-request", "body must be a JSON object");
    };
    let mut wait_ms = DEFAULT_RESUME_WAIT_MS;
    if let Some(t) = obj.remove("timeoutMs") {
        match t.as_f64() {
            Some(n) if n.fract() == 0.0 && (1_000.0..=MAX_WAIT_MS as f64).contains(&n) => {
                wait_ms = n as u64
            }
            _ => {
                return error(
                    400,
                    "bad-request",
                    &format!("\"timeoutMs\" must be an integer from 1000 to {MAX_WAIT_MS}"),
                )
            }
        }
    }
    let action_ok = matches!(
        obj.get("action").and_then(Value::as_str),
        Some("continue" | "retry" | "inject" | "abort")
    );
    let request_ok = obj.get("requestId").is_none_or(|r| r.as_str().is_some());
    if !action_ok || !request_ok {
        return error(400, "bad-request", "\"action\" must be one of continue, retry, inject, abort (and \"requestId\", if given, a string)");
    }
    obj.insert("pauseId", Value::from(pause));
    let payload = Value::Object(obj);
    // Take a slot BEFORE forwarding: a refused request must have no effect.
    let Some(_slot) = Slot::take(shared) else {
        return error(
            429,
            "too-many-requests",
            &format!("at most {MAX_CONCURRENT_WAITS} long-polls at once"),
        );
    };
    let (tx, rx) = crossbeam_channel::bounded::<Outcome>(1);
    let run_id = run.to_owned();
    let Ok(start) = shared
        .hub
        .call(move |h| h.request_resume(Responder::Http(tx), &run_id, &payload, principal))
    else {
        return shutting_down();
    };
    shared.notify();
    let outcome = match start {
        ResumeStart::Answered(o) => o,
        ResumeStart::Forwarded { request_id, timer } => {
            shared.arm(Duration::from_millis(RESOLVING_TIMEOUT_MS), timer);
            let deadline = Instant::now() + Duration::from_millis(wait_ms);
            // In slices, so that a server going down answers instead of leaving the caller
            // with a dropped connection.
            let answer = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left.min(SHUTDOWN_CHECK)) {
                    Ok(o) => break Some(o),
                    // Nobody will answer any more (the pause was replaced): give up now.
                    Err(RecvTimeoutError::Disconnected) => break None,
                    Err(_) if shut_down_giving_up(shared, run, pause, &request_id) => {
                        return shutting_down();
                    }
                    Err(_) if Instant::now() < deadline => continue,
                    Err(_) => break None,
                }
            };
            match answer {
                Some(o) => o,
                None => {
                    let (r, p, id) = (run.to_owned(), pause.to_owned(), request_id.clone());
                    shared.hub.tell(move |h| h.resume_gave_up(&r, &p, &id));
                    Outcome {
                        outcome: "timeout",
                        run_id: run.to_owned(),
                        pause_id: pause.to_owned(),
                        request_id,
                        code: Some("no-answer".into()),
                        message: Some("no answer from the app".into()),
                        principal: None,
                    }
                }
            }
        }
    };
    answer(outcome.http_status(), outcome.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert!(is_resume_path("/api/runs/r%201/pauses/p/resume"));
        assert!(!is_resume_path("/api/runs/r/pauses/p"));
        assert!(!is_resume_path("/api/runs/r/events"));
        assert!(!is_resume_path("/api/runs//pauses/p/resume"));
    }

    #[test]
    fn describes_a_pause_from_the_stored_run() {
        let f = |s: &str| json::parse_str(s).unwrap();
        let frames = vec![
            f(
                r#"{"gm":1,"seq":0,"ts":1,"runId":"r","type":"node.started","payload":{"nodeId":"tool:x","kind":"tool","name":"x","instanceId":"i1","input":{"q":1}}}"#,
            ),
            f(
                r#"{"gm":1,"seq":1,"ts":2,"runId":"r","type":"node.error","payload":{"nodeId":"tool:x","instanceId":"i1","error":{"message":"boom"}}}"#,
            ),
            f(
                r#"{"gm":1,"seq":2,"ts":3,"runId":"r","type":"exec.paused","payload":{"pauseId":"p","nodeId":"tool:x","point":"error","editable":true}}"#,
            ),
            f(
                r#"{"gm":1,"seq":3,"ts":4,"runId":"r","type":"exec.resumed","payload":{"pauseId":"p","action":"continue","principal":"agent"}}"#,
            ),
        ];
        let d = describe_pause(&frames, "r", "p", None).unwrap();
        assert_eq!(
            d,
            r#"{"runId":"r","pauseId":"p","nodeId":"tool:x","point":"error","since":3,"editable":true,"state":"closed","node":{"kind":"tool","name":"x","instanceId":"i1","input":{"q":1},"error":{"message":"boom"}},"resumed":{"action":"continue","principal":"agent","ts":4}}"#
        );
        assert!(describe_pause(&frames, "r", "nope", None).is_none());
    }
}
