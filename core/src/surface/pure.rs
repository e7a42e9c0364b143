//! The pure functions every binding re-exports, listed once, each over [`Value`]s and
//! strings: a binding's own `pure.rs` (and the C ABI's) only names them in its language
//! and converts its values, so two bindings cannot answer the same question two ways.
//!
//! The rules themselves live in their modules (`canonical`, `fingerprint`, `shrink`,
//! `redact`, `llm`, `codec`, `edit_input`, `smart`, `loop_guard`); what is here is the
//! shape every surface hands out: which defaults apply to an argument not given, which
//! JSON object an answer is, and which [`PureError`] an argument earns.

use crate::codec::{self, Api};
use crate::config::{self, EnvSnapshot, SdkFlavor};
use crate::edit_input::{self, InputValidation};
use crate::json::{JsStr, Map, Value};
use crate::loop_guard::{
    default_node_name, LoopDetect, LoopGuard, LoopGuardConfig, LoopHide, LoopInfo, LoopKind,
    LoopValue, LoopVerdict, NodeStart,
};
use crate::redact::{EventContext, HideSwitches, RedactOutcome, Redactor};
use crate::{canonical, fingerprint as fp, llm, shrink, smart};

/// An argument a pure function refuses; each binding raises it as its language's
/// argument error, with this text (Node and the C ABI prefix their own).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PureError {
    /// `provider_usage` of a provider the core does not know.
    #[error("unknown provider {0:?}")]
    UnknownProvider(String),
    /// A codec call of a model API the core does not know.
    #[error("unknown model API {0:?}")]
    UnknownApi(String),
    /// A loop guard asked for a detector that does not exist.
    #[error("{0:?} is not a loop detector")]
    UnknownDetector(String),
    /// A flavor (`node`, `python`, `ruby`, `native`) the core does not know.
    #[error("unknown flavor {0:?}")]
    UnknownFlavor(String),
}

// -- canonical JSON and fingerprints ----------------------------------------------------

/// The ignore list: `keys`, or the loop guard's default (`_meta`) when not given.
pub fn ignore_keys(keys: Option<&[String]>) -> Vec<&str> {
    match keys {
        Some(k) => k.iter().map(String::as_str).collect(),
        None => canonical::DEFAULT_IGNORE_KEYS.to_vec(),
    }
}

/// The canonical JSON text of `value` (keys sorted by UTF-16 units, JavaScript number
/// spelling, `ignore` keys removed at every depth; default: `_meta`).
pub fn canonical_json(value: &Value, ignore: Option<&[String]>) -> String {
    canonical::canonical_json_with(value, &ignore_keys(ignore))
}

/// The canonical text of one call, `[nodeId, input]`, as the loop guard hashes it.
pub fn canonical_call(node_id: &JsStr, input: Option<&Value>, ignore: Option<&[String]>) -> String {
    canonical::canonical_call_js(node_id, input, &ignore_keys(ignore))
}

/// The loop guard's fingerprint of a call (32 hex digits of SHA-256 over
/// [`canonical_call`]); `input` `None` is an absent input.
pub fn fingerprint(node_id: &JsStr, input: Option<&Value>, ignore: Option<&[String]>) -> String {
    fp::fingerprint_js_with(node_id, input, &ignore_keys(ignore))
}

// -- configuration ------------------------------------------------------------------------

/// The flavor named `name`.
pub fn flavor(name: &str) -> Result<SdkFlavor, PureError> {
    SdkFlavor::parse(name).ok_or_else(|| PureError::UnknownFlavor(name.to_string()))
}

/// Options (camelCase, ms) + an environment object + a flavor -> `Config::to_json()`.
pub fn resolve_config(options: &Value, env: &Value, flavor: SdkFlavor) -> Value {
    config::resolve_json(options, &EnvSnapshot::from_json(env), flavor).to_json()
}

/// What `graphmind serve` resolves from its flags and environment
/// (`ServerConfig::to_json`), or `{error: "pauseOnError" | "days", message}` for a flag
/// it refuses.
pub fn resolve_server_config(flags: &Value, env: &Value) -> Value {
    let flags = config::ServerFlags::from_json(flags);
    match config::resolve_server(&flags, &EnvSnapshot::from_json(env)) {
        Ok(c) => c.to_json(),
        Err(e) => {
            let name = match e {
                config::ServerConfigError::PauseOnError(_) => "pauseOnError",
                config::ServerConfigError::Days(_) => "days",
            };
            let mut m = Map::with_capacity(2);
            m.insert("error", Value::from(name));
            m.insert("message", Value::from(e.to_string().as_str()));
            Value::Object(m)
        }
    }
}

