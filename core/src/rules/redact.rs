//! Recording less: the four `GRAPHMIND_HIDE_*` switches, applied to one event at a time
//! before it is buffered or sent.
//!
//! A [`Redactor`] (one per session) replaces `node.started.input`, `node.finished.output`,
//! the text of `node.token` deltas, the arguments of `output.toolCalls` and the
//! input-shaped parts of pause answers (`exec.resumed.edited`, `exec.refused.message`)
//! with [`REDACTED`], chosen by the node's kind. It records what it did in
//! `redaction: {count, keys}` on the payload, merged with a summary that is already there.
//! `node.error` is never touched.
//!
//! It **fails closed**: with a switch on, a payload it cannot inspect (not an object, token
//! `deltas` that is not an array, a covered delta that is not an object or whose `v` is not
//! a string, an identity field that is present, not null and not a string) is replaced by
//! its *failed form*, built only from identity fields, with `redaction.failed: true`; when
//! even that cannot be valid the event is dropped. A binding that could not read a host
//! object at all reports it through [`Redactor::redact_unreadable`].
//!
//! The redactor never panics, and it works on the very [`Value`] that will be serialised,
//! so what it inspected is exactly what is sent.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

use crate::event::{NodeKind, RefusalCode, ResumeAction, RunStatus};
use crate::json::{JsStr, Map, Number, Value};

/// The placeholder every hidden value becomes (shared by every port of GraphMind).
pub const REDACTED: &str = "__REDACTED__";

/// Open executions (run + node + instance) whose kind is tracked at once; past this the
/// oldest is forgotten and its `node.finished` falls back to the node's latest kind.
pub const DEFAULT_MAX_TRACKED_INSTANCES: usize = 10_000;

/// Nodes (run + node id) whose latest kind is remembered; past this the least recently
/// started is forgotten and its events fall back to the `tool:` id prefix.
pub const MAX_TRACKED_NODES: usize = 10_000;

/// `redaction.keys` of a failed form: nothing counted, every hideable field named.
pub const FAILED_REDACTION_KEYS: [&str; 3] = ["input", "output", "deltas"];

/// The fields of an `output.toolCalls[]` entry that carry the model's tool arguments:
/// `input` / `inputText`, and the older spellings `arguments` and `args`.
pub const TOOL_CALL_ARG_KEYS: [&str; 4] = ["input", "inputText", "arguments", "args"];

/// Largest integer a JavaScript number holds exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// The four switches, already resolved from the session options and the environment
/// (the config module does that; either source turning a switch on turns it on).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HideSwitches {
    /// `hideInputs` / `GRAPHMIND_HIDE_INPUTS`: every node's input, `tool-args` deltas,
    /// tool-call arguments, pause answers.
    pub inputs: bool,
    /// `hideOutputs` / `GRAPHMIND_HIDE_OUTPUTS`: every node's output and every delta.
    pub outputs: bool,
    /// `hideToolArgs` / `GRAPHMIND_HIDE_TOOL_ARGS`: tool nodes' input, `tool-args` deltas,
    /// tool-call arguments, a paused tool's answers.
    pub tool_args: bool,
    /// `hideToolResults` / `GRAPHMIND_HIDE_TOOL_RESULTS`: tool nodes' output and deltas.
    pub tool_results: bool,
}

impl HideSwitches {
    /// Every switch off.
    pub const NONE: HideSwitches = HideSwitches {
        inputs: false,
        outputs: false,
        tool_args: false,
        tool_results: false,
    };

    /// Every switch on.
    pub const ALL: HideSwitches = HideSwitches {
        inputs: true,
        outputs: true,
        tool_args: true,
        tool_results: true,
    };

    /// Whether at least one switch is on (when none is, redaction costs nothing).
    pub fn any(&self) -> bool {
        self.inputs || self.outputs || self.tool_args || self.tool_results
    }

    /// Whether a switch hides the input of a paused node of this kind: `inputs`, or
    /// `tool_args` on a tool. An unknown kind (`None`) counts as a tool. This decides what
    /// a pause answer may show and that a hidden input takes only a full replacement
    /// (see `edit_input::merge_edited_input`).
    pub fn covers_pause_input(&self, node_kind: Option<&str>) -> bool {
        self.inputs || (self.tool_args && node_kind.is_none_or(|k| k == "tool"))
    }
}

