//! The core's pure functions that the conformance vectors check, as
//! `Graphmind::Native` singleton methods: LLM capture (`llm`), edit input (`edit_input`)
//! and the smart-breakpoint rules (`smart`). Translation only: Ruby values in, the core's
//! answer out. An argument given as `absent` stands for "not passed" (distinct from `nil`,
//! which is JSON null).

use crate::convert::{from_value, to_value};
use graphmind_core::json::{Map, Value as J};
use graphmind_core::surface::options::{self, Host, Kind};
use graphmind_core::surface::pure::{self, LoopGuardFields, PureError, StandaloneLoopGuard};
use graphmind_core::{edit_input, llm, smart};
use magnus::r_hash::ForEach;
use magnus::{function, method, prelude::*, Error, RArray, RHash, RModule, Ruby, Value};
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

fn arg_error(ruby: &Ruby, e: PureError) -> Error {
    Error::new(ruby.exception_arg_error(), e.to_string())
}

/// `core_options(hash)`: the client's keyword options (Ruby spelling, seconds) as the
/// core's camelCase option Hash (milliseconds), by the core's option table; the options
/// the Ruby layer takes itself (`env`, `logger`, `clock`) are left out unread.
fn core_options(ruby: &Ruby, options: RHash) -> Result<Value, Error> {
    let mut given = Map::new();
    options.foreach(|key: Value, value: Value| {
        if let J::String(name) = to_value(ruby, key) {
            let name = name.to_string_lossy();
            let local = options::find(Host::Ruby, &name).is_some_and(|o| o.kind == Kind::Local);
            if !local {
                given.insert(name.as_ref(), to_value(ruby, value));
            }
        }
        Ok(ForEach::Continue)
    })?;
    from_value(ruby, &options::to_core(Host::Ruby, &J::Object(given)))
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
    let usage = pure::provider_usage(&provider, &to_value(ruby, raw));
    nil_or(ruby, usage.map_err(|e| arg_error(ruby, e))?)
}

/// `sampling_param_keys`: the allow-list, in order.
fn sampling_param_keys() -> Vec<&'static str> {
    pure::sampling_param_keys()
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
    nil_or(ruby, pure::truncated_tool_call(&to_value(ruby, result)))
}

/// `parse_break_on(raw_or_nil)`: whether a raw `GRAPHMIND_BREAK_ON_*` value turns the rule on.
fn parse_break_on(raw: Option<String>) -> bool {
    smart::parse_break_on(raw.as_deref())
}

/// `error_text_key(text)`: what makes two error texts "the same error".
fn error_text_key(ruby: &Ruby, text: Value) -> Result<Value, Error> {
    match pure::error_text_key(&to_value(ruby, text)) {
        Some(key) => from_value(ruby, &key),
        None => Err(Error::new(
            ruby.exception_type_error(),
            "error_text_key takes a String",
        )),
    }
}

/// `Graphmind::Native::LoopGuard`: the core's loop guard on its own (a session runs the
/// same one at every `before` gate), for the loop-guard conformance sequences.
#[magnus::wrap(class = "Graphmind::Native::LoopGuard", free_immediately, size)]
struct RbLoopGuard {
    inner: RefCell<StandaloneLoopGuard>,
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
        let fields = LoopGuardFields {
            threshold,
            allow_nodes,
            ignore_keys,
            kinds,
            detect,
        };
        let guard = StandaloneLoopGuard::new(fields).map_err(|e| arg_error(ruby, e))?;
        Ok(RbLoopGuard {
            inner: RefCell::new(guard),
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
        rb_self.inner.borrow_mut().started(
            &run_id,
            &node_id,
            &kind,
            name.as_deref(),
            instance_id.as_deref(),
            input.as_ref(),
            unreadable,
            seq,
            true,
        )
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
        let (name, message) = (to_value(ruby, name), to_value(ruby, message));
        rb_self.inner.borrow_mut().errored(
            &run_id,
            &node_id,
            instance_id.as_deref(),
            Some(&name),
            Some(&message),
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
        rb_self.inner.borrow_mut().finished(
            &run_id,
            &node_id,
            instance_id.as_deref(),
            status.as_deref(),
            output.as_ref(),
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
        let hold = rb_self.inner.borrow_mut().consult_before(
            &run_id,
            &kind,
            &node_id,
            name.as_deref(),
            true,
        );
        nil_or(ruby, hold)
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
    native.define_singleton_method("core_options", function!(core_options, 1))?;
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
