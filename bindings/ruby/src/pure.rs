//! The core's pure functions that the conformance vectors check, as
//! `Graphmind::Native` singleton methods: LLM capture (`llm`), edit input (`edit_input`)
//! and the smart-breakpoint rules (`smart`). Translation only: Ruby values in, the core's
//! answer out. An argument given as `absent` stands for "not passed" (distinct from `nil`,
//! which is JSON null).

use crate::convert::{from_value, to_value};
use graphmind_core::json::{Map, Value as J};
use graphmind_core::loop_guard::{
    default_node_name, LoopDetect, LoopGuard, LoopGuardConfig, LoopHide, LoopKind, LoopValue,
    LoopVerdict, NodeStart,
};
use graphmind_core::{edit_input, llm, smart};
use magnus::{function, method, prelude::*, Error, RArray, RModule, Ruby, Value};
use std::cell::RefCell;

fn opt(ruby: &Ruby, v: Value, absent: bool) -> Option<J> {
    if absent {
        None
    } else {
        Some(to_value(ruby, v))
    }
}

fn nil_or(ruby: &Ruby, v: Option<J>) -> Result<Value, Error> {
    match v {
        Some(v) => from_value(ruby, &v),
        None => Ok(ruby.qnil().as_value()),
    }
}

/// `finish_reason(raw, raw_absent, has_tool_calls)`: the normalised finish reason or nil.
fn finish_reason(
    ruby: &Ruby,
    raw: Value,
    absent: bool,
    has_tool_calls: bool,
) -> Option<&'static str> {
    llm::normalize_finish_reason(opt(ruby, raw, absent).as_ref(), has_tool_calls)
        .map(|r| r.as_str())
}

/// `tool_call(id, name, args, absent_mask)`: the wire form of one tool call, or nil. Bit 0
/// of `absent_mask` marks `id` absent, bit 1 `name`, bit 2 `args`.
fn tool_call(ruby: &Ruby, id: Value, name: Value, args: Value, absent: u8) -> Result<Value, Error> {
    let (id, name, args) = (
        opt(ruby, id, absent & 1 != 0),
        opt(ruby, name, absent & 2 != 0),
        opt(ruby, args, absent & 4 != 0),
    );
    nil_or(
        ruby,
        llm::tool_call(id.as_ref(), name.as_ref(), args.as_ref()),
    )
}

/// `schema_hash(definition)`.
fn schema_hash(ruby: &Ruby, definition: Value) -> String {
    llm::schema_hash(&to_value(ruby, definition))
}

/// `sanitize_tool_definition(definition)`: the definition as recorded.
fn sanitize_tool_definition(ruby: &Ruby, definition: Value) -> Result<Value, Error> {
    from_value(
        ruby,
        &llm::sanitize_tool_definition(&to_value(ruby, definition)),
    )
}

/// `provider_usage(provider_name, raw)`: the wire's token usage, or nil.
fn provider_usage(ruby: &Ruby, provider: String, raw: Value) -> Result<Value, Error> {
    let p = llm::UsageProvider::from_name(&provider).ok_or_else(|| {
        Error::new(
            ruby.exception_arg_error(),
            format!("unknown provider {provider:?}"),
        )
    })?;
    nil_or(ruby, llm::provider_usage(p, &to_value(ruby, raw)))
}

/// `sampling_param_keys`: the allow-list, in order.
fn sampling_param_keys() -> Vec<&'static str> {
    llm::SAMPLING_PARAM_KEYS.to_vec()
}

/// `proposed_value_refusal(value)`: the refusal code, or nil.
fn proposed_value_refusal(ruby: &Ruby, value: Value) -> Option<&'static str> {
    edit_input::proposed_value_refusal(&to_value(ruby, value)).map(|c| c.as_str())
}

/// `prototype_key_refused?(value)`.
fn prototype_key_refused(ruby: &Ruby, value: Value) -> bool {
    edit_input::prototype_key_refusal(&to_value(ruby, value)).is_some()
}

/// `normalize_validation(result, absent)`: `{ok, value}` or `{ok: false, code, message?}`.
fn normalize_validation(ruby: &Ruby, result: Value, absent: bool) -> Result<Value, Error> {
    from_value(
        ruby,
        &edit_input::normalize_validation(opt(ruby, result, absent).as_ref()).to_value(),
    )
}

/// `sanitize_short_text(message, absent)`: the cleaned text, or nil.
fn sanitize_short_text(ruby: &Ruby, message: Value, absent: bool) -> Result<Value, Error> {
    nil_or(
        ruby,
        edit_input::sanitize_short_text(opt(ruby, message, absent).as_ref()).map(J::String),
    )
}

