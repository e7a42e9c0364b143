//! A provider reply (or a stream of chunks) rebuilt from a recorded output, for replay
//! ([`crate::replay`]): the recording keeps `{text, toolCalls, finishReason,
//! rawFinishReason}` and the usage, not the provider's bytes, so the reply is what the
//! provider would have sent to say exactly that. The client library's own parser then
//! reads it, so the app's code runs unchanged.

use super::{get, has_reply_shape, injected_reply, items, Api};
use crate::json::{self, Map, Value};

/// Characters of text per rebuilt stream chunk.
pub const STREAM_TEXT_PIECE_CHARS: usize = 32;
/// The id of every rebuilt reply.
pub const REPLAYED_ID: &str = "graphmind-replayed";

/// Whether a recorded stream of `api` can be rebuilt as chunks.
pub fn can_rebuild_stream(api: Api) -> bool {
    matches!(api, Api::OpenAiChat)
}

/// Whether a replay may answer a call of `api` (`streamed`: the request asked for a
/// stream). Anthropic's calls are left live for now: its `messages.stream()` helper opens
/// the provider's own stream whatever the step answers, and its request does not say so.
/// The frameworks (LangChain, ruby_llm, the AI SDK) are not replayed yet either.
pub fn can_replay(api: Api, streamed: bool) -> bool {
    match api {
        Api::OpenAiChat => true,
        Api::OpenAiResponses => !streamed,
        Api::Anthropic | Api::LangChain | Api::RubyLlm | Api::AiSdk => false,
    }
}

/// The recorded text: the output's `text`, or the output itself when it is a string (a
/// call the debugger injected a text into records that text as its output).
fn text_of(output: &Value) -> String {
    output
        .as_js_str()
        .or_else(|| get(Some(output), "text").and_then(Value::as_js_str))
        .map(|t| t.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A recorded call's arguments as the provider spells them: its `inputText` when it did
/// not parse, else its input as JSON text.
fn arguments(call: &Value) -> String {
    if let Some(text) = get(Some(call), "inputText").and_then(Value::as_str) {
        return text.to_string();
    }
    get(Some(call), "input").map_or_else(|| "{}".to_string(), json::to_string)
}

fn finish_reason(output: &Value, chat: bool) -> Value {
    if let Some(raw) = get(Some(output), "rawFinishReason") {
        return raw.clone();
    }
    let normalized = get(Some(output), "finishReason")
        .and_then(Value::as_str)
        .unwrap_or("stop");
    Value::from(match (normalized, chat) {
        ("tool-calls", true) => "tool_calls",
        ("tool-calls", false) => "tool_use",
        ("length", true) => "length",
        ("length", false) => "max_tokens",
        ("content-filter", _) => "content_filter",
        (_, true) => "stop",
        (_, false) => "end_turn",
    })
}

fn count(usage: Option<&Value>, key: &str) -> u64 {
    usage
        .and_then(|u| u.get(key))
        .and_then(Value::as_f64)
        .filter(|n| n.is_finite() && *n >= 0.0)
        .map_or(0, |n| n as u64)
}

fn model_value(model: Option<&Value>) -> Value {
    model
        .cloned()
        .unwrap_or_else(|| Value::from("graphmind-replayed"))
}

/// The reply `api`'s client would have parsed for this recorded `output` and `usage`
/// (the wire `TokenUsage`); `model` is the request's.
pub fn reply_from_output(
    api: Api,
    output: &Value,
    usage: Option<&Value>,
    model: Option<&Value>,
) -> Value {
    if output.as_object().is_some_and(|m| has_reply_shape(api, m)) {
        // An injected reply already in the provider's shape: what the app got live.
        return output.clone();
    }
    match api {
        Api::OpenAiChat => chat_reply(output, usage, model),
        Api::OpenAiResponses => responses_reply(output, usage, model),
        Api::Anthropic => anthropic_reply(output, usage, model),
        Api::LangChain | Api::RubyLlm | Api::AiSdk => {
            let mut request = Map::new();
            if let Some(m) = model {
                request.insert("model", m.clone());
            }
            injected_reply(
                api,
                Value::from(text_of(output).as_str()),
                &Value::Object(request),
            )
        }
    }
}

fn chat_tool_calls(output: &Value) -> Vec<Value> {
    items(Some(output), "toolCalls")
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let mut function = Map::with_capacity(2);
            function.insert(
                "name",
                get(Some(call), "name").cloned().unwrap_or(Value::from("")),
            );
            function.insert("arguments", Value::from(arguments(call).as_str()));
            let mut c = Map::with_capacity(3);
            c.insert(
                "id",
                get(Some(call), "id")
                    .cloned()
                    .unwrap_or_else(|| Value::from(format!("call_{i}"))),
            );
            c.insert("type", Value::from("function"));
            c.insert("function", Value::Object(function));
            Value::Object(c)
        })
        .collect()
}

