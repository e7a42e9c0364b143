//! Built-in tools: tools the provider runs itself (OpenAI Responses' web search, file
//! search, code interpreter...; Anthropic's `server_tool_use` web search / code execution).
//! The codecs list them in a model call's output as `builtinTools`; each is recorded here as
//! an observed node of its own, `tool:<name>` under `llm:step`, with `providerExecuted` and
//! `ungated` set: it already ran when the answer arrived, so there is nothing to gate.

use crate::event::{self, NodeKind};
use crate::json::{Map, Value};
use crate::session::Session;

/// The member of a decoded output that lists the built-in tools the provider ran.
pub const BUILTIN_TOOLS_KEY: &str = "builtinTools";
/// `node.finished.status` of a built-in tool whose item reports one of these statuses.
const FAILED_STATUSES: [&str; 2] = ["failed", "incomplete"];

/// The node name of a built-in tool entry: its `name` (Anthropic's server tool), else its
/// item type without `_call` (`web_search_call` -> `web_search`).
fn tool_name(entry: &Value) -> Option<String> {
    if let Some(name) = entry.get("name").and_then(Value::as_str) {
        return Some(name.to_string());
    }
    let kind = entry.get("type").and_then(Value::as_str)?;
    Some(kind.strip_suffix("_call").unwrap_or(kind).to_string())
}

/// Records every built-in tool of `output` (a decoded model call's output) as an observed
/// node under `llm:step`: `node.started` (its `input`, when the provider reported one) then
/// `node.finished` (its `output`, status `error` for a failed or incomplete item). The
/// instance id is the provider's item id, else `<step instance>:b<index>`. Returns how many
/// nodes were recorded.
pub fn observe_builtin_tools(
    session: &Session,
    run_id: Option<&str>,
    step_node_id: &str,
    step_instance_id: &str,
    output: &Map,
) -> usize {
    let Some(Value::Array(entries)) = output.get(BUILTIN_TOOLS_KEY) else {
        return 0;
    };
    let mut recorded = 0;
    for (index, entry) in entries.iter().enumerate() {
        let Some(name) = tool_name(entry) else { continue };
        let node_id = event::node_id(NodeKind::Tool, &name);
        let instance_id = entry
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{step_instance_id}:b{index}"));
        let mut started = Map::with_capacity(8);
        started.insert("nodeId", Value::from(node_id.as_str()));
        started.insert("kind", Value::from("tool"));
        started.insert("name", Value::from(name.as_str()));
        started.insert("instanceId", Value::from(instance_id.as_str()));
        started.insert("parentId", Value::from(step_node_id));
        started.insert("input", entry.get("input").cloned().unwrap_or(Value::Null));
        started.insert("providerExecuted", Value::Bool(true));
        started.insert("ungated", Value::Bool(true));
        session.emit(run_id, "node.started", Value::Object(started));
        let failed = entry
            .get("status")
            .and_then(Value::as_str)
            .is_some_and(|s| FAILED_STATUSES.contains(&s));
        let mut finished = Map::with_capacity(6);
        finished.insert("nodeId", Value::from(node_id.as_str()));
        finished.insert("instanceId", Value::from(instance_id.as_str()));
        finished.insert("output", entry.get("output").cloned().unwrap_or(Value::Null));
        finished.insert("durationMs", Value::from(0u64));
        finished.insert("status", Value::from(if failed { "error" } else { "ok" }));
        finished.insert("providerExecuted", Value::Bool(true));
        session.emit(run_id, "node.finished", Value::Object(finished));
        recorded += 1;
    }
    recorded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_server_tool_or_the_item_type() {
        let v = |s: &str| crate::json::parse_str(s).unwrap();
        assert_eq!(tool_name(&v(r#"{"type":"web_search_call"}"#)).as_deref(), Some("web_search"));
        assert_eq!(
            tool_name(&v(r#"{"type":"server_tool_use","name":"code_execution"}"#)).as_deref(),
            Some("code_execution")
        );
        assert_eq!(tool_name(&v(r#"{"id":"x"}"#)), None);
    }
}
