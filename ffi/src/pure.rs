//! The core's remaining pure functions behind the C ABI, translation only (JSON text in,
//! JSON text out): the coarse redactor, the edit-input helpers, the smart-breakpoint and
//! LLM-capture helpers, RFC 8785 canonicalisation, the number writer and the loop guard on
//! its own. They are what the Node and Ruby bindings expose for the conformance vectors;
//! every rule is the core's.
//!
//! Conventions as in the rest of the crate: text is pointer + length (NULL with length 0:
//! absent), results go to a caller-owned `gm_string` (free with `gm_string_free`) whose
//! `ptr` is NULL when the result is "none", and fallible calls return `gm_error *`.

use super::{
    err, gm_code, gm_error, gm_str, gm_string, guard, guard_value, handle_mut, js_text, json_value,
    need, put, required_text, text, NulText, R,
};
use graphmind_core::edit_input;
use graphmind_core::json::{self, Value};
use graphmind_core::redact::{EventContext, HideSwitches, RedactOutcome, Redactor};
use graphmind_core::surface::pure::{self, LoopGuardFields, StandaloneLoopGuard};
use graphmind_core::{canonical, llm, redact, smart};
use std::ffi::c_char;

fn owned(s: String) -> gm_string {
    gm_string::from_string(s)
}

fn maybe(s: Option<String>) -> gm_string {
    s.map(owned).unwrap_or_else(gm_string::empty)
}

fn value_text(v: &Value) -> String {
    json::to_string(v)
}

unsafe fn required_json(ptr: *const c_char, len: usize, what: &str) -> R<Value> {
    json_value(ptr, len, what)?
        .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, format!("{what}: NULL")))
}

// ---------------------------------------------------------------------------------------
// JSON: RFC 8785 canonicalisation and the number writer
// ---------------------------------------------------------------------------------------

/// RFC 8785 (JCS) canonical text of the JSON bytes `json` (parsed by the core's strict
/// parser: numbers and lone surrogates as written; no key is removed) into `*out`.
/// `GM_INVALID_JSON` when they do not parse. Pure; any thread.
///
/// # Safety
/// `json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_canonicalize_text(
    json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = required_json(json, len, "json")?;
        put(out, owned(canonical::canonical_json_with(&v, &[])), "out")
    })
}

/// The double `value` as ECMAScript (JSON.stringify) spells it into `*out` (`null` for NaN
/// and infinities). Pure; any thread.
///
/// # Safety
/// `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_format_number(value: f64, out: *mut gm_string) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        put(out, owned(value_text(&Value::from(value))), "out")
    })
}

// ---------------------------------------------------------------------------------------
// The coarse redactor
// ---------------------------------------------------------------------------------------

/// The coarse redactor (the four hide switches), stateful across one run's events. Opaque;
/// one thread at a time; free with `gm_redactor_free`.
pub struct gm_redactor {
    inner: Redactor,
}

/// What one redaction did (`gm_redactor_redact`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum gm_redact_outcome {
    /// Nothing was hidden; the payload is the input's.
    GM_REDACT_UNCHANGED = 0,
    /// Some fields were replaced by the placeholder.
    GM_REDACT_REDACTED = 1,
    /// Redaction failed; the payload is the core's safe fallback.
    GM_REDACT_FAILED = 2,
    /// The event must not be sent (no payload).
    GM_REDACT_DROPPED = 3,
}

/// A redactor for the switches `hideInputs`, `hideOutputs`, `hideToolArgs`,
/// `hideToolResults`. Never NULL; free with `gm_redactor_free`. Any thread.
#[no_mangle]
pub extern "C" fn gm_redactor_new(
    hide_inputs: bool,
    hide_outputs: bool,
    hide_tool_args: bool,
    hide_tool_results: bool,
) -> *mut gm_redactor {
    let switches = HideSwitches {
        inputs: hide_inputs,
        outputs: hide_outputs,
        tool_args: hide_tool_args,
        tool_results: hide_tool_results,
    };
    Box::into_raw(Box::new(gm_redactor {
        inner: Redactor::new(switches),
    }))
}