/// Where an event belongs, for what the payload itself does not say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventContext<'a> {
    /// The run the event belongs to: kinds are tracked per run.
    pub run_id: &'a str,
    /// For `exec.resumed` / `exec.refused`: the paused node's kind (`None`: unknown, which
    /// counts as a tool). Ignored for other events.
    pub node_kind: Option<&'a str>,
}

/// A fail-closed report, for the session's rate-limited warner. Never quotes the payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedactWarning {
    /// `redaction:failed` or `redaction:dropped` (the rate-limit key).
    pub key: &'static str,
    /// One line for the user.
    pub message: String,
}

/// What [`Redactor::redact`] did to the payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedactOutcome {
    /// Left exactly as it was (no switch covers it, or nothing was there to hide).
    Unchanged,
    /// `count` values were replaced; the payload carries the merged `redaction` summary.
    Redacted {
        /// Values replaced by this call.
        count: u64,
    },
    /// The payload could not be inspected and was replaced by its failed form
    /// (`redaction.failed: true`). Send it, and log the warning.
    Failed(RedactWarning),
    /// The event must NOT be sent (its failed form cannot be valid); the payload has been
    /// set to `null`. Log the warning once.
    Dropped(RedactWarning),
}

impl RedactOutcome {
    /// Whether the event may be sent.
    pub fn keep(&self) -> bool {
        !matches!(self, RedactOutcome::Dropped(_))
    }

    /// The warning to log, if any.
    pub fn warning(&self) -> Option<&RedactWarning> {
        match self {
            RedactOutcome::Failed(w) | RedactOutcome::Dropped(w) => Some(w),
            _ => None,
        }
    }
}

/// The payload cannot be inspected safely: fail closed.
struct Uninspectable;

type Checked<T> = Result<T, Uninspectable>;

/// A bounded map that remembers insertion order and forgets the oldest entry first.
struct OrderedBounded<K, V> {
    entries: HashMap<K, (V, u64)>,
    order: BTreeMap<u64, K>,
    next: u64,
    cap: usize,
}

impl<K: Hash + Eq + Clone, V> OrderedBounded<K, V> {
    fn new(cap: usize) -> Self {
        OrderedBounded {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            next: 0,
            cap: cap.max(1),
        }
    }

    /// Sets `key`; `refresh` moves an existing key to the newest position.
    fn set(&mut self, key: K, value: V, refresh: bool) {
        if let Some(slot) = self.entries.get_mut(&key) {
            slot.0 = value;
            if !refresh {
                return;
            }
            let old = slot.1;
            slot.1 = self.next;
            self.order.remove(&old);
            self.order.insert(self.next, key);
            self.next += 1;
            return;
        }
        self.entries.insert(key.clone(), (value, self.next));
        self.order.insert(self.next, key);
        self.next += 1;
        while self.entries.len() > self.cap {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }

    fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|(v, _)| v)
    }

    fn remove(&mut self, key: &K) {
        if let Some((_, seq)) = self.entries.remove(key) {
            self.order.remove(&seq);
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }
}

type NodeKey = (Box<str>, JsStr);
type InstanceKey = (Box<str>, JsStr, JsStr);

/// Applies the switches to one event at a time. Create one per session (kind tracking
/// starts empty); it is not shared between threads without a lock.
pub struct Redactor {
    switches: HideSwitches,
    instances: OrderedBounded<InstanceKey, JsStr>,
    nodes: OrderedBounded<NodeKey, JsStr>,
}

impl Redactor {
    /// A redactor tracking at most [`DEFAULT_MAX_TRACKED_INSTANCES`] open executions.
    pub fn new(switches: HideSwitches) -> Self {
        Self::with_max_tracked_instances(switches, DEFAULT_MAX_TRACKED_INSTANCES)
    }

    /// A redactor tracking at most `max` open executions (at least 1).
    pub fn with_max_tracked_instances(switches: HideSwitches, max: usize) -> Self {
        Redactor {
            switches,
            instances: OrderedBounded::new(max),
            nodes: OrderedBounded::new(MAX_TRACKED_NODES),
        }
    }

    /// The switches this redactor applies.
    pub fn switches(&self) -> HideSwitches {
        self.switches
    }

