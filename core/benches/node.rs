//! App-thread cost of one tool node (node.started + node.finished with 1 KB in and out,
//! `bench/sample-1k.json`) on a detached session, broken down, next to what serializing the
//! same two payloads with serde_json alone costs. Criterion, one run, side by side.
//!
//! Every figure is the calling thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall
//! time: "app-thread cost" is what the application thread spends, and on a shared 2-core
//! machine wall time mostly measures who else was scheduled (the session's own worker
//! included, which runs on another core on any real machine).

#[path = "support/borrowed_fields.rs"]
mod borrowed_fields;
#[path = "support/cpu_time.rs"]
mod cpu_time;

use cpu_time::thread_cpu;
use criterion::{criterion_group, criterion_main, Criterion};
use graphmind_core::config::{self, EnvSnapshot, Options, SdkFlavor};
use graphmind_core::event::NodeKind;
use graphmind_core::fingerprint::fingerprint;
use graphmind_core::host_value::HostValue;
use graphmind_core::json::{self, Value};
use graphmind_core::loop_guard::{LoopGuard, LoopGuardConfig, LoopValue, NodeStart};
use graphmind_core::session::{NodeRef, Session};
use std::sync::Arc;
use std::time::Duration;

/// Values cloned ahead of one timed batch.
const VALUES_PER_BATCH: u64 = 32;

fn sample_text() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../bench/sample-1k.json"
    ))
    .unwrap()
}

/// Times `iters` calls of `f` in thread CPU time, in batches; `between` runs after each
/// batch outside the clock.
fn cpu_iters(iters: u64, mut f: impl FnMut(), mut between: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let batch = left.min(8192);
        let started = thread_cpu();
        for _ in 0..batch {
            f();
        }
        total += thread_cpu() - started;
        between();
        left -= batch;
    }
    total
}

/// Thread CPU time of `iters` tool nodes (start + finish) with input and output from
/// `make`. Only the application thread is timed; the worker drains between batches so the
/// bounded channel never fills and nothing is dropped. The values are made outside the
/// clock: a binding builds them from host objects, timed there.
fn node_cpu(session: &Session, run_id: &str, iters: u64, make: impl Fn() -> HostValue) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    let mut drained = 0;
    while left > 0 {
        // Small batches: the values a binding hands over were just built and sit in cache,
        // as they do here (a long batch would measure misses).
        let batch = left.min(VALUES_PER_BATCH);
        let values: Vec<(HostValue, HostValue)> = (0..batch).map(|_| (make(), make())).collect();
        let started = thread_cpu();
        for (i, o) in values {
            let node = NodeRef::new(NodeKind::Tool, "search_files");
            session.node_started_host(Some(run_id), &node, None, Some(i));
            session.node_finished_host(Some(run_id), &node, Some(o), 0.5, false);
        }
        total += thread_cpu() - started;
        drained += batch;
        if drained >= 512 {
            session.flush(Duration::from_secs(60));
            drained = 0;
        }
        left -= batch;
    }
    total
}

fn session_with(loop_guard: bool) -> Session {
    // Port 9 (discard) on loopback: nothing listens, the worker stays detached.
    let mut options = Options {
        url: Some("ws://127.0.0.1:9/ingest".into()),
        ..Options::default()
    };
    if !loop_guard {
        options.loop_guard = Some(config::LoopGuardOption::Off);
    }
    Session::new(
        config::resolve(&options, &EnvSnapshot::new(), SdkFlavor::Native),
        Arc::new(|_: &str| {}),
    )
}

