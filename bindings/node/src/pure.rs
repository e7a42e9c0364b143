//! The core's pure functions, exported as they are (JSON text in, JSON text out), so the
//! package's API and the conformance vectors reach the very code the session runs.

use graphmind_core::config;
use graphmind_core::edit_input;
use graphmind_core::json::{self, Value};
use graphmind_core::redact::{HideSwitches, Redactor};
use graphmind_core::surface::options::{self, Host};
use graphmind_core::surface::pure::{self, LoopGuardFields, PureError, StandaloneLoopGuard};
use graphmind_core::{canonical, fingerprint, llm, shrink, smart};
use napi::bindgen_prelude::*;
use napi::JsString;
use napi_derive::napi;

fn parse(text: &str) -> Result<Value> {
    json::parse_str(text).map_err(|e| Error::from_reason(format!("graphmind: invalid JSON: {e}")))
}

fn parse_opt(text: Option<String>) -> Result<Option<Value>> {
    text.map(|t| parse(&t)).transpose()
}

fn text(v: &Value) -> String {
    json::to_string(v)
}

fn keys(ignore: &Option<Vec<String>>) -> Vec<&str> {
    pure::ignore_keys(ignore.as_deref())
}

fn pure_error(e: PureError) -> Error {
    Error::from_reason(format!("graphmind: {e}"))
}

/// The session option names the core reads, as JavaScript spells them (the core's option
/// table, with its aliases): what `createSession` hands over.
#[napi]
pub fn option_names() -> Vec<&'static str> {
    options::names(Host::Node)
}

/// The canonical JSON text of a value (sorted keys by UTF-16 units, `_meta` ignored unless
/// `ignoreKeys` says otherwise).
#[napi]
pub fn canonical_json(
    value_json: JsString<'_>,
    ignore_keys: Option<Vec<String>>,
) -> Result<String> {
    crate::text::with_js_text(&value_json, |text| {
        canonical::canonical_json_text(text, &keys(&ignore_keys)).map_err(invalid_json)
    })?
}

fn invalid_json(e: json::ParseError) -> Error {
    Error::from_reason(format!("graphmind: invalid JSON from the binding: {e}"))
}

/// The canonical text of a call (`nodeId` + input), as the loop guard hashes it.
#[napi]
pub fn canonical_call(
    node_id_json: String,
    input_json: Option<String>,
    ignore_keys: Option<Vec<String>>,
) -> Result<String> {
    let node_id = js_str(&node_id_json)?;
    let input = parse_opt(input_json)?;
    Ok(pure::canonical_call(
        &node_id,
        input.as_ref(),
        ignore_keys.as_deref(),
    ))
}

/// A node id handed over as JSON text, so a lone surrogate in it survives.
fn js_str(text: &str) -> Result<graphmind_core::json::JsStr> {
    match parse(text)? {
        Value::String(s) => Ok(s),
        _ => Err(Error::from_reason("graphmind: a node id is a string")),
    }
}

/// The fingerprint of a call: 32 hex characters of SHA-256 over its canonical text.
#[napi]
pub fn fingerprint(
    node_id_json: String,
    input_json: Option<JsString<'_>>,
    ignore_keys: Option<Vec<String>>,
) -> Result<String> {
    let node_id = js_str(&node_id_json)?;
    let keys = keys(&ignore_keys);
    match input_json {
        // The text as JSON.stringify wrote it is hashed without being parsed.
        Some(text) => crate::text::with_js_text(&text, |bytes| {
            fingerprint::fingerprint_text_js(&node_id, Some(bytes), &keys).map_err(invalid_json)
        })?,
        None => fingerprint::fingerprint_text_js(&node_id, None, &keys).map_err(invalid_json),
    }
}

/// Canonical JSON (RFC 8785 for JSON input) of raw JSON bytes parsed by the core's own
/// parser (numbers and lone surrogates exactly as written); `null` when they do not parse.
#[napi]
pub fn canonicalize_text(bytes: Buffer) -> Option<String> {
    json::parse(&bytes)
        .ok()
        .map(|v| canonical::canonical_json_with(&v, &[]))
}

/// Whether the core's strict parser accepts these bytes (`null`: rejected).
#[napi]
pub fn parse_text(bytes: Buffer) -> Option<String> {
    json::parse(&bytes).ok().map(|v| text(&v))
}

/// A double as ECMAScript spells it (the core's number writer).
#[napi]
pub fn format_number(value: f64) -> String {
    text(&Value::from(value))
}