    /// Whether any switch is on (when not, every call returns `Unchanged` at once).
    pub fn active(&self) -> bool {
        self.switches.any()
    }

    /// Open executions whose kind is tracked (diagnostics, tests).
    pub fn tracked_instances(&self) -> usize {
        self.instances.len()
    }

    /// Redacts one event of an anonymous run (`run_id` empty, paused kind unknown).
    /// See [`Redactor::redact_in`].
    pub fn redact(&mut self, event_type: &str, payload: &mut Value) -> RedactOutcome {
        self.redact_in(&EventContext::default(), event_type, payload)
    }

    /// Redacts one event in place. Only `node.started`, `node.finished`, `node.token`,
    /// `exec.resumed` and `exec.refused` are ever changed, and only while a switch is on.
    /// On [`RedactOutcome::Dropped`] the payload is set to `null` and must not be sent.
    pub fn redact_in(
        &mut self,
        ctx: &EventContext<'_>,
        event_type: &str,
        payload: &mut Value,
    ) -> RedactOutcome {
        if !self.switches.any() {
            return RedactOutcome::Unchanged;
        }
        match event_type {
            "exec.resumed" | "exec.refused" => self.on_pause_answer(ctx, event_type, payload),
            "node.started" | "node.finished" | "node.token" => {
                let checked = match payload {
                    Value::Object(p) => match event_type {
                        "node.started" => self.on_started(ctx.run_id, p),
                        "node.finished" => self.on_finished(ctx.run_id, p),
                        _ => self.on_token(ctx.run_id, p),
                    },
                    _ => Err(Uninspectable),
                };
                match checked {
                    Ok(outcome) => outcome,
                    Err(Uninspectable) => self.fail_closed(ctx.run_id, event_type, payload),
                }
            }
            _ => RedactOutcome::Unchanged,
        }
    }

    /// The entry point for a binding that could not read a host payload safely (a raising
    /// getter or property, a proxy, a mapping whose iteration raised).
    ///
    /// `readable` holds whatever fields the binding *could* read (a field whose read
    /// raised is left out; an object that could not be read at all is `null`), and
    /// `unreadable_keys` names the fields whose read raised. When a switch covers the
    /// event, the payload is replaced by its failed form built from the readable identity
    /// fields (`exec.resumed` keeps `edited: {after: placeholder}` when `edited` was there
    /// or could not be read), or dropped when a required one is missing: the event is
    /// never sent raw. When no switch covers the event the outcome is `Unchanged`: the
    /// redactor has nothing to protect, and what to send is the event layer's rule.
    pub fn redact_unreadable(
        &mut self,
        ctx: &EventContext<'_>,
        event_type: &str,
        readable: &mut Value,
        unreadable_keys: &[&str],
    ) -> RedactOutcome {
        if !self.switches.any() {
            return RedactOutcome::Unchanged;
        }
        match event_type {
            "exec.resumed" | "exec.refused" => {
                if !self.switches.covers_pause_input(ctx.node_kind) {
                    return RedactOutcome::Unchanged;
                }
                let edit_unreadable = unreadable_keys.contains(&"edited");
                fail_closed_answer(event_type, readable, edit_unreadable)
            }
            "node.started" | "node.finished" | "node.token" => {
                self.fail_closed(ctx.run_id, event_type, readable)
            }
            _ => RedactOutcome::Unchanged,
        }
    }

    // -- node events -------------------------------------------------------------

    fn on_started(&mut self, run_id: &str, p: &mut Map) -> Checked<RedactOutcome> {
        let node_id = identity(p, "nodeId")?;
        let instance_id = identity(p, "instanceId")?;
        let kind = identity(p, "kind")?;
        if let (Some(node_id), Some(kind)) = (node_id, kind) {
            self.remember(run_id, node_id, instance_id, kind);
        }
        let hide =
            self.switches.inputs || (self.switches.tool_args && kind.is_some_and(|k| k == "tool"));
        if !hide {
            return Ok(RedactOutcome::Unchanged);
        }
        Ok(hide_field(p, "input"))
    }

