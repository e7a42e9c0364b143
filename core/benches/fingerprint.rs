//! The cost of fingerprinting a watched call's arguments (paid at every watched start),
//! next to two RFC 8785 crates plus SHA-256 on the same input, in the same run.
//!
//! Input: `bench/sample-1k.json` (an MCP `tools/call` request) as the input of
//! `tool:search_files`. The peers canonicalise `["tool:search_files", input]` from a
//! `serde_json::Value` and hash it with `sha2`; they do not remove `_meta` (ours does, which
//! only makes our text shorter by that member).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use graphmind_core::fingerprint::fingerprint;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

const NODE_ID: &str = "tool:search_files";

fn sample() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench/sample-1k.json");
    std::fs::read(path).expect("bench/sample-1k.json")
}

fn hex32(digest: &[u8]) -> String {
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn bench(c: &mut Criterion) {
    let bytes = sample();
    let ours = graphmind_core::json::parse(&bytes).expect("sample parses");
    let theirs: serde_json::Value =
        serde_json::from_slice(&bytes).expect("sample parses with serde_json");
    let theirs_value = theirs.clone();
    let call = serde_json::Value::Array(vec![serde_json::Value::from(NODE_ID), theirs]);

    let mut group = c.benchmark_group("fingerprint sample-1k");
    group.bench_function("graphmind_core::fingerprint", |b| {
        b.iter(|| fingerprint(black_box(NODE_ID), Some(black_box(&ours))))
    });
    group.bench_function("serde_jcs 0.2 + sha2", |b| {
        b.iter(|| {
            let text = serde_jcs::to_vec(black_box(&call)).unwrap();
            hex32(&Sha256::digest(&text))
        })
    });
    group.bench_function("serde_json_canonicalizer 0.4 + sha2", |b| {
        b.iter(|| {
            let text = serde_json_canonicalizer::to_vec(black_box(&call)).unwrap();
            hex32(&Sha256::digest(&text))
        })
    });
    group.finish();

    // From JSON text, as the Node binding and the C ABI have it: the text as JSON.stringify
    // writes it (tokens already canonical, copied) next to parsing it first.
    let stringified = graphmind_core::json::to_string(&ours);
    let id = graphmind_core::JsStr::from(NODE_ID);
    let keys = graphmind_core::canonical::DEFAULT_IGNORE_KEYS;
    let mut group = c.benchmark_group("fingerprint sample-1k from JSON text");
    group.bench_function(
        "graphmind_core::fingerprint_text_js (stringified text)",
        |b| {
            b.iter(|| {
                graphmind_core::fingerprint::fingerprint_text_js(
                    &id,
                    Some(black_box(stringified.as_bytes())),
                    keys,
                )
                .unwrap()
            })
        },
    );
    group.bench_function("json::parse + graphmind_core::fingerprint", |b| {
        b.iter(|| {
            let v = graphmind_core::json::parse(black_box(stringified.as_bytes())).unwrap();
            fingerprint(NODE_ID, Some(&v))
        })
    });
    group.bench_function("serde_json::from_slice + serde_jcs 0.2 + sha2", |b| {
        b.iter(|| {
            let v: serde_json::Value =
                serde_json::from_slice(black_box(stringified.as_bytes())).unwrap();
            let call = serde_json::Value::Array(vec![serde_json::Value::from(NODE_ID), v]);
            hex32(&Sha256::digest(serde_jcs::to_vec(&call).unwrap()))
        })
    });
    group.finish();

    // What a binding handing JSON text over pays first: parsing it.
    let mut group = c.benchmark_group("parse sample-1k");
    group.bench_function("graphmind_core::json::parse", |b| {
        b.iter(|| graphmind_core::json::parse(black_box(&bytes)).unwrap())
    });
    group.bench_function("serde_json::from_slice to Value", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(&bytes)).unwrap())
    });
    group.bench_function("graphmind_core::json::validate (no value built)", |b| {
        b.iter(|| graphmind_core::json::validate(black_box(&bytes)).unwrap())
    });
    group.bench_function("serde_json::from_slice to IgnoredAny", |b| {
        b.iter(|| serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&bytes)).unwrap())
    });
    group.finish();

    // What the session's worker pays to serialize an event's payload.
    let mut group = c.benchmark_group("write sample-1k");
    group.bench_function("graphmind_core::json::to_string", |b| {
        b.iter(|| graphmind_core::json::to_string(black_box(&ours)))
    });
    group.bench_function("serde_json::to_string", |b| {
        b.iter(|| serde_json::to_string(black_box(&theirs_value)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