/// The resolved configuration (`Config::to_json`) for options, an environment and a flavor.
#[napi]
pub fn resolve_config(options_json: String, env_json: String, flavor: String) -> Result<String> {
    let (options, env) = (parse(&options_json)?, parse(&env_json)?);
    let flavor = pure::flavor(&flavor).unwrap_or(config::SdkFlavor::Node);
    Ok(text(&pure::resolve_config(&options, &env, flavor)))
}

/// What `serializePayload` returns.
#[napi(object)]
pub struct SerializedPayload {
    pub json: String,
    pub truncated: bool,
    pub original_bytes: f64,
}

/// Serializes a payload within `maxBytes` (default `MAX_PAYLOAD_BYTES`), shrinking it by
/// the reference's tiers when needed.
#[napi]
pub fn serialize_payload(
    payload_json: String,
    max_bytes: Option<f64>,
    event_type: Option<String>,
) -> Result<SerializedPayload> {
    let payload = parse(&payload_json)?;
    let max = max_bytes
        .map(|m| m as usize)
        .unwrap_or(shrink::MAX_PAYLOAD_BYTES);
    let out = shrink::serialize_payload(&payload, max, event_type.as_deref());
    Ok(SerializedPayload {
        json: out.json,
        truncated: out.truncated,
        original_bytes: out.original_bytes as f64,
    })
}

/// The result of one redaction.
#[napi(object)]
pub struct Redacted {
    /// `unchanged`, `redacted`, `failed` or `dropped`.
    pub outcome: String,
    /// The payload to send (JSON), `null` when dropped.
    pub payload: Option<String>,
}

/// The coarse redactor (the four hide switches), stateful across one run's events.
#[napi]
pub struct NativeRedactor {
    inner: Redactor,
}

#[napi]
impl NativeRedactor {
    /// A redactor for `{hideInputs, hideOutputs, hideToolArgs, hideToolResults}`.
    #[napi(constructor)]
    pub fn new(
        hide_inputs: bool,
        hide_outputs: bool,
        hide_tool_args: bool,
        hide_tool_results: bool,
    ) -> Self {
        let switches = HideSwitches {
            inputs: hide_inputs,
            outputs: hide_outputs,
            tool_args: hide_tool_args,
            tool_results: hide_tool_results,
        };
        NativeRedactor {
            inner: Redactor::new(switches),
        }
    }

    /// Redacts one event's payload.
    #[napi]
    pub fn redact(
        &mut self,
        event_type: String,
        run_id: String,
        node_kind: Option<String>,
        payload_json: String,
    ) -> Result<Redacted> {
        let mut payload = parse(&payload_json)?;
        let (name, keep) = pure::redact(
            &mut self.inner,
            &event_type,
            &run_id,
            node_kind.as_deref(),
            &mut payload,
        );
        Ok(Redacted {
            outcome: name.into(),
            payload: keep.then(|| text(&payload)),
        })
    }
}

/// The refusal code of a proposed edited value (placeholder or truncation marker), if any.
#[napi]
pub fn proposed_value_refusal(value_json: String) -> Result<Option<String>> {
    Ok(edit_input::proposed_value_refusal(&parse(&value_json)?).map(|c| c.as_str().to_string()))
}

/// A refusal `{code, message}` when the value carries a prototype-polluting key.
#[napi]
pub fn prototype_key_refusal(value_json: String) -> Result<Option<String>> {
    Ok(pure::prototype_key_verdict(&parse(&value_json)?).map(|v| text(&v)))
}

/// A validator's verdict, normalised (`{ok:true,value}` / `{ok:false,code,message}`).
#[napi]
pub fn normalize_validation(result_json: Option<String>) -> Result<String> {
    let result = parse_opt(result_json)?;
    Ok(text(
        &edit_input::normalize_validation(result.as_ref()).to_value(),
    ))
}

/// A short message made safe to show (JSON string, or `null`).
#[napi]
pub fn sanitize_short_text(message_json: Option<String>) -> Result<Option<String>> {
    let message = parse_opt(message_json)?;
    Ok(edit_input::sanitize_short_text(message.as_ref()).map(|s| text(&Value::String(s))))
}

/// Tool arguments edited at a pause merged into the live ones, as a validation verdict.
#[napi]
pub fn merge_tool_input(
    live_json: Option<String>,
    proposed_json: Option<String>,
    input_hidden: bool,
) -> Result<String> {
    let (live, proposed) = (parse_opt(live_json)?, parse_opt(proposed_json)?);
    Ok(text(&pure::merge_verdict(
        live.as_ref(),
        proposed.as_ref(),
        input_hidden,
    )))
}

