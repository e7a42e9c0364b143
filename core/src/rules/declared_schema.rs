//! The input schemas a run's model requests declared for their tools: OpenAI's
//! `function.parameters` (Chat) or `parameters` (Responses), Anthropic's `input_schema`,
//! the AI SDK's `inputSchema`. A tool step with no schema of its own (a plain function
//! wrapped by `wrapTools({fn})`) holds a debugger's edit to the schema the model was shown
//! for that tool name in the same run, so an edit there is checked too
//! ([`crate::edit_schema`]). The LLM step records them ([`DeclaredSchemas::record`]); the
//! tool step looks one up only when it offers an editable pause, and compiles it then,
//! once per schema.

use std::collections::{HashMap, VecDeque};

use crate::edit_schema::InputSchema;
use crate::json::Value;
use crate::llm;

/// Runs whose declared schemas are remembered (the oldest forgotten first).
pub const MAX_DECLARED_RUNS: usize = 64;
/// Tools remembered per run; past it the run's memory restarts.
pub const MAX_DECLARED_TOOLS_PER_RUN: usize = 256;

/// The JSON Schema a tool definition declares for its input, in any provider's shape.
pub fn declared_input_schema(definition: &Value) -> Option<&Value> {
    let schema = definition
        .get("function")
        .and_then(|f| f.get("parameters"))
        .or_else(|| definition.get("parameters"))
        .or_else(|| definition.get("input_schema"))
        .or_else(|| definition.get("inputSchema"))?;
    matches!(schema, Value::Object(_) | Value::Bool(_)).then_some(schema)
}

/// One declared schema: as sent, and compiled the first time an edit needs it (`None`
/// inside: it does not compile, and edits are not schema-checked).
#[derive(Debug)]
struct Declared {
    schema: Value,
    compiled: Option<Option<InputSchema>>,
}

/// Per run scope: tool name -> the schema the latest request declared for it.
#[derive(Debug, Default)]
pub struct DeclaredSchemas {
    runs: HashMap<String, HashMap<String, Declared>>,
    order: VecDeque<String>,
}

impl DeclaredSchemas {
    /// Remembers the input schema of each named definition of a request in `scope`. A
    /// schema that changed replaces the one before (and its compiled form).
    pub fn record(&mut self, scope: &str, definitions: &[Value]) {
        if definitions.is_empty() {
            return;
        }
        if !self.runs.contains_key(scope) {
            while self.order.len() >= MAX_DECLARED_RUNS {
                if let Some(old) = self.order.pop_front() {
                    self.runs.remove(&old);
                }
            }
            self.order.push_back(scope.to_string());
        }
        let run = self.runs.entry(scope.to_string()).or_default();
        for definition in definitions {
            let (Some(name), Some(schema)) = (
                llm::tool_def_name(definition),
                declared_input_schema(definition),
            ) else {
                continue;
            };
            let name = name.to_string_lossy().into_owned();
            if run.get(&name).is_some_and(|d| &d.schema == schema) {
                continue;
            }
            if run.len() >= MAX_DECLARED_TOOLS_PER_RUN && !run.contains_key(&name) {
                run.clear();
            }
            let declared = Declared {
                schema: schema.clone(),
                compiled: None,
            };
            run.insert(name, declared);
        }
    }

    /// The compiled schema declared for tool `name` in `scope`, if any that compiles.
    pub fn lookup(&mut self, scope: &str, name: &str) -> Option<InputSchema> {
        let declared = self.runs.get_mut(scope)?.get_mut(name)?;
        declared
            .compiled
            .get_or_insert_with(|| InputSchema::compile(&declared.schema).ok())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_str;

    fn v(text: &str) -> Value {
        parse_str(text).unwrap()
    }

    #[test]
    fn each_providers_shape_is_read_and_the_latest_wins() {
        let mut d = DeclaredSchemas::default();
        d.record(
            "run_1",
            &[
                v(r#"{"type":"function","function":{"name":"chat","parameters":{"type":"object","required":["a"]}}}"#),
                v(r#"{"type":"function","name":"resp","parameters":{"type":"object","required":["b"]}}"#),
                v(r#"{"name":"claude","input_schema":{"type":"object","required":["c"]}}"#),
                v(r#"{"type":"web_search_20250305","name":"web_search"}"#),
            ],
        );
        let refuses = |s: &InputSchema, x: &str| s.check(&v(x)).is_err();
        let chat = d.lookup("run_1", "chat").unwrap();
        assert!(refuses(&chat, "{}") && !refuses(&chat, r#"{"a":1}"#));
        assert!(refuses(&d.lookup("run_1", "resp").unwrap(), "{}"));
        assert!(refuses(&d.lookup("run_1", "claude").unwrap(), "{}"));
        assert!(d.lookup("run_1", "web_search").is_none());
        assert!(d.lookup("run_2", "chat").is_none(), "per run");
        d.record(
            "run_1",
            &[v(
                r#"{"type":"function","function":{"name":"chat","parameters":{"type":"object"}}}"#,
            )],
        );
        assert!(
            !refuses(&d.lookup("run_1", "chat").unwrap(), "{}"),
            "replaced"
        );
        d.record(
            "run_1",
            &[v(r#"{"name":"bad","input_schema":{"type":12}}"#)],
        );
        assert!(
            d.lookup("run_1", "bad").is_none(),
            "one that does not compile"
        );
        for i in 0..MAX_DECLARED_RUNS {
            d.record(&format!("r{i}"), &[v(r#"{"name":"t","input_schema":{}}"#)]);
        }
        assert!(
            d.lookup("run_1", "chat").is_none(),
            "the oldest run forgotten"
        );
    }
}
