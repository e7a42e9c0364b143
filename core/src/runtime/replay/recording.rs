//! A recorded run read from its envelopes: every tool and model execution, per node in
//! the order they started, with the matching key of its input and how it ended.

use std::collections::HashMap;

use crate::event::ErrorInfo;
use crate::fingerprint;
use crate::json::{self, Map, Value};

/// Most executions one recording may hold (a bigger export is refused, not truncated).
pub const MAX_RECORDED_EXECUTIONS: usize = 1_000_000;
/// Most paths a divergence lists.
pub const MAX_DIFF_PATHS: usize = 8;

/// Members of a model call's recorded input that are not part of its request (tool
/// definitions are recorded once per run, so a later call's input lacks them).
const LLM_INPUT_ONLY_RECORDED: [&str; 2] = ["tools", "toolSchemas"];

/// How a recorded execution ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// `node.finished` with status `ok` (and its output, when one was recorded).
    Output(Option<Value>),
    /// `node.error` then a failed `node.finished`: the error it raised.
    Error(ErrorInfo),
    /// It never finished in the recording (aborted, or the export was cut).
    Unfinished,
}

/// One recorded execution of a node.
#[derive(Clone, Debug, PartialEq)]
pub struct Execution {
    /// Its input as recorded (`node.started.input`).
    pub input: Option<Value>,
    /// The matching key of that input ([`match_key`]).
    pub key: String,
    /// How it ended.
    pub outcome: Outcome,
    /// `node.finished.usage` (model calls).
    pub usage: Option<Value>,
}

/// A recorded run, indexed for replay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recording {
    /// The recorded run's id.
    pub run_id: String,
    /// Its name (`run.started.meta.name`).
    pub run_name: Option<String>,
    /// Its app (`run.started.app`).
    pub app: Option<String>,
    /// Each replayable node's executions, in the order they started.
    pub nodes: HashMap<String, Vec<Execution>>,
    /// Every execution as `(nodeId, n)` (n from 1), in the order they started.
    pub order: Vec<(String, u32)>,
}

/// Why envelopes are not a recording.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordingError {
    /// Nothing in it is a GraphMind envelope with a `run.started`.
    #[error("not an exported GraphMind run (no run.started envelope)")]
    NotARun,
    /// More executions than [`MAX_RECORDED_EXECUTIONS`].
    #[error("the recording holds more than {MAX_RECORDED_EXECUTIONS} executions")]
    TooBig,
}

/// The form an input is compared in: members whose value is `null` are left out (a client
/// library's model fills unset optional fields with `None`, a rebuilt reply leaves them
/// out), and a string under `arguments` that is a JSON object or array is compared as that
/// value (a model's tool-call arguments, re-spelled when a recorded reply is rebuilt).
pub fn match_form(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, v) in m.iter() {
                if v.is_null() {
                    continue;
                }
                let parsed = match (k.as_str(), v) {
                    (Some("arguments"), Value::String(s)) => json::parse_str(&s.to_string_lossy())
                        .ok()
                        .filter(|p| matches!(p, Value::Object(_) | Value::Array(_))),
                    _ => None,
                };
                out.insert(k.clone(), match_form(parsed.as_ref().unwrap_or(v)));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(match_form).collect()),
        other => other.clone(),
    }
}