/// The error-result shape of a tool result (`isError`, `success`, ...), if error-shaped.
#[napi]
pub fn error_result_shape(result_json: String) -> Result<Option<String>> {
    Ok(smart::error_result_shape(&parse(&result_json)?).map(|s| s.as_str().to_string()))
}

/// `{finishReason, toolCalls, unparsed}` when an LLM result was truncated mid tool call.
#[napi]
pub fn truncated_tool_call(result_json: String) -> Result<Option<String>> {
    Ok(pure::truncated_tool_call(&parse(&result_json)?).map(|v| text(&v)))
}

/// Whether a raw `GRAPHMIND_BREAK_ON_*` value turns the rule on.
#[napi]
pub fn parse_break_on(raw: Option<String>) -> bool {
    smart::parse_break_on(raw.as_deref())
}

/// The key that makes two error texts "the same error" (JSON string in and out).
#[napi]
pub fn error_text_key(text_json: String) -> Result<String> {
    match pure::error_text_key(&parse(&text_json)?) {
        Some(key) => Ok(text(&key)),
        None => Err(Error::from_reason("graphmind: errorTextKey takes a string")),
    }
}

/// A provider's finish reason normalised.
#[napi]
pub fn normalize_finish_reason(
    raw_json: Option<String>,
    has_tool_calls: bool,
) -> Result<Option<String>> {
    let raw = parse_opt(raw_json)?;
    Ok(llm::normalize_finish_reason(raw.as_ref(), has_tool_calls).map(|r| r.as_str().to_string()))
}

/// One recorded tool call `{id, name, args}` (JSON), or `null`.
#[napi]
pub fn tool_call(
    id_json: Option<String>,
    name_json: Option<String>,
    args_json: Option<String>,
) -> Result<Option<String>> {
    let (id, name, args) = (
        parse_opt(id_json)?,
        parse_opt(name_json)?,
        parse_opt(args_json)?,
    );
    Ok(llm::tool_call(id.as_ref(), name.as_ref(), args.as_ref()).map(|v| text(&v)))
}

/// The hash of a tool schema.
#[napi]
pub fn schema_hash(definition_json: String) -> Result<String> {
    Ok(llm::schema_hash(&parse(&definition_json)?))
}

/// A tool definition with secrets and noise removed, as recorded.
#[napi]
pub fn sanitize_tool_definition(definition_json: String) -> Result<String> {
    Ok(text(&llm::sanitize_tool_definition(&parse(
        &definition_json,
    )?)))
}

/// Token usage from a provider's raw usage object (`anthropic`, `openai-chat`, ...).
#[napi]
pub fn provider_usage(provider: String, raw_json: String) -> Result<Option<String>> {
    let usage = pure::provider_usage(&provider, &parse(&raw_json)?).map_err(pure_error)?;
    Ok(usage.map(|v| text(&v)))
}

/// What a complete answer of `api` (`openai-chat`, `anthropic`, ...: the codec names)
/// records, as the codec's decode path reads it: `{"output": ..., "usage": ... | null}`.
#[napi]
pub fn codec_decode(api_name: String, response_json: String) -> Result<String> {
    let (output, usage) =
        pure::codec_decode(&api_name, &parse(&response_json)?).map_err(pure_error)?;
    let mut out = json::Map::with_capacity(2);
    out.insert("output", output);
    out.insert("usage", usage.unwrap_or(Value::Null));
    Ok(text(&Value::Object(out)))
}

/// What `node.started.input` of a call of `api` records of `request` (the request codec).
#[napi]
pub fn codec_request_input(api_name: String, request_json: String) -> Result<String> {
    let input = pure::codec_request_input(&api_name, &parse(&request_json)?).map_err(pure_error)?;
    Ok(text(&input))
}

/// The allow-listed sampling parameter names, in order.
#[napi]
pub fn sampling_param_keys() -> Vec<String> {
    pure::sampling_param_keys()
        .into_iter()
        .map(String::from)
        .collect()
}

/// The allow-listed sampling parameters of a request body.
#[napi]
pub fn pick_params(source_json: String) -> Result<String> {
    Ok(text(&Value::Object(llm::pick_params(&parse(
        &source_json,
    )?))))
}

/// The core's constants a binding needs.
#[napi(object)]
pub struct Constants {
    pub max_payload_bytes: f64,
    pub redacted: String,
    pub unserializable: String,
    pub circular: String,
    pub max_value_depth: f64,
    pub max_refusal_message: f64,
    pub default_ready_timeout_ms: f64,
}