fn bench(c: &mut Criterion) {
    let text = sample_text();
    let input = json::parse_str(&text).unwrap();
    let serde_value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut group = c.benchmark_group("one tool node, 1 KB in and out (thread CPU)");
    group.measurement_time(Duration::from_secs(4));
    let text_bytes = text.as_bytes().to_vec();
    let as_text = || HostValue::Text(text_bytes.clone());
    let built = || HostValue::Built(input.clone());
    for (label, guard, text_values) in [
        // How the Node binding and C callers hand values over: the worker parses them.
        (
            "session (detached), start + finish, input and output as JSON text",
            true,
            true,
        ),
        ("session (detached), start + finish", true, false),
        ("same, loop guard off", false, false),
    ] {
        let session = session_with(guard);
        let run = session.start_run("bench", None);
        let make = || if text_values { as_text() } else { built() };
        group.bench_function(label, |b| {
            b.iter_custom(|iters| node_cpu(&session, &run.run_id, iters, make))
        });
        session.dispose(Duration::from_secs(5));
    }
    for (label, distinct) in [
        (
            "of which: the loop guard on this thread, attached (the same call repeated)",
            false,
        ),
        (
            "of which: the loop guard on this thread, attached (a different input each call)",
            true,
        ),
    ] {
        // What a session does on the application thread while a debugger is attached: key
        // the input, record the start, key the finish leaving the output for later, record
        // it. The worker's share (keying the output, filling it in) runs outside the clock.
        let guard = std::cell::RefCell::new(LoopGuard::new(LoopGuardConfig::default()));
        let keyer = guard.borrow().keyer().clone();
        let tickets = std::cell::RefCell::new(Vec::new());
        let inputs: Vec<Value> = (0..64)
            .map(|n| {
                let mut v = input.clone();
                if let Some(map) = v.as_object_mut() {
                    map.insert("nonce", Value::from(n as i64));
                }
                v
            })
            .collect();
        let mut seq = 0u64;
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                cpu_iters(
                    iters,
                    || {
                        seq += 1;
                        let value = if distinct {
                            &inputs[(seq % 64) as usize]
                        } else {
                            &input
                        };
                        let instance = format!("inst_{seq}");
                        let start = NodeStart::new(
                            "run_bench",
                            "tool:search_files",
                            "tool",
                            LoopValue::Read(Some(value)),
                            seq,
                        )
                        .name("search_files")
                        .instance(&instance);
                        let fp = keyer.fingerprint_start(start.node_id, start.input);
                        let mut guard = guard.borrow_mut();
                        std::hint::black_box(guard.awaits_output(
                            "run_bench",
                            "tool",
                            start.node_id,
                            fp,
                        ));
                        std::hint::black_box(guard.record_start(&start, fp, true));
                        let key = keyer.key_finish_later(Some("ok"), LoopValue::Read(Some(value)));
                        if let Some(ticket) = guard.record_finish(
                            "run_bench",
                            "tool:search_files",
                            Some(&instance),
                            key,
                        ) {
                            tickets.borrow_mut().push((ticket, seq));
                        }
                    },
                    || {
                        let mut guard = guard.borrow_mut();
                        for (ticket, at) in tickets.borrow_mut().drain(..) {
                            let output = if distinct {
                                &inputs[(at % 64) as usize]
                            } else {
                                &input
                            };
                            let key = keyer.key_output(Some(output));
                            guard.fill_output("run_bench", ticket, Some(key));
                        }
                    },
                )
            })
        });
    }
    let guard = LoopGuard::new(LoopGuardConfig::default());
    group.bench_function("of which: the loop guard's key of the input", |b| {
        b.iter_custom(|iters| {
            cpu_iters(
                iters,
                || {
                    std::hint::black_box(
                        guard.fingerprint_start("tool:search_files", LoopValue::Read(Some(&input))),
                    );
                },
                || {},
            )
        })
    });
    group.bench_function(
        "for comparison: the reported fingerprint (SHA-256 of canonical text)",
        |b| {
            b.iter_custom(|iters| {
                cpu_iters(
                    iters,
                    || {
                        drop(std::hint::black_box(fingerprint(
                            "tool:search_files",
                            Some(&input),
                        )))
                    },
                    || {},
                )
            })
        },
    );
    group.bench_function("of which: canonical text of the input (no hashing)", |b| {
        b.iter_custom(|iters| {
            cpu_iters(
                iters,
                || {
                    drop(std::hint::black_box(
                        graphmind_core::canonical::canonical_json(&input),
                    ))
                },
                || {},
            )
        })
    });
    group.bench_function("of which: a new node identity", |b| {
        b.iter_custom(|iters| {
            cpu_iters(
                iters,
                || {
                    drop(std::hint::black_box(NodeRef::new(
                        NodeKind::Tool,
                        "search_files",
                    )))
                },
                || {},
            )
        })
    });
    group.bench_function(
        "two clones of the 1 KB value (not in the session figure)",
        |b| {
            b.iter_custom(|iters| {
                cpu_iters(
                    iters,
                    || drop(std::hint::black_box((input.clone(), input.clone()))),
                    || {},
                )
            })
        },
    );
    let events = borrowed_fields::NodeEvents::new();
    group.bench_function(
        "serde_json: serialize the same two payloads (borrowed)",
        |b| {
            b.iter_custom(|iters| {
                cpu_iters(
                    iters,
                    || {
                        drop(std::hint::black_box(
                            events.serialize(&serde_value, &serde_value),
                        ))
                    },
                    || {},
                )
            })
        },
    );
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
