//! Runs every part of the reference LLM-capture fixture through `graphmind_core::llm`.

use graphmind_core::json::{self, Value};
use graphmind_core::llm::{
    normalize_finish_reason, pick_params, provider_usage, sanitize_tool_definition, schema_hash,
    tool_call, ToolSchemaMemory, UsageProvider, SAMPLING_PARAM_KEYS,
};

#[path = "support/verdict.rs"]
mod verdict;
use verdict::finish;

fn fixture() -> Value {
    let path = format!(
        "{}/../tests/vectors/reference/llm-fixture.json",
        env!("CARGO_MANIFEST_DIR")
    );
    json::parse(&std::fs::read(&path).expect("read fixture")).expect("parse fixture")
}

fn section(name: &str) -> Vec<Value> {
    fixture()
        .get(name)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("section {name}"))
        .clone()
}

fn text(v: &Value) -> String {
    json::to_string(v)
}

#[test]
fn finish_reasons() {
    let cases = section("finishReasons");
    let mut failures = Vec::new();
    for case in &cases {
        let c = case.as_array().expect("triple");
        let got =
            normalize_finish_reason(Some(&c[0]), c[1].as_bool().expect("bool")).map(|r| r.as_str());
        let want = c[2].as_str();
        if got != want {
            failures.push(format!(
                "{} (tool calls {}): got {got:?}, want {want:?}",
                text(&c[0]),
                text(&c[1])
            ));
        }
    }
    finish("finishReasons", cases.len(), failures);
}

#[test]
fn tool_calls() {
    let cases = section("toolCalls");
    let mut failures = Vec::new();
    for case in &cases {
        let input = case.get("in").expect("in");
        let got =
            tool_call(input.get("id"), input.get("name"), input.get("args")).unwrap_or(Value::Null);
        let want = case.get("out").expect("out");
        if text(&got) != text(want) {
            failures.push(format!(
                "{}:\n  got  {}\n  want {}",
                text(input),
                text(&got),
                text(want)
            ));
        }
    }
    finish("toolCalls", cases.len(), failures);
}

#[test]
fn schema_hashes() {
    let cases = section("schemaHashes");
    let mut failures = Vec::new();
    for case in &cases {
        let input = case.get("in").expect("in");
        let got = schema_hash(input);
        let want = case.get("hash").and_then(Value::as_str).expect("hash");
        if got != want {
            failures.push(format!("{}: got {got}, want {want}", text(input)));
        }
    }
    finish("schemaHashes", cases.len(), failures);
}

#[test]
fn tool_definitions() {
    let cases = section("toolDefinitions");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.get("name").and_then(Value::as_str).unwrap_or("?");
        let input = case.get("in").expect("in");
        let out = sanitize_tool_definition(input);
        let want = case.get("out").expect("out");
        if text(&out) != text(want) {
            failures.push(format!(
                "{name}:\n  got  {}\n  want {}",
                text(&out),
                text(want)
            ));
        }
        let want_hash = case.get("hash").and_then(Value::as_str).expect("hash");
        if schema_hash(&out) != want_hash {
            failures.push(format!(
                "{name}: hash {} want {want_hash}",
                schema_hash(&out)
            ));
        }
        // capture_tools records and hashes exactly that form.
        let mut memory = ToolSchemaMemory::new();
        match memory.capture_tools("run", std::slice::from_ref(input)) {
            Some(c) => {
                let got = c.tools.first().map(|(_, h)| h.as_str());
                if got != Some(want_hash)
                    || c.tool_schemas.get(want_hash).map(text) != Some(text(want))
                {
                    failures.push(format!(
                        "{name}: capture_tools gave {}",
                        text(&c.to_value())
                    ));
                }
            }
            None => failures.push(format!("{name}: capture_tools found no name")),
        }
    }
    finish("toolDefinitions", cases.len(), failures);
}

#[test]
fn usage() {
    let cases = section("usage");
    let mut failures = Vec::new();
    for case in &cases {
        let provider = case
            .get("provider")
            .and_then(Value::as_str)
            .expect("provider");
        let name = case.get("name").and_then(Value::as_str).unwrap_or("?");
        let Some(p) = UsageProvider::from_name(provider) else {
            failures.push(format!("{provider}: unknown provider"));
            continue;
        };
        let got = provider_usage(p, case.get("raw").expect("raw")).unwrap_or(Value::Null);
        let want = case.get("out").expect("out");
        if text(&got) != text(want) {
            failures.push(format!(
                "{provider} / {name}:\n  got  {}\n  want {}",
                text(&got),
                text(want)
            ));
        }
    }
    finish("usage", cases.len(), failures);
}

#[test]
fn sampling_params() {
    let cases = section("samplingParams");
    let want: Vec<&str> = cases.iter().map(|v| v.as_str().expect("string")).collect();
    assert_eq!(
        SAMPLING_PARAM_KEYS.as_slice(),
        want.as_slice(),
        "the allow-list, in order"
    );
    // pick_params keeps exactly the allow-listed keys that were given, in list order.
    let mut body = json::Map::new();
    body.insert("api_key", Value::from("sk-SECRET"));
    body.insert("metadata", json::parse_str(r#"{"user_id":"u"}"#).unwrap());
    for key in want.iter().rev() {
        body.insert(*key, Value::from(1i64));
    }
    body.insert("seed", Value::Null);
    let picked = pick_params(&Value::Object(body));
    let keys: Vec<String> = picked.keys().map(|k| k.to_string()).collect();
    let expected: Vec<String> = want
        .iter()
        .filter(|k| **k != "seed")
        .map(|k| k.to_string())
        .collect();
    assert_eq!(keys, expected);
}

#[test]
fn schemas_are_sent_once_per_run_and_again_after_release() {
    let def = json::parse_str(r#"{"name":"search","input_schema":{"type":"object"}}"#).unwrap();
    let mut memory = ToolSchemaMemory::new();
    let first = memory
        .capture_tools("r1", std::slice::from_ref(&def))
        .unwrap();
    assert_eq!(first.tool_schemas.len(), 1);
    let second = memory
        .capture_tools("r1", std::slice::from_ref(&def))
        .unwrap();
    assert!(second.tool_schemas.is_empty());
    assert_eq!(second.tools, first.tools);
    let other_run = memory
        .capture_tools("r2", std::slice::from_ref(&def))
        .unwrap();
    assert_eq!(other_run.tool_schemas.len(), 1);
    memory.release("r1", &first);
    assert_eq!(
        memory
            .capture_tools("r1", std::slice::from_ref(&def))
            .unwrap()
            .tool_schemas
            .len(),
        1
    );
    // Unnamed definitions are skipped; nothing named is nothing recorded.
    assert!(memory
        .capture_tools("r1", &[json::parse_str(r#"{"x":1}"#).unwrap()])
        .is_none());
}