fn chat_usage(usage: Option<&Value>) -> Option<Value> {
    usage?;
    let (i, o) = (count(usage, "inputTokens"), count(usage, "outputTokens"));
    let mut u = Map::with_capacity(3);
    u.insert("prompt_tokens", Value::from(i));
    u.insert("completion_tokens", Value::from(o));
    u.insert("total_tokens", Value::from(i + o));
    Some(Value::Object(u))
}

fn chat_reply(output: &Value, usage: Option<&Value>, model: Option<&Value>) -> Value {
    let text = text_of(output);
    let calls = chat_tool_calls(output);
    let mut message = Map::with_capacity(3);
    message.insert("role", Value::from("assistant"));
    let content = if text.is_empty() && !calls.is_empty() {
        Value::Null
    } else {
        Value::from(text.as_str())
    };
    message.insert("content", content);
    if !calls.is_empty() {
        message.insert("tool_calls", Value::Array(calls));
    }
    let mut choice = Map::with_capacity(3);
    choice.insert("index", Value::from(0u64));
    choice.insert("message", Value::Object(message));
    choice.insert("finish_reason", finish_reason(output, true));
    let mut out = Map::with_capacity(7);
    out.insert("id", Value::from(REPLAYED_ID));
    out.insert("object", Value::from("chat.completion"));
    out.insert("created", Value::from(0u64));
    out.insert("model", model_value(model));
    out.insert("choices", Value::Array(vec![Value::Object(choice)]));
    if let Some(u) = chat_usage(usage) {
        out.insert("usage", u);
    }
    Value::Object(out)
}

fn chunk(model: &Value, delta: Map, finish: Value) -> Value {
    let mut choice = Map::with_capacity(3);
    choice.insert("index", Value::from(0u64));
    choice.insert("delta", Value::Object(delta));
    choice.insert("finish_reason", finish);
    let mut out = Map::with_capacity(5);
    out.insert("id", Value::from(REPLAYED_ID));
    out.insert("object", Value::from("chat.completion.chunk"));
    out.insert("created", Value::from(0u64));
    out.insert("model", model.clone());
    out.insert("choices", Value::Array(vec![Value::Object(choice)]));
    Value::Object(out)
}

/// The chunks of a stream that says this recorded `output` (OpenAI chat: the role, the
/// text in pieces of [`STREAM_TEXT_PIECE_CHARS`], each tool call whole, the finish
/// reason, then the usage chunk when usage was recorded); empty for an API whose streams
/// cannot be rebuilt ([`can_rebuild_stream`]).
pub fn stream_from_output(
    api: Api,
    output: &Value,
    usage: Option<&Value>,
    model: Option<&Value>,
) -> Vec<Value> {
    if api != Api::OpenAiChat {
        return Vec::new();
    }
    let model = model_value(model);
    let mut chunks = Vec::new();
    let mut first = Map::with_capacity(2);
    first.insert("role", Value::from("assistant"));
    first.insert("content", Value::from(""));
    chunks.push(chunk(&model, first, Value::Null));
    let chars: Vec<char> = text_of(output).chars().collect();
    for piece in chars.chunks(STREAM_TEXT_PIECE_CHARS) {
        let mut d = Map::with_capacity(1);
        d.insert(
            "content",
            Value::from(piece.iter().collect::<String>().as_str()),
        );
        chunks.push(chunk(&model, d, Value::Null));
    }
    for (i, call) in chat_tool_calls(output).into_iter().enumerate() {
        let mut c = match call {
            Value::Object(m) => m,
            _ => continue,
        };
        c.insert("index", Value::from(i as u64));
        let mut d = Map::with_capacity(1);
        d.insert("tool_calls", Value::Array(vec![Value::Object(c)]));
        chunks.push(chunk(&model, d, Value::Null));
    }
    chunks.push(chunk(&model, Map::new(), finish_reason(output, true)));
    if let Some(u) = chat_usage(usage) {
        if let Value::Object(mut last) = chunk(&model, Map::new(), Value::Null) {
            last.insert("choices", Value::Array(Vec::new()));
            last.insert("usage", u);
            chunks.push(Value::Object(last));
        }
    }
    chunks
}

