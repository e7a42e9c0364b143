//! Anthropic Messages: `messages.create` / `stream` / `parse` and `beta.messages.*`
//! requests, `Message` answers (content blocks) and the raw event stream (usage reported in
//! pieces: `message_start`, then cumulative `message_delta`s).

use std::collections::BTreeMap;

use super::{copy_given, delta, finish_calls, get, items, put_finish, Decoded, Delta, PartialCall};
use crate::event::TokenChannel;
use crate::json::{JsStr, Map, Value};
use crate::llm;

/// The raw usage counts a streamed message reports in pieces.
const USAGE_FIELDS: [&str; 4] = [
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
];
/// The cache-write split's counts.
const USAGE_SPLIT_FIELDS: [&str; 2] = ["ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"];

/// `node.started.input`: provider, model, system, the messages in full, the sampling
/// parameters, `stream`.
pub fn request_input(request: &Value) -> Map {
    super::provider_request_input(request, "anthropic", &["model", "system"], "messages")
}

/// The content block of a tool the provider runs (web search, code execution...).
const SERVER_TOOL_USE: &str = "server_tool_use";
/// How the type of a server tool's result block ends (`web_search_tool_result`, ...).
const SERVER_TOOL_RESULT_SUFFIX: &str = "_tool_result";

/// The `builtinTools` entry of a `server_tool_use` block.
fn server_entry(block: &Value) -> Map {
    let mut entry = Map::with_capacity(4);
    entry.insert("type", Value::from(SERVER_TOOL_USE));
    copy_given(&mut entry, block, &["id", "name", "input"]);
    entry
}

/// A server tool's result block (`*_tool_result`) as the `output` of its call's entry.
fn attach_server_result(builtin: &mut [Map], block: &Value) {
    let id = get(Some(block), "tool_use_id");
    let content = get(Some(block), "content").cloned().unwrap_or(Value::Null);
    if let Some(entry) = builtin
        .iter_mut()
        .find(|e| e.get("id") == id && id.is_some())
    {
        entry.insert("output", content);
    }
}

/// Adds the entries as `builtinTools` (nothing when there are none).
fn put_builtin(out: &mut Map, builtin: Vec<Map>) {
    if !builtin.is_empty() {
        out.insert(
            crate::llm_builtin::BUILTIN_TOOLS_KEY,
            Value::Array(builtin.into_iter().map(Value::Object).collect()),
        );
    }
}

/// A streamed `server_tool_use` block: its start, and its input as `input_json_delta`s.
#[derive(Clone, Debug)]
struct ServerCall {
    block: Value,
    args: String,
}

impl ServerCall {
    /// The entry, its input the streamed JSON when it came and parses (else the block's).
    fn entry(&self) -> Map {
        let mut entry = server_entry(&self.block);
        if !self.args.trim().is_empty() {
            let input = crate::json::parse_str(&self.args)
                .unwrap_or_else(|_| Value::from(self.args.as_str()));
            entry.insert("input", input);
        }
        entry
    }
}

/// A complete `Message`: text blocks joined, the last thinking block, `tool_use` blocks as
/// tool calls, `parsed_output` (from `parse`), the finish reason from `stop_reason`; usage.
pub fn decode(message: &Value) -> Decoded {
    let m = Some(message);
    let mut out = Map::with_capacity(6);
    let mut text = String::new();
    let mut thinking = None;
    let mut calls = Vec::new();
    let mut builtin: Vec<Map> = Vec::new();
    for block in items(m, "content") {
        let b = Some(block);
        match get(b, "type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = get(b, "text").and_then(Value::as_js_str) {
                    text.push_str(&t.to_string_lossy());
                }
            }
            Some("tool_use") => calls.extend(llm::tool_call(
                get(b, "id"),
                get(b, "name"),
                get(b, "input"),
            )),
            Some("thinking") => {
                if let Some(t) = get(b, "thinking").filter(|t| t.as_str().is_some()) {
                    thinking = Some(t.clone());
                }
            }
            Some(SERVER_TOOL_USE) => builtin.push(server_entry(block)),
            Some(kind) if kind.ends_with(SERVER_TOOL_RESULT_SUFFIX) => {
                attach_server_result(&mut builtin, block)
            }
            _ => {}
        }
    }
    put_builtin(&mut out, builtin);
    if let Some(t) = thinking {
        out.insert("thinking", t);
    }
    out.insert("text", Value::from(text.as_str()));
    let has_calls = !calls.is_empty();
    if has_calls {
        out.insert("toolCalls", Value::Array(calls));
    }
    if let Some(parsed) = get(m, "parsed_output") {
        out.insert("parsed", parsed.clone());
    }
    put_finish(&mut out, get(m, "stop_reason"), has_calls);
    Decoded::of_reply(out, m, llm::anthropic_usage)
}

/// A raw message event stream being read.
#[derive(Debug, Default)]
pub struct MessageStream {
    pub(crate) text: String,
    raw_reason: Option<Value>,
    usage: Map,
    open: BTreeMap<i64, PartialCall>,
    closed: BTreeMap<i64, PartialCall>,
    /// The provider's own tool calls (`server_tool_use`), by block index.
    servers: BTreeMap<i64, ServerCall>,
    /// Their result blocks (`*_tool_result`, complete in their start event), in order.
    server_results: Vec<Value>,
}

