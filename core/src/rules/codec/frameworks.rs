//! The framework shapes the integrations read: a LangChain `LLMResult`, a ruby_llm
//! `Message` (as the Ruby skin hands it over: `{role, content, tool_calls, model_id,
//! input_tokens, output_tokens, ...}`), a Vercel AI SDK `doGenerate` result and its
//! `doStream` parts.

use super::{delta, get, items, params_and_stream, put_finish, text, Api, Decoded, Delta};
use crate::event::ErrorInfo;
use crate::event::TokenChannel;
use crate::json::{JsStr, Map, Value};
use crate::llm;

/// `node.started.input` of a framework call: the prompt (`messages`, `prompts` or the AI
/// SDK's `prompt`), the model and the sampling parameters under the framework's names.
pub fn request_input(api: Api, request: &Value) -> Map {
    let r = Some(request);
    let mut out = Map::with_capacity(6);
    if api != Api::AiSdk {
        out.insert("provider", Value::from(api.provider()));
    }
    super::copy_given(&mut out, request, &["model"]);
    for key in ["prompt", "messages", "prompts"] {
        if let Some(v) = get(r, key) {
            let v = if api == Api::LangChain {
                langchain_plain(v)
            } else {
                v.clone()
            };
            out.insert(key, v);
        }
    }
    params_and_stream(&mut out, request);
    out
}

// -- LangChain ---------------------------------------------------------------------------

/// The largest depth [`langchain_plain`] unwraps (deeper values are kept as they are).
const MAX_PLAIN_DEPTH: usize = 64;

/// A LangChain.js value as the Python shapes the codec reads: a serialized `Serializable`
/// (`{lc: 1, type: "constructor", id: [..., "AIMessageChunk"], kwargs}`, what
/// `JSON.stringify` makes of a message) becomes its `kwargs` with `type` the message type
/// (`human`, `ai`, `system`, `tool`, ...); the camelCase fields of an `LLMResult`
/// (`llmOutput`, `generationInfo`, `tokenUsage`) get their snake_case names.
pub fn langchain_plain(value: &Value) -> Value {
    plain_at(value, 0)
}

