//! Canonical JSON and fingerprints against the reference fixtures, RFC 8785's vectors and
//! property tests.

use graphmind_core::canonical::{
    canonical_call, canonical_call_js, canonical_json, canonical_json_text, canonical_json_with,
    DEFAULT_IGNORE_KEYS,
};
use graphmind_core::fingerprint::{
    fingerprint, fingerprint_js_with, fingerprint_text_js, fingerprint_with, sha256_hex32,
};
use graphmind_core::json::{self, JsStr, Map, Number, Value};
use proptest::prelude::*;
use std::path::PathBuf;

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors")
}

fn load(rel: &str) -> Value {
    let bytes = std::fs::read(vectors().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    json::parse(&bytes).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn loop_guard_fixture_canonical_cases() {
    let fixture = load("reference/loop-guard-fixture.json");
    let cases = fixture.get("canonical").unwrap().as_array().unwrap();
    assert_eq!(cases.len(), 17);
    for case in cases {
        let name = case.get("name").unwrap().as_str().unwrap();
        let node_id = case.get("nodeId").unwrap().as_str().unwrap();
        let absent = case.get("inputAbsent") == Some(&Value::Bool(true));
        let input = if absent {
            None
        } else {
            Some(case.get("input").unwrap())
        };
        let ignore: Vec<String> = match case.get("ignoreKeys") {
            Some(v) => str_list(v),
            None => DEFAULT_IGNORE_KEYS.iter().map(|s| s.to_string()).collect(),
        };
        let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
        let expected = case.get("canonical").unwrap().as_str().unwrap();
        assert_eq!(canonical_call(node_id, input, &ignore), expected, "{name}");
        let fp = case.get("fingerprint").unwrap().as_str().unwrap();
        assert_eq!(fingerprint_with(node_id, input, &ignore), fp, "{name}");
        assert_eq!(sha256_hex32(expected.as_bytes()), fp, "{name}");
        if case.get("ignoreKeys").is_none() {
            assert_eq!(fingerprint(node_id, input), fp, "{name}");
        }
    }
}

fn run_differential(cases: &[Value]) -> usize {
    for (i, case) in cases.iter().enumerate() {
        let node_id = case.get("nodeId").unwrap().as_js_str().unwrap();
        let input = case.get("input");
        let ignore = str_list(case.get("ignoreKeys").unwrap());
        let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
        let expected = case.get("canonical").unwrap().as_str().unwrap();
        assert_eq!(
            canonical_call_js(node_id, input, &ignore),
            expected,
            "case {i}"
        );
        let fp = case.get("fingerprint").unwrap().as_str().unwrap();
        assert_eq!(fingerprint_js_with(node_id, input, &ignore), fp, "case {i}");
    }
    cases.len()
}

#[test]
fn differential_canonical_cases() {
    let fixture = load("reference/differential.json");
    let cases = fixture.get("canonical").unwrap().as_array().unwrap();
    assert_eq!(run_differential(cases), 354);
}

#[test]
fn differential_canonical_cases_with_lone_surrogates() {
    let fixture = load("reference/differential.json");
    let text = fixture
        .get("canonicalLoneSurrogates")
        .unwrap()
        .as_js_str()
        .unwrap();
    let cases = json::parse(text.as_bytes()).unwrap();
    let cases = cases.as_array().unwrap();
    assert_eq!(run_differential(cases), 52);
}

#[test]
fn rfc8785_vectors() {
    let mut names: Vec<_> = std::fs::read_dir(vectors().join("jcs/input"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 6);
    for name in names {
        let input = load(&format!("jcs/input/{name}"));
        let expected = std::fs::read_to_string(vectors().join("jcs/output").join(&name)).unwrap();
        assert_eq!(canonical_json_with(&input, &[]), expected, "{name}");
    }
}

#[test]
fn es6_number_spelling_1k() {
    let text = std::fs::read_to_string(vectors().join("jcs/es6-numbers-1k.txt")).unwrap();
    let mut count = 0;
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (hex, expected) = line.split_once(',').unwrap();
        let f = f64::from_bits(u64::from_str_radix(hex, 16).unwrap());
        assert_eq!(
            canonical_json(&Value::Number(Number::Float(f))),
            expected,
            "{hex}"
        );
        count += 1;
    }
    assert_eq!(count, 1000);
}

#[test]
fn number_rules() {
    let v = |n: Number| canonical_json(&Value::Number(n));
    assert_eq!(v(Number::Float(f64::NAN)), "null");
    assert_eq!(v(Number::Float(f64::INFINITY)), "null");
    assert_eq!(v(Number::Float(-0.0)), "0");
    assert_eq!(v(Number::Float(1.0)), "1");
    // A host integer keeps every digit (Python int, JS BigInt); a double is ECMAScript's.
    assert_eq!(v(Number::Int(9007199254740993)), "9007199254740993");
    assert_eq!(v(Number::Float(9007199254740993.0)), "9007199254740992");
    assert_eq!(
        v(Number::BigInt("-123456789012345678901234567890".into())),
        "-123456789012345678901234567890"
    );
}

#[test]
fn markers_are_the_references() {
    use graphmind_core::canonical::{
        CIRCULAR_MARKER, DEPTH_MARKER, MAX_CANONICAL_DEPTH, UNSERIALIZABLE_MARKER,
    };
    assert_eq!(
        (DEPTH_MARKER, CIRCULAR_MARKER, UNSERIALIZABLE_MARKER),
        ("[depth]", "[circular]", "[unserializable]")
    );
    assert_eq!(MAX_CANONICAL_DEPTH, 64);
    // 66 nested objects: depths 0..=64 are walked, the one at depth 65 is the marker.
    let mut v = Value::Object(Map::new());
    for _ in 0..65 {
        let mut m = Map::new();
        m.insert("a", v);
        v = Value::Object(m);
    }
    let text = canonical_json(&v);
    assert_eq!(
        text,
        format!("{}\"[depth]\"{}", "{\"a\":".repeat(65), "}".repeat(65))
    );
}

#[test]
fn reference_depth_cut_agrees_with_python() {
    // graphmind-ai 0.5.1: canonical_call("tool:x", [[...70 levels...]]) cuts at the same level.
    let mut v = Value::Null;
    for _ in 0..70 {
        v = Value::Array(vec![v]);
    }
    let text = canonical_call("tool:x", Some(&v), &[] as &[&str]);
    assert_eq!(
        text,
        format!(
            "[\"tool:x\",{}\"[depth]\"{}]",
            "[".repeat(65),
            "]".repeat(65)
        )
    );
}

// -- properties -------------------------------------------------------------

fn arb_key() -> impl Strategy<Value = JsStr> {
    prop_oneof![
        "[a-z_]{0,6}".prop_map(|s| JsStr::from(s.as_str())),
        Just(JsStr::from("_meta")),
        Just(JsStr::from("é")),
        Just(JsStr::from("😀")),
        Just(JsStr::from("\u{ff61}")),
        prop::collection::vec(any::<u16>(), 0..4).prop_map(|u| JsStr::from_utf16(&u)),
    ]
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| Value::Number(Number::Int(i))),
        any::<f64>().prop_map(|f| Value::Number(Number::Float(f))),
        "[0-9]{20,30}".prop_map(|d| Value::Number(Number::BigInt(format!("1{d}").into()))),
        prop::collection::vec(any::<u16>(), 0..8)
            .prop_map(|u| Value::String(JsStr::from_utf16(&u))),
        ".{0,8}".prop_map(|s| Value::from(s.as_str())),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((arb_key(), inner), 0..6).prop_map(|entries| {
                let mut m = Map::new();
                for (k, v) in entries {
                    m.insert(k, v);
                }
                Value::Object(m)
            }),
        ]
    })
}

