//! MCP's result shapes: what an injected value becomes when a debugger answers an MCP
//! request (`graphmind mcp-proxy`, the Node `wrapServer`): one rule, so every MCP surface
//! lifts the same value the same way.

use crate::event::NodeKind;
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
            if is_obj
                && (matches!(value.get("content"), Some(Value::Array(_)))
                    || value.get("structuredContent").is_some())
            {
                return value;
            }
            match value {
                Value::Null => obj(vec![("content", Value::Array(vec![]))]),
                Value::String(_) => obj(vec![(
                    "content",
                    Value::Array(vec![text_block(as_text(&value))]),
                )]),
                Value::Object(_) => obj(vec![
                    ("content", Value::Array(vec![text_block(as_text(&value))])),
                    ("structuredContent", value),
                ]),
                other => obj(vec![(
                    "content",
                    Value::Array(vec![text_block(as_text(&other))]),
                )]),
            }
        }
        "resources/read" => {
            if is_obj && matches!(value.get("contents"), Some(Value::Array(_))) {
                return value;
            }
            let uri = params
                .and_then(|p| p.get("uri"))
                .and_then(Value::as_str)
                .unwrap_or("graphmind://injected")
                .to_owned();
            let item = match &value {
                Value::String(_) => obj(vec![
                    ("uri", Value::from(uri)),
                    ("text", Value::from(as_text(&value))),
                ]),
                _ => obj(vec![
                    ("uri", Value::from(uri)),
                    ("mimeType", Value::from("application/json")),
                    ("text", Value::from(as_text(&value))),
                ]),
            };
            obj(vec![("contents", Value::Array(vec![item]))])
        }
        "prompts/get" => {
            if is_obj && matches!(value.get("messages"), Some(Value::Array(_))) {
                return value;
            }
            let msg = obj(vec![
                ("role", Value::from("user")),
                ("content", text_block(as_text(&value))),
            ]);
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

/// The graph node an MCP method maps to: `(node_id, kind, name)`. `tools/call` ->
/// `tool:<name>`, `resources/read` -> `resource:<uri>`, `prompts/get` -> `prompt:<name>`,
/// `sampling/createMessage` -> `llm:sampling`, anything else `mcp:<method>` (custom); a
/// missing name or URI is `unknown`. `graphmind mcp-proxy` and the Node `wrapServer` both
/// draw requests with it.
pub fn request_node(method: &str, params: Option<&Value>) -> (String, NodeKind, String) {
    let param = |key: &str| {
        params
            .and_then(|p| p.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("unknown")
            .to_owned()
    };
    match method {
        "tools/call" => {
            let n = param("name");
            (format!("tool:{n}"), NodeKind::Tool, n)
        }
        "resources/read" => {
            let u = param("uri");
            (format!("resource:{u}"), NodeKind::Resource, u)
        }
        "prompts/get" => {
            let n = param("name");
            (format!("prompt:{n}"), NodeKind::Prompt, n)
        }
        "sampling/createMessage" => ("llm:sampling".into(), NodeKind::Llm, "sampling".into()),
        other => (format!("mcp:{other}"), NodeKind::Custom, other.to_owned()),
    }
}

/// How a server built on the low-level `Server` (its own `setRequestHandler`) gates a
/// request it receives: the work methods (`tools/call`, `resources/read`, `prompts/get`)
/// are gated nodes; every other method (`tools/list`, `ping`, ...) passes untouched.
#[derive(Clone, Debug, PartialEq)]
pub struct GatedRequest {
    /// The node ([`request_node`]).
    pub node_id: String,
    /// Its kind.
    pub kind: NodeKind,
    /// Its name.
    pub name: String,
    /// What the node records as its input: a tool's or prompt's `arguments` (`{}` when
    /// none), a resource's `{uri}`.
    pub input: Value,
    /// Whether the debugger may edit the input (arguments: yes; a URI: no). An edit
    /// replaces `params.arguments`.
    pub editable: bool,
}

/// The gated view of a request a server received, or `None` for a method not gated.
pub fn gated_request(method: &str, params: Option<&Value>) -> Option<GatedRequest> {
    let (node_id, kind, name) = request_node(method, params);
    let (input, editable) = match method {
        "tools/call" | "prompts/get" => (
            params
                .and_then(|p| p.get("arguments"))
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
            true,
        ),
        "resources/read" => (obj(vec![("uri", Value::from(name.as_str()))]), false),
        _ => return None,
    };
    Some(GatedRequest {
        node_id,
        kind,
        name,
        input,
        editable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_methods_are_gated_with_their_input_others_pass() {
        let p = json::parse_str(r#"{"name":"echo","arguments":{"m":"hi"}}"#).unwrap();
        let g = gated_request("tools/call", Some(&p)).unwrap();
        assert_eq!(
            (g.node_id.as_str(), g.kind, g.editable),
            ("tool:echo", NodeKind::Tool, true)
        );
        assert_eq!(json::to_string(&g.input), r#"{"m":"hi"}"#);
        let r = json::parse_str(r#"{"uri":"file:///n.txt"}"#).unwrap();
        let g = gated_request("resources/read", Some(&r)).unwrap();
        assert_eq!(
            (g.node_id.as_str(), g.editable),
            ("resource:file:///n.txt", false)
        );
        assert_eq!(json::to_string(&g.input), r#"{"uri":"file:///n.txt"}"#);
        let g = gated_request(
            "prompts/get",
            Some(&json::parse_str(r#"{"name":"greet"}"#).unwrap()),
        )
        .unwrap();
        assert_eq!(json::to_string(&g.input), "{}");
        assert!(gated_request("tools/list", None).is_none());
        assert!(gated_request("ping", None).is_none());
        assert_eq!(
            request_node("sampling/createMessage", None).0,
            "llm:sampling"
        );
        assert_eq!(request_node("tools/call", None).0, "tool:unknown");
    }

    fn lift(method: &str, params: Option<&str>, value: &str) -> String {
        let params = params.map(|p| json::parse_str(p).unwrap());
        json::to_string(&lift_injected(
            method,
            params.as_ref(),
            json::parse_str(value).unwrap(),
        ))
    }

    #[test]
    fn a_tool_gets_text_and_an_object_also_structured_content() {
        assert_eq!(
            lift("tools/call", None, r#""hi""#),
            r#"{"content":[{"type":"text","text":"hi"}]}"#
        );
        assert_eq!(
            lift("tools/call", None, r#"{"a":1}"#),
            r#"{"content":[{"type":"text","text":"{\"a\":1}"}],"structuredContent":{"a":1}}"#
        );
        assert_eq!(lift("tools/call", None, "null"), r#"{"content":[]}"#);
        assert_eq!(
            lift("tools/call", None, "7"),
            r#"{"content":[{"type":"text","text":"7"}]}"#
        );
    }

    #[test]
    fn a_value_already_of_the_result_shape_passes_unchanged() {
        assert_eq!(
            lift("tools/call", None, r#"{"content":[],"isError":true}"#),
            r#"{"content":[],"isError":true}"#
        );
        assert_eq!(
            lift("resources/read", None, r#"{"contents":[]}"#),
            r#"{"contents":[]}"#
        );
        assert_eq!(
            lift("prompts/get", None, r#"{"messages":[]}"#),
            r#"{"messages":[]}"#
        );
        assert_eq!(
            lift(
                "tools/call",
                None,
                r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
            ),
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        );
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
        assert!(
            lift("sampling/createMessage", None, r#""ok""#).contains(r#""stopReason":"endTurn""#)
        );
    }
}