impl MessageStream {
    fn add_usage(&mut self, reported: Option<&Value>) {
        let Some(reported) = reported else { return };
        for key in USAGE_FIELDS {
            if let Some(n) = get(Some(reported), key).filter(|v| matches!(v, Value::Number(_))) {
                self.usage.insert(key, n.clone());
            }
        }
        if let Some(split) = get(Some(reported), "cache_creation") {
            let mut parts = self
                .usage
                .get("cache_creation")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            for key in USAGE_SPLIT_FIELDS {
                if let Some(n) = get(Some(split), key).filter(|v| matches!(v, Value::Number(_))) {
                    parts.insert(key, n.clone());
                }
            }
            if !parts.is_empty() {
                self.usage.insert("cache_creation", Value::Object(parts));
            }
        }
    }

    pub(crate) fn push(&mut self, event: &Value, deltas: &mut Vec<Delta>) {
        let e = Some(event);
        let index = get(e, "index").and_then(Value::as_i64);
        match get(e, "type").and_then(Value::as_str) {
            Some("message_start") => self.add_usage(get(get(e, "message"), "usage")),
            Some("content_block_start") => {
                let block = get(e, "content_block");
                let kind = get(block, "type").and_then(Value::as_str);
                if let (Some(SERVER_TOOL_USE), Some(i), Some(b)) = (kind, index, block) {
                    let call = ServerCall {
                        block: b.clone(),
                        args: String::new(),
                    };
                    self.servers.insert(i, call);
                } else if let (Some(k), Some(b)) = (kind, block) {
                    if k.ends_with(SERVER_TOOL_RESULT_SUFFIX) {
                        self.server_results.push(b.clone());
                    }
                }
                if let (Some("tool_use"), Some(i)) = (kind, index) {
                    self.open.insert(
                        i,
                        PartialCall {
                            id: super::text(block, "id").cloned(),
                            name: super::text(block, "name").cloned(),
                            ..Default::default()
                        },
                    );
                }
            }
            Some("content_block_stop") => {
                if let Some(call) = index.and_then(|i| self.open.remove(&i).map(|c| (i, c))) {
                    self.closed.insert(call.0, call.1);
                }
            }
            Some("content_block_delta") => {
                let d = get(e, "delta");
                match get(d, "type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        if let Some(t) = delta(deltas, TokenChannel::Text, get(d, "text")) {
                            self.text.push_str(&t.to_string_lossy());
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some(t) =
                            delta(deltas, TokenChannel::ToolArgs, get(d, "partial_json"))
                        {
                            if let Some(call) = index.and_then(|i| self.open.get_mut(&i)) {
                                call.args.push_str(&t.to_string_lossy());
                            } else if let Some(server) =
                                index.and_then(|i| self.servers.get_mut(&i))
                            {
                                server.args.push_str(&t.to_string_lossy());
                            }
                        }
                    }
                    Some("thinking_delta") => {
                        delta(deltas, TokenChannel::Reasoning, get(d, "thinking"));
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                self.add_usage(get(e, "usage"));
                if let Some(reason) =
                    get(get(e, "delta"), "stop_reason").filter(|v| v.as_str().is_some())
                {
                    self.raw_reason = Some(reason.clone());
                }
            }
            _ => {}
        }
    }

    /// The streamed text, calls and server tools (a block never closed was cut off:
    /// recorded as far as it came), completed by the library's accumulated message when there is one.
    pub(crate) fn finish(&self, final_message: Option<&Value>) -> Decoded {
        let mut out = Map::with_capacity(6);
        out.insert("text", Value::from(self.text.as_str()));
        let mut all = self.closed.clone();
        for (i, call) in &self.open {
            all.entry(*i).or_insert_with(|| call.clone());
        }
        let calls = finish_calls(&all);
        let has_calls = !calls.is_empty();
        if has_calls {
            out.insert("toolCalls", Value::Array(calls));
        }
        put_finish(&mut out, self.raw_reason.as_ref(), has_calls);
        let mut builtin: Vec<Map> = self.servers.values().map(ServerCall::entry).collect();
        for result in &self.server_results {
            attach_server_result(&mut builtin, result);
        }
        put_builtin(&mut out, builtin);
        let mut usage = if self.usage.is_empty() {
            None
        } else {
            llm::anthropic_usage(&Value::Object(self.usage.clone()))
        };
        if let Some(message) = final_message.filter(|m| m.as_object().is_some()) {
            let summary = decode(message);
            let said = summary
                .output
                .get("text")
                .and_then(Value::as_str)
                .is_some_and(|t| !t.is_empty())
                || summary.output.contains_key("toolCalls");
            if said {
                for (k, v) in summary.output.iter() {
                    out.insert(k.clone(), v.clone());
                }
            }
            usage = summary.usage.or(usage);
        }
        Decoded {
            output: out,
            usage,
            response_id: None,
        }
    }
}

/// A `Message` from the assistant saying `text`.
pub fn reply_with_text(text: &JsStr, model: &JsStr) -> Value {
    let mut block = Map::with_capacity(2);
    block.insert("type", Value::from("text"));
    block.insert("text", Value::String(text.clone()));
    let mut usage = Map::with_capacity(2);
    usage.insert("input_tokens", Value::from(0u64));
    usage.insert("output_tokens", Value::from(0u64));
    let mut out = Map::with_capacity(8);
    out.insert("id", Value::from("msg_graphmind_injected"));
    out.insert("type", Value::from("message"));
    out.insert("role", Value::from("assistant"));
    out.insert("model", Value::String(model.clone()));
    out.insert("content", Value::Array(vec![Value::Object(block)]));
    out.insert("stop_reason", Value::from("end_turn"));
    out.insert("stop_sequence", Value::Null);
    out.insert("usage", Value::Object(usage));
    Value::Object(out)
}
