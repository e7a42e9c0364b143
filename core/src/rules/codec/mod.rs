//! Provider codecs: pure functions over [`Value`] that say what a model call records and
//! what an injected reply looks like, one module per wire format. Every SDK skin reads
//! its client library's objects into values, hands them here, and turns what comes back
//! into its own types; none of them maps a provider field itself.
//!
//! For each [`Api`]:
//! - [`request_input`]: the request -> `node.started.input` (the prompt in full, the
//!   allow-listed sampling parameters via [`llm::pick_params`], `stream`), without the
//!   tools, which [`crate::llm_step`] adds per run ([`request_tools`]);
//! - [`prompt_key`]: how the request chains into an invocation;
//! - [`decode_response`]: a complete answer -> output (text, tool calls, finish reason)
//!   and inclusive usage;
//! - [`StreamDecoder`]: stream chunks / events -> deltas per channel, then the same output
//!   (with `chunks`);
//! - [`injected_reply`]: the debugger's injected value -> the provider-shaped reply.

pub mod anthropic;
pub mod frameworks;
pub mod openai_chat;
pub mod openai_responses;
pub mod rebuild;

use crate::event::TokenChannel;
use crate::json::{JsStr, Map, Value};
use crate::llm;

/// The wire formats the core maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Api {
    /// OpenAI Chat Completions (`chat.completions.create` / `parse`, compatible servers).
    OpenAiChat,
    /// OpenAI Responses (`responses.create`).
    OpenAiResponses,
    /// Anthropic Messages (`messages.create`, `messages.stream`, `beta.messages`, `parse`).
    Anthropic,
    /// A LangChain chat model run (`LLMResult`).
    LangChain,
    /// A ruby_llm chat round-trip (`RubyLLM::Message`).
    RubyLlm,
    /// A Vercel AI SDK language model call (`doGenerate` / `doStream`).
    AiSdk,
}

impl Api {
    /// Every API, in this order.
    pub const ALL: [Api; 6] = [
        Api::OpenAiChat,
        Api::OpenAiResponses,
        Api::Anthropic,
        Api::LangChain,
        Api::RubyLlm,
        Api::AiSdk,
    ];

    /// The API for its name (`openai-chat`, `openai-responses`, `anthropic`, `langchain`,
    /// `ruby_llm`, `ai-sdk`: the fixture's provider names).
    pub fn from_name(name: &str) -> Option<Api> {
        Some(match name {
            "openai-chat" => Api::OpenAiChat,
            "openai-responses" => Api::OpenAiResponses,
            "anthropic" => Api::Anthropic,
            "langchain" => Api::LangChain,
            "ruby_llm" => Api::RubyLlm,
            "ai-sdk" => Api::AiSdk,
            _ => return None,
        })
    }

    /// Its name (see [`Api::from_name`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenAiChat => "openai-chat",
            Api::OpenAiResponses => "openai-responses",
            Api::Anthropic => "anthropic",
            Api::LangChain => "langchain",
            Api::RubyLlm => "ruby_llm",
            Api::AiSdk => "ai-sdk",
        }
    }

    /// `input.provider` of the recorded request.
    pub fn provider(self) -> &'static str {
        match self {
            Api::OpenAiChat | Api::OpenAiResponses => "openai",
            Api::Anthropic => "anthropic",
            Api::LangChain => "langchain",
            Api::RubyLlm => "ruby_llm",
            Api::AiSdk => "ai-sdk",
        }
    }
}

/// What a complete answer (or a finished stream) records.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decoded {
    /// `node.finished.output`.
    pub output: Map,
    /// `node.finished.usage` (the wire `TokenUsage`), when reported.
    pub usage: Option<Value>,
    /// The provider's id of the answer (Responses chaining).
    pub response_id: Option<JsStr>,
}

impl Decoded {
    /// `output` with the usage (`usage_of` the reply's `usage` member) and the id of the
    /// provider's `reply` object.
    pub(crate) fn of_reply(
        output: Map,
        reply: Option<&Value>,
        usage_of: impl FnOnce(&Value) -> Option<Value>,
    ) -> Decoded {
        Decoded {
            output,
            usage: get(reply, "usage").and_then(usage_of),
            response_id: get(reply, "id").and_then(Value::as_js_str).cloned(),
        }
    }
}

