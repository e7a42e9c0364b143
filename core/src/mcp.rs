//! MCP's result shapes: what an injected value becomes when a debugger answers an MCP
//! request (`graphmind mcp-proxy`, the Node `wrapServer`): one rule, so every MCP surface
//! lifts the same value the same way.

use crate::json::{self, Map, Value};

fn text_block(text: String) -> Value {
    let mut m = Map::new();
    m.insert("type", Value::from("text"));
    m.insert("text", Value::from(text));
    Value::Object(m)
}

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(k, v);
    }
    Value::Object(m)
}

/// Lifts an injected value into the result type `method` answers with (`CallToolResult`,
/// `ReadResourceResult`, `GetPromptResult`, `CreateMessageResult`); a value already of
/// that shape, a whole frame (has `jsonrpc`) or an unmodelled method passes unchanged.
pub fn lift_injected(method: &str, params: Option<&Value>, value: Value) -> Value {
    let is_obj = matches!(value, Value::Object(_));
    if is_obj && value.get("jsonrpc").and_then(Value::as_str).is_some() {
        return value;
    }
    let as_text = |v: &Value| match v {
        Value::String(s) => s.to_string_lossy().into_owned(),
        other => json::to_string(other),
    };
    match method {
        "tools/call" => {
            if is_obj && (matches!(value.get("content"), Some(Value::Array(_))) || value.get("structuredContent").is_some()) {
                return value;
            }
            match value {
                Value::Null => obj(vec![("content", Value::Array(vec![]))]),
                Value::String(_) => obj(vec![("content", Value::Array(vec![text_block(as_text(&value))]))]),
                Value::Object(_) => obj(vec![("content", Value::Array(vec![text_block(as_text(&value))])), ("structuredContent", value)]),
                other => obj(vec![("content", Value::Array(vec![text_block(as_text(&other))]))]),
            }
        }
        "resources/read" => {
            if is_obj && matches!(value.get("contents"), Some(Value::Array(_))) {
                return value;
            }
            let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str).unwrap_or("graphmind://injected").to_owned();
            let item = match &value {
                Value::String(_) => obj(vec![("uri", Value::from(uri)), ("text", Value::from(as_text(&value)))]),
                _ => obj(vec![("uri", Value::from(uri)), ("mimeType", Value::from("application/json")), ("text", Value::from(as_text(&value)))]),
            };
            obj(vec![("contents", Value::Array(vec![item]))])
        }
        "prompts/get" => {
            if is_obj && matches!(value.get("messages"), Some(Value::Array(_))) {
                return value;
            }
            let msg = obj(vec![("role", Value::from("user")), ("content", text_block(as_text(&value)))]);
            obj(vec![("messages", Value::Array(vec![msg]))])
        }
        "sampling/createMessage" => {
            if is_obj && value.get("content").is_some() {
                return value;
            }
            obj(vec![
                ("model", Value::from("graphmind-injected")),
                ("role", Value::from("assistant")),
                ("content", text_block(as_text(&value))),
                ("stopReason", Value::from("endTurn")),
            ])
        }
        _ => value,
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    fn lift(method: &str, params: Option<&str>, value: &str) -> String {
        let params = params.map(|p| json::parse_str(p).unwrap());
        json::to_string(&lift_injected(method, params.as_ref(), json::parse_str(value).unwrap()))
    }

    #[test]
    fn a_tool_gets_text_and_an_object_also_structured_content() {
        assert_eq!(lift("tools/call", None, r#""hi""#), r#"{"content":[{"type":"text","text":"hi"}]}"#);
        assert_eq!(
            lift("tools/call", None, r#"{"a":1}"#),
            r#"{"content":[{"type":"text","text":"{\"a\":1}"}],"structuredContent":{"a":1}}"#
        );
        assert_eq!(lift("tools/call", None, "null"), r#"{"content":[]}"#);
        assert_eq!(lift("tools/call", None, "7"), r#"{"content":[{"type":"text","text":"7"}]}"#);
    }

    #[test]
    fn a_value_already_of_the_result_shape_passes_unchanged() {
        assert_eq!(lift("tools/call", None, r#"{"content":[],"isError":true}"#), r#"{"content":[],"isError":true}"#);
        assert_eq!(lift("resources/read", None, r#"{"contents":[]}"#), r#"{"contents":[]}"#);
        assert_eq!(lift("prompts/get", None, r#"{"messages":[]}"#), r#"{"messages":[]}"#);
        assert_eq!(lift("tools/call", None, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(lift("ping", None, "1"), "1");
    }

    #[test]
    fn resources_prompts_and_sampling_get_their_shapes() {
        assert_eq!(
            lift("resources/read", Some(r#"{"uri":"file:///x"}"#), r#""t""#),
            r#"{"contents":[{"uri":"file:///x","text":"t"}]}"#
        );
        assert_eq!(
            lift("resources/read", None, r#"{"k":true}"#),
            r#"{"contents":[{"uri":"graphmind://injected","mimeType":"application/json","text":"{\"k\":true}"}]}"#
        );
        assert_eq!(
            lift("prompts/get", None, r#""say hi""#),
            r#"{"messages":[{"role":"user","content":{"type":"text","text":"say hi"}}]}"#
        );
        assert!(lift("sampling/createMessage", None, r#""ok""#).contains(r#""stopReason":"endTurn""#));
    }
}
