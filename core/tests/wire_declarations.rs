//! The protocol's declarations (`event::declared_fields` and each payload piece's
//! `FIELDS`) against the reference's JSON Schema (`tests/vectors/reference/wire-schema.json`):
//! every message type the core declares exists in the schema with the same required fields
//! and every field the schema names, and every message type in the schema is declared.
//! Fields the core writes beyond the reference schema (protocol additions after it was
//! taken) are listed here by name, so a new one is a decision, not an accident.

use graphmind_core::event::{self, FieldSpec, MessageType};
use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Payload fields written by the core that the reference schema does not name.
const ADDITIONS: &[(&str, &str)] = &[
    ("graph.hint", "gap"),
    ("node.finished", "injected"),
    ("node.finished", "recoveredFromError"),
];

fn schema() -> Json {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/vectors/reference/wire-schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `node` with its `$ref` chain followed.
fn resolve<'a>(schema: &'a Json, mut node: &'a Json) -> &'a Json {
    while let Some(r) = node.get("$ref").and_then(Json::as_str) {
        let name = r.strip_prefix("#/$defs/").expect("local ref");
        node = &schema["$defs"][name];
    }
    node
}

fn keys(node: &Json, field: &str) -> BTreeSet<String> {
    match &node[field] {
        Json::Object(m) => m.keys().cloned().collect(),
        Json::Array(a) => a.iter().map(|k| k.as_str().unwrap().to_owned()).collect(),
        _ => BTreeSet::new(),
    }
}

/// Checks one declared object against its schema object; returns the declared top-level
/// keys the schema does not name.
fn check(schema: &Json, what: &str, object: &Json, fields: &[FieldSpec]) -> BTreeSet<String> {
    let object = resolve(schema, object);
    let declared: Vec<&FieldSpec> = fields.iter().filter(|f| !f.path.is_empty()).collect();
    let top: BTreeSet<String> = declared.iter().map(|f| f.path[0].to_owned()).collect();
    let required: BTreeSet<String> = declared
        .iter()
        .filter(|f| f.required)
        .map(|f| f.path[0].to_owned())
        .collect();
    assert_eq!(
        required,
        keys(object, "required"),
        "{what}: required fields differ from the schema's"
    );
    let named = keys(object, "properties");
    let missing: Vec<&String> = named.difference(&top).collect();
    assert!(missing.is_empty(), "{what}: not declared: {missing:?}");
    assert!(
        fields.iter().any(|f| f.path.is_empty()) == (object["additionalProperties"] != false),
        "{what}: extras are declared exactly where the schema allows more fields"
    );
    for group in &top {
        let members: Vec<&FieldSpec> = declared
            .iter()
            .copied()
            .filter(|f| f.path.len() == 2 && f.path[0] == group)
            .collect();
        if members.is_empty() {
            continue;
        }
        let inner = resolve(schema, &object["properties"][group]);
        let member_keys: BTreeSet<String> = members.iter().map(|f| f.path[1].to_owned()).collect();
        assert_eq!(member_keys, keys(inner, "properties"), "{what}.{group}");
        // A group is written when one of its members is, so a lone member is required in it.
        let inner_required: BTreeSet<String> = members
            .iter()
            .filter(|f| f.required || members.len() == 1)
            .map(|f| f.path[1].to_owned())
            .collect();
        assert_eq!(inner_required, keys(inner, "required"), "{what}.{group}");
    }
    top.difference(&named).cloned().collect()
}

#[test]
fn every_declared_message_matches_the_reference_schema() {
    let schema = schema();
    for &message in MessageType::ALL {
        let name = message.as_str();
        let envelope = &schema["$defs"][format!("envelope.{name}")];
        assert!(envelope.is_object(), "{name} is not in the schema");
        let payload = &envelope["properties"]["payload"];
        let beyond = check(&schema, name, payload, event::declared_fields(message));
        let allowed: BTreeSet<String> = ADDITIONS
            .iter()
            .filter(|(t, _)| *t == name)
            .map(|(_, f)| (*f).to_owned())
            .collect();
        assert_eq!(beyond, allowed, "{name}: fields beyond the schema");
    }
}

#[test]
fn every_schema_message_is_declared_by_the_core() {
    let schema = schema();
    let types: Vec<String> = schema["$defs"]
        .as_object()
        .unwrap()
        .keys()
        .filter_map(|k| k.strip_prefix("envelope.").map(str::to_owned))
        .collect();
    assert_eq!(types.len(), MessageType::ALL.len());
    for t in types {
        let message = MessageType::parse(&t).unwrap_or_else(|| panic!("{t} is not declared"));
        assert!(!event::declared_fields(message).is_empty(), "{t}");
    }
}

#[test]
fn every_payload_piece_matches_the_reference_schema() {
    let schema = schema();
    let pieces: [(&str, &[FieldSpec]); 6] = [
        ("SdkInfo", event::SdkInfo::FIELDS),
        ("ErrorInfo", event::ErrorInfo::FIELDS),
        ("GraphNodeHint", event::GraphNodeHint::FIELDS),
        ("TokenDelta", event::TokenDelta::FIELDS),
        ("TokenUsage", event::TokenUsage::FIELDS),
        ("BreakpointMatcher", event::BreakpointMatcher::FIELDS),
    ];
    for (name, fields) in pieces {
        let beyond = check(&schema, name, &schema["$defs"][name], fields);
        assert!(
            beyond.is_empty(),
            "{name}: fields beyond the schema: {beyond:?}"
        );
    }
}

#[test]
fn declarations_drive_the_bytes() {
    // The declaration order is the wire order, group members nest, the extras sit where
    // `..` is declared, and a later declared field replaces an extra of its name in place.
    let mut ack = event::HelloAck::new("0.6.0", vec!["pause".into()], event::RunMode::Step);
    ack.extra.insert("x", 1u64.into());
    assert_eq!(
        event::Message::payload_json(&ack),
        r#"{"versions":{"protocol":1,"viewer":"0.6.0"},"capabilities":["pause"],"breakpoints":[],"mode":"step","x":1}"#
    );
    let mut done = event::NodeError::new("tool:t", event::ErrorInfo::new("E", "m"));
    done.extra.insert("heldMs", 9u64.into());
    done.extra.insert("y", true.into());
    done.held_ms = Some(2.0);
    assert_eq!(
        event::Message::payload_json(&done),
        r#"{"nodeId":"tool:t","error":{"name":"E","message":"m"},"heldMs":2,"y":true}"#
    );
}