/// Redacts one event (`event_type`, `run_id`, `node_kind` (NULL: none), UTF-8) whose payload
/// is the JSON text `payload_json`: `*outcome` says what happened and `*out` receives the
/// payload to send (JSON; `ptr` NULL when dropped). One thread at a time per redactor.
///
/// # Safety
/// `redactor` is live; text pointers point to their lengths' bytes or are NULL; `outcome`
/// and `out` are valid pointers.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn gm_redactor_redact(
    redactor: *mut gm_redactor,
    event_type: *const c_char,
    event_type_len: usize,
    run_id: *const c_char,
    run_id_len: usize,
    node_kind: *const c_char,
    node_kind_len: usize,
    payload_json: *const c_char,
    payload_len: usize,
    outcome: *mut gm_redact_outcome,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(outcome, "outcome")?;
        need(out, "out")?;
        let r = handle_mut(redactor, "redactor")?;
        let event_type = required_text(event_type, event_type_len, "event_type")?;
        let run_id = text(run_id, run_id_len, "run_id")?.unwrap_or("");
        let node_kind = text(node_kind, node_kind_len, "node_kind")?;
        let mut payload = required_json(payload_json, payload_len, "payload")?;
        if outcome.is_null() || out.is_null() {
            return Err(err(gm_code::GM_NULL_ARGUMENT, "outcome/out: NULL"));
        }
        let ctx = EventContext { run_id, node_kind };
        let (code, keep) = match r.inner.redact_in(&ctx, event_type, &mut payload) {
            RedactOutcome::Unchanged => (gm_redact_outcome::GM_REDACT_UNCHANGED, true),
            RedactOutcome::Redacted { .. } => (gm_redact_outcome::GM_REDACT_REDACTED, true),
            RedactOutcome::Failed(_) => (gm_redact_outcome::GM_REDACT_FAILED, true),
            RedactOutcome::Dropped(_) => (gm_redact_outcome::GM_REDACT_DROPPED, false),
        };
        put(outcome, code, "outcome")?;
        put(out, maybe(keep.then(|| value_text(&payload))), "out")
    })
}

/// Frees a redactor; accepts NULL.
///
/// # Safety
/// `redactor` is NULL or came from `gm_redactor_new` and is not used again.
#[no_mangle]
pub unsafe extern "C" fn gm_redactor_free(redactor: *mut gm_redactor) {
    guard_value((), || {
        if !redactor.is_null() {
            drop(Box::from_raw(redactor));
        }
    })
}

/// The placeholder that replaces hidden values (`REDACTED`), borrowed static text.
#[no_mangle]
pub extern "C" fn gm_redacted_placeholder() -> gm_str {
    static PLACEHOLDER: std::sync::OnceLock<NulText> = std::sync::OnceLock::new();
    PLACEHOLDER
        .get_or_init(|| NulText::new(redact::REDACTED))
        .view()
}

// ---------------------------------------------------------------------------------------
// Edit input (values proposed at a pause)
// ---------------------------------------------------------------------------------------

/// The longest refusal message shown (`MAX_REFUSAL_MESSAGE`, in characters).
#[no_mangle]
pub extern "C" fn gm_max_refusal_message() -> usize {
    edit_input::MAX_REFUSAL_MESSAGE
}

/// The refusal code of a proposed edited value `value_json` (a placeholder or truncation
/// marker) into `*out` as plain text; `ptr` NULL when the value is acceptable. Pure; any thread.
///
/// # Safety
/// `value_json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_proposed_value_refusal(
    value_json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = required_json(value_json, len, "value")?;
        let code = edit_input::proposed_value_refusal(&v).map(|c| c.as_str().to_string());
        put(out, maybe(code), "out")
    })
}

/// A refusal `{ok:false, code, message}` (JSON) into `*out` when `value_json` carries a
/// prototype-polluting key; `ptr` NULL otherwise. Pure; any thread.
///
/// # Safety
/// `value_json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_prototype_key_refusal(
    value_json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = required_json(value_json, len, "value")?;
        let refusal = pure::prototype_key_verdict(&v).map(|r| value_text(&r));
        put(out, maybe(refusal), "out")
    })
}