    fn on_finished(&mut self, run_id: &str, p: &mut Map) -> Checked<RedactOutcome> {
        let node_id = identity(p, "nodeId")?;
        let instance_id = identity(p, "instanceId")?;
        let is_tool = node_id.is_some_and(|n| self.kind_is_tool(run_id, n, instance_id));
        if let (Some(n), Some(i)) = (node_id, instance_id) {
            self.instances
                .remove(&(run_id.into(), n.clone(), i.clone()));
        }
        let s = self.switches;
        if s.outputs || (s.tool_results && is_tool) {
            return Ok(hide_field(p, "output"));
        }
        if s.tool_args || s.inputs {
            return Ok(hide_tool_call_args(p));
        }
        Ok(RedactOutcome::Unchanged)
    }

    fn on_token(&mut self, run_id: &str, p: &mut Map) -> Checked<RedactOutcome> {
        let s = self.switches;
        let node_id = identity(p, "nodeId")?;
        let node_is_tool =
            s.tool_results && node_id.is_some_and(|n| self.kind_is_tool(run_id, n, None));
        let hide_all = s.outputs || node_is_tool;
        let hide_args = s.tool_args || s.inputs;
        if !hide_all && !hide_args {
            return Ok(RedactOutcome::Unchanged);
        }
        // First pass: inspect everything and decide; nothing is changed on failure.
        let Some(Value::Array(deltas)) = p.get("deltas") else {
            return Err(Uninspectable);
        };
        let mut hidden: Vec<(usize, usize)> = Vec::new();
        for (i, delta) in deltas.iter().enumerate() {
            let d = match delta {
                Value::Null => continue,
                Value::Object(d) => d,
                // A bare value where a delta belongs: its channel is unknown.
                _ => return Err(Uninspectable),
            };
            let channel = identity(d, "t")?;
            let hide = hide_all || (hide_args && channel.is_some_and(|t| t == "tool-args"));
            if !hide {
                continue;
            }
            match d.get("v") {
                None => {}
                Some(Value::String(v)) if v.is_empty() => {}
                Some(Value::String(v)) => hidden.push((i, v.utf16_len())),
                Some(_) => return Err(Uninspectable),
            }
        }
        if hidden.is_empty() {
            return Ok(RedactOutcome::Unchanged);
        }
        // Second pass: apply.
        if let Some(Value::Array(deltas)) = p.get_mut("deltas") {
            for &(i, chars) in &hidden {
                if let Some(Value::Object(d)) = deltas.get_mut(i) {
                    if let Some(v) = d.get_mut("v") {
                        *v = Value::String(JsStr::new());
                    }
                    d.insert("chars", Value::from(chars as u64));
                }
            }
        }
        let count = hidden.len() as u64;
        merge_summary(p, count, "deltas");
        Ok(RedactOutcome::Redacted { count })
    }

    // -- pause answers -----------------------------------------------------------

    fn on_pause_answer(
        &mut self,
        ctx: &EventContext<'_>,
        event_type: &str,
        payload: &mut Value,
    ) -> RedactOutcome {
        if !self.switches.covers_pause_input(ctx.node_kind) {
            return RedactOutcome::Unchanged;
        }
        let p = match payload {
            Value::Object(p) if identity(p, "pauseId").is_ok() => p,
            _ => return fail_closed_answer(event_type, payload, false),
        };
        if event_type == "exec.resumed" {
            let Some(edited) = p.get("edited") else {
                return RedactOutcome::Unchanged;
            };
            if let Value::Object(e) = edited {
                if e.len() == 1 && is_placeholder(e.get("after")) {
                    return RedactOutcome::Unchanged;
                }
            }
            let mut after = Map::with_capacity(1);
            after.insert("after", Value::from(REDACTED));
            p.insert("edited", Value::Object(after));
            merge_summary(p, 1, "edited");
        } else {
            if !p.contains_key("message") {
                return RedactOutcome::Unchanged;
            }
            merge_summary(p, 1, "message");
            p.remove("message");
        }
        RedactOutcome::Redacted { count: 1 }
    }

    // -- fail closed -------------------------------------------------------------

    fn fail_closed(
        &mut self,
        run_id: &str,
        event_type: &str,
        payload: &mut Value,
    ) -> RedactOutcome {
        match self.failed_form(run_id, event_type, payload) {
            Some(form) => {
                *payload = Value::Object(form);
                RedactOutcome::Failed(RedactWarning {
                    key: "redaction:failed",
                    message: format!(
                        "redaction failed on a {event_type} event (unreadable or malformed payload); \
                         sent it with input/output/deltas hidden and redaction.failed set"
                    ),
                })
            }
            None => {
                *payload = Value::Null;
                dropped(event_type)
            }
        }
    }

