//! Protocol v1 conformance: every builder's envelope against the reference's JSON Schema
//! (`tests/vectors/reference/wire-schema.json`), the parser's verdicts against the same
//! schema on thousands of mutated envelopes, the parser's outcomes on hand-made frames,
//! and JSONTestSuite's `test_parsing` through both the JSON layer and the envelope parser.

use graphmind_core::event::*;
use graphmind_core::json::{self, JsStr, Map, Value};
use graphmind_core::wire::{
    encode_envelope, parse_envelope, parse_envelope_value, ParseOutcome, REASON_NOT_AN_ENVELOPE,
};
use std::collections::BTreeSet;
use std::path::PathBuf;

#[path = "support/json_suite.rs"]
mod json_suite;
#[path = "support/to_serde.rs"]
mod to_serde;
use json_suite::suite;
use to_serde::to_serde;

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors")
}

fn validator() -> jsonschema::Validator {
    let text = std::fs::read(vectors().join("reference/wire-schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_slice(&text).unwrap();
    jsonschema::validator_for(&schema).expect("the reference schema compiles")
}

fn schema_errors(validator: &jsonschema::Validator, envelope: &Value) -> Vec<String> {
    validator
        .iter_errors(&to_serde(envelope))
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

fn js(s: &str) -> JsStr {
    JsStr::from(s)
}

fn obj(pairs: &[(&str, Value)]) -> Map {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(*k, v.clone());
    }
    m
}

/// One envelope per builder and per shape: minimal, and with every optional field set.
fn sample_envelopes() -> Vec<(&'static str, String)> {
    let sdk = SdkInfo::new("ai", "7.0.79");
    let mut full_sdk = sdk.clone();
    full_sdk.extra.insert("runtime", Value::from("node"));
    let mut error = ErrorInfo::new("TypeError", "x is not a function");
    error.stack = Some(js("TypeError: x\n    at f (a.js:1:1)"));
    error.extra.insert("code", Value::from("E_X"));
    let redaction = RedactionSummary {
        count: 1,
        keys: vec![js("input")],
        extra: obj(&[("failed", Value::Bool(true))]),
    };
    let mut matcher = BreakpointMatcher {
        kind: Some(NodeKind::Tool),
        name: Some(js("search")),
        point: Some(PausePoint::After),
        ..Default::default()
    };
    matcher.extra.insert("note", Value::from("x"));
    let input = json::parse_str(r#"{"q":"weather","n":3,"deep":[1,{"a":null}],"f":1.5}"#).unwrap();
    let mut out: Vec<(&'static str, String)> = Vec::new();
    let run = "run_0123456789ab";

    out.push((
        "run.started/min",
        RunStarted::new("my-agent", sdk.clone()).encode(0, 1_756_254_187_512, run),
    ));
    let mut p = RunStarted::new("my-agent", full_sdk.clone());
    p.meta = Some(obj(&[
        ("name", Value::from("lossy")),
        ("implicit", Value::Bool(true)),
        ("git", Value::Null),
    ]));
    p.extra.insert("pid", Value::from(123i64));
    out.push(("run.started/full", p.encode(1, 2, run)));

    out.push((
        "run.finished/min",
        RunFinished::new(RunStatus::Ok).encode(2, 3, run),
    ));
    let mut p = RunFinished::new(RunStatus::Error);
    p.error = Some(error.clone());
    out.push(("run.finished/full", p.encode(3, 4, run)));
    out.push((
        "run.finished/aborted",
        RunFinished::new(RunStatus::Aborted).encode(3, 4, run),
    ));

    out.push(("graph.hint/min", GraphHint::new(vec![]).encode(4, 5, run)));
    let mut agent = GraphNodeHint::new(agent_node_id("lossy"), NodeKind::Agent, "lossy");
    agent.extra.insert("x", Value::from(1i64));
    let mut llm = GraphNodeHint::new(LLM_STEP_NODE_ID, NodeKind::Llm, LLM_STEP_NODE_NAME);
    llm.parent_id = Some(js("agent:lossy"));
    let mut tool = GraphNodeHint::new(tool_node_id("web_search"), NodeKind::Tool, "web_search");
    tool.parent_id = Some(js(LLM_STEP_NODE_ID));
    tool.extra.insert("providerExecuted", Value::Bool(true));
    tool.extra.insert("ungated", Value::Bool(true));
    let mut nodes = vec![agent, llm, tool];
    for kind in NodeKind::ALL {
        nodes.push(GraphNodeHint::new(node_id(*kind, "n"), *kind, "n"));
    }
    let mut p = GraphHint::new(nodes);
    p.extra.insert("source", Value::from("adapter"));
    out.push(("graph.hint/full", p.encode(5, 6, run)));
    out.push((
        "graph.hint/gap",
        GraphHint::gap_marker(GapInfo {
            dropped_count: 180,
            from_seq: 1,
            to_seq: 180,
            reason: GAP_REASON_BUFFER_OVERFLOW,
        })
        .encode(6, 7, run),
    ));

    out.push((
        "node.started/min",
        NodeStarted::new("tool:search", NodeKind::Tool, "search", "call_1").encode(7, 8, run),
    ));
    let mut p = NodeStarted::new("tool:search", NodeKind::Tool, "search", "call_1");
    p.parent_id = Some(js(LLM_STEP_NODE_ID));
    p.input = Some(input.clone());
    p.collapsed = Some(true);
    p.extra.insert("method", Value::from("tools/call"));
    p.redaction = Some(redaction.clone());
    out.push(("node.started/full", p.encode(8, 9, run)));
    let mut p = NodeStarted::new(
        LLM_STEP_NODE_ID,
        NodeKind::Llm,
        LLM_STEP_NODE_NAME,
        llm_step_instance_id("inv_abc123_1", 0),
    );
    p.input = Some(Value::Null);
    out.push(("node.started/null-input", p.encode(9, 10, run)));

    out.push((
        "node.token/min",
        NodeToken::new("llm:step", vec![]).encode(10, 11, run),
    ));
    let mut delta = TokenDelta::new(TokenChannel::Text, "");
    delta.extra.insert("chars", Value::from(5i64));
    let mut p = NodeToken::new(
        "llm:step",
        vec![
            TokenDelta::new(TokenChannel::Text, "Hel"),
            TokenDelta::new(TokenChannel::Reasoning, "hmm"),
            TokenDelta::new(TokenChannel::ToolArgs, "{\"q\":"),
            delta,
        ],
    );
    p.redaction = Some(RedactionSummary {
        count: 1,
        keys: vec![js("deltas")],
        extra: Map::new(),
    });
    out.push(("node.token/full", p.encode(11, 12, run)));

    out.push((
        "node.finished/min",
        NodeFinished::new("tool:search", 0.0, RunStatus::Ok).encode(12, 13, run),
    ));
    let mut p = NodeFinished::new("llm:step", 1234.56, RunStatus::Ok);
    p.instance_id = Some(js("inv_abc123_1:s0"));
    p.output = Some(input.clone());
    let mut usage = TokenUsage::new(1200, 87);
    usage.inclusive = Some(true);
    usage.cache_read_tokens = Some(1000);
    usage.cache_write_tokens = Some(0);
    usage.reasoning_tokens = Some(12);
    usage.extra.insert("serverToolUse", Value::from(1i64));
    p.usage = Some(usage);
    p.injected = Some(true);
    p.recovered_from_error = Some(true);
    p.extra.insert("providerExecuted", Value::Bool(true));
    p.redaction = Some(RedactionSummary {
        count: 1,
        keys: vec![js("output")],
        extra: Map::new(),
    });
    p.held_ms = Some(1000.25);
    out.push(("node.finished/full", p.encode(13, 14, run)));

    out.push((
        "node.error/min",
        NodeError::new("tool:search", ErrorInfo::new("Error", "boom")).encode(14, 15, run),
    ));
    let mut p = NodeError::new("tool:search", error.clone());
    p.instance_id = Some(js("call_1"));
    p.held_ms = Some(0.0);
    p.extra.insert("retryable", Value::Bool(false));
    out.push(("node.error/full", p.encode(15, 16, run)));

    out.push((
        "exec.paused/min",
        ExecPaused::new("pause_ab12cd_1", "tool:search", PausePoint::Before).encode(16, 17, run),
    ));
    let mut p = ExecPaused::new("pause_ab12cd_2", "tool:search", PausePoint::Before);
    p.reason = Some(PauseReason::Loop);
    p.loop_info = Some(LoopInfo {
        repeats: 3,
        first_seq: 10,
        last_seq: 14,
        fingerprint: js("sha256:abc"),
        kind: Some(LoopKind::Cycle),
        period: Some(2),
        laps: Some(3),
        extra: obj(&[("note", Value::from("x"))]),
    });
    let mut smart = SmartInfo::new(SmartRule::ErrorResult);
    smart.detail = Some(js("isError: true"));
    p.smart = Some(smart);
    p.editable = Some(true);
    out.push(("exec.paused/full", p.encode(17, 18, run)));
    for reason in PauseReason::ALL {
        let mut p = ExecPaused::new("pause_x_3", "llm:step", PausePoint::Error);
        p.reason = Some(*reason);
        out.push(("exec.paused/reason", p.encode(18, 19, run)));
    }

    out.push((
        "exec.refused/min",
        ExecRefused::new("pause_ab12cd_2", RefusalCode::Shape).encode(19, 20, run),
    ));
    let mut p = ExecRefused::new("pause_ab12cd_2", RefusalCode::Placeholder);
    p.message = Some(js("the input still holds the redaction placeholder"));
    p.request_id = Some(js("req_1"));
    out.push(("exec.refused/full", p.encode(20, 21, run)));

    out.push((
        "exec.resumed/min",
        ExecResumed::new("pause_ab12cd_2", ResumeAction::Continue).encode(21, 22, run),
    ));
    let mut p = ExecResumed::new("pause_ab12cd_2", ResumeAction::Retry);
    p.edited_after = Some(input.clone());
    p.request_id = Some(js("req_1"));
    p.principal = Some(js("operator"));
    p.extra.insert("injected", Value::Bool(false));
    out.push(("exec.resumed/full", p.encode(22, 23, run)));
    let mut p = ExecResumed::new("pause_ab12cd_3", ResumeAction::Inject);
    p.edited_after = Some(Value::Null);
    out.push(("exec.resumed/edited-null", p.encode(23, 24, run)));

    out.push((
        "exec.resume/min",
        ExecResume::new("pause_ab12cd_2", ResumeAction::Abort).encode(0, 25, run),
    ));
    let mut p = ExecResume::new("pause_ab12cd_2", ResumeAction::Inject);
    p.output = Some(Value::from("injected result"));
    p.input = Some(input.clone());
    p.request_id = Some(js("req_2"));
    out.push(("exec.resume/full", p.encode(1, 26, run)));

    out.push((
        "breakpoint.set/min",
        BreakpointSet::default().encode(2, 27, WILDCARD_RUN_ID),
    ));
    out.push((
        "breakpoint.set/full",
        BreakpointSet {
            matcher: matcher.clone(),
            extra: obj(&[("id", Value::from("bp1"))]),
        }
        .encode(3, 28, WILDCARD_RUN_ID),
    ));
    out.push((
        "breakpoint.clear/min",
        BreakpointClear::default().encode(4, 29, WILDCARD_RUN_ID),
    ));
    out.push((
        "breakpoint.clear/full",
        BreakpointClear {
            matcher: matcher.clone(),
            extra: Map::new(),
        }
        .encode(5, 30, WILDCARD_RUN_ID),
    ));

    out.push((
        "mode.set/min",
        ModeSet::new(RunMode::Step).encode(6, 31, WILDCARD_RUN_ID),
    ));
    let mut p = ModeSet::new(RunMode::Run);
    p.extra.insert("by", Value::from("viewer"));
    out.push(("mode.set/full", p.encode(7, 32, WILDCARD_RUN_ID)));

    out.push((
        "hello/min",
        Hello::new("0.6.0", vec![]).encode(0, 33, WILDCARD_RUN_ID),
    ));
    let mut p = Hello::new(
        "0.6.0",
        KNOWN_CAPABILITIES
            .iter()
            .map(|c| js(c))
            .chain([js("future-cap")])
            .collect(),
    );
    p.app = Some(js("my-agent"));
    p.sdk = Some(full_sdk.clone());
    p.resume_token = Some(js("tok_abc"));
    p.extra.insert("pid", Value::from(42i64));
    out.push(("hello/full", p.encode(0, 34, WILDCARD_RUN_ID)));

    out.push((
        "hello.ack/min",
        HelloAck::new("0.6.0", vec![], RunMode::Run).encode(0, 35, WILDCARD_RUN_ID),
    ));
    let mut p = HelloAck::new("0.6.0", vec![js("pause"), js("step")], RunMode::Step);
    p.breakpoints = vec![BreakpointMatcher::default(), matcher.clone()];
    p.session_token = Some(js("tok_abc"));
    p.hub_capabilities = Some(vec![js("edit-input")]);
    p.extra.insert("server", Value::from("graphmind-rs"));
    out.push(("hello.ack/full", p.encode(0, 36, WILDCARD_RUN_ID)));

    out
}

#[test]
fn every_builder_validates_against_the_reference_schema() {
    let validator = validator();
    let samples = sample_envelopes();
    let mut covered = BTreeSet::new();
    for (label, frame) in &samples {
        let value = json::parse(frame.as_bytes()).unwrap_or_else(|e| panic!("{label}: {e}"));
        let errors = schema_errors(&validator, &value);
        assert!(
            errors.is_empty(),
            "{label} breaks the schema: {errors:?}\n{frame}"
        );
        match parse_envelope(frame.as_bytes()) {
            ParseOutcome::Ok(env) => {
                covered.insert(env.message_type.unwrap().as_str());
                // The parser keeps the frame exactly.
                assert_eq!(&env.to_json(), frame, "{label}");
            }
            other => panic!("{label}: {other:?}"),
        }
    }
    let all: BTreeSet<_> = MessageType::ALL.iter().map(|t| t.as_str()).collect();
    assert_eq!(covered, all, "a message type has no builder sample");
    // Two samples (min and full) per type at least.
    assert!(samples.len() >= 2 * MessageType::ALL.len());
}

#[test]
fn builders_write_the_client_key_order() {
    let frames: std::collections::HashMap<_, _> = sample_envelopes().into_iter().collect();
    assert_eq!(
        frames["node.started/full"],
        r#"{"gm":1,"seq":8,"ts":9,"runId":"run_0123456789ab","type":"node.started","payload":{"nodeId":"tool:search","kind":"tool","name":"search","instanceId":"call_1","parentId":"llm:step","input":{"q":"weather","n":3,"deep":[1,{"a":null}],"f":1.5},"collapsed":true,"method":"tools/call","redaction":{"count":1,"keys":["input"],"failed":true}}}"#
    );
    assert_eq!(
        frames["exec.paused/full"],
        r#"{"gm":1,"seq":17,"ts":18,"runId":"run_0123456789ab","type":"exec.paused","payload":{"pauseId":"pause_ab12cd_2","nodeId":"tool:search","point":"before","reason":"loop","loop":{"repeats":3,"firstSeq":10,"lastSeq":14,"fingerprint":"sha256:abc","kind":"cycle","period":2,"laps":3,"note":"x"},"smart":{"rule":"error-result","detail":"isError: true"},"editable":true}}"#
    );
    assert_eq!(
        frames["hello/full"],
        r#"{"gm":1,"seq":0,"ts":34,"runId":"*","type":"hello","payload":{"versions":{"protocol":1,"client":"0.6.0"},"capabilities":["pause","step","inject","retry","abort","run-claim","edit-input","future-cap"],"app":"my-agent","sdk":{"name":"ai","version":"7.0.79","runtime":"node"},"resumeToken":"tok_abc","pid":42}}"#
    );
    assert_eq!(
        frames["graph.hint/gap"],
        r#"{"gm":1,"seq":6,"ts":7,"runId":"run_0123456789ab","type":"graph.hint","payload":{"nodes":[],"gap":{"droppedCount":180,"fromSeq":1,"toSeq":180,"reason":"buffer-overflow"}}}"#
    );
    assert_eq!(
        frames["exec.resumed/full"],
        r#"{"gm":1,"seq":22,"ts":23,"runId":"run_0123456789ab","type":"exec.resumed","payload":{"pauseId":"pause_ab12cd_2","action":"retry","edited":{"after":{"q":"weather","n":3,"deep":[1,{"a":null}],"f":1.5}},"requestId":"req_1","principal":"operator","injected":false}}"#
    );
}

/// Every path to a value inside `v`, as keys / indexes.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn paths(v: &Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter() {
                prefix.push(Step::Key(k.to_string_lossy().into_owned()));
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                prefix.push(Step::Index(i));
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn at_mut<'a>(v: &'a mut Value, path: &[Step]) -> &'a mut Value {
    let mut cur = v;
    for step in path {
        cur = match (step, cur) {
            (Step::Key(k), Value::Object(m)) => m.get_mut(k).unwrap(),
            (Step::Index(i), Value::Array(a)) => &mut a[*i],
            _ => unreachable!(),
        };
    }
    cur
}

/// The parser agrees with the reference schema on every single-field mutation of every
/// payload: a field removed, or replaced by a value of each JSON type (and out-of-range
/// numbers). Envelope-level fields are covered by the hand-made cases below, where the
/// reference's structural check is stricter than its schema (`ts`, `runId`).
#[test]
fn parser_verdicts_match_the_schema_on_mutated_payloads() {
    let validator = validator();
    let replacements: Vec<Value> = vec![
        Value::Null,
        Value::Bool(true),
        Value::from(-1i64),
        Value::from(0i64),
        Value::from(1.5),
        Value::from(3i64),
        Value::from(9_007_199_254_740_993u64),
        Value::from("x"),
        Value::from("tool"),
        Value::from("before"),
        Value::from("ok"),
        Value::Array(vec![]),
        Value::Array(vec![Value::from(1i64)]),
        Value::Object(Map::new()),
    ];
    let mut checked = 0;
    let mut invalid_seen = 0;
    for (label, frame) in sample_envelopes() {
        let base = json::parse(frame.as_bytes()).unwrap();
        let mut all_paths = Vec::new();
        paths(&base, &mut Vec::new(), &mut all_paths);
        for path in all_paths {
            if !matches!(path.first(), Some(Step::Key(k)) if k == "payload") {
                continue;
            }
            let mut variants = Vec::new();
            if let (Some(Step::Key(k)), parent_path) = (path.last(), &path[..path.len() - 1]) {
                let mut removed = base.clone();
                at_mut(&mut removed, parent_path)
                    .as_object_mut()
                    .unwrap()
                    .remove(k);
                variants.push(removed);
            }
            for r in &replacements {
                let mut v = base.clone();
                *at_mut(&mut v, &path) = r.clone();
                variants.push(v);
            }
            // An unknown field added to an object never fails.
            let mut extended = base.clone();
            if let Value::Object(m) = at_mut(&mut extended, &path) {
                m.insert("__unknownField", Value::from("kept"));
                variants.push(extended);
            }
            for v in variants {
                let schema_ok = schema_errors(&validator, &v).is_empty();
                let outcome = parse_envelope_value(v.clone());
                let ours_ok = matches!(outcome, ParseOutcome::Ok(_));
                assert_eq!(
                    ours_ok,
                    schema_ok,
                    "{label}: parser says {} but the schema says {} for {}\n{:?}",
                    outcome.kind(),
                    if schema_ok { "valid" } else { "invalid" },
                    json::to_string(&v),
                    outcome.invalid()
                );
                if let ParseOutcome::Invalid(inv) = &outcome {
                    invalid_seen += 1;
                    assert!(
                        inv.reason
                            .starts_with("invalid payload for message type \""),
                        "{}",
                        inv.reason
                    );
                    assert!(!inv.issues.is_empty());
                    assert!(
                        inv.issues.iter().all(|i| i.path.starts_with("payload")),
                        "{inv}"
                    );
                } else {
                    assert!(ours_ok, "{label}: unexpected {}", outcome.kind());
                }
                checked += 1;
            }
        }
    }
    eprintln!("schema differential: {checked} mutated envelopes, {invalid_seen} of them invalid");
    assert!(checked > 5000, "only {checked} variants");
    assert!(invalid_seen > 1000, "only {invalid_seen} invalid variants");
}

fn frame(fields: &str) -> String {
    format!("{{{fields}}}")
}

const BASE: &str = r#""gm":1,"seq":3,"ts":1756254187512,"runId":"run_1","type":"node.token","payload":{"nodeId":"llm:step","deltas":[]}"#;

fn outcome(text: &str) -> ParseOutcome {
    parse_envelope(text.as_bytes())
}

fn invalid_reason(text: &str) -> String {
    match outcome(text) {
        ParseOutcome::Invalid(inv) => inv.to_string(),
        other => panic!("expected invalid for {text}, got {other:?}"),
    }
}

#[test]
fn hand_made_envelopes() {
    // The base frame is fine.
    let ok = outcome(&frame(BASE));
    assert_eq!(ok.kind(), "ok");
    let env = ok.envelope().unwrap();
    assert_eq!(
        (env.seq, env.ts, env.run_id.as_str(), env.type_name.as_str()),
        (3, 1_756_254_187_512, "run_1", "node.token")
    );

    // Wrong major version, whatever else is unknown about the frame.
    for gm in ["2", "0", "-1", "2.0"] {
        let text = frame(&BASE.replace(r#""gm":1"#, &format!(r#""gm":{gm}"#)));
        match outcome(&text) {
            ParseOutcome::VersionMismatch {
                received,
                supported,
            } => {
                assert_eq!(received, gm.parse::<f64>().unwrap() as i64);
                assert_eq!(supported, 1);
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    let text = r#"{"gm":2,"seq":0,"ts":0,"runId":"*","type":"something.new"}"#;
    assert_eq!(outcome(text).kind(), "version-mismatch");
    let text = r#"{"gm":2,"seq":0,"ts":0,"runId":"*","type":"node.started","payload":7}"#;
    assert_eq!(outcome(text).kind(), "version-mismatch");
    // ...but a frame that is not an envelope at all is invalid before its version counts.
    let text = r#"{"gm":2,"ts":0,"runId":"*","type":"hello","payload":{}}"#;
    assert!(
        invalid_reason(text).contains("seq: expected an integer, received nothing"),
        "{}",
        invalid_reason(text)
    );

    // gm must be a safe integer.
    for gm in [
        r#""1""#,
        "1.5",
        "true",
        "null",
        "1152921504606846976",
        "[1]",
    ] {
        let text = frame(&BASE.replace(r#""gm":1"#, &format!(r#""gm":{gm}"#)));
        let reason = invalid_reason(&text);
        assert!(
            reason.starts_with(REASON_NOT_AN_ENVELOPE) && reason.contains("gm: expected"),
            "{reason}"
        );
    }
    assert!(invalid_reason(&frame(&BASE.replace(r#""gm":1,"#, "")))
        .contains("gm: expected an integer, received nothing"));
    // "1.0" and "1e0" are the integer 1 to JavaScript.
    assert_eq!(
        outcome(&frame(&BASE.replace(r#""gm":1"#, r#""gm":1.0"#))).kind(),
        "ok"
    );
    assert_eq!(
        outcome(&frame(&BASE.replace(r#""gm":1"#, r#""gm":1e0"#))).kind(),
        "ok"
    );

    // seq: a safe integer >= 0.
    for seq in ["-1", "1.5", r#""3""#, "null", "9007199254740992", "1e400"] {
        let reason = invalid_reason(&frame(
            &BASE.replace(r#""seq":3"#, &format!(r#""seq":{seq}"#)),
        ));
        assert!(reason.contains("seq: expected"), "{reason}");
    }
    assert!(invalid_reason(&frame(&BASE.replace(r#""seq":3,"#, "")))
        .contains("seq: expected an integer, received nothing"));
    assert_eq!(
        outcome(&frame(
            &BASE.replace(r#""seq":3"#, r#""seq":9007199254740991"#)
        ))
        .kind(),
        "ok"
    );
    assert_eq!(
        outcome(&frame(&BASE.replace(r#""seq":3"#, r#""seq":-0"#))).kind(),
        "ok"
    );

    // ts: epoch milliseconds, a safe integer >= 0.
    for ts in ["-5", "1.5", "1e300", r#""now""#] {
        let reason = invalid_reason(&frame(
            &BASE.replace(r#""ts":1756254187512"#, &format!(r#""ts":{ts}"#)),
        ));
        assert!(reason.contains("ts: expected"), "{reason}");
    }
    assert!(
        invalid_reason(&frame(&BASE.replace(r#""ts":1756254187512,"#, "")))
            .contains("ts: expected")
    );

    // runId: required on every message, controls included; no lone surrogates.
    assert!(
        invalid_reason(&frame(&BASE.replace(r#""runId":"run_1","#, "")))
            .contains("runId: expected a string")
    );
    let control = r#"{"gm":1,"seq":0,"ts":0,"type":"mode.set","payload":{"mode":"step"}}"#;
    assert!(invalid_reason(control).contains("runId: expected a string, received nothing"));
    assert_eq!(
        outcome(&control.replace(r#""ts":0"#, r#""ts":0,"runId":"*""#)).kind(),
        "ok"
    );
    let reason = invalid_reason(&frame(&BASE.replace("run_1", r"run_\ud800")));
    assert!(
        reason.contains("runId: runId must not contain lone surrogates"),
        "{reason}"
    );
    assert_eq!(
        outcome(&frame(&BASE.replace("run_1", r"run_\ud83d\ude00"))).kind(),
        "ok"
    );
    assert!(invalid_reason(&frame(&BASE.replace(r#""run_1""#, "7")))
        .contains("runId: expected a string, received the number 7"));

    // type: a string; an unknown one is tolerated with its payload kept whole.
    assert!(
        invalid_reason(&frame(&BASE.replace(r#""type":"node.token","#, "")))
            .contains("type: expected a string")
    );
    assert!(
        invalid_reason(&frame(&BASE.replace(r#""node.token""#, "1")))
            .contains("type: expected a string")
    );
    for t in [
        "node.tokens",
        "run.gap",
        "constructor",
        "__proto__",
        "NODE.TOKEN",
        "",
    ] {
        let text = frame(&BASE.replace(r#""node.token""#, &format!("{t:?}")));
        match outcome(&text) {
            ParseOutcome::UnknownType(env) => {
                assert_eq!(env.type_name, t);
                assert_eq!(env.message_type, None);
                assert_eq!(env.to_json(), text);
            }
            other => panic!("{t}: {other:?}"),
        }
    }
    // A future type need not carry a payload, nor an object one.
    for text in [
        r#"{"gm":1,"seq":0,"ts":0,"runId":"*","type":"future.ping"}"#,
        r#"{"gm":1,"seq":0,"ts":0,"runId":"*","type":"future.ping","payload":[1,2]}"#,
        r#"{"gm":1,"seq":0,"ts":0,"runId":"*","type":"future.ping","payload":null,"extra":{"a":1}}"#,
    ] {
        let out = outcome(text);
        assert_eq!(out.kind(), "unknown-type", "{text}");
        assert_eq!(out.envelope().unwrap().to_json(), text);
    }

    // A known type needs its payload object, with every required field.
    let reason = invalid_reason(&frame(
        &BASE.replace(r#","payload":{"nodeId":"llm:step","deltas":[]}"#, ""),
    ));
    assert_eq!(reason, "invalid payload for message type \"node.token\": payload: expected an object, received nothing (the field is missing)");
    let reason = invalid_reason(&frame(
        &BASE.replace(r#"{"nodeId":"llm:step","deltas":[]}"#, "null"),
    ));
    assert_eq!(reason, "invalid payload for message type \"node.token\": payload: expected an object, received null");
    let reason = invalid_reason(&frame(&BASE.replace(
        r#""deltas":[]"#,
        r#""deltas":[{"t":"text"},{"t":"sound","v":"x"}]"#,
    )));
    assert_eq!(
        reason,
        "invalid payload for message type \"node.token\": payload.deltas.0.v: expected a string, received nothing (the field is missing); payload.deltas.1.t: expected one of text, reasoning, tool-args, received string"
    );
    let text = r#"{"gm":1,"seq":1,"ts":2,"runId":"r","type":"node.finished","payload":{"nodeId":"n","durationMs":-1,"status":"done","heldMs":null}}"#;
    let reason = invalid_reason(text);
    assert!(
        reason
            .contains("payload.durationMs: expected a finite number >= 0, received the number -1"),
        "{reason}"
    );
    assert!(
        reason.contains("payload.heldMs: expected a finite number >= 0, received null"),
        "{reason}"
    );
    assert!(
        reason.contains("payload.status: expected one of ok, error, aborted"),
        "{reason}"
    );

    // Unknown fields, in the envelope and in the payload, are kept in place.
    let text = r#"{"trace":{"id":"t1"},"gm":1,"seq":0,"ts":5,"runId":"run_1","type":"exec.resume","payload":{"pauseId":"p","action":"inject","output":{"a":[1,2.5,"\ud800"]},"why":"because"},"zz":null}"#;
    match outcome(text) {
        ParseOutcome::Ok(env) => {
            assert_eq!(env.to_json(), text);
            assert_eq!(
                env.object.get("trace").unwrap().get("id").unwrap().as_str(),
                Some("t1")
            );
            assert_eq!(
                env.payload().unwrap().get("why").unwrap().as_str(),
                Some("because")
            );
            assert_eq!(env.message_type, Some(MessageType::ExecResume));
        }
        other => panic!("{other:?}"),
    }

    // A repeated key keeps its last value, as JSON.parse does.
    assert_eq!(
        outcome(&frame(&format!(r#"{BASE},"gm":2"#))).kind(),
        "version-mismatch"
    );
    assert_eq!(outcome(&frame(&format!(r#""gm":7,{BASE}"#))).kind(), "ok");

    // Not an object at all.
    for text in ["[]", "1", "\"gm\"", "null", "true"] {
        let reason = invalid_reason(text);
        assert!(
            reason.starts_with(
                "not a structurally valid GraphMind envelope: expected an object, received"
            ),
            "{reason}"
        );
    }
    // Not JSON.
    for bytes in [&b""[..], b"{", b"{\"gm\":1,}", b"\xff\xfe", b"{\"gm\":1} x"] {
        match parse_envelope(bytes) {
            ParseOutcome::Invalid(inv) => assert!(
                inv.reason.starts_with("frame is not valid JSON: "),
                "{}",
                inv.reason
            ),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn encode_envelope_matches_the_builders_and_escapes() {
    let payload = NodeToken::new("llm:step", vec![]);
    let a = payload.encode(5, 6, "run_\u{1F600}\u{7}");
    let b = encode_envelope(
        PROTOCOL_VERSION,
        5,
        6,
        "run_\u{1F600}\u{7}",
        "node.token",
        &payload.payload_json(),
    );
    assert_eq!(a, b);
    assert_eq!(a, "{\"gm\":1,\"seq\":5,\"ts\":6,\"runId\":\"run_\u{1F600}\\u0007\",\"type\":\"node.token\",\"payload\":{\"nodeId\":\"llm:step\",\"deltas\":[]}}");
    assert_eq!(outcome(&a).kind(), "ok");
    // A payload the session already shrank to text is inserted verbatim.
    let shrunk =
        r#"{"nodeId":"n","durationMs":1,"status":"ok","output":"…","__graphmindTruncated":true}"#;
    let e = encode_envelope(1, 0, 0, "r", "node.finished", shrunk);
    assert!(e.ends_with(&format!(",\"payload\":{shrunk}}}")));
    assert_eq!(outcome(&e).kind(), "ok");
}

#[test]
fn jsontestsuite_n_files_are_refused_with_a_reason() {
    let mut count = 0;
    for (name, bytes) in suite().iter().filter(|(n, _)| n.starts_with("n_")) {
        assert!(json::parse(bytes).is_err(), "{name} parsed");
        match parse_envelope(bytes) {
            ParseOutcome::Invalid(inv) => {
                let detail = inv
                    .reason
                    .strip_prefix("frame is not valid JSON: ")
                    .unwrap_or_else(|| panic!("{name}: {}", inv.reason));
                assert!(!detail.is_empty(), "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
        count += 1;
    }
    assert_eq!(count, 188);
}

#[test]
fn jsontestsuite_y_files_parse_and_are_not_envelopes() {
    let mut count = 0;
    for (name, bytes) in suite().iter().filter(|(n, _)| n.starts_with("y_")) {
        let value = json::parse(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        match parse_envelope(bytes) {
            ParseOutcome::Invalid(inv) => {
                assert_eq!(inv.reason, REASON_NOT_AN_ENVELOPE, "{name}");
                assert!(!inv.issues.is_empty(), "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
        // The same document parsed from the value is judged the same way.
        assert_eq!(parse_envelope_value(value).kind(), "invalid", "{name}");
        count += 1;
    }
    assert_eq!(count, 95);
}

#[test]
fn jsontestsuite_i_files_never_panic() {
    let mut count = 0;
    for (name, bytes) in suite().iter().filter(|(n, _)| n.starts_with("i_")) {
        let parsed = json::parse(bytes);
        let out = parse_envelope(bytes);
        // Whatever the JSON layer decides, the envelope parser agrees on "is it JSON".
        match (&parsed, &out) {
            (Err(_), ParseOutcome::Invalid(inv)) => {
                assert!(inv.reason.starts_with("frame is not valid JSON"), "{name}")
            }
            (Ok(_), ParseOutcome::Invalid(inv)) => {
                assert_eq!(inv.reason, REASON_NOT_AN_ENVELOPE, "{name}")
            }
            _ => panic!("{name}: {out:?}"),
        }
        count += 1;
    }
    assert_eq!(count, 35);
}

#[test]
fn deep_nesting_never_overflows_the_stack() {
    let deep = suite()
        .into_iter()
        .find(|(n, _)| n == "n_structure_100000_opening_arrays.json")
        .unwrap()
        .1;
    assert_eq!(
        outcome(std::str::from_utf8(&deep).unwrap()).kind(),
        "invalid"
    );
    // Closed, and inside a payload: refused as too deep, not a crash.
    for depth in [json::MAX_JSON_DEPTH + 1, 100_000] {
        let text = format!(
            r#"{{"gm":1,"seq":0,"ts":0,"runId":"r","type":"exec.resume","payload":{{"pauseId":"p","action":"inject","output":{}{}}}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let reason = invalid_reason(&text);
        assert!(reason.contains("nesting deeper than"), "{reason}");
    }
    // Within the limit, an opaque deep value passes through untouched.
    let depth = json::MAX_JSON_DEPTH - 3;
    let text = format!(
        r#"{{"gm":1,"seq":0,"ts":0,"runId":"r","type":"exec.resume","payload":{{"pauseId":"p","action":"inject","output":{}{}}}}}"#,
        "{\"a\":".repeat(depth) + "1",
        "}".repeat(depth)
    );
    let out = outcome(&text);
    assert_eq!(out.kind(), "ok");
    assert_eq!(out.envelope().unwrap().to_json(), text);
}

#[test]
fn replayed_frames_and_gap_markers_validate() {
    use graphmind_core::buffer::ReplayBuffer;
    let validator = validator();
    let mut buffer = ReplayBuffer::new(3, 1 << 20);
    let mut seq = 0;
    for run in ["run_a", "run_b", "run_a", "run_c", "run_a", "run_b"] {
        let mut p = NodeStarted::new("tool:t", NodeKind::Tool, "t", format!("call_{seq}"));
        p.input = Some(Value::from(seq));
        buffer.push(run, seq, p.encode(seq, 1000 + seq, run));
        seq += 1;
    }
    let frames = buffer.replay(
        || {
            seq += 1;
            seq - 1
        },
        2000,
    );
    // seq 0 and 2 (run_a) and 1 (run_b) were pushed out before any debugger saw them.
    assert_eq!(frames.len(), 2 + 3);
    let mut kinds = Vec::new();
    for f in &frames {
        let v = json::parse(f.as_bytes()).unwrap();
        assert!(schema_errors(&validator, &v).is_empty(), "{f}");
        let env = parse_envelope(f.as_bytes());
        let env = env.envelope().unwrap();
        kinds.push((env.type_name.clone(), env.run_id.clone(), env.seq));
    }
    assert_eq!(
        kinds,
        vec![
            ("graph.hint".into(), "run_a".into(), 6),
            ("graph.hint".into(), "run_b".into(), 7),
            ("node.started".into(), "run_c".into(), 3),
            ("node.started".into(), "run_a".into(), 4),
            ("node.started".into(), "run_b".into(), 5),
        ]
    );
}