fn responses_reply(output: &Value, usage: Option<&Value>, model: Option<&Value>) -> Value {
    let mut items_out = Vec::new();
    let text = text_of(output);
    if !text.is_empty() {
        let mut part = Map::with_capacity(3);
        part.insert("type", Value::from("output_text"));
        part.insert("text", Value::from(text.as_str()));
        part.insert("annotations", Value::Array(Vec::new()));
        let mut msg = Map::with_capacity(5);
        msg.insert("type", Value::from("message"));
        msg.insert("id", Value::from("msg_graphmind_replayed"));
        msg.insert("status", Value::from("completed"));
        msg.insert("role", Value::from("assistant"));
        msg.insert("content", Value::Array(vec![Value::Object(part)]));
        items_out.push(Value::Object(msg));
    }
    for (i, call) in items(Some(output), "toolCalls").iter().enumerate() {
        let id = get(Some(call), "id")
            .cloned()
            .unwrap_or_else(|| Value::from(format!("call_{i}")));
        let mut item = Map::with_capacity(6);
        item.insert("type", Value::from("function_call"));
        item.insert("id", Value::from(format!("fc_{i}")));
        item.insert("call_id", id);
        item.insert(
            "name",
            get(Some(call), "name").cloned().unwrap_or(Value::from("")),
        );
        item.insert("arguments", Value::from(arguments(call).as_str()));
        item.insert("status", Value::from("completed"));
        items_out.push(Value::Object(item));
    }
    let mut out = Map::with_capacity(8);
    out.insert("id", Value::from(REPLAYED_ID));
    out.insert("object", Value::from("response"));
    out.insert("created_at", Value::from(0u64));
    out.insert(
        "status",
        get(Some(output), "status")
            .cloned()
            .unwrap_or(Value::from("completed")),
    );
    out.insert("model", model_value(model));
    out.insert("output", Value::Array(items_out));
    out.insert("parallel_tool_calls", Value::Bool(true));
    out.insert("tool_choice", Value::from("auto"));
    out.insert("tools", Value::Array(Vec::new()));
    if usage.is_some() {
        let (i, o) = (count(usage, "inputTokens"), count(usage, "outputTokens"));
        let mut u = Map::with_capacity(5);
        u.insert("input_tokens", Value::from(i));
        u.insert("output_tokens", Value::from(o));
        u.insert("total_tokens", Value::from(i + o));
        out.insert("usage", Value::Object(u));
    }
    Value::Object(out)
}