    /// The failed form of a node event, or `None` when it cannot be valid. Never reads
    /// `input`, `output` or `deltas`.
    fn failed_form(&mut self, run_id: &str, event_type: &str, payload: &Value) -> Option<Map> {
        let p = payload.as_object()?;
        let node_id = plain_str(p.get("nodeId"))?.clone();
        let mut out = Map::with_capacity(8);
        out.push_unique("nodeId".into(), Value::String(node_id.clone()));
        match event_type {
            "node.started" => {
                if let Some(parent) = plain_str(p.get("parentId")) {
                    out.push_unique("parentId".into(), Value::String(parent.clone()));
                }
                let kind = plain_str(p.get("kind"))
                    .filter(|k| NodeKind::NAMES.iter().any(|n| *k == *n))?;
                let name = plain_str(p.get("name"))?;
                let instance_id = plain_str(p.get("instanceId"))?;
                // Still learn the kind, so this instance's node.finished is judged right.
                self.remember(run_id, &node_id, Some(instance_id), kind);
                out.push_unique("kind".into(), Value::String(kind.clone()));
                out.push_unique("name".into(), Value::String(name.clone()));
                out.push_unique("instanceId".into(), Value::String(instance_id.clone()));
                out.push_unique("input".into(), Value::from(REDACTED));
            }
            "node.finished" => {
                if let Some(instance_id) = plain_str(p.get("instanceId")) {
                    out.push_unique("instanceId".into(), Value::String(instance_id.clone()));
                    self.instances
                        .remove(&(run_id.into(), node_id.clone(), instance_id.clone()));
                }
                let duration = p.get("durationMs").filter(|v| is_duration(v))?;
                let status = plain_str(p.get("status"))
                    .filter(|s| RunStatus::NAMES.iter().any(|r| *s == *r))?;
                out.push_unique("durationMs".into(), duration.clone());
                if let Some(held) = p.get("heldMs").filter(|v| is_duration(v)) {
                    out.push_unique("heldMs".into(), held.clone());
                }
                out.push_unique("status".into(), Value::String(status.clone()));
                if let Some(usage) = p.get("usage").and_then(failed_usage) {
                    out.push_unique("usage".into(), usage);
                }
                out.push_unique("output".into(), Value::from(REDACTED));
            }
            "node.token" => {
                if let Some(instance_id) = plain_str(p.get("instanceId")) {
                    out.push_unique("instanceId".into(), Value::String(instance_id.clone()));
                }
                out.push_unique("deltas".into(), Value::Array(Vec::new()));
            }
            _ => return None,
        }
        out.push_unique("redaction".into(), failed_summary(&FAILED_REDACTION_KEYS));
        Some(out)
    }

    // -- kind tracking -----------------------------------------------------------

    fn remember(
        &mut self,
        run_id: &str,
        node_id: &JsStr,
        instance_id: Option<&JsStr>,
        kind: &JsStr,
    ) {
        self.nodes
            .set((run_id.into(), node_id.clone()), kind.clone(), true);
        if let Some(instance_id) = instance_id {
            self.instances.set(
                (run_id.into(), node_id.clone(), instance_id.clone()),
                kind.clone(),
                false,
            );
        }
    }

    /// The kind of an execution: its own recorded kind; else the node's latest kind; else
    /// `tool` when the node id has the `tool:` prefix every adapter uses.
    fn kind_is_tool(&self, run_id: &str, node_id: &JsStr, instance_id: Option<&JsStr>) -> bool {
        if let Some(instance_id) = instance_id {
            if let Some(kind) =
                self.instances
                    .get(&(run_id.into(), node_id.clone(), instance_id.clone()))
            {
                return kind == "tool";
            }
        }
        if let Some(kind) = self.nodes.get(&(run_id.into(), node_id.clone())) {
            return kind == "tool";
        }
        node_id.as_bytes().starts_with(b"tool:")
    }
}

// -- helpers -----------------------------------------------------------------------