/// How one request chains into an invocation (see [`crate::llm_step::InvocationTracker`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PromptKey {
    /// A digest of the first message / input item.
    pub first: String,
    /// How many messages / input items the request has.
    pub length: usize,
    /// Responses: the answer this request continues from.
    pub previous_response_id: Option<String>,
}

/// Characters of the first message's JSON a [`PromptKey`] keeps.
pub const PROMPT_KEY_CHARS: usize = 200;

impl PromptKey {
    /// The key of a prompt: its first item (or itself when not an array) and its length.
    pub fn of(prompt: Option<&Value>, previous_response_id: Option<&Value>) -> PromptKey {
        let (first, length) = match prompt {
            Some(Value::Array(items)) => (items.first(), items.len()),
            other => (other, 1),
        };
        let text = first.map_or_else(|| "undefined".to_string(), crate::json::to_string);
        PromptKey {
            first: text.chars().take(PROMPT_KEY_CHARS).collect(),
            length,
            previous_response_id: previous_response_id
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        }
    }
}

// -- shared readers ------------------------------------------------------------------------

/// `value[key]` unless absent or null.
pub(crate) fn get<'a>(value: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    value?.get(key).filter(|v| !v.is_null())
}

/// `value[key]` as a non-empty string.
pub(crate) fn text<'a>(value: Option<&'a Value>, key: &str) -> Option<&'a JsStr> {
    get(value, key)
        .and_then(Value::as_js_str)
        .filter(|s| !s.is_empty())
}