/// A model call's input as a request gives it, without the members only a recording has.
pub fn llm_request_form(input: &Value) -> Value {
    match input {
        Value::Object(m) => {
            let mut out = m.clone();
            for k in LLM_INPUT_ONLY_RECORDED {
                out.remove(k);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The key a live call's input must have to be answered by a recorded execution: the
/// canonical fingerprint ([`crate::fingerprint`]) of `[nodeId, match_form(input)]`.
pub fn match_key(node_id: &str, input: Option<&Value>) -> String {
    let form = input.map(match_form);
    fingerprint::fingerprint(node_id, form.as_ref())
}

/// Where `live` and `recorded` differ, as paths (`input.flight`, `input.messages[2]`), at
/// most [`MAX_DIFF_PATHS`], compared in [`match_form`].
pub fn diff_paths(recorded: Option<&Value>, live: Option<&Value>) -> Vec<String> {
    let a = recorded.map(match_form).unwrap_or(Value::Null);
    let b = live.map(match_form).unwrap_or(Value::Null);
    let mut out = Vec::new();
    diff(&a, &b, "input".to_string(), &mut out);
    out
}

fn diff(a: &Value, b: &Value, path: String, out: &mut Vec<String>) {
    if out.len() >= MAX_DIFF_PATHS {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x.iter() {
                let p = format!("{path}.{}", k.to_string_lossy());
                match y.get(&k.to_string_lossy()) {
                    Some(vb) => diff(va, vb, p, out),
                    None => out.push(p),
                }
                if out.len() >= MAX_DIFF_PATHS {
                    return;
                }
            }
            for (k, _) in y.iter() {
                if x.get(&k.to_string_lossy()).is_none() && out.len() < MAX_DIFF_PATHS {
                    out.push(format!("{path}.{}", k.to_string_lossy()));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                diff(va, vb, format!("{path}[{i}]"), out);
            }
        }
        _ => {
            if crate::canonical::canonical_json(a) != crate::canonical::canonical_json(b) {
                out.push(path);
            }
        }
    }
}

/// A recorded `{name, message, stack?}`.
fn error_info(v: &Value) -> Option<ErrorInfo> {
    let name = v.get("name").and_then(Value::as_js_str)?.clone();
    let message = v
        .get("message")
        .and_then(Value::as_js_str)
        .cloned()
        .unwrap_or_default();
    let mut info = ErrorInfo::new(name, message);
    info.stack = v.get("stack").and_then(Value::as_js_str).cloned();
    Some(info)
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_string)
}

/// The kinds a replay answers: tool calls and model calls (spans and agents run their
/// own code whatever the recording says).
pub fn replayable_kind(kind: &str) -> bool {
    matches!(kind, "tool" | "llm")
}

impl Recording {
    /// Reads the envelopes of one run (NDJSON lines, or the HTTP API's `events`), in `seq`
    /// order. Envelopes of another run than the first `run.started` are skipped; lines that
    /// are not JSON are skipped.
    pub fn from_envelopes<'a>(
        envelopes: impl IntoIterator<Item = &'a Value>,
    ) -> Result<Recording, RecordingError> {
        let mut rec = Recording::default();
        let mut started = false;
        // instanceId -> (nodeId, index into nodes[nodeId])
        let mut open: HashMap<String, (String, usize)> = HashMap::new();
        let mut errors: HashMap<String, ErrorInfo> = HashMap::new();
        let mut total = 0usize;
        for env in envelopes {
            let Some(kind) = env.get("type").and_then(Value::as_str) else {
                continue;
            };
            let run_id = text(env.get("runId")).unwrap_or_default();
            let payload = env.get("payload");
            let field = |k: &str| payload.and_then(|p| p.get(k));
            if kind == "run.started" {
                if started {
                    continue;
                }
                started = true;
                rec.run_id = run_id;
                rec.app = text(field("app"));
                rec.run_name = text(field("meta").and_then(|m| m.get("name")));
                continue;
            }
            if !started || run_id != rec.run_id {
                continue;
            }
            let instance = text(field("instanceId")).unwrap_or_default();
            match kind {
                "node.started" => {
                    let kind = field("kind").and_then(Value::as_str).unwrap_or("");
                    let Some(node_id) = text(field("nodeId")) else {
                        continue;
                    };
                    if !replayable_kind(kind)
                        || field("ungated").and_then(Value::as_bool) == Some(true)
                    {
                        continue;
                    }
                    total += 1;
                    if total > MAX_RECORDED_EXECUTIONS {
                        return Err(RecordingError::TooBig);
                    }
                    let input = field("input").cloned();
                    let compared = match (kind, &input) {
                        ("llm", Some(i)) => Some(llm_request_form(i)),
                        _ => input.clone(),
                    };
                    let key = match_key(&node_id, compared.as_ref());
                    let list = rec.nodes.entry(node_id.clone()).or_default();
                    list.push(Execution {
                        input: compared,
                        key,
                        outcome: Outcome::Unfinished,
                        usage: None,
                    });
                    rec.order.push((node_id.clone(), list.len() as u32));
                    open.insert(instance, (node_id, list.len() - 1));
                }
                "node.error" => {
                    if let Some(info) = field("error").and_then(error_info) {
                        errors.insert(instance, info);
                    }
                }
                "node.finished" => {
                    let Some((node_id, i)) = open.remove(&instance) else {
                        continue;
                    };
                    let Some(exec) = rec.nodes.get_mut(&node_id).and_then(|l| l.get_mut(i)) else {
                        continue;
                    };
                    let status = field("status").and_then(Value::as_str).unwrap_or("ok");
                    exec.usage = field("usage").cloned();
                    exec.outcome = match status {
                        "ok" => Outcome::Output(field("output").cloned()),
                        "error" => match errors.remove(&instance) {
                            Some(info) => Outcome::Error(info),
                            None => Outcome::Unfinished,
                        },
                        _ => Outcome::Unfinished,
                    };
                }
                _ => {}
            }
        }
        if !started {
            return Err(RecordingError::NotARun);
        }
        Ok(rec)
    }

    /// Reads an exported run: NDJSON, one envelope a line.
    pub fn from_ndjson(text: &str) -> Result<Recording, RecordingError> {
        let values: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| json::parse_str(l).ok())
            .collect();
        Recording::from_envelopes(values.iter())
    }

    /// The `n`-th (from 1) recorded execution of `node_id`.
    pub fn execution(&self, node_id: &str, n: u32) -> Option<&Execution> {
        self.nodes.get(node_id)?.get((n as usize).checked_sub(1)?)
    }

    /// How many executions were recorded.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The execution that started just before `(node_id, n)` (the one an edited output
    /// replaces), if any.
    pub fn before(&self, node_id: &str, n: u32) -> Option<&(String, u32)> {
        let at = self
            .order
            .iter()
            .position(|(id, k)| id == node_id && *k == n)?;
        at.checked_sub(1).map(|i| &self.order[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = r#"{"gm":1,"seq":0,"ts":1,"runId":"run_a","type":"run.started","payload":{"app":"demo","sdk":{"name":"python","version":"0"},"meta":{"name":"r"}}}
{"gm":1,"seq":1,"ts":1,"runId":"run_a","type":"node.started","payload":{"nodeId":"tool:search","kind":"tool","name":"search","instanceId":"i1","input":{"q":"x","page":null}}}
{"gm":1,"seq":2,"ts":1,"runId":"run_a","type":"node.finished","payload":{"nodeId":"tool:search","instanceId":"i1","output":[1,2],"durationMs":1,"status":"ok"}}
{"gm":1,"seq":3,"ts":1,"runId":"run_a","type":"node.started","payload":{"nodeId":"custom:plan","kind":"custom","name":"plan","instanceId":"s1"}}
{"gm":1,"seq":4,"ts":1,"runId":"run_a","type":"node.started","payload":{"nodeId":"tool:search","kind":"tool","name":"search","instanceId":"i2","input":{"q":"y"}}}
{"gm":1,"seq":5,"ts":1,"runId":"run_a","type":"node.error","payload":{"nodeId":"tool:search","instanceId":"i2","error":{"name":"ValueError","message":"bad"}}}
{"gm":1,"seq":6,"ts":1,"runId":"run_a","type":"node.finished","payload":{"nodeId":"tool:search","instanceId":"i2","durationMs":1,"status":"error"}}
not json
{"gm":1,"seq":7,"ts":1,"runId":"run_a","type":"node.started","payload":{"nodeId":"llm:step","kind":"llm","name":"step","instanceId":"inv:s0","input":{"provider":"openai","messages":[],"tools":[{"name":"search","schemaHash":"ab"}]}}}
"#;

    #[test]
    fn executions_are_indexed_per_node_in_order() {
        let rec = Recording::from_ndjson(RUN).unwrap();
        assert_eq!(rec.run_id, "run_a");
        assert_eq!(rec.app.as_deref(), Some("demo"));
        assert_eq!(rec.run_name.as_deref(), Some("r"));
        assert_eq!(rec.len(), 3, "spans are not replayable");
        let first = rec.execution("tool:search", 1).unwrap();
        assert_eq!(
            first.outcome,
            Outcome::Output(Some(json::parse_str("[1,2]").unwrap()))
        );
        let q = json::parse_str(r#"{"q":"x"}"#).unwrap();
        assert_eq!(
            first.key,
            match_key("tool:search", Some(&q)),
            "null members do not count"
        );
        match &rec.execution("tool:search", 2).unwrap().outcome {
            Outcome::Error(e) => assert_eq!(e.name.to_string_lossy(), "ValueError"),
            other => panic!("{other:?}"),
        }
        let llm = rec.execution("llm:step", 1).unwrap();
        assert_eq!(llm.outcome, Outcome::Unfinished);
        assert!(llm.input.as_ref().unwrap().get("tools").is_none());
        assert_eq!(
            rec.before("llm:step", 1),
            Some(&("tool:search".to_string(), 2))
        );
        assert_eq!(rec.before("tool:search", 1), None);
    }

    #[test]
    fn arguments_text_compares_as_its_value() {
        let a = json::parse_str(r#"{"m":[{"arguments":"{\"a\": 1}","refusal":null}]}"#).unwrap();
        let b = json::parse_str(r#"{"m":[{"arguments":"{\"a\":1}"}]}"#).unwrap();
        assert_eq!(
            match_key("llm:step", Some(&a)),
            match_key("llm:step", Some(&b))
        );
        let c = json::parse_str(r#"{"m":[{"arguments":"{\"a\":2}"}]}"#).unwrap();
        assert_eq!(
            diff_paths(Some(&a), Some(&c)),
            vec!["input.m[0].arguments.a".to_string()]
        );
    }

    #[test]
    fn what_is_not_a_run_is_refused() {
        assert_eq!(
            Recording::from_ndjson("hello\n{}\n"),
            Err(RecordingError::NotARun)
        );
        assert_eq!(Recording::from_ndjson(""), Err(RecordingError::NotARun));
    }
}