fn dropped(event_type: &str) -> RedactOutcome {
    RedactOutcome::Dropped(RedactWarning {
        key: "redaction:dropped",
        message: format!(
            "a {event_type} event could not be redacted and its identity fields could not be read; \
             dropped it rather than send data a GRAPHMIND_HIDE_* switch hides"
        ),
    })
}

/// The failed form of a pause answer: `{pauseId, action, edited?: {after: placeholder},
/// requestId?}` or `{pauseId, code, requestId?}`; dropped without a string `pauseId` and a
/// valid action / code.
fn fail_closed_answer(
    event_type: &str,
    payload: &mut Value,
    edit_unreadable: bool,
) -> RedactOutcome {
    let form = (|| {
        let p = payload.as_object()?;
        let pause_id = plain_str(p.get("pauseId"))?;
        let mut out = Map::with_capacity(5);
        out.push_unique("pauseId".into(), Value::String(pause_id.clone()));
        let key = if event_type == "exec.resumed" {
            let action = plain_str(p.get("action"))
                .filter(|a| ResumeAction::NAMES.iter().any(|r| *a == *r))?;
            out.push_unique("action".into(), Value::String(action.clone()));
            if edit_unreadable || p.contains_key("edited") {
                let mut after = Map::with_capacity(1);
                after.insert("after", Value::from(REDACTED));
                out.push_unique("edited".into(), Value::Object(after));
            }
            "edited"
        } else {
            let code =
                plain_str(p.get("code")).filter(|c| RefusalCode::NAMES.iter().any(|r| *c == *r))?;
            out.push_unique("code".into(), Value::String(code.clone()));
            "message"
        };
        if let Some(request_id) = plain_str(p.get("requestId")) {
            out.push_unique("requestId".into(), Value::String(request_id.clone()));
        }
        out.push_unique("redaction".into(), failed_summary(&[key]));
        Some(out)
    })();
    match form {
        Some(form) => {
            *payload = Value::Object(form);
            RedactOutcome::Failed(RedactWarning {
                key: "redaction:failed",
                message: format!(
                    "redaction failed on a {event_type} event (unreadable or malformed payload); \
                     sent it with the edited input / refusal message hidden and redaction.failed set"
                ),
            })
        }
        None => {
            *payload = Value::Null;
            dropped(event_type)
        }
    }
}

/// `{count: 0, keys, failed: true}`.
fn failed_summary(keys: &[&str]) -> Value {
    let mut m = Map::with_capacity(3);
    m.push_unique("count".into(), Value::from(0i64));
    m.push_unique(
        "keys".into(),
        Value::Array(keys.iter().map(|k| Value::from(*k)).collect()),
    );
    m.push_unique("failed".into(), Value::Bool(true));
    Value::Object(m)
}

/// The usage a failed `node.finished` keeps: both counts (required), `inclusive` when a
/// boolean, and the cache / reasoning counts when each is valid.
fn failed_usage(usage: &Value) -> Option<Value> {
    let u = usage.as_object()?;
    let input = u.get("inputTokens").filter(|v| is_token_count(v))?;
    let output = u.get("outputTokens").filter(|v| is_token_count(v))?;
    let mut out = Map::with_capacity(6);
    out.push_unique("inputTokens".into(), input.clone());
    out.push_unique("outputTokens".into(), output.clone());
    if let Some(b @ Value::Bool(_)) = u.get("inclusive") {
        out.push_unique("inclusive".into(), b.clone());
    }
    for key in ["cacheReadTokens", "cacheWriteTokens", "reasoningTokens"] {
        if let Some(v) = u.get(key).filter(|v| is_token_count(v)) {
            out.push_unique(key.into(), v.clone());
        }
    }
    Some(Value::Object(out))
}

/// An identity field a switch decides by: absent or null -> `None`, a string -> itself;
/// anything else cannot be inspected (a host could serialise it as the very string a
/// switch looks for).
fn identity<'a>(p: &'a Map, key: &str) -> Checked<Option<&'a JsStr>> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Uninspectable),
    }
}

fn plain_str(v: Option<&Value>) -> Option<&JsStr> {
    match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn is_placeholder(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::String(s)) if s == REDACTED)
}