/// `value[key]` as an array (empty when absent or not an array).
pub(crate) fn items<'a>(value: Option<&'a Value>, key: &str) -> &'a [Value] {
    get(value, key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Copies `request[key]` into `out` when given.
pub(crate) fn copy_given(out: &mut Map, request: &Value, keys: &[&str]) {
    for key in keys {
        if let Some(v) = get(Some(request), key) {
            out.insert(*key, v.clone());
        }
    }
}

/// `node.started.input` of a provider request: `provider`, the `given` keys the request
/// has, its `body` (the messages or input) in full (null when absent), the sampling
/// parameters and `stream`.
pub(crate) fn provider_request_input(
    request: &Value,
    provider: &str,
    given: &[&str],
    body: &str,
) -> Map {
    let mut out = Map::with_capacity(8);
    out.insert("provider", Value::from(provider));
    copy_given(&mut out, request, given);
    out.insert(
        body,
        get(Some(request), body).cloned().unwrap_or(Value::Null),
    );
    params_and_stream(&mut out, request);
    out
}

/// The recorded request's common tail: the sampling parameters, then `stream: true`.
pub(crate) fn params_and_stream(out: &mut Map, request: &Value) {
    for (k, v) in llm::pick_params(request).iter() {
        out.insert(k.clone(), v.clone());
    }
    if get(Some(request), "stream").and_then(Value::as_bool) == Some(true) {
        out.insert("stream", Value::Bool(true));
    }
}

/// Adds `finishReason` / `rawFinishReason` to `out`.
pub(crate) fn put_finish(out: &mut Map, raw: Option<&Value>, has_calls: bool) {
    for (k, v) in llm::finish_fields(raw, has_calls).iter() {
        out.insert(k.clone(), v.clone());
    }
}

/// A custom (free-form) tool's call: its input is text by design, kept as it is.
pub(crate) fn custom_call(
    id: Option<&Value>,
    name: Option<&Value>,
    input: Option<&Value>,
) -> Option<Value> {
    let name = name.and_then(Value::as_js_str).filter(|s| !s.is_empty())?;
    let mut out = Map::with_capacity(3);
    if let Some(id) = id.and_then(Value::as_js_str).filter(|s| !s.is_empty()) {
        out.insert("id", Value::String(id.clone()));
    }
    out.insert("name", Value::String(name.clone()));
    out.insert(
        "input",
        input
            .filter(|v| v.as_str().is_some())
            .cloned()
            .unwrap_or_else(|| Value::from("")),
    );
    Some(Value::Object(out))
}

/// A tool call assembled from streamed pieces (by index).
#[derive(Clone, Debug, Default)]
pub(crate) struct PartialCall {
    pub id: Option<JsStr>,
    pub name: Option<JsStr>,
    pub args: String,
    pub custom: bool,
}

impl PartialCall {
    /// The recorded call (the core's [`llm::tool_call`], or [`custom_call`]).
    pub fn finish(&self) -> Option<Value> {
        let id = self.id.clone().map(Value::String);
        let name = self.name.clone().map(Value::String);
        let args = Value::from(self.args.as_str());
        if self.custom {
            custom_call(id.as_ref(), name.as_ref(), Some(&args))
        } else {
            llm::tool_call(id.as_ref(), name.as_ref(), Some(&args))
        }
    }
}

/// The recorded calls of a set of partial calls, in index order.
pub(crate) fn finish_calls(calls: &std::collections::BTreeMap<i64, PartialCall>) -> Vec<Value> {
    calls.values().filter_map(PartialCall::finish).collect()
}

// -- dispatch ------------------------------------------------------------------------------

/// `node.started.input` for a request of `api` (tools aside: see [`request_tools`]).
pub fn request_input(api: Api, request: &Value) -> Map {
    match api {
        Api::OpenAiChat => openai_chat::request_input(request),
        Api::OpenAiResponses => openai_responses::request_input(request),
        Api::Anthropic => anthropic::request_input(request),
        Api::LangChain | Api::RubyLlm | Api::AiSdk => frameworks::request_input(api, request),
    }
}

/// The tool definitions a request offers (any provider's shape; `tools` of the body).
pub fn request_tools(request: &Value) -> &[Value] {
    items(Some(request), "tools")
}

/// How a request chains into an invocation.
pub fn prompt_key(api: Api, request: &Value) -> PromptKey {
    let r = Some(request);
    match api {
        Api::OpenAiResponses => PromptKey::of(get(r, "input"), get(r, "previous_response_id")),
        Api::AiSdk => PromptKey::of(get(r, "prompt"), None),
        // A chat model's callback gets a batch of conversations: the first one is the prompt.
        Api::LangChain => {
            let messages = get(r, "messages");
            let first = messages
                .and_then(Value::as_array)
                .and_then(|batch| batch.first())
                .filter(|c| c.as_array().is_some());
            PromptKey::of(first.or(messages), None)
        }
        _ => PromptKey::of(get(r, "messages"), None),
    }
}

/// What a complete answer of `api` records.
pub fn decode_response(api: Api, response: &Value) -> Decoded {
    match api {
        Api::OpenAiChat => openai_chat::decode(response),
        Api::OpenAiResponses => openai_responses::decode(response),
        Api::Anthropic => anthropic::decode(response),
        Api::LangChain => frameworks::langchain_decode(response),
        Api::RubyLlm => frameworks::ruby_llm_decode(response),
        Api::AiSdk => frameworks::ai_sdk_decode(response),
    }
}

/// The injected value as the reply the app's client would have returned: a string becomes
/// a reply with that text; an object that already has the reply's shape passes through
/// (an object without it is made one with its `text`/`content` when it has one, else
/// passes through as it is). `request` supplies the model name.
pub fn injected_reply(api: Api, value: Value, request: &Value) -> Value {
    let model = get(Some(request), "model")
        .and_then(Value::as_js_str)
        .cloned()
        .unwrap_or_else(|| JsStr::from("graphmind-injected"));
    let text = match &value {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) if !has_reply_shape(api, m) => m
            .get("text")
            .or_else(|| m.get("content"))
            .and_then(Value::as_js_str)
            .cloned(),
        _ => None,
    };
    let Some(text) = text else {
        return value;
    };
    match api {
        Api::OpenAiChat => openai_chat::reply_with_text(&text, &model),
        Api::OpenAiResponses => openai_responses::reply_with_text(&text, &model),
        Api::Anthropic => anthropic::reply_with_text(&text, &model),
        Api::LangChain | Api::RubyLlm | Api::AiSdk => frameworks::reply_with_text(api, &text),
    }
}

/// Whether an object is already a reply in `api`'s shape (an injected value passed through).
pub(crate) fn has_reply_shape(api: Api, m: &Map) -> bool {
    match api {
        Api::OpenAiChat => m.contains_key("choices"),
        Api::OpenAiResponses => m.contains_key("output"),
        Api::Anthropic => {
            m.contains_key("content") && m.get("content").is_some_and(|c| c.as_array().is_some())
        }
        Api::LangChain | Api::RubyLlm => m.contains_key("role") || m.contains_key("generations"),
        Api::AiSdk => {
            m.contains_key("content") && m.get("content").is_some_and(|c| c.as_array().is_some())
        }
    }
}

