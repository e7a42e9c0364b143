//! Conformance: every case of the reference's shrink fixture (version 2), byte for byte.

use graphmind_core::json::{parse, to_string, JsStr, JsStrBuilder, Map, Value};
use graphmind_core::shrink::{
    is_valid_event_payload, serialize_payload, skeleton_plan, MAX_PAYLOAD_BYTES, MAX_SHRINK_DEPTH,
    MAX_SHRINK_KEYS, MAX_TRIM_FIELDS, PREVIEW_CHARS, SKELETON_CHARS, SKELETON_MIN_CHARS,
    TRUNCATION_SUFFIX,
};
use sha2::{Digest, Sha256};

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/vectors/reference/shrink-fixture.json"
    );
    parse(&std::fs::read(path).expect("fixture")).expect("fixture parses")
}

fn int(v: &Value) -> usize {
    v.as_i64().expect("an integer") as usize
}

/// Expands the fixture's generator shorthands (see its `generator` text).
fn expand(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(expand).collect()),
        Value::Object(map) if map.len() == 1 => {
            let (key, arg) = map.iter().next().unwrap();
            let args = arg.as_array();
            match (key.as_str(), args) {
                (Some("$repeat"), Some(args)) => {
                    let unit = expand(&args[0]);
                    let unit = unit.as_js_str().expect("$repeat unit is a string");
                    let n = int(&args[1]);
                    let mut b = JsStrBuilder::with_capacity(unit.len() * n);
                    for _ in 0..n {
                        for u in unit.utf16_units() {
                            b.push_utf16_unit(u);
                        }
                    }
                    Value::String(b.finish())
                }
                (Some("$array"), Some(args)) => {
                    let item = expand(&args[0]);
                    Value::Array(vec![item; int(&args[1])])
                }
                (Some("$concat"), Some(parts)) => {
                    let mut b = JsStrBuilder::default();
                    for part in parts {
                        let part = expand(part);
                        for u in part
                            .as_js_str()
                            .expect("$concat part is a string")
                            .utf16_units()
                        {
                            b.push_utf16_unit(u);
                        }
                    }
                    Value::String(b.finish())
                }
                (Some("$keys"), Some(args)) => {
                    let prefix = args[0].as_str().expect("prefix");
                    let n = int(&args[1]);
                    let item = expand(&args[2]);
                    let mut out = Map::with_capacity(n);
                    for i in 0..n {
                        out.push_unique(JsStr::from(format!("{prefix}{i}")), item.clone());
                    }
                    Value::Object(out)
                }
                (Some("$merge"), Some(parts)) => {
                    let mut out = Map::new();
                    for part in parts {
                        let Value::Object(part) = expand(part) else {
                            panic!("$merge of a non-object")
                        };
                        for (k, v) in part {
                            out.push_unique(k, v);
                        }
                    }
                    Value::Object(out)
                }
                _ => Value::Object(map.iter().map(|(k, v)| (k.clone(), expand(v))).collect()),
            }
        }
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map.iter() {
                out.push_unique(k.clone(), expand(v));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[test]
fn constants_match_the_fixture() {
    let f = fixture();
    let c = f.get("constants").unwrap();
    assert_eq!(int(c.get("MAX_PAYLOAD_BYTES").unwrap()), MAX_PAYLOAD_BYTES);
    assert_eq!(int(c.get("PREVIEW_CHARS").unwrap()), PREVIEW_CHARS);
    assert_eq!(int(c.get("MAX_SHRINK_DEPTH").unwrap()), MAX_SHRINK_DEPTH);
    assert_eq!(int(c.get("MAX_SHRINK_KEYS").unwrap()), MAX_SHRINK_KEYS);
    assert_eq!(int(c.get("MAX_TRIM_FIELDS").unwrap()), MAX_TRIM_FIELDS);
    assert_eq!(int(c.get("SKELETON_CHARS").unwrap()), SKELETON_CHARS);
    assert_eq!(
        int(c.get("SKELETON_MIN_CHARS").unwrap()),
        SKELETON_MIN_CHARS
    );
    assert_eq!(
        c.get("TRUNCATION_SUFFIX").unwrap().as_str(),
        Some(TRUNCATION_SUFFIX)
    );
}

#[test]
fn skeleton_plans_match_the_fixture() {
    let f = fixture();
    let plans = f.get("skeletonPlans").unwrap().as_object().unwrap();
    assert_eq!(plans.len(), 10);
    for (event_type, plan) in plans.iter() {
        let ours = skeleton_plan(event_type.as_str().unwrap()).expect("a known type");
        assert_eq!(to_string(&ours), to_string(plan), "{event_type}");
    }
    assert!(skeleton_plan("node.custom").is_none());
}

#[test]
fn every_fixture_case_matches_byte_for_byte() {
    let f = fixture();
    let cases = f.get("cases").unwrap().as_array().unwrap();
    assert_eq!(cases.len(), 49);
    let mut failures = Vec::new();
    for case in cases {
        let name = case.get("name").unwrap().as_str().unwrap();
        let input = expand(case.get("input").unwrap());
        let max = case.get("maxBytes").map_or(MAX_PAYLOAD_BYTES, int);
        let event_type = case.get("type").and_then(Value::as_str);
        let expected = case.get("expected").unwrap();
        let out = serialize_payload(&input, max, event_type);

        let want_truncated = expected.get("truncated").unwrap().as_bool().unwrap();
        if out.truncated != want_truncated {
            failures.push(format!(
                "{name}: truncated {} (want {want_truncated})",
                out.truncated
            ));
        }
        if let Some(json) = expected.get("json") {
            let json = json.as_str().expect("expected json is well-formed text");
            if out.json != json {
                let at = out
                    .json
                    .bytes()
                    .zip(json.bytes())
                    .take_while(|(a, b)| a == b)
                    .count();
                let lo = at.saturating_sub(80);
                failures.push(format!(
                    "{name}: json differs at byte {at} (len {} vs {}):\n  ours: {:?}\n  want: {:?}",
                    out.json.len(),
                    json.len(),
                    out.json.get(lo..(at + 80).min(out.json.len())),
                    json.get(lo..(at + 80).min(json.len())),
                ));
            }
        } else {
            let bytes = int(expected.get("jsonBytes").unwrap());
            let sha = expected.get("jsonSha256").unwrap().as_str().unwrap();
            let ours: String = Sha256::digest(out.json.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            if out.json.len() != bytes || ours != sha {
                let head = expected
                    .get("jsonHead")
                    .and_then(Value::as_js_str)
                    .map(|s| s.to_string_lossy().into_owned());
                failures.push(format!(
                    "{name}: {} bytes (want {bytes}), sha {ours} (want {sha})\n  ours head: {:?}\n  want head: {:?}",
                    out.json.len(),
                    out.json.get(..160),
                    head
                ));
            }
        }
        if !out.truncated {
            assert_eq!(
                out.json,
                to_string(&input),
                "{name}: untouched payload is plain JSON"
            );
        }
        // The result reparses, and every case with a known type that ends up shrunk but not
        // as the whole-payload marker is still a valid payload of its type.
        let reparsed = parse(out.json.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        if let (Some(t), true) = (event_type, out.truncated) {
            let whole_marker = reparsed
                .as_object()
                .is_some_and(|m| m.len() == 3 && m.contains_key("preview"));
            if !whole_marker {
                assert!(
                    is_valid_event_payload(t, &reparsed),
                    "{name}: result is not a valid {t}"
                );
            }
        }
        if out.truncated {
            assert!(out.original_bytes > max, "{name}: original_bytes");
        } else {
            assert_eq!(out.original_bytes, out.json.len());
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
