//! Properties of the shrink for arbitrary JSON and small budgets:
//! - it never panics, its output parses, an untouched payload is the plain JSON;
//! - the output fits the budget wherever the algorithm guarantees it: always when the budget
//!   is at least `MAX_MARKER_BYTES`; for a valid payload of a known event type whenever the
//!   budget is at least 4096 bytes;
//! - a shrunk valid payload of a known event type still validates against that type's payload
//!   definition in the wire schema (checked with the `jsonschema` crate, independent of ours);
//! - our payload validator agrees with the wire schema;
//! - a result fed back in comes back unchanged.

use std::collections::HashMap;
use std::sync::OnceLock;

use graphmind_core::json::{parse, to_string, JsStr, Map, Number, Value};
use graphmind_core::shrink::{is_valid_event_payload, serialize_payload, MAX_MARKER_BYTES};
use proptest::prelude::*;

#[path = "support/to_serde.rs"]
mod to_serde;
use to_serde::to_serde;

const EVENT_TYPES: [&str; 10] = [
    "run.started",
    "run.finished",
    "graph.hint",
    "node.started",
    "node.token",
    "node.finished",
    "node.error",
    "exec.paused",
    "exec.refused",
    "exec.resumed",
];

// ---------------------------------------------------------------------------------------
// The wire schema, through the jsonschema crate.
// ---------------------------------------------------------------------------------------

fn validators() -> &'static HashMap<&'static str, jsonschema::Validator> {
    static CELL: OnceLock<HashMap<&'static str, jsonschema::Validator>> = OnceLock::new();
    CELL.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/vectors/reference/wire-schema.json"
        );
        let root: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let mut out = HashMap::new();
        for t in EVENT_TYPES {
            let payload = &root["$defs"][format!("envelope.{t}")]["properties"]["payload"];
            assert!(payload.is_object(), "{t} has a payload definition");
            // The payload definition, with the document's $defs for its references.
            let mut schema = serde_json::Map::new();
            schema.insert("$schema".into(), root["$schema"].clone());
            schema.insert("$defs".into(), root["$defs"].clone());
            schema.insert(
                "allOf".into(),
                serde_json::Value::Array(vec![payload.clone()]),
            );
            let validator = jsonschema::validator_for(&serde_json::Value::Object(schema))
                .expect("schema compiles");
            out.insert(t, validator);
        }
        out
    })
}

fn schema_valid(event_type: &str, payload: &Value) -> bool {
    validators()[event_type].is_valid(&to_serde(payload))
}

// ---------------------------------------------------------------------------------------
// Strategies.
// ---------------------------------------------------------------------------------------

/// UTF-16 units that land on every awkward boundary.
fn unit_run() -> impl Strategy<Value = Vec<u16>> {
    prop_oneof![
        4 => "[a-z ]{1,4}".prop_map(|s| s.encode_utf16().collect()),
        1 => Just(vec![0xE9]),                    // é
        1 => Just(vec![0x4E2D]),                  // 中
        1 => Just(vec![0xD83D, 0xDE00]),          // 😀
        1 => Just(vec![0xD83D]),                  // lone high
        1 => Just(vec![0xDE00]),                  // lone low
        1 => Just(vec![0x01]),
        1 => Just(vec![b'"' as u16]),
        1 => Just(vec![b'\\' as u16]),
        1 => Just(vec![b'\n' as u16]),
    ]
}

fn js_string() -> impl Strategy<Value = JsStr> {
    prop_oneof![
        // Short text.
        6 => prop::collection::vec(unit_run(), 0..12).prop_map(|runs| JsStr::from_utf16(&runs.concat())),
        // A big string: a run repeated up to ~20k units.
        1 => (prop::collection::vec(unit_run(), 1..4), 100usize..6000).prop_map(|(runs, n)| {
            let unit = runs.concat();
            JsStr::from_utf16(&unit.repeat(n))
        }),
    ]
}

fn key() -> impl Strategy<Value = JsStr> {
    prop_oneof![
        6 => "[a-z]{1,6}".prop_map(JsStr::from),
        1 => Just(JsStr::from("__graphmindTruncated")),
        1 => Just(JsStr::from("bytes")),
        1 => Just(JsStr::from("preview")),
        1 => Just(JsStr::from("fields")),
        1 => Just(JsStr::from("__proto__")),
        1 => js_string().prop_filter("short key", |k| k.len() < 64),
    ]
}

