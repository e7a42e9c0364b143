//! Cost of the app-side rules on the emit path: redaction of typical events (every switch
//! on, and the no-switch pass-through every event pays), the inject guard's JSON scan, and
//! a tool-definition schema hash.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use graphmind_core::edit_input::proposed_value_refusal;
use graphmind_core::json::{self, Value};
use graphmind_core::llm::{sanitize_tool_definition, schema_hash};
use graphmind_core::redact::{HideSwitches, Redactor};

fn one_kb_input() -> Value {
    let filler = "lorem ipsum dolor sit amet ".repeat(30);
    json::parse_str(&format!(
        r#"{{"nodeId":"tool:search","kind":"tool","name":"search","instanceId":"i1","input":{{"query":"{filler}","limit":10,"filters":{{"lang":"en","tags":["a","b","c"]}}}}}}"#
    ))
    .unwrap()
}

fn token_batch() -> Value {
    let deltas: Vec<String> = (0..16)
        .map(|i| format!(r#"{{"t":"text","v":"chunk {i} of the answer"}}"#))
        .collect();
    json::parse_str(&format!(
        r#"{{"nodeId":"llm:step","instanceId":"l1","deltas":[{}]}}"#,
        deltas.join(",")
    ))
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let started = one_kb_input();
    let tokens = token_batch();
    let mut g = c.benchmark_group("redact");
    g.bench_function("node.started 1KB, every switch on", |b| {
        let mut r = Redactor::new(HideSwitches::ALL);
        b.iter(|| {
            let mut p = started.clone();
            black_box(r.redact("node.started", &mut p));
            p
        })
    });
    g.bench_function("node.started 1KB, no switch (clone only)", |b| {
        let mut r = Redactor::new(HideSwitches::NONE);
        b.iter(|| {
            let mut p = started.clone();
            black_box(r.redact("node.started", &mut p));
            p
        })
    });
    g.bench_function("node.token 16 deltas, hideOutputs", |b| {
        let mut r = Redactor::new(HideSwitches {
            outputs: true,
            ..HideSwitches::NONE
        });
        b.iter(|| {
            let mut p = tokens.clone();
            black_box(r.redact("node.token", &mut p));
            p
        })
    });
    g.bench_function("node.token 16 deltas, no switch (clone only)", |b| {
        let mut r = Redactor::new(HideSwitches::NONE);
        b.iter(|| {
            let mut p = tokens.clone();
            black_box(r.redact("node.token", &mut p));
            p
        })
    });
    g.finish();

    let value = started.get("input").unwrap().clone();
    c.bench_function("edit_input/proposed_value_refusal 1KB", |b| {
        b.iter(|| proposed_value_refusal(black_box(&value)))
    });
    let def = json::parse_str(
        r#"{"type":"mcp","server_label":"s","server_url":"https://u:p@h.example/sse?k=1","headers":{"Authorization":"x"},"input_schema":{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer"}},"required":["q"]}}"#,
    )
    .unwrap();
    c.bench_function("llm/sanitize + schema_hash", |b| {
        b.iter(|| schema_hash(&sanitize_tool_definition(black_box(&def))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