/// The core's constants.
#[napi]
pub fn constants() -> Constants {
    Constants {
        max_payload_bytes: shrink::MAX_PAYLOAD_BYTES as f64,
        redacted: graphmind_core::redact::REDACTED.into(),
        unserializable: canonical::UNSERIALIZABLE_MARKER.into(),
        circular: canonical::CIRCULAR_MARKER.into(),
        max_value_depth: shrink::depth::MAX_VALUE_DEPTH as f64,
        max_refusal_message: edit_input::MAX_REFUSAL_MESSAGE as f64,
        default_ready_timeout_ms: config::DEFAULT_READY_TIMEOUT_MS as f64,
    }
}

/// What an LLM node records for a Vercel AI SDK `doGenerate` result (the core's rule).
#[napi]
pub fn ai_sdk_step_output(result_json: String) -> Result<String> {
    Ok(text(&llm::ai_sdk_step_output(&parse(&result_json)?)))
}

/// What `graphmind serve` resolves from its flags and environment (`ServerConfig::to_json`),
/// or `{error: "pauseOnError" | "days", message}` for a flag it refuses.
#[napi]
pub fn resolve_server_config(flags_json: String, env_json: String) -> Result<String> {
    let (flags, env) = (parse(&flags_json)?, parse(&env_json)?);
    Ok(text(&pure::resolve_server_config(&flags, &env)))
}

/// The loop guard on its own (the session runs the same one at every `before` gate), for
/// the loop-guard conformance sequences.
#[napi]
pub struct NativeLoopGuard {
    inner: StandaloneLoopGuard,
}

#[napi]
impl NativeLoopGuard {
    /// A guard with the default configuration, overridden by `{threshold, allowNodes,
    /// ignoreKeys, kinds, detect}` when given (`detect`: the opt-in detector names; an
    /// unknown one throws).
    #[napi(constructor)]
    pub fn new(
        threshold: Option<u32>,
        allow_nodes: Option<Vec<String>>,
        ignore_keys: Option<Vec<String>>,
        kinds: Option<Vec<String>>,
        detect: Option<Vec<String>>,
    ) -> napi::Result<Self> {
        let fields = LoopGuardFields {
            threshold,
            allow_nodes,
            ignore_keys,
            kinds,
            detect,
        };
        let inner = StandaloneLoopGuard::new(fields)
            .map_err(|e| napi::Error::from_reason(e.to_string()))?;
        Ok(NativeLoopGuard { inner })
    }

    /// A node started: returns its fingerprint (`null` when the guard does not watch it).
    /// `unreadable`: the input could not be read; `input_json` `null`: no input.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn started(
        &mut self,
        run_id: String,
        node_id: String,
        kind: String,
        name: Option<String>,
        instance_id: Option<String>,
        input_json: Option<String>,
        unreadable: bool,
        seq: u32,
        attached: bool,
    ) -> Result<Option<String>> {
        let input = parse_opt(input_json)?;
        Ok(self.inner.started(
            &run_id,
            &node_id,
            &kind,
            name.as_deref(),
            instance_id.as_deref(),
            input.as_ref(),
            unreadable,
            u64::from(seq),
            attached,
        ))
    }

    /// A node failed (`name` and `message` as JSON strings, or `null`).
    #[napi]
    pub fn errored(
        &mut self,
        run_id: String,
        node_id: String,
        instance_id: Option<String>,
        name_json: Option<String>,
        message_json: Option<String>,
    ) -> Result<()> {
        let (name, message) = (parse_opt(name_json)?, parse_opt(message_json)?);
        self.inner.errored(
            &run_id,
            &node_id,
            instance_id.as_deref(),
            name.as_ref(),
            message.as_ref(),
        );
        Ok(())
    }

    /// A node finished with `status` and `output` (JSON, `null`: none).
    #[napi]
    pub fn finished(
        &mut self,
        run_id: String,
        node_id: String,
        instance_id: Option<String>,
        status: Option<String>,
        output_json: Option<String>,
    ) -> Result<()> {
        let output = parse_opt(output_json)?;
        self.inner.finished(
            &run_id,
            &node_id,
            instance_id.as_deref(),
            status.as_deref(),
            output.as_ref(),
        );
        Ok(())
    }

    /// The `before` gate's question: `{kind, repeats, firstSeq, lastSeq, fingerprint}` when
    /// the guard holds the call, else `null`.
    #[napi]
    pub fn consult_before(
        &mut self,
        run_id: String,
        kind: String,
        node_id: String,
        name: Option<String>,
        attached: bool,
    ) -> Option<String> {
        self.inner
            .consult_before(&run_id, &kind, &node_id, name.as_deref(), attached)
            .map(|v| text(&v))
    }
}

