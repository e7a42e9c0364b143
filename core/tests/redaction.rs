//! Runs every case of the reference redaction fixture and the redaction arrays of the
//! differential vectors through `graphmind_core::redact`, plus property tests.

use graphmind_core::json::{self, Value};
use graphmind_core::redact::{EventContext, HideSwitches, RedactOutcome, Redactor, REDACTED};

fn vectors(name: &str) -> Value {
    let path = format!(
        "{}/../tests/vectors/reference/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    json::parse(&bytes).unwrap_or_else(|e| panic!("parse {path}: {e:?}"))
}

fn switches(v: Option<&Value>) -> HideSwitches {
    let on = |k: &str| {
        v.and_then(|v| v.get(k))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    HideSwitches {
        inputs: on("hideInputs"),
        outputs: on("hideOutputs"),
        tool_args: on("hideToolArgs"),
        tool_results: on("hideToolResults"),
    }
}

/// Runs one case; returns the failures (each names the case and the event index).
fn run_case(label: &str, case: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    let mut redactor = Redactor::new(switches(case.get("switches")));
    let ins = case.get("in").and_then(Value::as_array).expect("in");
    let outs = case.get("out").and_then(Value::as_array).expect("out");
    assert_eq!(ins.len(), outs.len(), "{label}: in/out lengths");
    for (i, (event, want)) in ins.iter().zip(outs).enumerate() {
        let ty = event.get("type").and_then(Value::as_str).expect("type");
        let ctx = EventContext {
            run_id: event.get("runId").and_then(Value::as_str).unwrap_or(""),
            node_kind: event.get("nodeKind").and_then(Value::as_str),
        };
        let mut payload = event.get("payload").cloned().unwrap_or(Value::Null);
        let before = json::to_string(&payload);
        let outcome = redactor.redact_in(&ctx, ty, &mut payload);
        let want_dropped = want.get("dropped").and_then(Value::as_bool) == Some(true);
        if want_dropped {
            if outcome.keep() {
                failures.push(format!(
                    "{label} #{i} ({ty}): expected dropped, got {outcome:?} {}",
                    json::to_string(&payload)
                ));
            } else if !payload.is_null() {
                failures.push(format!("{label} #{i}: dropped payload not cleared"));
            }
            continue;
        }
        let want_payload = json::to_string(want.get("payload").expect("payload"));
        let got = json::to_string(&payload);
        if !outcome.keep() {
            failures.push(format!(
                "{label} #{i} ({ty}): dropped, expected {want_payload}"
            ));
        } else if got != want_payload {
            failures.push(format!(
                "{label} #{i} ({ty}):\n  got  {got}\n  want {want_payload}"
            ));
        } else if matches!(outcome, RedactOutcome::Unchanged) && got != before {
            failures.push(format!(
                "{label} #{i} ({ty}): outcome Unchanged but payload changed"
            ));
        } else if !matches!(outcome, RedactOutcome::Unchanged) && got == before {
            failures.push(format!(
                "{label} #{i} ({ty}): outcome {outcome:?} but payload unchanged"
            ));
        }
    }
    failures
}

#[test]
fn redaction_fixture_every_case() {
    let fixture = vectors("redaction-fixture.json");
    assert_eq!(
        fixture.get("placeholder").and_then(Value::as_str),
        Some(REDACTED)
    );
    let cases = fixture
        .get("cases")
        .and_then(Value::as_array)
        .expect("cases");
    assert_eq!(cases.len(), 23, "every fixture case is run");
    let mut failures = Vec::new();
    for case in cases {
        let name = case.get("name").and_then(Value::as_str).unwrap_or("?");
        failures.extend(run_case(name, case));
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn differential_redaction_every_case() {
    let diff = vectors("differential.json");
    let plain = diff
        .get("redaction")
        .and_then(Value::as_array)
        .expect("redaction")
        .clone();
    // The lone-surrogate cases are stored as JSON text (serde-based tools reject them).
    let text = diff
        .get("redactionLoneSurrogates")
        .and_then(Value::as_js_str)
        .expect("lone");
    let lone = json::parse(text.as_bytes()).expect("parse redactionLoneSurrogates");
    let lone = lone.as_array().expect("array").clone();
    let mut failures = Vec::new();
    let mut n = 0;
    for (set, cases) in [("redaction", &plain), ("redactionLoneSurrogates", &lone)] {
        for (i, case) in cases.iter().enumerate() {
            failures.extend(run_case(&format!("{set}[{i}]"), case));
            n += 1;
        }
    }
    assert_eq!(n, 84 + 36, "every differential case ran");
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// -- the binding entry point and kind tracking -----------------------------------------

fn obj(text: &str) -> Value {
    json::parse_str(text).expect("test json")
}

#[test]
fn unreadable_payload_is_sent_as_its_failed_form_or_dropped() {
    let mut r = Redactor::new(HideSwitches {
        outputs: true,
        ..HideSwitches::NONE
    });
    let ctx = EventContext {
        run_id: "run-1",
        node_kind: None,
    };
    // The binding read the identity fields, but reading `output` raised.
    let mut readable = obj(r#"{"nodeId":"llm:a","instanceId":"i1","durationMs":3,"status":"ok"}"#);
    let outcome = r.redact_unreadable(&ctx, "node.finished", &mut readable, &["output"]);
    assert!(
        matches!(outcome, RedactOutcome::Failed(ref w) if w.key == "redaction:failed"),
        "{outcome:?}"
    );
    assert_eq!(
        json::to_string(&readable),
        r#"{"nodeId":"llm:a","instanceId":"i1","durationMs":3,"status":"ok","output":"__REDACTED__","redaction":{"count":0,"keys":["input","output","deltas"],"failed":true}}"#
    );
    // Not even the identity could be read: dropped, with one warning to log.
    let mut nothing = Value::Null;
    let outcome = r.redact_unreadable(&ctx, "node.token", &mut nothing, &[]);
    assert!(
        matches!(outcome, RedactOutcome::Dropped(ref w) if w.key == "redaction:dropped"),
        "{outcome:?}"
    );
    assert!(!outcome.keep());
    // A type no switch covers is the event layer's business.
    let mut err = obj(r#"{"nodeId":"x"}"#);
    assert_eq!(
        r.redact_unreadable(&ctx, "node.error", &mut err, &["error"]),
        RedactOutcome::Unchanged
    );
    // No switch on: nothing to protect.
    let mut off = Redactor::new(HideSwitches::NONE);
    let mut v = obj(r#"{"nodeId":"x"}"#);
    assert_eq!(
        off.redact_unreadable(&ctx, "node.started", &mut v, &["input"]),
        RedactOutcome::Unchanged
    );
}

#[test]
fn unreadable_pause_answer_keeps_a_possible_edit_hidden() {
    let mut r = Redactor::new(HideSwitches {
        inputs: true,
        ..HideSwitches::NONE
    });
    let ctx = EventContext {
        run_id: "",
        node_kind: Some("llm"),
    };
    let mut v = obj(r#"{"pauseId":"p1","action":"continue","requestId":"q"}"#);
    let outcome = r.redact_unreadable(&ctx, "exec.resumed", &mut v, &["edited"]);
    assert!(matches!(outcome, RedactOutcome::Failed(_)), "{outcome:?}");
    assert_eq!(
        json::to_string(&v),
        r#"{"pauseId":"p1","action":"continue","edited":{"after":"__REDACTED__"},"requestId":"q","redaction":{"count":0,"keys":["edited"],"failed":true}}"#
    );
    let mut v = obj(r#"{"pauseId":"p2","code":"schema"}"#);
    r.redact_unreadable(&ctx, "exec.refused", &mut v, &["message"]);
    assert_eq!(
        json::to_string(&v),
        r#"{"pauseId":"p2","code":"schema","redaction":{"count":0,"keys":["message"],"failed":true}}"#
    );
    let mut v = obj(r#"{"pauseId":"p3","code":"not-a-code"}"#);
    assert!(!r
        .redact_unreadable(&ctx, "exec.refused", &mut v, &[])
        .keep());
}

#[test]
fn evicted_instance_falls_back_to_the_node_kind_then_the_prefix() {
    let mut r = Redactor::with_max_tracked_instances(
        HideSwitches {
            tool_results: true,
            ..HideSwitches::NONE
        },
        2,
    );
    for i in 0..3 {
        let mut p = obj(&format!(
            r#"{{"nodeId":"custom:t","kind":"tool","name":"t","instanceId":"i{i}"}}"#
        ));
        r.redact("node.started", &mut p);
    }
    assert_eq!(r.tracked_instances(), 2);
    // i0 was evicted; the node's latest kind (tool) still hides its output.
    let mut p =
        obj(r#"{"nodeId":"custom:t","instanceId":"i0","output":"x","durationMs":1,"status":"ok"}"#);
    assert_eq!(
        r.redact("node.finished", &mut p),
        RedactOutcome::Redacted { count: 1 }
    );
    // Kinds are tracked per run: another run knows nothing, and `custom:` is no tool prefix.
    let ctx = EventContext {
        run_id: "other",
        node_kind: None,
    };
    let mut p =
        obj(r#"{"nodeId":"custom:t","instanceId":"i1","output":"x","durationMs":1,"status":"ok"}"#);
    assert_eq!(
        r.redact_in(&ctx, "node.finished", &mut p),
        RedactOutcome::Unchanged
    );
    // A finished instance is forgotten.
    let mut p =
        obj(r#"{"nodeId":"custom:t","instanceId":"i1","output":"x","durationMs":1,"status":"ok"}"#);
    r.redact("node.finished", &mut p);
    assert_eq!(r.tracked_instances(), 1);
}

#[test]
fn a_non_safe_prior_count_is_not_carried_into_the_sum() {
    let mut r = Redactor::new(HideSwitches::ALL);
    let mut p = obj(
        r#"{"nodeId":"a","kind":"llm","name":"a","instanceId":"1","input":1,"redaction":{"count":9007199254740991,"keys":["x"]}}"#,
    );
    r.redact("node.started", &mut p);
    assert_eq!(
        json::to_string(p.get("redaction").unwrap()),
        r#"{"count":1,"keys":["x","input"]}"#
    );
}

// -- properties --------------------------------------------------------------------------

mod props {
    use super::*;
    use graphmind_core::json::{JsStr, Map, Number};
    use proptest::prelude::*;

    const WORDS: &[&str] = &[
        "tool:a",
        "llm:b",
        "tool",
        "llm",
        "tool-args",
        "text",
        "reasoning",
        "__REDACTED__",
        "",
        "ok",
        "error",
        "continue",
        "schema",
        "secret",
        "p1",
        "i1",
    ];
    const KEYS: &[&str] = &[
        "nodeId",
        "instanceId",
        "kind",
        "name",
        "parentId",
        "input",
        "output",
        "deltas",
        "t",
        "v",
        "chars",
        "redaction",
        "count",
        "keys",
        "toolCalls",
        "arguments",
        "args",
        "inputText",
        "durationMs",
        "status",
        "usage",
        "inputTokens",
        "outputTokens",
        "pauseId",
        "action",
        "code",
        "edited",
        "after",
        "message",
        "requestId",
    ];

    fn js_str() -> impl Strategy<Value = JsStr> {
        prop_oneof![
            4 => proptest::sample::select(WORDS).prop_map(JsStr::from),
            2 => any::<String>().prop_map(JsStr::from),
            1 => proptest::collection::vec(any::<u16>(), 0..6).prop_map(|u| JsStr::from_utf16(&u)),
        ]
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| Value::Number(Number::Int(i))),
            any::<f64>().prop_map(|f| Value::Number(Number::Float(f))),
            Just(Value::Number(Number::BigInt(
                "123456789012345678901234567890".into()
            ))),
            js_str().prop_map(Value::String),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::vec(
                    (prop_oneof![3 => proptest::sample::select(KEYS).prop_map(JsStr::from), 1 => js_str()], inner),
                    0..7
                )
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map>())),
            ]
        })
    }

    fn event_type() -> impl Strategy<Value = &'static str> {
        proptest::sample::select(
            &[
                "node.started",
                "node.finished",
                "node.token",
                "node.error",
                "exec.resumed",
                "exec.refused",
                "run.started",
            ][..],
        )
    }

    fn switches() -> impl Strategy<Value = HideSwitches> {
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(a, b, c, d)| {
            HideSwitches {
                inputs: a,
                outputs: b,
                tool_args: c,
                tool_results: d,
            }
        })
    }

    /// No string of an input, an output, a delta's text or a pause answer's edit survives.
    fn leaks(event_type: &str, p: &Value) -> Option<String> {
        let Value::Object(m) = p else { return None };
        let hidden_or_absent = |k: &str| match m.get(k) {
            None => true,
            Some(Value::String(s)) => s == REDACTED,
            Some(_) => false,
        };
        match event_type {
            "node.started" if !hidden_or_absent("input") => Some("input".into()),
            "node.finished" if !hidden_or_absent("output") => Some("output".into()),
            "node.token" => match m.get("deltas") {
                Some(Value::Array(ds)) => ds.iter().find_map(|d| match d.get("v") {
                    None => None,
                    Some(Value::String(s)) if s.is_empty() => None,
                    Some(other) => Some(format!("delta v {}", json::to_string(other))),
                }),
                _ => Some("deltas is not an array".into()),
            },
            "exec.resumed" => match m.get("edited") {
                None => None,
                Some(e) if json::to_string(e) == r#"{"after":"__REDACTED__"}"# => None,
                Some(e) => Some(format!("edited {}", json::to_string(e))),
            },
            "exec.refused" if m.contains_key("message") => Some("message".into()),
            _ => None,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn never_panics(sw in switches(), events in proptest::collection::vec((event_type(), value(), proptest::option::of(proptest::sample::select(WORDS))), 1..8)) {
            let mut r = Redactor::with_max_tracked_instances(sw, 3);
            for (ty, mut payload, kind) in events {
                let ctx = EventContext { run_id: "r", node_kind: kind };
                let outcome = r.redact_in(&ctx, ty, &mut payload);
                if !outcome.keep() {
                    prop_assert!(payload.is_null());
                }
                let mut copy = payload.clone();
                let _ = r.redact_unreadable(&ctx, ty, &mut copy, &["input", "edited"]);
            }
        }

        #[test]
        fn all_switches_on_no_input_or_output_string_survives(events in proptest::collection::vec((event_type(), value(), proptest::option::of(proptest::sample::select(WORDS))), 1..8)) {
            let mut r = Redactor::new(HideSwitches::ALL);
            for (ty, mut payload, kind) in events {
                let ctx = EventContext { run_id: "r", node_kind: kind };
                let outcome = r.redact_in(&ctx, ty, &mut payload);
                if outcome.keep() {
                    let leak = leaks(ty, &payload);
                    prop_assert!(leak.is_none(), "{} leaked {:?}: {}", ty, leak, json::to_string(&payload));
                }
            }
        }
    }
}