fn number() -> impl Strategy<Value = Number> {
    prop_oneof![
        any::<i64>().prop_map(Number::Int),
        (-1e6f64..1e6).prop_map(Number::Float),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Number::Float),
        Just(Number::BigInt("123456789012345678901234567890".into())),
    ]
}

fn object_of(
    inner: impl Strategy<Value = Value> + Clone,
    max: usize,
) -> impl Strategy<Value = Value> {
    prop::collection::vec((key(), inner), 0..max).prop_map(|entries| {
        let mut map = Map::new();
        for (k, v) in entries {
            map.insert(k, v);
        }
        Value::Object(map)
    })
}

fn leaf() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        js_string().prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(9, 300, 10, |inner| {
        prop_oneof![
            4 => prop::collection::vec(inner.clone(), 0..10).prop_map(Value::Array),
            4 => object_of(inner, 10),
            // A wide object (over the key cap) of small leaves now and then.
            1 => (leaf(), 250usize..600).prop_map(|(v, n)| {
                let v = match v {
                    Value::String(s) if s.len() > 64 => Value::from("x"),
                    other => other,
                };
                let mut map = Map::with_capacity(n);
                for i in 0..n {
                    map.push_unique(JsStr::from(format!("k{i}")), v.clone());
                }
                Value::Object(map)
            }),
        ]
    })
}

fn budget() -> impl Strategy<Value = usize> {
    prop_oneof![
        0usize..200,
        200usize..4096,
        4096usize..20_000,
        20_000usize..70_000
    ]
}

fn event_type() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        1 => Just(None),
        1 => Just(Some("node.custom")),
        6 => prop::sample::select(EVENT_TYPES.to_vec()).prop_map(Some),
    ]
}

fn s(text: &str) -> Value {
    Value::from(text)
}

fn obj(entries: Vec<(&str, Value)>) -> Map {
    let mut map = Map::new();
    for (k, v) in entries {
        map.insert(k, v);
    }
    map
}

/// A small valid payload of each event type.
fn base(event_type: &str) -> Map {
    match event_type {
        "run.started" => obj(vec![
            ("app", s("demo")),
            (
                "sdk",
                Value::Object(obj(vec![("name", s("ai")), ("version", s("7.0.79"))])),
            ),
            ("meta", Value::Object(obj(vec![("env", s("dev"))]))),
        ]),
        "run.finished" => obj(vec![
            ("status", s("error")),
            (
                "error",
                Value::Object(obj(vec![
                    ("name", s("Error")),
                    ("message", s("boom")),
                    ("stack", s("at x")),
                ])),
            ),
        ]),
        "graph.hint" => obj(vec![(
            "nodes",
            Value::Array(vec![Value::Object(obj(vec![
                ("nodeId", s("tool:a")),
                ("kind", s("tool")),
                ("name", s("a")),
            ]))]),
        )]),
        "node.started" => obj(vec![
            ("nodeId", s("tool:search")),
            ("kind", s("tool")),
            ("name", s("search")),
            ("instanceId", s("i1")),
            ("input", Value::Object(obj(vec![("q", Value::from(1i64))]))),
        ]),
        "node.token" => obj(vec![
            ("nodeId", s("llm:step")),
            (
                "deltas",
                Value::Array(vec![Value::Object(obj(vec![
                    ("t", s("text")),
                    ("v", s("hello")),
                ]))]),
            ),
        ]),
        "node.finished" => obj(vec![
            ("nodeId", s("tool:search")),
            ("instanceId", s("i1")),
            (
                "output",
                Value::Object(obj(vec![("hits", Value::from(3i64))])),
            ),
            (
                "usage",
                Value::Object(obj(vec![
                    ("inputTokens", Value::from(1i64)),
                    ("outputTokens", Value::from(2i64)),
                ])),
            ),
            ("durationMs", Value::from(4.25)),
            ("heldMs", Value::from(0i64)),
            ("status", s("ok")),
        ]),
        "node.error" => obj(vec![
            ("nodeId", s("llm:step")),
            ("instanceId", s("l1")),
            (
                "error",
                Value::Object(obj(vec![
                    ("name", s("APIError")),
                    ("message", s("bad")),
                    ("stack", s("s")),
                ])),
            ),
        ]),
        "exec.paused" => obj(vec![
            ("pauseId", s("p1")),
            ("nodeId", s("tool:search")),
            ("point", s("before")),
            ("reason", s("loop")),
            (
                "loop",
                Value::Object(obj(vec![
                    ("repeats", Value::from(3i64)),
                    ("firstSeq", Value::from(1i64)),
                    ("lastSeq", Value::from(3i64)),
                    ("fingerprint", s("abc")),
                ])),
            ),
        ]),
        "exec.refused" => obj(vec![
            ("pauseId", s("p1")),
            ("code", s("schema")),
            ("message", s("amount: expected a number")),
        ]),
        "exec.resumed" => obj(vec![("pauseId", s("p1")), ("action", s("inject"))]),
        other => panic!("no base for {other}"),
    }
}

