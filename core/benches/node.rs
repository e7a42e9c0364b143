//! App-thread cost of one tool node (node.started + node.finished with 1 KB in and out,
//! `bench/sample-1k.json`) on a detached session, broken down, next to what serializing the
//! same two payloads with serde_json alone costs. Criterion, one run, side by side.

use criterion::{criterion_group, criterion_main, Criterion};
use graphmind_core::config::{self, EnvSnapshot, Options, SdkFlavor};
use graphmind_core::event::NodeKind;
use graphmind_core::fingerprint::fingerprint;
use graphmind_core::json::{self, Value};
use graphmind_core::session::{NodeRef, Session};
use std::sync::Arc;
use std::time::Duration;

fn sample_text() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/sample-1k.json")).unwrap()
}

fn detached_session() -> Session {
    // Port 9 (discard) on loopback: nothing listens, the worker stays detached.
    let options = Options { url: Some("ws://127.0.0.1:9/ingest".into()), ..Options::default() };
    Session::new(config::resolve(&options, &EnvSnapshot::new(), SdkFlavor::Native), Arc::new(|_: &str| {}))
}

fn bench(c: &mut Criterion) {
    let text = sample_text();
    let input = json::parse_str(&text).unwrap();
    let serde_value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let session = detached_session();
    let run = session.start_run("bench", None);
    let mut group = c.benchmark_group("one tool node, 1 KB in and out");
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("graphmind-core session (detached), start + finish", |b| {
        // Only the application thread is timed: the worker drains between timed batches
        // (outside the clock), so the bounded channel never fills and nothing is dropped.
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let batch = left.min(8192);
                let started = std::time::Instant::now();
                for _ in 0..batch {
                    let node = NodeRef::new(NodeKind::Tool, "search_files");
                    session.node_started(Some(&run.run_id), &node, None, Some(input.clone()));
                    session.node_finished(Some(&run.run_id), &node, Some(input.clone()), 0.5, false);
                }
                total += started.elapsed();
                session.flush(Duration::from_secs(60));
                left -= batch;
            }
            total
        })
    });
    group.bench_function("of which: fingerprint of the input (loop guard)", |b| {
        b.iter(|| fingerprint("tool:search_files", Some(std::hint::black_box(&input))))
    });
    group.bench_function("of which: two clones of the 1 KB value", |b| {
        b.iter(|| std::hint::black_box((input.clone(), input.clone())))
    });
    group.bench_function("serde_json: serialize the same two payloads", |b| {
        b.iter(|| {
            let a = serde_json::to_string(&serde_json::json!({"nodeId":"tool:search_files","kind":"tool","name":"search_files","instanceId":"inst_0123456789ab","input":serde_value.clone()})).unwrap();
            let z = serde_json::to_string(&serde_json::json!({"nodeId":"tool:search_files","instanceId":"inst_0123456789ab","output":serde_value.clone(),"durationMs":0.5,"status":"ok"})).unwrap();
            std::hint::black_box((a, z))
        })
    });
    group.finish();
    let _: Option<Value> = None;
    session.dispose(Duration::from_secs(5));
}

criterion_group!(benches, bench);
criterion_main!(benches);