/// Replaces `p[key]` by the placeholder unless it is absent or already the placeholder.
fn hide_field(p: &mut Map, key: &str) -> RedactOutcome {
    match p.get(key) {
        None => return RedactOutcome::Unchanged,
        v if is_placeholder(v) => return RedactOutcome::Unchanged,
        _ => {}
    }
    p.insert(key, Value::from(REDACTED));
    merge_summary(p, 1, key);
    RedactOutcome::Redacted { count: 1 }
}

/// `output.toolCalls[*]` with every argument field replaced by the placeholder; a
/// `toolCalls` that is not an array, or an entry that is neither null nor an object, is
/// replaced whole.
fn hide_tool_call_args(p: &mut Map) -> RedactOutcome {
    let Some(Value::Object(output)) = p.get_mut("output") else {
        return RedactOutcome::Unchanged;
    };
    let Some(calls) = output.get_mut("toolCalls") else {
        return RedactOutcome::Unchanged;
    };
    if calls.is_null() || is_placeholder(Some(calls)) {
        return RedactOutcome::Unchanged;
    }
    let mut count = 0u64;
    match calls {
        Value::Array(items) => {
            for call in items.iter_mut() {
                match call {
                    Value::Null => {}
                    Value::Object(entry) => {
                        for key in TOOL_CALL_ARG_KEYS {
                            match entry.get(key) {
                                None => continue,
                                v if is_placeholder(v) => continue,
                                _ => {}
                            }
                            entry.insert(key, Value::from(REDACTED));
                            count += 1;
                        }
                    }
                    other if is_placeholder(Some(other)) => {}
                    other => {
                        *other = Value::from(REDACTED);
                        count += 1;
                    }
                }
            }
        }
        other => {
            *other = Value::from(REDACTED);
            count = 1;
        }
    }
    if count == 0 {
        return RedactOutcome::Unchanged;
    }
    merge_summary(p, count, "output.toolCalls");
    RedactOutcome::Redacted { count }
}

/// Sets `p.redaction` to the fresh summary merged into whatever was there: a well-formed
/// prior summary (a numeric count, a keys array) adds its count when that is a
/// non-negative safe integer and keeps its string keys; anything else is replaced.
fn merge_summary(p: &mut Map, count: u64, key: &str) {
    let fresh = |count: u64, keys: Vec<Value>| {
        let mut m = Map::with_capacity(2);
        m.push_unique("count".into(), Value::from(count));
        m.push_unique("keys".into(), Value::Array(keys));
        Value::Object(m)
    };
    let merged = match p.get("redaction") {
        Some(Value::Object(existing)) => match (existing.get("count"), existing.get("keys")) {
            (Some(Value::Number(n)), Some(Value::Array(keys))) => {
                let mut prior: Vec<Value> = keys
                    .iter()
                    .filter(|k| matches!(k, Value::String(_)))
                    .cloned()
                    .collect();
                if !prior
                    .iter()
                    .any(|k| matches!(k, Value::String(s) if s == key))
                {
                    prior.push(Value::from(key));
                }
                let prior_count = safe_non_negative(n).unwrap_or(0);
                let total = prior_count.saturating_add(count);
                fresh(
                    if total <= MAX_SAFE_INTEGER as u64 {
                        total
                    } else {
                        count
                    },
                    prior,
                )
            }
            _ => fresh(count, vec![Value::from(key)]),
        },
        _ => fresh(count, vec![Value::from(key)]),
    };
    p.insert("redaction", merged);
}

/// The number as a non-negative safe integer (`Number.isSafeInteger(n) && n >= 0`).
fn safe_non_negative(n: &Number) -> Option<u64> {
    match n {
        Number::Int(i) if (0..=MAX_SAFE_INTEGER).contains(i) => Some(*i as u64),
        Number::Float(f)
            if f.is_finite() && f.fract() == 0.0 && *f >= 0.0 && *f <= MAX_SAFE_INTEGER as f64 =>
        {
            Some(*f as u64)
        }
        _ => None,
    }
}

/// A token count on the wire: a non-negative safe integer.
fn is_token_count(v: &Value) -> bool {
    matches!(v, Value::Number(n) if safe_non_negative(n).is_some())
}

/// A duration on the wire: a finite number >= 0.
fn is_duration(v: &Value) -> bool {
    matches!(v, Value::Number(n) if { let f = n.as_f64(); f.is_finite() && f >= 0.0 })
}