fn plain_at(value: &Value, depth: usize) -> Value {
    if depth >= MAX_PLAIN_DEPTH {
        return value.clone();
    }
    match value {
        Value::Array(list) => Value::Array(list.iter().map(|v| plain_at(v, depth + 1)).collect()),
        Value::Object(map) => {
            let serialized = map.get("lc").is_some_and(|v| v.as_f64().is_some())
                && map.get("type").and_then(Value::as_str) == Some("constructor");
            if let (true, Some(Value::Object(kwargs))) = (serialized, map.get("kwargs")) {
                let mut out = match plain_at(&Value::Object(kwargs.clone()), depth + 1) {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                let class = items(Some(value), "id").last().and_then(Value::as_str);
                if let (false, Some(class)) = (out.contains_key("type"), class) {
                    out.insert("type", Value::from(message_type(class).as_str()));
                }
                return Value::Object(out);
            }
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map.iter() {
                let key = match k.as_str() {
                    Some("llmOutput") => "llm_output".into(),
                    Some("generationInfo") => "generation_info".into(),
                    Some("tokenUsage") => "token_usage".into(),
                    _ => k.clone(),
                };
                out.insert(key, plain_at(v, depth + 1));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// `HumanMessage` -> `human`, `AIMessageChunk` -> `ai`, `ToolMessage` -> `tool`.
fn message_type(class: &str) -> String {
    let base = class
        .strip_suffix("MessageChunk")
        .or_else(|| class.strip_suffix("Message"))
        .unwrap_or(class);
    base.to_lowercase()
}

fn first_generation(result: &Value) -> Option<&Value> {
    items(Some(result), "generations")
        .iter()
        .find_map(|batch| batch.as_array().and_then(|b| b.first()))
}

/// The provider's own reason: the message's `response_metadata`, else the generation's
/// `generation_info` (`finish_reason`, `stop_reason` or `finishReason`).
fn langchain_reason(generation: Option<&Value>) -> Option<&Value> {
    let sources = [
        get(get(generation, "message"), "response_metadata"),
        get(generation, "generation_info"),
    ];
    sources.into_iter().flatten().find_map(|source| {
        ["finish_reason", "stop_reason", "finishReason"]
            .into_iter()
            .find_map(|k| {
                get(Some(source), k).filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            })
    })
}

/// `AIMessage.tool_calls` (arguments parsed) and `invalid_tool_calls` (text kept).
fn langchain_calls(message: Option<&Value>) -> Vec<Value> {
    let mut calls: Vec<Value> = items(message, "tool_calls")
        .iter()
        .filter_map(|c| {
            llm::tool_call(
                get(Some(c), "id"),
                get(Some(c), "name"),
                get(Some(c), "args"),
            )
        })
        .collect();
    for c in items(message, "invalid_tool_calls") {
        let args = get(Some(c), "args").filter(|a| a.as_str().is_some());
        let Some(mut recorded) = llm::tool_call(get(Some(c), "id"), get(Some(c), "name"), args)
        else {
            continue;
        };
        if let (Some(m), Some(a)) = (recorded.as_object_mut(), args) {
            if !m.contains_key("inputText") && a.as_str().is_some_and(|s| !s.is_empty()) {
                m.insert("input", Value::Null);
                m.insert("inputText", a.clone());
            }
        }
        calls.push(recorded);
    }
    calls
}

/// An `LLMResult`: every generation's text joined, the first message's tool calls and
/// finish reason, the model; usage from `usage_metadata`, else `llm_output`, else the
/// message's `response_metadata.usage`.
/// A bare message (`AIMessage`, an injected reply) is read as a result of one generation.
pub fn langchain_decode(result: &Value) -> Decoded {
    let plain = langchain_plain(result);
    decode_plain(&plain)
}

fn decode_plain(result: &Value) -> Decoded {
    if get(Some(result), "generations").is_none() && get(Some(result), "content").is_some() {
        let text = get(Some(result), "content")
            .filter(|c| c.as_str().is_some())
            .cloned()
            .unwrap_or_else(|| Value::from(""));
        let mut generation = Map::with_capacity(2);
        generation.insert("text", text);
        generation.insert("message", result.clone());
        let mut wrapped = Map::with_capacity(1);
        wrapped.insert(
            "generations",
            Value::Array(vec![Value::Array(vec![Value::Object(generation)])]),
        );
        return decode_plain(&Value::Object(wrapped));
    }
    let r = Some(result);
    let mut out = Map::with_capacity(5);
    let mut joined = String::new();
    for batch in items(r, "generations") {
        for generation in batch.as_array().map_or(&[][..], Vec::as_slice) {
            if let Some(t) = get(Some(generation), "text").and_then(Value::as_js_str) {
                joined.push_str(&t.to_string_lossy());
            }
        }
    }
    out.insert("text", Value::from(joined.as_str()));
    let generation = first_generation(result);
    let message = get(generation, "message");
    let calls = langchain_calls(message);
    let has_calls = !calls.is_empty();
    if has_calls {
        out.insert("toolCalls", Value::Array(calls));
    }
    put_finish(&mut out, langchain_reason(generation), has_calls);
    let mut usage = get(message, "usage_metadata").and_then(llm::langchain_usage);
    if let Some(llm_output) = get(r, "llm_output").filter(|v| v.as_object().is_some()) {
        if usage.is_none() {
            let raw = get(Some(llm_output), "token_usage")
                .or_else(|| get(Some(llm_output), "usage"))
                .unwrap_or(llm_output);
            usage = llm::langchain_usage(raw);
        }
        if let Some(model) =
            text(Some(llm_output), "model_name").or_else(|| text(Some(llm_output), "model"))
        {
            out.insert("model", Value::String(model.clone()));
        }
    }
    if usage.is_none() {
        usage = get(get(message, "response_metadata"), "usage").and_then(llm::langchain_usage);
    }
    Decoded {
        output: out,
        usage,
        response_id: None,
    }
}

// -- ruby_llm ------------------------------------------------------------------------------

/// A ruby_llm `Message`: its text, the tool calls it requested (`tool_calls` as a map of
/// id -> `{id, name, arguments}` or a list), the model; usage from its token counts
/// (`tokens: {input, output, cached, ...}` or the flat `input_tokens` / `output_tokens` /
/// `cached_tokens` / `cache_creation_tokens` / `thinking_tokens`).
pub fn ruby_llm_decode(message: &Value) -> Decoded {
    let m = Some(message);
    let mut out = Map::with_capacity(5);
    let content = get(m, "content");
    let said = content
        .and_then(Value::as_js_str)
        .cloned()
        .or_else(|| text(content, "text").cloned())
        .unwrap_or_default();
    out.insert("text", Value::String(said));
    let raw_calls: Vec<&Value> = match get(m, "tool_calls") {
        Some(Value::Object(map)) => map.values().collect(),
        Some(Value::Array(list)) => list.iter().collect(),
        _ => Vec::new(),
    };
    let calls: Vec<Value> = raw_calls
        .into_iter()
        .filter_map(|c| {
            llm::tool_call(
                get(Some(c), "id"),
                get(Some(c), "name"),
                get(Some(c), "arguments"),
            )
        })
        .collect();
    let has_calls = !calls.is_empty();
    if has_calls {
        out.insert("toolCalls", Value::Array(calls));
    }
    put_finish(
        &mut out,
        get(m, "finish_reason").or_else(|| get(m, "stop_reason")),
        has_calls,
    );
    if let Some(model) = text(m, "model_id") {
        out.insert("model", Value::String(model.clone()));
    }
    let usage = match get(m, "tokens") {
        Some(tokens) => llm::ruby_llm_usage(tokens),
        None => {
            let mut flat = Map::with_capacity(5);
            for (from, to) in [
                ("input_tokens", "input"),
                ("output_tokens", "output"),
                ("cached_tokens", "cached"),
                ("cache_creation_tokens", "cache_creation"),
                ("thinking_tokens", "thinking"),
            ] {
                if let Some(v) = get(m, from) {
                    flat.insert(to, v.clone());
                }
            }
            llm::ruby_llm_usage(&Value::Object(flat))
        }
    };
    Decoded {
        output: out,
        usage,
        response_id: None,
    }
}

// -- AI SDK ----------------------------------------------------------------------------------

/// A `doGenerate` result (see [`llm::ai_sdk_step_output`]), usage split out.
pub fn ai_sdk_decode(result: &Value) -> Decoded {
    let mut output = match llm::ai_sdk_step_output(result) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let usage = output.remove("usage");
    Decoded {
        output,
        usage,
        response_id: None,
    }
}

// -- streams of the frameworks ---------------------------------------------------------------

/// A framework's stream: LangChain tokens (`{text}` chunks or strings), ruby_llm chunks
/// (`{content}`), AI SDK stream parts (`text-delta`, `reasoning-delta`, `tool-input-delta`,
/// `tool-call`, `finish`).
#[derive(Debug)]
pub struct TextStream {
    api: Api,
    pub(crate) text: String,
    calls: Vec<Value>,
    /// AI SDK provider-executed tool parts.
    builtin: crate::llm_builtin::AiSdkBuiltin,
    finish: Option<Value>,
    /// The first AI SDK `{type: "error", error}` part's error.
    error: Option<Value>,
}

impl TextStream {
    pub(crate) fn new(api: Api) -> TextStream {
        TextStream {
            api,
            text: String::new(),
            calls: Vec::new(),
            builtin: Default::default(),
            finish: None,
            error: None,
        }
    }

    /// The error an AI SDK `error` part carried (the provider failed mid-stream; the SDK
    /// hands it to `onError` and the stream itself ends normally): the first one.
    pub(crate) fn error(&self) -> Option<ErrorInfo> {
        self.error.as_ref().map(error_info)
    }

    pub(crate) fn push(&mut self, chunk: &Value, deltas: &mut Vec<Delta>) {
        let c = Some(chunk);
        if let Value::String(s) = chunk {
            if !s.is_empty() {
                self.text.push_str(&s.to_string_lossy());
                deltas.push((TokenChannel::Text, s.clone()));
            }
            return;
        }
        if self.api == Api::LangChain {
            self.push_langchain(chunk, deltas);
            return;
        }
        if self.api != Api::AiSdk {
            let piece = get(c, "text").or_else(|| get(c, "content"));
            if let Some(t) = delta(deltas, TokenChannel::Text, piece) {
                self.text.push_str(&t.to_string_lossy());
            }
            return;
        }
        if self.builtin.take(chunk) {
            return;
        }
        // AI SDK V2+ parts carry `delta`; V1 `textDelta`.
        let piece = get(c, "delta").or_else(|| get(c, "textDelta"));
        match get(c, "type").and_then(Value::as_str) {
            Some("text-delta") | Some("text") => {
                if let Some(t) = delta(deltas, TokenChannel::Text, piece.or_else(|| get(c, "text")))
                {
                    self.text.push_str(&t.to_string_lossy());
                }
            }
            Some("reasoning-delta") | Some("reasoning") => {
                delta(
                    deltas,
                    TokenChannel::Reasoning,
                    piece.or_else(|| get(c, "text")),
                );
            }
            Some("tool-input-delta") | Some("tool-call-delta") => {
                delta(
                    deltas,
                    TokenChannel::ToolArgs,
                    piece.or_else(|| get(c, "argsTextDelta")),
                );
            }
            Some("tool-call") => self.calls.extend(llm::tool_call(
                get(c, "toolCallId"),
                get(c, "toolName"),
                get(c, "input").or_else(|| get(c, "args")),
            )),
            Some("finish") => self.finish = Some(chunk.clone()),
            Some("error") if self.error.is_none() => {
                self.error = Some(get(c, "error").cloned().unwrap_or(Value::Null));
            }
            _ => {}
        }
    }

    /// A LangChain.js token: `{text}` or a `ChatGenerationChunk` (`{text, message}`, the
    /// message serialized or plain) whose `tool_call_chunks` carry the arguments as they
    /// stream (`tool-args`).
    fn push_langchain(&mut self, chunk: &Value, deltas: &mut Vec<Delta>) {
        let plain = langchain_plain(chunk);
        let c = Some(&plain);
        let message = get(c, "message");
        let piece = get(c, "text")
            .or_else(|| get(c, "content"))
            .or_else(|| get(message, "content").filter(|v| v.as_str().is_some()));
        if let Some(t) = delta(deltas, TokenChannel::Text, piece) {
            self.text.push_str(&t.to_string_lossy());
        }
        let calls = get(message, "tool_call_chunks").or_else(|| get(c, "tool_call_chunks"));
        for call in calls
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
        {
            delta(deltas, TokenChannel::ToolArgs, get(Some(call), "args"));
        }
    }

    pub(crate) fn finish(&self, final_message: Option<&Value>) -> Decoded {
        if let (Some(message), false) = (final_message, self.api == Api::AiSdk) {
            let mut decoded = super::decode_response(self.api, message);
            if decoded
                .output
                .get("text")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                decoded
                    .output
                    .insert("text", Value::from(self.text.as_str()));
            }
            return decoded;
        }
        let mut out = Map::with_capacity(5);
        out.insert("text", Value::from(self.text.as_str()));
        let has_calls = !self.calls.is_empty();
        if has_calls {
            out.insert("toolCalls", Value::Array(self.calls.clone()));
        }
        self.builtin.put(&mut out);
        let finish = self.finish.as_ref();
        let raw_reason = match get(finish, "finishReason") {
            Some(obj @ Value::Object(_)) => obj.get("unified"),
            other => other,
        };
        put_finish(&mut out, raw_reason, has_calls);
        Decoded {
            output: out,
            usage: get(finish, "usage").and_then(llm::ai_sdk_usage),
            response_id: None,
        }
    }
}

/// A framework reply saying `text`: a LangChain `AIMessage` / ruby_llm `Message` as
/// `{role: "assistant", content}`, an AI SDK result as `{content: [{type: "text", text}],
/// finishReason: "stop"}`.
pub fn reply_with_text(api: Api, said: &JsStr) -> Value {
    let mut out = Map::with_capacity(3);
    if api == Api::AiSdk {
        let mut part = Map::with_capacity(2);
        part.insert("type", Value::from("text"));
        part.insert("text", Value::String(said.clone()));
        out.insert("content", Value::Array(vec![Value::Object(part)]));
        out.insert("finishReason", Value::from("stop"));
        let mut usage = Map::with_capacity(2);
        usage.insert("inputTokens", Value::from(0u64));
        usage.insert("outputTokens", Value::from(0u64));
        out.insert("usage", Value::Object(usage));
        out.insert("warnings", Value::Array(Vec::new()));
    } else {
        out.insert("role", Value::from("assistant"));
        out.insert("content", Value::String(said.clone()));
    }
    Value::Object(out)
}

/// Names the AI SDK's stream `error` part may carry when the error is not an object.
pub const STREAM_ERROR_NAME: &str = "Error";

/// An AI SDK stream error part's `error` as the recorded error: an object's `name` /
/// `message` / `stack` (the skin turns a thrown `Error` into those fields), a string as
/// the message, anything else as its JSON text.
fn error_info(error: &Value) -> ErrorInfo {
    let field = |k: &str| error.get(k).and_then(Value::as_js_str).cloned();
    let message = match error {
        Value::String(s) => s.clone(),
        _ => field("message").unwrap_or_else(|| crate::json::to_string(error).as_str().into()),
    };
    let mut info = ErrorInfo::new(
        field("name").unwrap_or_else(|| STREAM_ERROR_NAME.into()),
        message,
    );
    info.stack = field("stack");
    info
}
