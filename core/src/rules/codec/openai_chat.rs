//! OpenAI Chat Completions: `chat.completions.create` / `parse` requests, `ChatCompletion`
//! answers and `ChatCompletionChunk` streams (tool-call argument deltas assembled by
//! index; usage on the last chunk with `stream_options.include_usage`).

use std::collections::BTreeMap;

use super::{
    custom_call, delta, finish_calls, get, items, put_finish, Decoded, Delta, PartialCall,
};
use crate::event::TokenChannel;
use crate::json::{JsStr, Map, Value};
use crate::llm;

/// `node.started.input`: provider, model, instructions / previous response (when given),
/// the messages in full, the sampling parameters, `stream`.
pub fn request_input(request: &Value) -> Map {
    super::provider_request_input(
        request,
        "openai",
        &["model", "instructions", "previous_response_id"],
        "messages",
    )
}

/// One `tool_calls[]` entry of a message: a function call, or a custom tool's call.
fn message_call(call: &Value) -> Option<Value> {
    let c = Some(call);
    if let Some(function) = get(c, "function") {
        let f = Some(function);
        return llm::tool_call(get(c, "id"), get(f, "name"), get(f, "arguments"));
    }
    let custom = get(c, "custom");
    custom_call(get(c, "id"), get(custom, "name"), get(custom, "input"))
}

/// A complete `ChatCompletion`: the choices' text joined, `parsed` (from `parse`), the
/// requested tool calls, the first choice's finish reason; usage.
pub fn decode(response: &Value) -> Decoded {
    let r = Some(response);
    let mut out = Map::with_capacity(5);
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut raw_reason = None;
    let mut parsed = None;
    for choice in items(r, "choices") {
        let message = get(Some(choice), "message");
        if let Some(content) = get(message, "content").and_then(Value::as_js_str) {
            text.push_str(&content.to_string_lossy());
        }
        if let Some(p) = get(message, "parsed") {
            parsed = Some(p.clone());
        }
        calls.extend(items(message, "tool_calls").iter().filter_map(message_call));
        if raw_reason.is_none() {
            raw_reason = get(Some(choice), "finish_reason");
        }
    }
    if let Some(p) = parsed {
        out.insert("parsed", p);
    }
    out.insert("text", Value::from(text.as_str()));
    let has_calls = !calls.is_empty();
    if has_calls {
        out.insert("toolCalls", Value::Array(calls));
    }
    put_finish(&mut out, raw_reason, has_calls);
    Decoded::of_reply(out, r, llm::openai_chat_usage)
}

/// A stream of `ChatCompletionChunk`s being read.
#[derive(Debug, Default)]
pub struct ChatStream {
    pub(crate) text: String,
    raw_reason: Option<Value>,
    usage: Option<Value>,
    calls: BTreeMap<i64, PartialCall>,
    id: Option<JsStr>,
}

impl ChatStream {
    /// One chunk: content -> `text`, reasoning (`reasoning_content` / `reasoning` of
    /// compatible servers) -> `reasoning`, tool-call argument pieces -> `tool-args`.
    pub(crate) fn push(&mut self, chunk: &Value, deltas: &mut Vec<Delta>) {
        let c = Some(chunk);
        if self.id.is_none() {
            self.id = get(c, "id").and_then(Value::as_js_str).cloned();
        }
        if let Some(usage) = get(c, "usage") {
            self.usage = Some(usage.clone());
        }
        for choice in items(c, "choices") {
            let ch = Some(choice);
            if let Some(d) = get(ch, "delta") {
                self.delta(d, deltas);
            }
            if let Some(reason) =
                get(ch, "finish_reason").filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            {
                self.raw_reason = Some(reason.clone());
            }
        }
    }

    fn delta(&mut self, d: &Value, deltas: &mut Vec<Delta>) {
        let d = Some(d);
        if let Some(t) = delta(deltas, TokenChannel::Text, get(d, "content")) {
            self.text.push_str(&t.to_string_lossy());
        }
        let reasoning = get(d, "reasoning_content")
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            .or_else(|| get(d, "reasoning"));
        delta(deltas, TokenChannel::Reasoning, reasoning);
        for part in items(d, "tool_calls") {
            let p = Some(part);
            let index = get(p, "index").and_then(Value::as_i64).unwrap_or(0);
            let entry = self.calls.entry(index).or_default();
            let custom = get(p, "custom");
            if get(p, "type").and_then(Value::as_str) == Some("custom") || custom.is_some() {
                entry.custom = true;
            }
            let source = if entry.custom {
                custom
            } else {
                get(p, "function")
            };
            if let Some(id) = super::text(p, "id") {
                entry.id = Some(id.clone());
            }
            if let Some(name) = super::text(source, "name") {
                entry.name = Some(name.clone());
            }
            let key = if entry.custom { "input" } else { "arguments" };
            if let Some(t) = delta(deltas, TokenChannel::ToolArgs, get(source, key)) {
                entry.args.push_str(&t.to_string_lossy());
            }
        }
    }

    /// The recorded output: text, tool calls, finish reason; usage when reported.
    pub(crate) fn finish(&self) -> Decoded {
        let mut out = Map::with_capacity(5);
        out.insert("text", Value::from(self.text.as_str()));
        let calls = finish_calls(&self.calls);
        let has_calls = !calls.is_empty();
        if has_calls {
            out.insert("toolCalls", Value::Array(calls));
        }
        put_finish(&mut out, self.raw_reason.as_ref(), has_calls);
        Decoded {
            output: out,
            usage: self.usage.as_ref().and_then(llm::openai_chat_usage),
            response_id: self.id.clone(),
        }
    }
}

/// A `ChatCompletion` whose one choice says `text`.
pub fn reply_with_text(text: &JsStr, model: &JsStr) -> Value {
    let mut message = Map::with_capacity(3);
    message.insert("role", Value::from("assistant"));
    message.insert("content", Value::String(text.clone()));
    message.insert("refusal", Value::Null);
    let mut choice = Map::with_capacity(4);
    choice.insert("index", Value::from(0u64));
    choice.insert("message", Value::Object(message));
    choice.insert("finish_reason", Value::from("stop"));
    choice.insert("logprobs", Value::Null);
    let mut out = Map::with_capacity(6);
    out.insert("id", Value::from("chatcmpl-graphmind-injected"));
    out.insert("object", Value::from("chat.completion"));
    out.insert("created", Value::from(0u64));
    out.insert("model", Value::String(model.clone()));
    out.insert("choices", Value::Array(vec![Value::Object(choice)]));
    Value::Object(out)
}