/// Free-text string fields of each base (any string is valid there), as paths.
fn free_strings(event_type: &str) -> &'static [&'static [&'static str]] {
    match event_type {
        "run.started" => &[&["app"], &["sdk", "name"], &["sdk", "version"]],
        "run.finished" => &[
            &["error", "name"],
            &["error", "message"],
            &["error", "stack"],
        ],
        "node.started" => &[&["nodeId"], &["name"], &["instanceId"]],
        "node.token" => &[&["nodeId"]],
        "node.finished" => &[&["nodeId"], &["instanceId"]],
        "node.error" => &[
            &["nodeId"],
            &["instanceId"],
            &["error", "name"],
            &["error", "message"],
            &["error", "stack"],
        ],
        "exec.paused" => &[&["pauseId"], &["nodeId"], &["loop", "fingerprint"]],
        "exec.refused" => &[&["pauseId"], &["message"]],
        "exec.resumed" => &[&["pauseId"]],
        _ => &[],
    }
}

fn set_path(map: &mut Map, path: &[&str], v: Value) {
    if path.len() == 1 {
        map.insert(path[0], v);
    } else if let Some(Value::Object(inner)) = map.get_mut(path[0]) {
        set_path(inner, &path[1..], v);
    }
}

/// A valid payload of a known type, made large and awkward in ways the schema allows.
fn valid_payload() -> impl Strategy<Value = (&'static str, Value)> {
    (
        prop::sample::select(EVENT_TYPES.to_vec()),
        prop::collection::vec(js_string(), 0..6),
        prop::collection::vec((key(), value()), 0..6),
        any::<bool>(),
        value(),
    )
        .prop_map(|(t, strings, extra, extra_first, slot)| {
            let mut payload = base(t);
            for (path, text) in free_strings(t).iter().zip(strings) {
                set_path(&mut payload, path, Value::String(text));
            }
            // Loose fields (never a declared key: those have shapes).
            let declared = |k: &JsStr| payload_declares(t, k);
            let mut loose = Map::new();
            for (k, v) in extra {
                if !declared(&k) {
                    loose.insert(k, v);
                }
            }
            match t {
                "node.finished" => drop(payload.insert("output", slot)),
                "node.started" => drop(payload.insert("input", slot)),
                _ => drop(loose.insert("slot", slot)),
            }
            let merged = if extra_first {
                let mut m = loose;
                for (k, v) in payload {
                    m.insert(k, v);
                }
                m
            } else {
                for (k, v) in loose {
                    payload.insert(k, v);
                }
                payload
            };
            (t, Value::Object(merged))
        })
}

fn payload_declares(event_type: &str, key: &JsStr) -> bool {
    graphmind_core::shrink::skeleton_plan(event_type)
        .and_then(|plan| plan.as_object().map(|m| m.get_js(key).is_some()))
        .unwrap_or(false)
}

/// A base payload with random damage: a key removed or a value replaced.
fn near_valid_payload() -> impl Strategy<Value = (&'static str, Value)> {
    (
        prop::sample::select(EVENT_TYPES.to_vec()),
        any::<prop::sample::Index>(),
        value(),
        0u8..3,
        any::<bool>(),
    )
        .prop_map(|(t, idx, replacement, op, nested)| {
            let mut payload = base(t);
            let keys: Vec<JsStr> = payload.keys().cloned().collect();
            let k = keys[idx.index(keys.len())].clone();
            let k = k.as_str().unwrap().to_owned();
            match (op, nested, payload.get_mut(&k)) {
                (_, true, Some(Value::Object(inner))) if !inner.is_empty() => {
                    let inner_keys: Vec<String> = inner.keys().map(|k| k.to_string()).collect();
                    let ik = &inner_keys[idx.index(inner_keys.len())];
                    if op == 0 {
                        inner.remove(ik);
                    } else {
                        inner.insert(ik.as_str(), replacement);
                    }
                }
                (0, _, _) => drop(payload.remove(&k)),
                _ => drop(payload.insert(k.as_str(), replacement)),
            }
            (t, Value::Object(payload))
        })
}

