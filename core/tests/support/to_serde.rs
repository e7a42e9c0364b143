//! The core's `Value` as a `serde_json::Value`, for checking payloads with the
//! `jsonschema` crate (`#[path]`, by the wire and shrink tests).

use graphmind_core::json::{Number, Value};

/// `v` as serde_json holds it. Lossy for lone surrogates: acceptable here, no schema
/// constrains their content.
pub fn to_serde(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Number(Number::Int(i)) => serde_json::Value::from(*i),
        Value::Number(Number::Float(f)) => serde_json::Number::from_f64(*f)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Value::Number(Number::BigInt(d)) => serde_json::from_str(d).unwrap(),
        Value::String(s) => serde_json::Value::String(s.to_string_lossy().into_owned()),
        Value::Array(items) => serde_json::Value::Array(items.iter().map(to_serde).collect()),
        Value::Object(map) => serde_json::Value::Object(
            map.iter()
                .map(|(k, v)| (k.to_string_lossy().into_owned(), to_serde(v)))
                .collect(),
        ),
    }
}