/// `merge_edited_input(live, proposed, input_hidden, absent_mask)` -> `[merged, nil]` or
/// `[nil, refusal_code]`. Bit 0 of `absent_mask` marks `live` absent, bit 1 `proposed`.
fn merge_edited_input(
    ruby: &Ruby,
    live: Value,
    proposed: Value,
    hidden: bool,
    absent: u8,
) -> Result<RArray, Error> {
    let (live, proposed) = (
        opt(ruby, live, absent & 1 != 0),
        opt(ruby, proposed, absent & 2 != 0),
    );
    let out = ruby.ary_new_capa(2);
    match edit_input::merge_edited_input(live.as_ref(), proposed.as_ref(), hidden) {
        Ok(v) => {
            out.push(from_value(ruby, &v)?)?;
            out.push(ruby.qnil())?;
        }
        Err(refusal) => {
            out.push(ruby.qnil())?;
            out.push(refusal.code.as_str())?;
        }
    }
    Ok(out)
}

/// `error_result_shape(result)`: which error shape a tool result has, or nil.
fn error_result_shape(ruby: &Ruby, result: Value) -> Option<&'static str> {
    smart::error_result_shape(&to_value(ruby, result)).map(|s| s.as_str())
}

/// `truncated_tool_call(result)`: `{finishReason, toolCalls, unparsed}`, or nil.
fn truncated_tool_call(ruby: &Ruby, result: Value) -> Result<Value, Error> {
    nil_or(
        ruby,
        smart::truncated_tool_call(&to_value(ruby, result)).map(|t| {
            let mut m = Map::new();
            m.insert("finishReason", J::from(t.finish_reason.as_str()));
            m.insert("toolCalls", J::from(t.tool_calls as i64));
            m.insert("unparsed", J::from(t.unparsed as i64));
            J::Object(m)
        }),
    )
}

/// `parse_break_on(raw_or_nil)`: whether a raw `GRAPHMIND_BREAK_ON_*` value turns the rule on.
fn parse_break_on(raw: Option<String>) -> bool {
    smart::parse_break_on(raw.as_deref())
}

/// `error_text_key(text)`: what makes two error texts "the same error".
fn error_text_key(ruby: &Ruby, text: Value) -> Result<Value, Error> {
    match to_value(ruby, text) {
        J::String(s) => from_value(ruby, &J::String(smart::error_text_key(&s))),
        _ => Err(Error::new(
            ruby.exception_type_error(),
            "error_text_key takes a String",
        )),
    }
}

/// `Graphmind::Native::LoopGuard`: the core's loop guard on its own (a session runs the
/// same one at every `before` gate), for the loop-guard conformance sequences.
#[magnus::wrap(class = "Graphmind::Native::LoopGuard", free_immediately, size)]
struct RbLoopGuard {
    inner: RefCell<LoopGuard>,
}

fn as_js(v: Option<J>) -> Option<graphmind_core::json::JsStr> {
    match v {
        Some(J::String(s)) => Some(s),
        _ => None,
    }
}

impl RbLoopGuard {
    /// `new(threshold, allow_nodes, ignore_keys, kinds, detect)`: the default configuration,
    /// with each non-nil argument replacing its field (`detect`: the opt-in detector names;
    /// an unknown one raises `ArgumentError`).
    fn new(
        ruby: &Ruby,
        threshold: Option<u32>,
        allow_nodes: Option<Vec<String>>,
        ignore_keys: Option<Vec<String>>,
        kinds: Option<Vec<String>>,
        detect: Option<Vec<String>>,
    ) -> Result<Self, Error> {
        let mut config = LoopGuardConfig::default();
        if let Some(t) = threshold {
            config.threshold = t;
        }
        if let Some(a) = allow_nodes {
            config.allow_nodes = a;
        }
        if let Some(k) = ignore_keys {
            config.ignore_keys = k;
        }
        if let Some(k) = kinds {
            config.kinds = k;
        }
        if let Some(names) = detect {
            let (detect, unknown) = LoopDetect::from_names(&names);
            if let Some(name) = unknown.first() {
                return Err(Error::new(
                    ruby.exception_arg_error(),
                    format!("{name:?} is not a loop detector"),
                ));
            }
            config.detect = detect;
        }
        Ok(RbLoopGuard {
            inner: RefCell::new(LoopGuard::new(config)),
        })
    }

    /// `started(run_id, node_id, kind, name, instance_id, input, input_absent, unreadable,
    /// seq)`: a node started (debugger attached); its fingerprint, or nil when not watched.
    #[allow(clippy::too_many_arguments)]
    fn started(
        ruby: &Ruby,
        rb_self: &Self,
        run_id: String,
        node_id: String,
        kind: String,
        name: Option<String>,
        instance_id: Option<String>,
        input: Value,
        input_absent: bool,
        unreadable: bool,
        seq: u64,
    ) -> Option<String> {
        let input = opt(ruby, input, input_absent || unreadable);
        let value = if unreadable {
            LoopValue::Unreadable
        } else {
            LoopValue::Read(input.as_ref())
        };
        let mut start = NodeStart::new(&run_id, &node_id, &kind, value, seq);
        if let Some(n) = name.as_deref() {
            start = start.name(n);
        }
        if let Some(i) = instance_id.as_deref() {
            start = start.instance(i);
        }
        rb_self
            .inner
            .borrow_mut()
            .on_node_started(&start, true)
            .fingerprint
    }

