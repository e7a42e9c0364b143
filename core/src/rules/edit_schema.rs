//! The tool's input schema an edited argument is re-checked against: a debugger's edit of a
//! held tool call's arguments (`exec.resume.input`) runs only when the merged arguments
//! match the JSON Schema the tool declared (the AI SDK's `inputSchema`, a zod or Standard
//! Schema converted to JSON Schema by the app's own library); otherwise the edit is refused
//! with `schema` and the gate stays held. The message names where the value failed (a JSON
//! pointer), never the value.

use std::sync::Arc;

use crate::edit_input::EditRefusal;
use crate::event::RefusalCode;
use crate::json::{self, Value};

/// The first words of every schema refusal (also of a host validator's, `tool_edit`).
pub const SCHEMA_REFUSAL_PREFIX: &str = "the edited arguments do not match the tool's input schema";

/// Why a schema could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The schema is not one the validator accepts.
    #[error("the tool's input schema is not a valid JSON Schema: {0}")]
    Invalid(String),
}

/// A compiled input schema (shared by every call of one tool).
#[derive(Clone)]
pub struct InputSchema(Arc<jsonschema::Validator>);

impl std::fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InputSchema")
    }
}

/// The core's value as `serde_json`'s, through its JSON text (an edit is rare and small).
fn to_serde(value: &Value) -> serde_json::Value {
    serde_json::from_str(&json::to_string(value)).unwrap_or(serde_json::Value::Null)
}

impl InputSchema {
    /// Compiles `schema` (a JSON Schema object).
    pub fn compile(schema: &Value) -> Result<InputSchema, SchemaError> {
        jsonschema::validator_for(&to_serde(schema))
            .map(|v| InputSchema(Arc::new(v)))
            .map_err(|e| SchemaError::Invalid(e.to_string()))
    }

    /// `Ok` when `value` matches; else the `schema` refusal naming the first place it fails.
    pub fn check(&self, value: &Value) -> Result<(), EditRefusal> {
        let instance = to_serde(value);
        match self.0.validate(&instance) {
            Ok(()) => Ok(()),
            Err(error) => {
                let at = error.instance_path().to_string();
                let at = if at.is_empty() { "/".to_string() } else { at };
                Err(EditRefusal {
                    code: RefusalCode::Schema,
                    message: format!("{SCHEMA_REFUSAL_PREFIX} (at {at})"),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_that_breaks_the_schema_is_refused_without_quoting_it() {
        let schema = json::parse_str(
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        )
        .unwrap();
        let s = InputSchema::compile(&schema).unwrap();
        assert!(s
            .check(&json::parse_str(r#"{"city":"Faro"}"#).unwrap())
            .is_ok());
        let refused = s
            .check(&json::parse_str(r#"{"city":12345}"#).unwrap())
            .unwrap_err();
        assert_eq!(refused.code, RefusalCode::Schema);
        assert!(
            refused.message.contains("/city") && !refused.message.contains("12345"),
            "{}",
            refused.message
        );
        assert!(InputSchema::compile(&json::parse_str(r#"{"type":12}"#).unwrap()).is_err());
    }
}
