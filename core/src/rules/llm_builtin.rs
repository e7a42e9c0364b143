//! Built-in tools: tools the provider runs itself (OpenAI Responses' web search, file
//! search, code interpreter...; Anthropic's `server_tool_use` web search / code execution).
//! The codecs list them in a model call's output as `builtinTools`; each is recorded here as
//! an observed node of its own, `tool:<name>` under `llm:step`, with `providerExecuted` and
//! `ungated` set: it already ran when the answer arrived, so there is nothing to gate.

use crate::event::{self, NodeKind};
use crate::json::{Map, Value};

/// The member of a decoded output that lists the built-in tools the provider ran.
pub const BUILTIN_TOOLS_KEY: &str = "builtinTools";
/// `node.finished.status` of a built-in tool whose item reports one of these statuses.
const FAILED_STATUSES: [&str; 2] = ["failed", "incomplete"];

/// The AI SDK's provider-executed tool parts (`tool-call` / `tool-result` with
/// `providerExecuted: true`, in a `doGenerate` result's content or a `doStream`), gathered
/// into `builtinTools` entries `{type: "tool-call", id, name, input, output?, status?}`.
#[derive(Debug, Default, Clone)]
pub struct AiSdkBuiltin {
    entries: Vec<Map>,
}

impl AiSdkBuiltin {
    /// Takes `part` when it is a provider-executed tool call (`providerExecuted: true`) or a
    /// tool result (a model's output only carries results of tools the provider ran; V2
    /// marks them `providerExecuted` too, V3 does not): the app has nothing to run for it,
    /// so it is not one of the step's `toolCalls`. `false` for every other part.
    pub fn take(&mut self, part: &Value) -> bool {
        let id = part.get("toolCallId").cloned();
        match part.get("type").and_then(Value::as_str) {
            Some("tool-call")
                if part.get("providerExecuted").and_then(Value::as_bool) == Some(true) =>
            {
                let entry = self.entry(id, part.get("toolName"));
                entry.insert("input", parsed_input(part.get("input")));
                true
            }
            Some("tool-result") => {
                let output = part.get("result").or_else(|| part.get("output")).cloned();
                let failed = part.get("isError").and_then(Value::as_bool) == Some(true);
                let entry = self.entry(id, part.get("toolName"));
                entry.insert("output", output.unwrap_or(Value::Null));
                if failed {
                    entry.insert("status", Value::from("failed"));
                }
                true
            }
            _ => false,
        }
    }

    /// The entry of the call `id` (a new one, named `name`, when it has none yet).
    fn entry(&mut self, id: Option<Value>, name: Option<&Value>) -> &mut Map {
        let at = self
            .entries
            .iter()
            .position(|e| id.is_some() && e.get("id") == id.as_ref());
        let at = at.unwrap_or_else(|| {
            let mut entry = Map::with_capacity(5);
            entry.insert("type", Value::from("tool-call"));
            if let Some(id) = id {
                entry.insert("id", id);
            }
            if let Some(name) = name {
                entry.insert("name", name.clone());
            }
            self.entries.push(entry);
            self.entries.len() - 1
        });
        &mut self.entries[at]
    }

    /// Adds the gathered entries to `out` as `builtinTools` (nothing when there are none).
    pub fn put(&self, out: &mut Map) {
        if !self.entries.is_empty() {
            let entries = self.entries.iter().cloned().map(Value::Object).collect();
            out.insert(BUILTIN_TOOLS_KEY, Value::Array(entries));
        }
    }
}

/// A tool input as the AI SDK hands it over: JSON text parsed, anything else as given.
fn parsed_input(input: Option<&Value>) -> Value {
    match input {
        Some(Value::String(text)) => crate::json::parse_str(&text.to_string_lossy())
            .unwrap_or_else(|_| Value::String(text.clone())),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

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
/// nodes were recorded. Each event goes to `emit` as its type and payload (the LLM step
/// hands them to its session).
pub fn observe_builtin_tools(
    mut emit: impl FnMut(&str, Value),
    step_node_id: &str,
    step_instance_id: &str,
    output: &Map,
) -> usize {
    let Some(Value::Array(entries)) = output.get(BUILTIN_TOOLS_KEY) else {
        return 0;
    };
    let mut recorded = 0;
    for (index, entry) in entries.iter().enumerate() {
        let Some(name) = tool_name(entry) else {
            continue;
        };
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
        emit("node.started", Value::Object(started));
        let failed = entry
            .get("status")
            .and_then(Value::as_str)
            .is_some_and(|s| FAILED_STATUSES.contains(&s));
        let mut finished = Map::with_capacity(6);
        finished.insert("nodeId", Value::from(node_id.as_str()));
        finished.insert("instanceId", Value::from(instance_id.as_str()));
        finished.insert(
            "output",
            entry.get("output").cloned().unwrap_or(Value::Null),
        );
        finished.insert("durationMs", Value::from(0u64));
        finished.insert("status", Value::from(if failed { "error" } else { "ok" }));
        finished.insert("providerExecuted", Value::Bool(true));
        emit("node.finished", Value::Object(finished));
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
        assert_eq!(
            tool_name(&v(r#"{"type":"web_search_call"}"#)).as_deref(),
            Some("web_search")
        );
        assert_eq!(
            tool_name(&v(r#"{"type":"server_tool_use","name":"code_execution"}"#)).as_deref(),
            Some("code_execution")
        );
        assert_eq!(tool_name(&v(r#"{"id":"x"}"#)), None);
    }

    #[test]
    fn ai_sdk_provider_executed_parts_become_entries_and_app_tools_do_not() {
        let v = |s: &str| crate::json::parse_str(s).unwrap();
        let mut b = AiSdkBuiltin::default();
        assert!(!b.take(&v(
            r#"{"type":"tool-call","toolCallId":"c1","toolName":"mine","input":"{}"}"#
        )));
        assert!(b.take(&v(r#"{"type":"tool-call","toolCallId":"w1","toolName":"web_search","input":"{\"q\":1}","providerExecuted":true}"#)));
        assert!(b.take(&v(
            r#"{"type":"tool-result","toolCallId":"w1","toolName":"web_search","result":[1]}"#
        )));
        let mut out = Map::new();
        b.put(&mut out);
        assert_eq!(
            crate::json::to_string(&Value::Object(out)),
            r#"{"builtinTools":[{"type":"tool-call","id":"w1","name":"web_search","input":{"q":1},"output":[1]}]}"#
        );
    }
}