// -- shrinking and redaction -------------------------------------------------------------

/// The shrinker's constants, by their reference names.
pub fn shrink_constants() -> Value {
    let mut m = Map::new();
    let count = |n: usize| Value::from(n as u64);
    m.insert("MAX_PAYLOAD_BYTES", count(shrink::MAX_PAYLOAD_BYTES));
    m.insert("PREVIEW_CHARS", count(shrink::PREVIEW_CHARS));
    m.insert("TRUNCATION_SUFFIX", Value::from(shrink::TRUNCATION_SUFFIX));
    m.insert("MAX_SHRINK_DEPTH", count(shrink::MAX_SHRINK_DEPTH));
    m.insert("MAX_SHRINK_KEYS", count(shrink::MAX_SHRINK_KEYS));
    m.insert("MAX_TRIM_FIELDS", count(shrink::MAX_TRIM_FIELDS));
    m.insert("SKELETON_CHARS", count(shrink::SKELETON_CHARS));
    m.insert("SKELETON_MIN_CHARS", count(shrink::SKELETON_MIN_CHARS));
    Value::Object(m)
}

/// The hide switches of `{hideInputs, hideOutputs, hideToolArgs, hideToolResults}` (a
/// member that is not `true` is off).
pub fn hide_switches(switches: &Value) -> HideSwitches {
    let on = |k: &str| switches.get(k).and_then(Value::as_bool).unwrap_or(false);
    HideSwitches {
        inputs: on("hideInputs"),
        outputs: on("hideOutputs"),
        tool_args: on("hideToolArgs"),
        tool_results: on("hideToolResults"),
    }
}

/// Redacts one event's `payload` in place: the outcome's name (`unchanged`, `redacted`,
/// `failed`, `dropped`) and whether the event is kept.
pub fn redact(
    redactor: &mut Redactor,
    event_type: &str,
    run_id: &str,
    node_kind: Option<&str>,
    payload: &mut Value,
) -> (&'static str, bool) {
    let ctx = EventContext { run_id, node_kind };
    match redactor.redact_in(&ctx, event_type, payload) {
        RedactOutcome::Unchanged => ("unchanged", true),
        RedactOutcome::Redacted { .. } => ("redacted", true),
        RedactOutcome::Failed(_) => ("failed", true),
        RedactOutcome::Dropped(_) => ("dropped", false),
    }
}

/// Redacts a sequence of `{type, payload, runId?, nodeKind?}` events with one fresh
/// redactor under `switches`: each result is the payload, or `None` when dropped.
pub fn redact_events(switches: &Value, events: &[Value]) -> Vec<Option<Value>> {
    let mut redactor = Redactor::new(hide_switches(switches));
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
    events
        .iter()
        .map(|e| {
            let mut payload = e.get("payload").cloned().unwrap_or(Value::Null);
            let (ty, run_id) = (text(e, "type"), text(e, "runId"));
            let kind = text(e, "nodeKind");
            let (_, keep) = redact(
                &mut redactor,
                ty.as_deref().unwrap_or(""),
                run_id.as_deref().unwrap_or(""),
                kind.as_deref(),
                &mut payload,
            );
            keep.then_some(payload)
        })
        .collect()
}

// -- LLM capture ---------------------------------------------------------------------------

/// The wire form of a provider's usage (`None`: nothing reported).
pub fn provider_usage(provider: &str, raw: &Value) -> Result<Option<Value>, PureError> {
    let p = llm::UsageProvider::from_name(provider)
        .ok_or_else(|| PureError::UnknownProvider(provider.to_string()))?;
    Ok(llm::provider_usage(p, raw))
}

/// The model API named `name` (`openai-chat`, `anthropic`, ...: the codec names).
pub fn api(name: &str) -> Result<Api, PureError> {
    Api::from_name(name).ok_or_else(|| PureError::UnknownApi(name.to_string()))
}

/// What a complete answer of `api` records: its output and usage (`None`: not reported).
pub fn codec_decode(api_name: &str, response: &Value) -> Result<(Value, Option<Value>), PureError> {
    let decoded = codec::decode_response(api(api_name)?, response);
    Ok((Value::Object(decoded.output), decoded.usage))
}

