//! OpenAI Responses: `responses.create` requests, `Response` objects (output items) and
//! the typed event stream. Built-in tools (web search, file search, code interpreter...)
//! run at the provider: their output items are observed (`builtinTools`), never gated.

use super::{copy_given, custom_call, delta, get, items, put_finish, Decoded, Delta};
use crate::event::TokenChannel;
use crate::json::{JsStr, Map, Value};
use crate::llm;

/// Output item types that are the app's own tools (everything else ending in `_call` is a
/// built-in tool).
const APP_TOOL_ITEMS: [&str; 2] = ["function_call", "custom_tool_call"];

/// Members of a built-in tool item that say what it was asked (the first one present).
const BUILTIN_INPUTS: [&str; 4] = ["action", "queries", "code", "arguments"];
/// Members of a built-in tool item that say what it found (the first one present).
const BUILTIN_OUTPUTS: [&str; 4] = ["results", "outputs", "output", "result"];

/// The first of `keys` that `item` carries (not `null`).
fn first_given<'a>(item: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter()
        .find_map(|k| get(Some(item), k).filter(|v| !v.is_null()))
}

/// Stream events whose `delta` is reasoning text.
const REASONING_EVENTS: [&str; 2] = [
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
];
/// Stream events whose `delta` is a tool call's argument text.
const TOOL_ARGS_EVENTS: [&str; 2] = [
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
];
/// Stream events that carry the whole answer.
const FINAL_EVENTS: [&str; 3] = [
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// `node.started.input`: provider, model, instructions, previous response, the input in
/// full, the sampling parameters, `stream`.
pub fn request_input(request: &Value) -> Map {
    super::provider_request_input(
        request,
        "openai",
        &["model", "instructions", "previous_response_id"],
        "input",
    )
}

/// The answer's text: `output_text` when the value carries it, else every `output_text`
/// part of its message items, joined (what the SDK's `output_text` property computes).
fn output_text(response: &Value) -> String {
    if let Some(t) = get(Some(response), "output_text").and_then(Value::as_js_str) {
        return t.to_string_lossy().into_owned();
    }
    let mut text = String::new();
    for item in items(Some(response), "output") {
        if get(Some(item), "type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        for part in items(Some(item), "content") {
            if get(Some(part), "type").and_then(Value::as_str) == Some("output_text") {
                if let Some(t) = get(Some(part), "text").and_then(Value::as_js_str) {
                    text.push_str(&t.to_string_lossy());
                }
            }
        }
    }
    text
}

/// A complete `Response`: text, the app's tool calls, built-in tool items, the finish
/// reason (the incomplete reason, else the status) and `status`; usage.
pub fn decode(response: &Value) -> Decoded {
    let r = Some(response);
    let mut out = Map::with_capacity(6);
    out.insert("text", Value::from(output_text(response).as_str()));
    let mut calls = Vec::new();
    let mut builtin = Vec::new();
    for item in items(r, "output") {
        let i = Some(item);
        match get(i, "type").and_then(Value::as_str) {
            Some("function_call") => calls.extend(llm::tool_call(
                get(i, "call_id"),
                get(i, "name"),
                get(i, "arguments"),
            )),
            Some("custom_tool_call") => calls.extend(custom_call(
                get(i, "call_id"),
                get(i, "name"),
                get(i, "input"),
            )),
            Some(kind) if kind.ends_with("_call") && !APP_TOOL_ITEMS.contains(&kind) => {
                let mut entry = Map::with_capacity(3);
                entry.insert("type", Value::from(kind));
                copy_given(&mut entry, item, &["id", "status"]);
                if let Some(input) = first_given(item, &BUILTIN_INPUTS) {
                    entry.insert("input", input.clone());
                }
                if let Some(output) = first_given(item, &BUILTIN_OUTPUTS) {
                    entry.insert("output", output.clone());
                }
                builtin.push(Value::Object(entry));
            }
            _ => {}
        }
    }
    let has_calls = !calls.is_empty();
    if has_calls {
        out.insert("toolCalls", Value::Array(calls));
    }
    if !builtin.is_empty() {
        out.insert("builtinTools", Value::Array(builtin));
    }
    let status = get(r, "status");
    let reason = get(get(r, "incomplete_details"), "reason")
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()));
    put_finish(&mut out, reason.or(status), has_calls);
    if let Some(s) = status.filter(|s| s.as_str().is_some()) {
        out.insert("status", s.clone());
    }
    Decoded::of_reply(out, r, llm::openai_responses_usage)
}

/// A Responses event stream being read.
#[derive(Debug, Default)]
pub struct ResponsesStream {
    pub(crate) text: String,
    last: Option<Value>,
}

impl ResponsesStream {
    pub(crate) fn push(&mut self, event: &Value, deltas: &mut Vec<Delta>) {
        let e = Some(event);
        let Some(kind) = get(e, "type").and_then(Value::as_str) else {
            return;
        };
        if kind == "response.output_text.delta" {
            if let Some(t) = delta(deltas, TokenChannel::Text, get(e, "delta")) {
                self.text.push_str(&t.to_string_lossy());
            }
        } else if TOOL_ARGS_EVENTS.contains(&kind) {
            delta(deltas, TokenChannel::ToolArgs, get(e, "delta"));
        } else if REASONING_EVENTS.contains(&kind) {
            delta(deltas, TokenChannel::Reasoning, get(e, "delta"));
        } else if FINAL_EVENTS.contains(&kind) {
            if let Some(response) = get(e, "response") {
                self.last = Some(response.clone());
            }
        }
    }

    /// The streamed text, completed by the final event's whole answer.
    pub(crate) fn finish(&self) -> Decoded {
        let mut out = Map::with_capacity(6);
        out.insert("text", Value::from(self.text.as_str()));
        let Some(last) = &self.last else {
            return Decoded {
                output: out,
                ..Default::default()
            };
        };
        let mut decoded = decode(last);
        for (k, v) in decoded.output.iter() {
            if k == "text" && v.as_str().is_none_or(str::is_empty) {
                continue;
            }
            out.insert(k.clone(), v.clone());
        }
        decoded.output = out;
        decoded
    }
}

/// A completed `Response` with one assistant message saying `text`.
pub fn reply_with_text(text: &JsStr, model: &JsStr) -> Value {
    let mut part = Map::with_capacity(3);
    part.insert("type", Value::from("output_text"));
    part.insert("text", Value::String(text.clone()));
    part.insert("annotations", Value::Array(Vec::new()));
    let mut message = Map::with_capacity(5);
    message.insert("type", Value::from("message"));
    message.insert("id", Value::from("msg_graphmind_injected"));
    message.insert("role", Value::from("assistant"));
    message.insert("status", Value::from("completed"));
    message.insert("content", Value::Array(vec![Value::Object(part)]));
    let mut out = Map::with_capacity(10);
    out.insert("id", Value::from("resp_graphmind_injected"));
    out.insert("object", Value::from("response"));
    out.insert("created_at", Value::from(0u64));
    out.insert("model", Value::String(model.clone()));
    out.insert("status", Value::from("completed"));
    out.insert("output", Value::Array(vec![Value::Object(message)]));
    out.insert("parallel_tool_calls", Value::Bool(true));
    out.insert("tool_choice", Value::from("auto"));
    out.insert("tools", Value::Array(Vec::new()));
    Value::Object(out)
}