/// A validator's verdict `result_json` (NULL: the validator returned nothing) normalised to
/// `{ok:true,value}` or `{ok:false,code,message}` (JSON) into `*out`. Pure; any thread.
///
/// # Safety
/// `result_json` points to `len` bytes or is NULL; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_normalize_validation(
    result_json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = json_value(result_json, len, "result")?;
        let verdict = edit_input::normalize_validation(v.as_ref()).to_value();
        put(out, owned(value_text(&verdict)), "out")
    })
}

/// A short message `message_json` (any JSON value; NULL: absent) made safe to show, as a
/// JSON string into `*out`; `ptr` NULL when there is nothing to show. Pure; any thread.
///
/// # Safety
/// `message_json` points to `len` bytes or is NULL; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_sanitize_short_text(
    message_json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = json_value(message_json, len, "message")?;
        let s = edit_input::sanitize_short_text(v.as_ref()).map(|s| value_text(&Value::String(s)));
        put(out, maybe(s), "out")
    })
}

/// Tool arguments edited at a pause (`proposed_json`) merged into the live ones
/// (`live_json`; either NULL: absent), as a verdict `{ok:true,value}` /
/// `{ok:false,code,message}` (JSON) into `*out`. Pure; any thread.
///
/// # Safety
/// Text pointers point to their lengths' bytes or are NULL; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_merge_tool_input(
    live_json: *const c_char,
    live_len: usize,
    proposed_json: *const c_char,
    proposed_len: usize,
    input_hidden: bool,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let live = json_value(live_json, live_len, "live")?;
        let proposed = json_value(proposed_json, proposed_len, "proposed")?;
        let verdict = pure::merge_verdict(live.as_ref(), proposed.as_ref(), input_hidden);
        put(out, owned(value_text(&verdict)), "out")
    })
}

// ---------------------------------------------------------------------------------------
// Smart breakpoints
// ---------------------------------------------------------------------------------------

/// The error shape of a tool result `result_json` (`isError`, `success`, ...) as plain text
/// into `*out`; `ptr` NULL when it is not error-shaped. Pure; any thread.
///
/// # Safety
/// `result_json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_error_result_shape(
    result_json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = required_json(result_json, len, "result")?;
        let shape = smart::error_result_shape(&v).map(|s| s.as_str().to_string());
        put(out, maybe(shape), "out")
    })
}

/// `{finishReason, toolCalls, unparsed}` (JSON) into `*out` when the LLM result
/// `result_json` was truncated mid tool call; `ptr` NULL otherwise. Pure; any thread.
///
/// # Safety
/// `result_json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_truncated_tool_call(
    result_json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = required_json(result_json, len, "result")?;
        let t = pure::truncated_tool_call(&v).map(|t| value_text(&t));
        put(out, maybe(t), "out")
    })
}

/// Whether a raw `GRAPHMIND_BREAK_ON_*` value (UTF-8; NULL: unset) turns the rule on.
/// Pure; any thread; false on invalid UTF-8.
///
/// # Safety
/// `raw` points to `len` bytes or is NULL.
#[no_mangle]
pub unsafe extern "C" fn gm_parse_break_on(raw: *const c_char, len: usize) -> bool {
    guard_value(false, || match text(raw, len, "raw") {
        Ok(t) => smart::parse_break_on(t),
        Err(_) => false,
    })
}

/// The key that makes two error texts "the same error": `text` is UTF-8/WTF-8 (lone
/// surrogates kept); `*out` receives the key as a JSON string. Pure; any thread.
///
/// # Safety
/// `text_ptr` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_error_text_key(
    text_ptr: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let s = js_text(text_ptr, len, "text")?
            .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, "text: NULL"))?;
        put(
            out,
            owned(value_text(&Value::String(smart::error_text_key(&s)))),
            "out",
        )
    })
}

// ---------------------------------------------------------------------------------------
// LLM capture
// ---------------------------------------------------------------------------------------

/// A provider's finish reason `raw_json` (NULL: absent) normalised, as plain text into
/// `*out`; `ptr` NULL when there is none. Pure; any thread.
///
/// # Safety
/// `raw_json` points to `len` bytes or is NULL; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_normalize_finish_reason(
    raw_json: *const c_char,
    len: usize,
    has_tool_calls: bool,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let raw = json_value(raw_json, len, "raw")?;
        let r = llm::normalize_finish_reason(raw.as_ref(), has_tool_calls)
            .map(|r| r.as_str().to_string());
        put(out, maybe(r), "out")
    })
}