/// An injected value lifted into the result `method` answers with (the core's MCP rule,
/// `graphmind_core::mcp::lift_injected`); `params_json` gives a resource its `uri`.
#[napi]
pub fn mcp_lift_injected(
    method: String,
    params_json: Option<String>,
    value_json: String,
) -> Result<String> {
    let params = parse_opt(params_json)?;
    Ok(text(&graphmind_core::mcp::lift_injected(
        &method,
        params.as_ref(),
        parse(&value_json)?,
    )))
}

/// The gated view of an MCP request a low-level `Server` received
/// (`graphmind_core::mcp::gated_request`): `{nodeId, kind, name, input, editable}` as JSON,
/// or `null` for a method that passes untouched (`tools/list`, `ping`, ...).
#[napi]
pub fn mcp_gated_request(method: String, params_json: Option<String>) -> Result<Option<String>> {
    let params = parse_opt(params_json)?;
    Ok(
        graphmind_core::mcp::gated_request(&method, params.as_ref()).map(|g| {
            let mut m = json::Map::new();
            m.insert("nodeId", Value::from(g.node_id.as_str()));
            m.insert("kind", Value::from(g.kind.as_str()));
            m.insert("name", Value::from(g.name.as_str()));
            m.insert("input", g.input);
            m.insert("editable", Value::Bool(g.editable));
            text(&Value::Object(m))
        }),
    )
}

// -- tool-argument edits (`core::tool_edit`): the client helpers' rules ---------------------

fn compile_schema(schema: &Value) -> Result<graphmind_core::edit_schema::InputSchema> {
    graphmind_core::edit_schema::InputSchema::compile(schema)
        .map_err(|e| Error::from_reason(format!("graphmind: {e}")))
}

/// The whole check of an edited tool input, as a held gate runs it (`validateInput`): the
/// placeholder guard, the pollution paths, the merge into `live` (none when `inputHidden`),
/// then `schema` (a JSON Schema, `null`: none). A verdict `{ok, value}` / `{ok, code,
/// message}`; an invalid schema throws.
#[napi]
pub fn validate_input(
    live_json: Option<String>,
    proposed_json: Option<String>,
    input_hidden: bool,
    schema_json: Option<String>,
) -> Result<String> {
    let (live, proposed) = (parse_opt(live_json)?, parse_opt(proposed_json)?);
    let schema = parse_opt(schema_json)?
        .map(|s| compile_schema(&s))
        .transpose()?;
    let verdict = graphmind_core::tool_edit::validate_edit(
        live.as_ref(),
        proposed.as_ref(),
        input_hidden,
        schema.as_ref(),
    );
    Ok(text(&verdict.to_value()))
}

/// The arguments a decision `{action, input?}` hands the call (JSON), or `null`.
#[napi]
pub fn edited_args(decision_json: String) -> Result<Option<String>> {
    let decision = parse(&decision_json)?;
    Ok(graphmind_core::tool_edit::edited_args(&decision).map(text))
}

/// A host validator's issues (zod, Standard Schema) as the `schema` refusal verdict, its
/// message naming the place and the problem, never a value.
#[napi]
pub fn issues_refusal(issues_json: String, value_json: Option<String>) -> Result<String> {
    let (issues, value) = (parse(&issues_json)?, parse_opt(value_json)?);
    Ok(text(
        &graphmind_core::tool_edit::issues_verdict(&issues, value.as_ref()).to_value(),
    ))
}

/// A tool's JSON Schema, compiled once (`toolSchemaCheck`).
#[napi]
pub struct NativeInputSchema {
    inner: graphmind_core::edit_schema::InputSchema,
}

#[napi]
impl NativeInputSchema {
    /// Compiles `schema` (JSON text); throws when it is not a valid JSON Schema.
    #[napi(constructor)]
    pub fn new(schema_json: String) -> Result<Self> {
        Ok(NativeInputSchema {
            inner: compile_schema(&parse(&schema_json)?)?,
        })
    }

    /// The verdict on `value` (JSON): itself when it matches, else the `schema` refusal.
    #[napi]
    pub fn check(&self, value_json: String) -> Result<String> {
        let value = parse(&value_json)?;
        Ok(text(
            &graphmind_core::tool_edit::schema_verdict(&self.inner, &value).to_value(),
        ))
    }
}