/// What `node.started.input` of a call of `api` records of `request`.
pub fn codec_request_input(api_name: &str, request: &Value) -> Result<Value, PureError> {
    Ok(Value::Object(codec::request_input(api(api_name)?, request)))
}

/// The sampling-parameter allow-list, in order.
pub fn sampling_param_keys() -> Vec<&'static str> {
    llm::SAMPLING_PARAM_KEYS.to_vec()
}

// -- edit input and smart breakpoints --------------------------------------------------------

/// The verdict `{ok: false, code, message}` when `value` carries a prototype-polluting key.
pub fn prototype_key_verdict(value: &Value) -> Option<Value> {
    edit_input::prototype_key_refusal(value).map(|r| InputValidation::from(r).to_value())
}

/// Tool arguments edited at a pause merged into the live ones, as a verdict `{ok, value}`
/// or `{ok: false, code, message}`.
pub fn merge_verdict(live: Option<&Value>, proposed: Option<&Value>, input_hidden: bool) -> Value {
    match edit_input::merge_edited_input(live, proposed, input_hidden) {
        Ok(v) => InputValidation::Accepted(v),
        Err(r) => r.into(),
    }
    .to_value()
}

/// `{finishReason, toolCalls, unparsed}` when an LLM result was truncated mid tool call.
pub fn truncated_tool_call(result: &Value) -> Option<Value> {
    smart::truncated_tool_call(result).map(|t| {
        let mut m = Map::with_capacity(3);
        m.insert("finishReason", Value::from(t.finish_reason.as_str()));
        m.insert("toolCalls", Value::from(t.tool_calls as i64));
        m.insert("unparsed", Value::from(t.unparsed as i64));
        Value::Object(m)
    })
}

/// The key that makes two error texts "the same error"; `None` when `text` is not a string.
pub fn error_text_key(text: &Value) -> Option<Value> {
    match text {
        Value::String(s) => Some(Value::String(smart::error_text_key(s))),
        _ => None,
    }
}

// -- the loop guard on its own -------------------------------------------------------------

/// Fields replacing the loop guard's defaults (`None`: the default).
#[derive(Clone, Debug, Default)]
pub struct LoopGuardFields {
    /// Identical calls in a row that count as a loop.
    pub threshold: Option<u32>,
    /// Node ids or tool names never held.
    pub allow_nodes: Option<Vec<String>>,
    /// Keys removed at every depth before comparing.
    pub ignore_keys: Option<Vec<String>>,
    /// Node kinds watched.
    pub kinds: Option<Vec<String>>,
    /// The opt-in detectors (`cycle`, `error-repeat`).
    pub detect: Option<Vec<String>>,
}

/// The core's loop guard on its own, as the bindings hand it out for the loop-guard
/// conformance sequences (a session runs the same one at every `before` gate).
pub struct StandaloneLoopGuard {
    inner: LoopGuard,
}

impl StandaloneLoopGuard {
    /// The default configuration with each given field replacing its default; an unknown
    /// detector name is refused.
    pub fn new(fields: LoopGuardFields) -> Result<Self, PureError> {
        let mut config = LoopGuardConfig::default();
        if let Some(t) = fields.threshold {
            config.threshold = t;
        }
        if let Some(a) = fields.allow_nodes {
            config.allow_nodes = a;
        }
        if let Some(k) = fields.ignore_keys {
            config.ignore_keys = k;
        }
        if let Some(k) = fields.kinds {
            config.kinds = k;
        }
        if let Some(names) = fields.detect {
            let (detect, unknown) = LoopDetect::from_names(&names);
            if let Some(name) = unknown.into_iter().next() {
                return Err(PureError::UnknownDetector(name));
            }
            config.detect = detect;
        }
        Ok(StandaloneLoopGuard {
            inner: LoopGuard::new(config),
        })
    }

    /// A node started (`input`: `None` when it had none; `unreadable`: it could not be
    /// read); its fingerprint, or `None` when the guard does not watch it.
    #[allow(clippy::too_many_arguments)]
    pub fn started(
        &mut self,
        run_id: &str,
        node_id: &str,
        kind: &str,
        name: Option<&str>,
        instance_id: Option<&str>,
        input: Option<&Value>,
        unreadable: bool,
        seq: u64,
        attached: bool,
    ) -> Option<String> {
        let value = if unreadable {
            LoopValue::Unreadable
        } else {
            LoopValue::Read(input)
        };
        let mut start = NodeStart::new(run_id, node_id, kind, value, seq);
        if let Some(n) = name {
            start = start.name(n);
        }
        if let Some(i) = instance_id {
            start = start.instance(i);
        }
        self.inner.on_node_started(&start, attached).fingerprint
    }