/// One recorded tool call `{id, name, args}` (JSON) into `*out` from its raw parts (each
/// JSON text or NULL: absent); `ptr` NULL when the parts do not make a call. Pure; any thread.
///
/// # Safety
/// Text pointers point to their lengths' bytes or are NULL; `out` is a valid pointer.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn gm_tool_call(
    id_json: *const c_char,
    id_len: usize,
    name_json: *const c_char,
    name_len: usize,
    args_json: *const c_char,
    args_len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let id = json_value(id_json, id_len, "id")?;
        let name = json_value(name_json, name_len, "name")?;
        let args = json_value(args_json, args_len, "args")?;
        let call =
            llm::tool_call(id.as_ref(), name.as_ref(), args.as_ref()).map(|v| value_text(&v));
        put(out, maybe(call), "out")
    })
}

/// The hash of a tool schema `definition_json` (plain text) into `*out`. Pure; any thread.
///
/// # Safety
/// `definition_json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_schema_hash(
    definition_json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = required_json(definition_json, len, "definition")?;
        put(out, owned(llm::schema_hash(&v)), "out")
    })
}

/// A tool definition with secrets and noise removed, as recorded (JSON) into `*out`. Pure;
/// any thread.
///
/// # Safety
/// `definition_json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_sanitize_tool_definition(
    definition_json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = required_json(definition_json, len, "definition")?;
        put(
            out,
            owned(value_text(&llm::sanitize_tool_definition(&v))),
            "out",
        )
    })
}

/// Token usage (JSON) into `*out` from a provider's raw usage object `raw_json`, for the
/// provider named `provider` (UTF-8: `anthropic`, `openai-chat`, ...; unknown:
/// `GM_INVALID_ARGUMENT`); `ptr` NULL when there is no usage. Pure; any thread.
///
/// # Safety
/// Text pointers point to their lengths' bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_provider_usage(
    provider: *const c_char,
    provider_len: usize,
    raw_json: *const c_char,
    raw_len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let name = required_text(provider, provider_len, "provider")?;
        let p = llm::UsageProvider::from_name(name).ok_or_else(|| {
            err(
                gm_code::GM_INVALID_ARGUMENT,
                format!("provider: unknown {name:?}"),
            )
        })?;
        let raw = required_json(raw_json, raw_len, "raw")?;
        put(
            out,
            maybe(llm::provider_usage(p, &raw).map(|v| value_text(&v))),
            "out",
        )
    })
}

/// The allow-listed sampling parameter names, in order, as a JSON array into `*out`. Pure;
/// any thread.
///
/// # Safety
/// `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_sampling_param_keys(out: *mut gm_string) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let keys = Value::Array(
            pure::sampling_param_keys()
                .into_iter()
                .map(Value::from)
                .collect(),
        );
        put(out, owned(value_text(&keys)), "out")
    })
}

/// The allow-listed sampling parameters of the request body `source_json` (a JSON object)
/// into `*out`. Pure; any thread.
///
/// # Safety
/// `source_json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_pick_params(
    source_json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = required_json(source_json, len, "source")?;
        put(
            out,
            owned(value_text(&Value::Object(llm::pick_params(&v)))),
            "out",
        )
    })
}

/// What an LLM node records (JSON) for a Vercel AI SDK `doGenerate` result `result_json`.
/// Pure; any thread.
///
/// # Safety
/// `result_json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_ai_sdk_step_output(
    result_json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = required_json(result_json, len, "result")?;
        put(out, owned(value_text(&llm::ai_sdk_step_output(&v))), "out")
    })
}

// ---------------------------------------------------------------------------------------
// The loop guard on its own
// ---------------------------------------------------------------------------------------

/// The loop guard on its own (a session runs the same one at every `before` gate), for
/// conformance sequences and hosts that drive it themselves. Opaque; one thread at a time;
/// free with `gm_loop_guard_free`.
pub struct gm_loop_guard {
    inner: StandaloneLoopGuard,
}