    /// `errored(run_id, node_id, instance_id, name, message)` (name/message: String or nil).
    fn errored(
        ruby: &Ruby,
        rb_self: &Self,
        run_id: String,
        node_id: String,
        instance_id: Option<String>,
        name: Value,
        message: Value,
    ) {
        let (name, message) = (
            as_js(opt(ruby, name, false)),
            as_js(opt(ruby, message, false)),
        );
        rb_self.inner.borrow_mut().on_node_error(
            &run_id,
            &node_id,
            instance_id.as_deref(),
            name.as_ref(),
            message.as_ref(),
        );
    }

    /// `finished(run_id, node_id, instance_id, status, output, output_absent)`.
    #[allow(clippy::too_many_arguments)]
    fn finished(
        ruby: &Ruby,
        rb_self: &Self,
        run_id: String,
        node_id: String,
        instance_id: Option<String>,
        status: Option<String>,
        output: Value,
        output_absent: bool,
    ) {
        let output = opt(ruby, output, output_absent);
        rb_self.inner.borrow_mut().on_node_finished(
            &run_id,
            &node_id,
            instance_id.as_deref(),
            status.as_deref(),
            LoopValue::Read(output.as_ref()),
            true,
        );
    }

    /// `consult_before(run_id, kind, node_id, name)`: the `before` gate's question (debugger
    /// attached): `{kind, repeats, firstSeq, lastSeq, fingerprint[, period, laps]}` when the
    /// guard holds the call, else nil.
    fn consult_before(
        ruby: &Ruby,
        rb_self: &Self,
        run_id: String,
        kind: String,
        node_id: String,
        name: Option<String>,
    ) -> Result<Value, Error> {
        let name = name.unwrap_or_else(|| default_node_name(&node_id).to_string());
        let verdict = rb_self.inner.borrow_mut().consult_before(
            &run_id,
            &kind,
            &node_id,
            &name,
            true,
            LoopHide::default(),
        );
        let LoopVerdict::Hold(info) = verdict else {
            return Ok(ruby.qnil().as_value());
        };
        let mut m = Map::new();
        let kind = match info.kind {
            LoopKind::Repeat => "repeat",
            LoopKind::Cycle { period, laps } => {
                m.insert("period", J::from(period as i64));
                m.insert("laps", J::from(laps as i64));
                "cycle"
            }
            LoopKind::ErrorRepeat => "error-repeat",
        };
        m.insert("kind", J::from(kind));
        m.insert("repeats", J::from(info.repeats as i64));
        m.insert("firstSeq", J::from(info.first_seq as i64));
        m.insert("lastSeq", J::from(info.last_seq as i64));
        m.insert("fingerprint", J::from(info.fingerprint.as_str()));
        from_value(ruby, &J::Object(m))
    }
}

/// Adds these functions to `Graphmind::Native`.
pub fn register(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let guard = native.define_class("LoopGuard", ruby.class_object())?;
    guard.define_singleton_method("new", function!(RbLoopGuard::new, 5))?;
    guard.define_method("started", method!(RbLoopGuard::started, 9))?;
    guard.define_method("errored", method!(RbLoopGuard::errored, 5))?;
    guard.define_method("finished", method!(RbLoopGuard::finished, 6))?;
    guard.define_method("consult_before", method!(RbLoopGuard::consult_before, 4))?;
    native.define_singleton_method("finish_reason", function!(finish_reason, 3))?;
    native.define_singleton_method("tool_call", function!(tool_call, 4))?;
    native.define_singleton_method("schema_hash", function!(schema_hash, 1))?;
    native.define_singleton_method(
        "sanitize_tool_definition",
        function!(sanitize_tool_definition, 1),
    )?;
    native.define_singleton_method("provider_usage", function!(provider_usage, 2))?;
    native.define_singleton_method("sampling_param_keys", function!(sampling_param_keys, 0))?;
    native.define_singleton_method(
        "proposed_value_refusal",
        function!(proposed_value_refusal, 1),
    )?;
    native.define_singleton_method(
        "prototype_key_refused?",
        function!(prototype_key_refused, 1),
    )?;
    native.define_singleton_method("normalize_validation", function!(normalize_validation, 2))?;
    native.define_singleton_method("sanitize_short_text", function!(sanitize_short_text, 2))?;
    native.define_singleton_method("merge_edited_input", function!(merge_edited_input, 4))?;
    native.define_singleton_method("error_result_shape", function!(error_result_shape, 1))?;
    native.define_singleton_method("truncated_tool_call", function!(truncated_tool_call, 1))?;
    native.define_singleton_method("parse_break_on", function!(parse_break_on, 1))?;
    native.define_singleton_method("error_text_key", function!(error_text_key, 1))?;
    native.const_set("MAX_REFUSAL_MESSAGE", edit_input::MAX_REFUSAL_MESSAGE)?;
    native.const_set("REDACTED", graphmind_core::redact::REDACTED)?;
    Ok(())
}

/// Makes the wrapped classes' handles now, on the loading thread (see `lib.rs`,
/// `force_lazy_values`).
pub fn force_lazy_values(ruby: &Ruby) {
    use magnus::TypedData;
    let _ = RbLoopGuard::class(ruby);
}
