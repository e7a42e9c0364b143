//! Shrinking a ~17 MB payload next to ONE plain serialization of the same value.
//!
//! Goal: `serialize_payload` on an oversized payload costs at most twice `json::to_string`.
//! Two shapes: a tool output holding one 17 MB string, and an output that is a large array of
//! small objects. Criterion reports each; a summary line per shape prints the ratio.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use graphmind_core::json::{to_string, Map, Value};
use graphmind_core::shrink::{serialize_payload, MAX_PAYLOAD_BYTES};

const TARGET: usize = 17_000_000;

fn obj(entries: Vec<(&str, Value)>) -> Value {
    let mut map = Map::new();
    for (k, v) in entries {
        map.insert(k, v);
    }
    Value::Object(map)
}

/// A node.finished whose output holds one 17 MB text (mostly ASCII, some escapes and
/// multi-byte characters, as a scraped page has).
fn big_string_payload() -> Value {
    let line = "The quick brown fox jumps over the lazy dog; \"quoted\" text, café, 中文, 😀.\n";
    let text = line.repeat(TARGET / line.len() + 1);
    obj(vec![
        ("nodeId", Value::from("tool:read_file")),
        ("instanceId", Value::from("i-42")),
        (
            "output",
            obj(vec![
                ("path", Value::from("/data/dump.txt")),
                ("mimeType", Value::from("text/plain")),
                ("content", Value::from(text)),
                ("truncated", Value::from(false)),
            ]),
        ),
        ("durationMs", Value::from(12.5)),
        ("status", Value::from("ok")),
    ])
}

/// A node.finished whose output is a large array of small records.
fn big_array_payload() -> Value {
    let mut rows = Vec::new();
    let mut size = 0;
    let mut i = 0i64;
    while size < TARGET {
        let row = obj(vec![
            ("id", Value::from(i)),
            ("name", Value::from(format!("record {i}"))),
            ("score", Value::from(i as f64 / 7.0)),
            (
                "tags",
                Value::Array(vec![Value::from("a"), Value::from("é")]),
            ),
            ("desc", Value::from("a short description of the record")),
        ]);
        size += to_string(&row).len() + 1;
        rows.push(row);
        i += 1;
    }
    obj(vec![
        ("nodeId", Value::from("tool:query")),
        ("instanceId", Value::from("q-7")),
        ("output", Value::Array(rows)),
        ("durationMs", Value::from(3i64)),
        ("status", Value::from("ok")),
    ])
}

fn best_of(n: usize, mut f: impl FnMut()) -> Duration {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap()
}

/// Plain serialization and `serialize_payload` of `payload`, side by side in one criterion
/// group (`samples` samples over `time`), then each one's best of `samples` timed runs.
fn side_by_side(
    c: &mut Criterion,
    group_name: &str,
    payload: &Value,
    samples: usize,
    time: Duration,
) -> (Duration, Duration) {
    let plain = || black_box(to_string(black_box(payload)));
    let shrink = || {
        black_box(serialize_payload(
            black_box(payload),
            MAX_PAYLOAD_BYTES,
            Some("node.finished"),
        ))
    };
    let mut group = c.benchmark_group(group_name);
    group
        .sample_size(samples)
        .measurement_time(time)
        .warm_up_time(time / 6);
    group.bench_function("plain json::to_string", |b| b.iter(plain));
    group.bench_function("shrink serialize_payload", |b| b.iter(shrink));
    group.finish();
    (
        best_of(samples, || {
            plain();
        }),
        best_of(samples, || {
            shrink();
        }),
    )
}

fn bench(c: &mut Criterion) {
    for (name, payload) in [
        ("string-17MB", big_string_payload()),
        ("array-17MB", big_array_payload()),
    ] {
        let plain_len = to_string(&payload).len();
        let shrunk = serialize_payload(&payload, MAX_PAYLOAD_BYTES, Some("node.finished"));
        assert!(shrunk.truncated && shrunk.json.len() <= MAX_PAYLOAD_BYTES);
        assert_eq!(shrunk.original_bytes, plain_len);

        let (plain, shrink) = side_by_side(c, name, &payload, 10, Duration::from_secs(3));
        println!(
            "SUMMARY {name}: {plain_len} bytes -> {} bytes | plain to_string {:.2} ms | shrink {:.2} ms | ratio {:.2}x",
            shrunk.json.len(),
            plain.as_secs_f64() * 1e3,
            shrink.as_secs_f64() * 1e3,
            shrink.as_secs_f64() / plain.as_secs_f64()
        );
    }
}

/// The fast path: a payload that fits is written once, as plain serialization writes it.
fn bench_fits(c: &mut Criterion) {
    let rows: Vec<Value> = (0..4000i64)
        .map(|i| {
            obj(vec![
                ("id", Value::from(i)),
                ("name", Value::from(format!("record {i} é 中"))),
            ])
        })
        .collect();
    let payload = obj(vec![
        ("nodeId", Value::from("tool:q")),
        ("output", Value::Array(rows)),
        ("durationMs", Value::from(1i64)),
        ("status", Value::from("ok")),
    ]);
    let plain_len = to_string(&payload).len();
    assert!(plain_len < MAX_PAYLOAD_BYTES);
    let (plain, shrink) =
        side_by_side(c, "fits-under-budget", &payload, 20, Duration::from_secs(2));
    println!(
        "SUMMARY fits-{plain_len}B: plain to_string {:.3} ms | serialize_payload {:.3} ms | ratio {:.2}x",
        plain.as_secs_f64() * 1e3,
        shrink.as_secs_f64() * 1e3,
        shrink.as_secs_f64() / plain.as_secs_f64()
    );
}

criterion_group!(benches, bench, bench_fits);
criterion_main!(benches);