fn string_list(v: &Value, what: &str) -> R<Vec<String>> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str().map(str::to_string).ok_or_else(|| {
                    err(
                        gm_code::GM_INVALID_ARGUMENT,
                        format!("{what}: not an array of strings"),
                    )
                })
            })
            .collect(),
        _ => Err(err(
            gm_code::GM_INVALID_ARGUMENT,
            format!("{what}: not an array"),
        )),
    }
}

/// A loop guard with the default configuration, overridden by the members of `config_json`
/// (NULL: none): `threshold` (integer), `allowNodes`, `ignoreKeys`, `kinds`, `detect` (arrays
/// of strings; `detect` names the opt-in detectors `cycle` and `error-repeat`, off by
/// default; `null` members are ignored). `*out` is freed with `gm_loop_guard_free`. Any thread.
///
/// # Safety
/// `config_json` points to `len` bytes or is NULL; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_loop_guard_new(
    config_json: *const c_char,
    len: usize,
    out: *mut *mut gm_loop_guard,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let mut fields = LoopGuardFields::default();
        match json_value(config_json, len, "config")? {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                let given = |k: &str| m.get(k).filter(|v| !matches!(v, Value::Null));
                if let Some(t) = given("threshold") {
                    fields.threshold = Some(
                        t.as_i64()
                            .and_then(|t| u32::try_from(t).ok())
                            .ok_or_else(|| {
                                err(gm_code::GM_INVALID_ARGUMENT, "threshold: not a count")
                            })?,
                    );
                }
                fields.allow_nodes = given("allowNodes")
                    .map(|a| string_list(a, "allowNodes"))
                    .transpose()?;
                fields.ignore_keys = given("ignoreKeys")
                    .map(|k| string_list(k, "ignoreKeys"))
                    .transpose()?;
                fields.kinds = given("kinds")
                    .map(|k| string_list(k, "kinds"))
                    .transpose()?;
                fields.detect = given("detect")
                    .map(|d| string_list(d, "detect"))
                    .transpose()?;
            }
            Some(_) => return Err(err(gm_code::GM_INVALID_ARGUMENT, "config: not an object")),
        }
        let guard = StandaloneLoopGuard::new(fields)
            .map_err(|e| err(gm_code::GM_INVALID_ARGUMENT, format!("detect: {e}")))?;
        put(
            out,
            Box::into_raw(Box::new(gm_loop_guard { inner: guard })),
            "out",
        )
    })
}

/// A node started (`run_id`, `node_id`, `kind`, `name` (NULL: derived from the id),
/// `instance_id` (NULL: none), UTF-8) with input `input_json` (NULL: no input; ignored when
/// `unreadable`: the input could not be read), at sequence `seq`. `*out` receives its
/// fingerprint (`ptr` NULL when the guard does not watch it). One thread at a time.
///
/// # Safety
/// `guard_ptr` is live; text pointers point to their lengths' bytes or are NULL; `out` is valid.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn gm_loop_guard_started(
    guard_ptr: *mut gm_loop_guard,
    run_id: *const c_char,
    run_id_len: usize,
    node_id: *const c_char,
    node_id_len: usize,
    kind: *const c_char,
    kind_len: usize,
    name: *const c_char,
    name_len: usize,
    instance_id: *const c_char,
    instance_id_len: usize,
    input_json: *const c_char,
    input_len: usize,
    unreadable: bool,
    seq: u64,
    attached: bool,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let g = handle_mut(guard_ptr, "guard")?;
        let run_id = required_text(run_id, run_id_len, "run_id")?;
        let node_id = required_text(node_id, node_id_len, "node_id")?;
        let kind = required_text(kind, kind_len, "kind")?;
        let name = text(name, name_len, "name")?;
        let instance = text(instance_id, instance_id_len, "instance_id")?;
        let input = if unreadable {
            None
        } else {
            json_value(input_json, input_len, "input")?
        };
        if out.is_null() {
            return Err(err(gm_code::GM_NULL_ARGUMENT, "out: NULL"));
        }
        let fp = g.inner.started(
            run_id,
            node_id,
            kind,
            name,
            instance,
            input.as_ref(),
            unreadable,
            seq,
            attached,
        );
        put(out, maybe(fp), "out")
    })
}