/// The same value with every object's members in reverse order.
fn reversed(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m.iter().rev() {
                out.insert(k.clone(), reversed(v));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// A JSON-parsed copy of a canonical text is the same value for canonicalisation, except
/// that BigInt digits that fit come back as integers and integers beyond i64 as doubles:
/// compare against values without those.
fn json_safe(v: &Value) -> bool {
    match v {
        Value::Number(Number::BigInt(_)) => false,
        Value::Array(items) => items.iter().all(json_safe),
        Value::Object(m) => m.values().all(json_safe),
        _ => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn insensitive_to_key_order(v in arb_value()) {
        prop_assert_eq!(canonical_json(&v), canonical_json(&reversed(&v)));
        prop_assert_eq!(fingerprint("tool:x", Some(&v)), fingerprint("tool:x", Some(&reversed(&v))));
    }

    #[test]
    fn idempotent(v in arb_value()) {
        let once = canonical_json_with(&v, &[]);
        let parsed = json::parse(once.as_bytes()).expect("canonical text is JSON");
        let twice = canonical_json_with(&parsed, &[]);
        if json_safe(&v) {
            prop_assert_eq!(&twice, &once);
        }
        // Always a fixed point from the second round on.
        let thrice = canonical_json_with(&json::parse(twice.as_bytes()).unwrap(), &[]);
        prop_assert_eq!(thrice, twice);
    }

    #[test]
    fn never_panics_on_arbitrary_text(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(v) = json::parse(&bytes) {
            let _ = canonical_json(&v);
            let _ = fingerprint("tool:x", Some(&v));
        }
    }

    #[test]
    fn strings_are_written_as_json_stringify_writes_them(units in prop::collection::vec(
        prop_oneof![any::<u16>(), 0u16..0x80, 0xD000u16..0xE000, Just(0x22u16), Just(0x5Cu16)], 0..40)) {
        let v = Value::String(JsStr::from_utf16(&units));
        prop_assert_eq!(canonical_json(&v), json::to_string(&v));
    }

    #[test]
    fn keys_sort_by_utf16_code_units(keys in prop::collection::vec(
        prop::collection::vec(prop_oneof![0x20u16..0x80, 0xD000u16..0xE000, 0xE000u16..=0xFFFF, any::<u16>()], 0..12), 0..12)) {
        let mut map = Map::new();
        for (i, k) in keys.iter().enumerate() {
            map.insert(JsStr::from_utf16(k), Value::from(i as i64));
        }
        let mut entries: Vec<_> = map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        entries.sort_by(|a, b| a.0.cmp_utf16(&b.0));
        let mut sorted = Map::new();
        for (k, v) in entries {
            sorted.insert(k, v);
        }
        prop_assert_eq!(canonical_json_with(&Value::Object(map), &[]), json::to_string(&Value::Object(sorted)));
    }

    #[test]
    fn ignored_keys_never_appear(v in arb_value()) {
        let text = canonical_json(&v);
        prop_assert!(!text.contains("\"_meta\":"));
    }
}

#[test]
fn benchmark_sample_matches_the_python_reference() {
    // graphmind-ai 0.5.1: fingerprint_call("tool:search_files", json.load(sample), {"_meta"}).
    let sample = std::fs::read(vectors().join("../../bench/sample-1k.json")).unwrap();
    let v = json::parse(&sample).unwrap();
    assert_eq!(
        fingerprint("tool:search_files", Some(&v)),
        "64d02db96e16511cfce8f8920cf29d44"
    );
}

// -- from JSON text -----------------------------------------------------------------------

/// Canonical text and fingerprint taken from JSON text agree with parsing it first, errors
/// included (the text path copies already-canonical tokens and parses everything else).
fn text_agrees_with_parsing(text: &[u8], ignore: &[&str]) -> Result<(), String> {
    let parsed = json::parse(text);
    let slow = parsed
        .as_ref()
        .map(|v| canonical_json_with(v, ignore))
        .map_err(Clone::clone);
    let fast = canonical_json_text(text, ignore);
    if fast != slow {
        return Err(format!(
            "canonical {fast:?} != {slow:?} for {:?}",
            String::from_utf8_lossy(text)
        ));
    }
    let id = JsStr::from("tool:x");
    let slow = parsed
        .as_ref()
        .map(|v| fingerprint_js_with(&id, Some(v), ignore))
        .map_err(Clone::clone);
    let fast = fingerprint_text_js(&id, Some(text), ignore);
    if fast != slow {
        return Err(format!(
            "fingerprint {fast:?} != {slow:?} for {:?}",
            String::from_utf8_lossy(text)
        ));
    }
    Ok(())
}

#[test]
fn from_text_agrees_with_parsing_on_every_vector_file_and_prefix() {
    let mut files = Vec::new();
    for dir in ["jsontestsuite/test_parsing", "jcs/input", "reference"] {
        for entry in std::fs::read_dir(vectors().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|x| x == "json") {
                files.push(std::fs::read(&path).unwrap());
            }
        }
    }
    assert!(files.len() > 300);
    for bytes in &files {
        for ignore in [&[][..], DEFAULT_IGNORE_KEYS] {
            text_agrees_with_parsing(bytes, ignore).unwrap();
            // Written back as JSON.stringify would (the text path's common case).
            if let Ok(v) = json::parse(bytes) {
                text_agrees_with_parsing(json::to_string(&v).as_bytes(), ignore).unwrap();
            }
        }
        if bytes.len() < 4096 {
            for end in 0..bytes.len() {
                text_agrees_with_parsing(&bytes[..end], &[]).unwrap();
            }
        }
    }
    assert_eq!(
        fingerprint_text_js(&JsStr::from("n"), None, DEFAULT_IGNORE_KEYS),
        Ok(fingerprint("n", None))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn from_text_agrees_with_parsing_on_random_values(v in arb_value()) {
        let text = json::to_string(&v);
        text_agrees_with_parsing(text.as_bytes(), DEFAULT_IGNORE_KEYS).map_err(TestCaseError::fail)?;
        text_agrees_with_parsing(json::to_string(&reversed(&v)).as_bytes(), &[]).map_err(TestCaseError::fail)?;
        if json_safe(&v) {
            prop_assert_eq!(canonical_json_text(text.as_bytes(), DEFAULT_IGNORE_KEYS).unwrap(), canonical_json(&v));
        }
    }
}