fn anthropic_reply(output: &Value, usage: Option<&Value>, model: Option<&Value>) -> Value {
    let mut content = Vec::new();
    let text = text_of(output);
    if !text.is_empty() {
        let mut block = Map::with_capacity(2);
        block.insert("type", Value::from("text"));
        block.insert("text", Value::from(text.as_str()));
        content.push(Value::Object(block));
    }
    for (i, call) in items(Some(output), "toolCalls").iter().enumerate() {
        let mut block = Map::with_capacity(4);
        block.insert("type", Value::from("tool_use"));
        block.insert(
            "id",
            get(Some(call), "id")
                .cloned()
                .unwrap_or_else(|| Value::from(format!("toolu_{i}"))),
        );
        block.insert(
            "name",
            get(Some(call), "name").cloned().unwrap_or(Value::from("")),
        );
        block.insert(
            "input",
            get(Some(call), "input")
                .cloned()
                .unwrap_or(Value::Object(Map::new())),
        );
        content.push(Value::Object(block));
    }
    let mut u = Map::with_capacity(2);
    u.insert("input_tokens", Value::from(count(usage, "inputTokens")));
    u.insert("output_tokens", Value::from(count(usage, "outputTokens")));
    let mut out = Map::with_capacity(8);
    out.insert("id", Value::from(REPLAYED_ID));
    out.insert("type", Value::from("message"));
    out.insert("role", Value::from("assistant"));
    out.insert("model", model_value(model));
    out.insert("content", Value::Array(content));
    out.insert("stop_reason", finish_reason(output, false));
    out.insert("stop_sequence", Value::Null);
    out.insert("usage", Value::Object(u));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_response, StreamDecoder};

    fn output(text: &str) -> Value {
        json::parse_str(text).unwrap()
    }

    #[test]
    fn a_rebuilt_chat_reply_decodes_to_the_recorded_output() {
        let recorded = output(
            r#"{"text":"","toolCalls":[{"id":"call_1","name":"book","input":{"flight":"GM202"}}],"finishReason":"tool-calls","rawFinishReason":"tool_calls"}"#,
        );
        let usage = output(r#"{"inputTokens":10,"outputTokens":5,"inclusive":true}"#);
        let reply = reply_from_output(
            Api::OpenAiChat,
            &recorded,
            Some(&usage),
            Some(&Value::from("gpt-x")),
        );
        let decoded = decode_response(Api::OpenAiChat, &reply);
        assert_eq!(
            json::to_string(&Value::Object(decoded.output)),
            json::to_string(&recorded)
        );
        assert_eq!(
            json::to_string(&decoded.usage.unwrap()),
            json::to_string(&usage)
        );
    }

    #[test]
    fn a_rebuilt_chat_stream_decodes_to_the_recorded_output() {
        let recorded = output(
            r#"{"text":"Booked: GM202-ADA, have a good flight to Lisbon!","finishReason":"stop","rawFinishReason":"stop"}"#,
        );
        let usage = output(r#"{"inputTokens":3,"outputTokens":4,"inclusive":true}"#);
        let chunks = stream_from_output(Api::OpenAiChat, &recorded, Some(&usage), None);
        let mut decoder = StreamDecoder::new(Api::OpenAiChat);
        for c in &chunks {
            decoder.push(c);
        }
        let decoded = decoder.finish(None);
        assert_eq!(decoded.output.get("text"), recorded.get("text"));
        assert_eq!(
            decoded.output.get("finishReason"),
            recorded.get("finishReason")
        );
        assert_eq!(
            json::to_string(&decoded.usage.unwrap()),
            json::to_string(&usage)
        );
        assert!(stream_from_output(Api::Anthropic, &recorded, None, None).is_empty());
    }

    #[test]
    fn anthropic_and_responses_replies_decode_back() {
        let recorded = output(
            r#"{"text":"hi","toolCalls":[{"id":"t1","name":"f","input":{"a":1}}],"finishReason":"tool-calls","rawFinishReason":"tool_use"}"#,
        );
        for api in [Api::Anthropic, Api::OpenAiResponses] {
            let reply = reply_from_output(api, &recorded, None, None);
            let d = decode_response(api, &reply);
            assert_eq!(d.output.get("text"), recorded.get("text"), "{api:?}");
            assert_eq!(
                json::to_string(d.output.get("toolCalls").unwrap()),
                json::to_string(recorded.get("toolCalls").unwrap()),
                "{api:?}"
            );
        }
    }

    #[test]
    fn an_injected_output_replays_as_the_reply_the_app_got() {
        // A text the debugger injected is recorded as the output itself.
        let text = Value::from("Injected at before.");
        for api in [Api::OpenAiChat, Api::OpenAiResponses, Api::Anthropic] {
            let d = decode_response(api, &reply_from_output(api, &text, None, None));
            assert_eq!(d.output.get("text"), Some(&text), "{api:?}");
        }
        let chunks = stream_from_output(Api::OpenAiChat, &text, None, None);
        let mut decoder = StreamDecoder::new(Api::OpenAiChat);
        for c in &chunks {
            decoder.push(c);
        }
        assert_eq!(decoder.finish(None).output.get("text"), Some(&text));
        // An injected reply already in the provider's shape passes through.
        let shaped = output(
            r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"as given"},"finish_reason":"stop"}]}"#,
        );
        assert_eq!(
            reply_from_output(Api::OpenAiChat, &shaped, None, None),
            shaped
        );
    }
}
