//! Reading the reference loop fixtures: shared by the loop-guard test files (`#[path]`).

use graphmind_core::json::{self, Value};
use graphmind_core::loop_guard::{LoopDetect, LoopGuard, LoopGuardConfig, LoopValue, NodeStart};
use std::path::PathBuf;

pub fn load(rel: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/vectors")
        .join(rel);
    json::parse(&std::fs::read(&path).unwrap()).unwrap()
}

pub fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    v.map(|v| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    })
}

/// `v[key]`, which the fixture gives as a list.
pub fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_else(|| panic!("no list `{key}`"))
}

/// Feeds one loop-kinds fixture event of sequence `name` that ends a node (`error`,
/// `finish`) to `guard`, attached. `false` for a `start`, which each test drives its own
/// way (it checks the before-gate).
pub fn feed_end_event(guard: &mut LoopGuard, event: &Value, name: &str) -> bool {
    let node_id = str_of(event, "nodeId").unwrap();
    let instance = str_of(event, "instanceId");
    match str_of(event, "event").unwrap() {
        "start" => return false,
        "error" => guard.on_node_error(
            "run",
            node_id,
            instance,
            event.get("name").and_then(Value::as_js_str),
            event.get("message").and_then(Value::as_js_str),
        ),
        "finish" => guard.on_node_finished(
            "run",
            node_id,
            instance,
            str_of(event, "status"),
            LoopValue::Read(event.get("output")),
            true,
        ),
        other => panic!("{name}: unknown event {other}"),
    }
    true
}

pub fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

pub fn int_of(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_i64).map(|i| i as u64)
}

pub fn config_for(seq: &Value) -> LoopGuardConfig {
    let mut config = LoopGuardConfig::default();
    if let Some(t) = int_of(seq, "threshold") {
        config.threshold = t as u32;
    }
    if let Some(a) = strings(seq.get("allowNodes")) {
        config.allow_nodes = a;
    }
    if let Some(k) = strings(seq.get("ignoreKeys")) {
        config.ignore_keys = k;
    }
    if let Some(k) = strings(seq.get("kinds")) {
        config.kinds = k;
    }
    if let Some(d) = strings(seq.get("detect")) {
        let (detect, unknown) = LoopDetect::from_names(&d);
        assert!(unknown.is_empty(), "unknown detectors {unknown:?}");
        config.detect = detect;
    }
    config
}

/// [`config_for`] with the opt-in detectors on: how the reference's loop-kinds fixture runs
/// (the reference's 0.6 client has them on by default; we follow the spec, which does not).
pub fn kinds_config_for(seq: &Value) -> LoopGuardConfig {
    LoopGuardConfig {
        detect: LoopDetect::ALL,
        ..config_for(seq)
    }
}

pub fn start_of<'a>(run: &'a str, call: &'a Value, seq: u64) -> NodeStart<'a> {
    let node_id = str_of(call, "nodeId").unwrap();
    let input = if call.get("unreadable") == Some(&Value::Bool(true)) {
        LoopValue::Unreadable
    } else if call.get("inputAbsent") == Some(&Value::Bool(true)) {
        LoopValue::Read(None)
    } else {
        LoopValue::Read(call.get("input"))
    };
    let mut start = NodeStart::new(run, node_id, str_of(call, "kind").unwrap(), input, seq);
    if let Some(name) = str_of(call, "name") {
        start = start.name(name);
    }
    if let Some(instance) = str_of(call, "instanceId") {
        start = start.instance(instance);
    }
    start
}