    /// A node failed; `name` and `message` count when they are strings.
    pub fn errored(
        &mut self,
        run_id: &str,
        node_id: &str,
        instance_id: Option<&str>,
        name: Option<&Value>,
        message: Option<&Value>,
    ) {
        let text = |v: Option<&Value>| match v {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let (name, message) = (text(name), text(message));
        self.inner.on_node_error(
            run_id,
            node_id,
            instance_id,
            name.as_ref(),
            message.as_ref(),
        );
    }

    /// A node finished with `status` and `output` (`None`: none).
    pub fn finished(
        &mut self,
        run_id: &str,
        node_id: &str,
        instance_id: Option<&str>,
        status: Option<&str>,
        output: Option<&Value>,
    ) {
        self.inner.on_node_finished(
            run_id,
            node_id,
            instance_id,
            status,
            LoopValue::Read(output),
            true,
        );
    }

    /// The `before` gate's question (`name` `None`: derived from the id):
    /// `{kind, repeats, firstSeq, lastSeq, fingerprint[, period, laps]}` when the guard
    /// holds the call.
    pub fn consult_before(
        &mut self,
        run_id: &str,
        kind: &str,
        node_id: &str,
        name: Option<&str>,
        attached: bool,
    ) -> Option<Value> {
        let name = name.unwrap_or_else(|| default_node_name(node_id));
        match self
            .inner
            .consult_before(run_id, kind, node_id, name, attached, LoopHide::default())
        {
            LoopVerdict::Hold(info) => Some(hold_value(&info)),
            _ => None,
        }
    }
}

/// A held call's loop evidence as the bindings report it.
fn hold_value(info: &LoopInfo) -> Value {
    let mut m = Map::new();
    let kind = match info.kind {
        LoopKind::Repeat => "repeat",
        LoopKind::Cycle { period, laps } => {
            m.insert("period", Value::from(period as i64));
            m.insert("laps", Value::from(laps as i64));
            "cycle"
        }
        LoopKind::ErrorRepeat => "error-repeat",
    };
    m.insert("kind", Value::from(kind));
    m.insert("repeats", Value::from(info.repeats as i64));
    m.insert("firstSeq", Value::from(info.first_seq as i64));
    m.insert("lastSeq", Value::from(info.last_seq as i64));
    m.insert("fingerprint", Value::from(info.fingerprint.as_str()));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[test]
    fn unknown_names_are_refused_with_their_text() {
        assert_eq!(
            provider_usage("nope", &Value::Null)
                .unwrap_err()
                .to_string(),
            "unknown provider \"nope\""
        );
        assert!(api("nope").is_err());
        let fields = LoopGuardFields {
            detect: Some(vec!["spin".into()]),
            ..Default::default()
        };
        assert_eq!(
            StandaloneLoopGuard::new(fields).err().unwrap().to_string(),
            "\"spin\" is not a loop detector"
        );
    }

    #[test]
    fn a_repeated_call_is_held_with_its_evidence() {
        let mut g = StandaloneLoopGuard::new(LoopGuardFields::default()).unwrap();
        let input = json::parse_str(r#"{"q":1}"#).unwrap();
        for seq in 1..=3 {
            let hold = g.consult_before("r", "tool", "tool:s", None, true);
            assert!(hold.is_none(), "held at {seq}");
            g.started(
                "r",
                "tool:s",
                "tool",
                None,
                None,
                Some(&input),
                false,
                seq,
                true,
            );
            g.finished("r", "tool:s", None, Some("ok"), None);
        }
        let hold = g.consult_before("r", "tool", "tool:s", None, true);
        let hold = hold.expect("the fourth identical call is held");
        assert_eq!(hold.get("kind").and_then(Value::as_str), Some("repeat"));
    }

    #[test]
    fn error_text_key_takes_only_a_string() {
        assert!(error_text_key(&Value::from(1_i64)).is_none());
        assert!(error_text_key(&Value::from("boom")).is_some());
    }
}