// -- streams -------------------------------------------------------------------------------

/// One streamed delta: its channel and text.
pub type Delta = (TokenChannel, JsStr);

/// Reads one stream of `api` chunk by chunk: [`StreamDecoder::push`] returns the deltas
/// each chunk carries; [`StreamDecoder::finish`] the recorded output (with `chunks`, the
/// number of chunks seen) and usage.
#[derive(Debug)]
pub struct StreamDecoder {
    chunks: u64,
    state: StreamState,
}

#[derive(Debug)]
enum StreamState {
    Chat(openai_chat::ChatStream),
    Responses(openai_responses::ResponsesStream),
    Anthropic(anthropic::MessageStream),
    Frameworks(frameworks::TextStream),
}

impl StreamDecoder {
    /// A decoder for one stream of `api`.
    pub fn new(api: Api) -> StreamDecoder {
        let state = match api {
            Api::OpenAiChat => StreamState::Chat(Default::default()),
            Api::OpenAiResponses => StreamState::Responses(Default::default()),
            Api::Anthropic => StreamState::Anthropic(Default::default()),
            Api::LangChain | Api::RubyLlm | Api::AiSdk => {
                StreamState::Frameworks(frameworks::TextStream::new(api))
            }
        };
        StreamDecoder { chunks: 0, state }
    }

    /// How many chunks were pushed.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// One chunk / event: the deltas it carries, in order.
    pub fn push(&mut self, chunk: &Value) -> Vec<Delta> {
        self.chunks += 1;
        let mut deltas = Vec::new();
        match &mut self.state {
            StreamState::Chat(s) => s.push(chunk, &mut deltas),
            StreamState::Responses(s) => s.push(chunk, &mut deltas),
            StreamState::Anthropic(s) => s.push(chunk, &mut deltas),
            StreamState::Frameworks(s) => s.push(chunk, &mut deltas),
        }
        deltas
    }

    /// A text delta the app read through a helper (Anthropic's `text_stream`) rather than
    /// as a raw event: recorded as if an event had carried it.
    pub fn push_text(&mut self, text: &JsStr) -> Option<Delta> {
        if text.is_empty() {
            return None;
        }
        match &mut self.state {
            StreamState::Anthropic(s) => s.text.push_str(&text.to_string_lossy()),
            StreamState::Frameworks(s) => s.text.push_str(&text.to_string_lossy()),
            StreamState::Chat(s) => s.text.push_str(&text.to_string_lossy()),
            StreamState::Responses(s) => s.text.push_str(&text.to_string_lossy()),
        }
        Some((TokenChannel::Text, text.clone()))
    }

    /// The error the stream itself reported in a part (an AI SDK `error` part), if any:
    /// the stream then ends as failed even though the client read it to its end.
    pub fn error(&self) -> Option<crate::event::ErrorInfo> {
        match &self.state {
            StreamState::Frameworks(s) => s.error(),
            _ => None,
        }
    }

    /// What the stream records when it ended: `final_message`, when the client library
    /// accumulated one (Anthropic's `MessageStream`), completes what the events missed.
    pub fn finish(&self, final_message: Option<&Value>) -> Decoded {
        let mut decoded = match &self.state {
            StreamState::Chat(s) => s.finish(),
            StreamState::Responses(s) => s.finish(),
            StreamState::Anthropic(s) => s.finish(final_message),
            StreamState::Frameworks(s) => s.finish(final_message),
        };
        // `chunks` right after the text, as the recorded shape has always had it.
        let mut output = Map::with_capacity(decoded.output.len() + 1);
        let mut placed = false;
        for (k, v) in decoded.output.iter() {
            output.insert(k.clone(), v.clone());
            if k == "text" {
                output.insert("chunks", Value::from(self.chunks));
                placed = true;
            }
        }
        if !placed {
            output.insert("chunks", Value::from(self.chunks));
        }
        decoded.output = output;
        decoded
    }
}

/// Pushes a delta when `text` is a non-empty string.
pub(crate) fn delta(
    deltas: &mut Vec<Delta>,
    channel: TokenChannel,
    text: Option<&Value>,
) -> Option<JsStr> {
    let s = text.and_then(Value::as_js_str).filter(|s| !s.is_empty())?;
    deltas.push((channel, s.clone()));
    Some(s.clone())
}

#[cfg(test)]
mod tests;