/// A node failed: `name_json` and `message_json` are JSON strings (or NULL / non-strings:
/// none). One thread at a time.
///
/// # Safety
/// `guard_ptr` is live; text pointers point to their lengths' bytes or are NULL.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn gm_loop_guard_errored(
    guard_ptr: *mut gm_loop_guard,
    run_id: *const c_char,
    run_id_len: usize,
    node_id: *const c_char,
    node_id_len: usize,
    instance_id: *const c_char,
    instance_id_len: usize,
    name_json: *const c_char,
    name_len: usize,
    message_json: *const c_char,
    message_len: usize,
) -> *mut gm_error {
    guard(|| {
        let g = handle_mut(guard_ptr, "guard")?;
        let run_id = required_text(run_id, run_id_len, "run_id")?;
        let node_id = required_text(node_id, node_id_len, "node_id")?;
        let instance = text(instance_id, instance_id_len, "instance_id")?;
        let name = json_value(name_json, name_len, "name")?;
        let message = json_value(message_json, message_len, "message")?;
        g.inner
            .errored(run_id, node_id, instance, name.as_ref(), message.as_ref());
        Ok(())
    })
}

/// A node finished with `status` (UTF-8; NULL: none) and output `output_json` (NULL:
/// none). One thread at a time.
///
/// # Safety
/// `guard_ptr` is live; text pointers point to their lengths' bytes or are NULL.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn gm_loop_guard_finished(
    guard_ptr: *mut gm_loop_guard,
    run_id: *const c_char,
    run_id_len: usize,
    node_id: *const c_char,
    node_id_len: usize,
    instance_id: *const c_char,
    instance_id_len: usize,
    status: *const c_char,
    status_len: usize,
    output_json: *const c_char,
    output_len: usize,
) -> *mut gm_error {
    guard(|| {
        let g = handle_mut(guard_ptr, "guard")?;
        let run_id = required_text(run_id, run_id_len, "run_id")?;
        let node_id = required_text(node_id, node_id_len, "node_id")?;
        let instance = text(instance_id, instance_id_len, "instance_id")?;
        let status = text(status, status_len, "status")?;
        let output = json_value(output_json, output_len, "output")?;
        g.inner
            .finished(run_id, node_id, instance, status, output.as_ref());
        Ok(())
    })
}

/// The `before` gate's question for a call (`run_id`, `kind`, `node_id`, `name` (NULL:
/// derived from the id), UTF-8): `*out` receives `{kind, repeats, firstSeq, lastSeq,
/// fingerprint}` (plus `period`, `laps` for a cycle) as JSON when the guard holds the call,
/// `ptr` NULL otherwise. One thread at a time.
///
/// # Safety
/// `guard_ptr` is live; text pointers point to their lengths' bytes or are NULL; `out` is valid.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn gm_loop_guard_consult_before(
    guard_ptr: *mut gm_loop_guard,
    run_id: *const c_char,
    run_id_len: usize,
    kind: *const c_char,
    kind_len: usize,
    node_id: *const c_char,
    node_id_len: usize,
    name: *const c_char,
    name_len: usize,
    attached: bool,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let g = handle_mut(guard_ptr, "guard")?;
        let run_id = required_text(run_id, run_id_len, "run_id")?;
        let kind = required_text(kind, kind_len, "kind")?;
        let node_id = required_text(node_id, node_id_len, "node_id")?;
        let name = text(name, name_len, "name")?;
        if out.is_null() {
            return Err(err(gm_code::GM_NULL_ARGUMENT, "out: NULL"));
        }
        let held = g
            .inner
            .consult_before(run_id, kind, node_id, name, attached)
            .map(|v| value_text(&v));
        put(out, maybe(held), "out")
    })
}

/// Frees a loop guard; accepts NULL.
///
/// # Safety
/// `guard_ptr` is NULL or came from `gm_loop_guard_new` and is not used again.
#[no_mangle]
pub unsafe extern "C" fn gm_loop_guard_free(guard_ptr: *mut gm_loop_guard) {
    guard_value((), || {
        if !guard_ptr.is_null() {
            drop(Box::from_raw(guard_ptr));
        }
    })
}