// ---------------------------------------------------------------------------------------
// Properties.
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn any_value_any_budget(v in value(), max in budget(), t in event_type()) {
        let out = serialize_payload(&v, max, t);
        let reparsed = parse(out.json.as_bytes()).expect("output parses");
        if !out.truncated {
            prop_assert_eq!(&out.json, &to_string(&v));
            prop_assert!(out.json.len() <= max);
        } else {
            prop_assert!(out.original_bytes > max);
            prop_assert_eq!(out.original_bytes, to_string(&v).len());
            prop_assert_eq!(reparsed.get("__graphmindTruncated"), Some(&Value::Bool(true)));
        }
        if max >= MAX_MARKER_BYTES {
            prop_assert!(out.json.len() <= max, "{} > {}", out.json.len(), max);
        }
        // Idempotent: a result within budget comes back unchanged.
        // (Compared with the reparsed value's own text: our parser reads an integer beyond
        // 64 bits as a double, as JavaScript does, so its spelling may change.)
        let text = to_string(&reparsed);
        if text.len() <= max {
            let again = serialize_payload(&reparsed, max, t);
            prop_assert!(!again.truncated);
            prop_assert_eq!(again.json, text);
        }
    }

    #[test]
    fn valid_events_stay_valid_and_fit((t, payload) in valid_payload(), max in 4096usize..70_000) {
        prop_assert!(is_valid_event_payload(t, &payload));
        prop_assert!(schema_valid(t, &payload), "base is valid per the wire schema");
        let out = serialize_payload(&payload, max, Some(t));
        prop_assert!(out.json.len() <= max, "{} > {}", out.json.len(), max);
        let reparsed = parse(out.json.as_bytes()).expect("output parses");
        prop_assert!(schema_valid(t, &reparsed), "{} result not valid: {}", t, &out.json[..out.json.len().min(400)]);
        prop_assert!(is_valid_event_payload(t, &reparsed));
    }

    #[test]
    fn our_validator_agrees_with_the_wire_schema((t, payload) in near_valid_payload()) {
        prop_assert_eq!(is_valid_event_payload(t, &payload), schema_valid(t, &payload), "{} {}", t, to_string(&payload));
    }
}

#[test]
fn validators_compile_and_accept_the_bases() {
    for t in EVENT_TYPES {
        let payload = Value::Object(base(t));
        assert!(schema_valid(t, &payload), "{t}");
        assert!(is_valid_event_payload(t, &payload), "{t}");
        assert!(!schema_valid(t, &Value::from("x")));
        assert!(!is_valid_event_payload(t, &Value::from("x")));
    }
}

/// The properties above are not vacuous: over the same strategies, every tier is reached.
#[test]
fn the_strategies_reach_every_tier() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut plain, mut trimmed, mut skeleton, mut marker) = (0, 0, 0, 0);
    let strategy = (valid_payload(), 4096usize..70_000);
    for _ in 0..256 {
        let ((t, payload), max) = strategy.new_tree(&mut runner).unwrap().current();
        let out = serialize_payload(&payload, max, Some(t));
        let reparsed = parse(out.json.as_bytes()).unwrap();
        let map = reparsed.as_object().unwrap();
        if !out.truncated {
            plain += 1;
        } else if map.len() == 3 && map.contains_key("preview") && map.contains_key("bytes") {
            marker += 1;
        } else if map.keys().all(|k| {
            payload_declares(t, k)
                || ["__graphmindTruncated", "bytes", "preview", "fields"]
                    .contains(&k.as_str().unwrap_or(""))
        }) {
            skeleton += 1;
        } else {
            trimmed += 1;
        }
    }
    eprintln!("plain {plain}, trimmed {trimmed}, skeleton {skeleton}, marker {marker}");
    assert!(
        plain > 10 && trimmed > 10 && skeleton > 0,
        "plain {plain}, trimmed {trimmed}, skeleton {skeleton}"
    );
    assert_eq!(
        marker, 0,
        "a valid event never ends as the whole-payload marker"
    );
}
