//! One tool node (start + finish, 1 KB in and out from bench/sample-1k.json) in one run of a
//! recording, detached session: through the Rust API (criterion), then through the C ABI
//! (the C program ffi/benches/tool_node.c, path in GM_C_BENCH; `make bench-c` builds it),
//! printed side by side. Goal: the C ABI costs at most 10% more.

#[path = "../../core/benches/support/cpu_time.rs"]
mod cpu_time;

use cpu_time::thread_cpu;
use criterion::{black_box, Criterion};
use graphmind_core::config::{self, EnvSnapshot, SdkFlavor};
use graphmind_core::json::{self, Value};
use graphmind_core::session::Session;
use graphmind_core::step::{tool_node, Step};
use std::sync::Arc;
use std::time::Duration;

fn sample() -> (Vec<u8>, std::path::PathBuf) {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench/sample-1k.json");
    (std::fs::read(&path).expect("bench/sample-1k.json"), path)
}

fn session() -> Session {
    let options =
        json::parse_str(r#"{"url":"ws://127.0.0.1:9/ingest","enabled":true,"appName":"bench"}"#)
            .unwrap();
    let config = config::resolve_json(&options, &EnvSnapshot::new(), SdkFlavor::Native);
    Session::new(config, Arc::new(|_: &str| {}))
}

/// The Rust API: the app holds its input/output as values.
fn one_node(session: &Session, run_id: &str, input: &Value, output: &Value) {
    let mut step = Step::start(
        session,
        Some(run_id),
        tool_node("lookup"),
        None,
        Some(input.clone()),
        true,
    );
    let d = step.before().wait();
    black_box(step.on_before(d));
    let d = step.after().wait();
    black_box(step.on_after(d, Some(output.clone())));
}

/// The Rust API starting from the same JSON text the C caller hands over.
fn one_node_from_text(session: &Session, run_id: &str, text: &[u8]) {
    let input = json::parse(text).unwrap();
    let mut step = Step::start(
        session,
        Some(run_id),
        tool_node("lookup"),
        None,
        Some(input),
        true,
    );
    let d = step.before().wait();
    black_box(step.on_before(d));
    let d = step.after().wait();
    black_box(step.on_after(d, Some(json::parse(text).unwrap())));
}

/// Best of 5 rounds of 10,000 calls, app-thread CPU time per call; the session is flushed
/// between rounds so its queue never fills (nothing dropped, nothing cheaper than real).
fn measure(session: &Session, mut f: impl FnMut()) -> f64 {
    for _ in 0..2000 {
        f();
    }
    session.flush(Duration::from_secs(60));
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t0 = thread_cpu();
        for _ in 0..10_000 {
            f();
        }
        best = best.min((thread_cpu() - t0).as_nanos() as f64 / 10_000.0);
        session.flush(Duration::from_secs(60));
    }
    best
}

fn main() {
    let (bytes, path) = sample();
    let value = json::parse(&bytes).unwrap();
    let s = session();
    let run = s.start_run("bench", None);

    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    c.bench_function("tool_node/rust_api_values", |b| {
        b.iter(|| one_node(&s, &run.run_id, &value, &value))
    });
    c.bench_function("tool_node/rust_api_from_json_text", |b| {
        b.iter(|| one_node_from_text(&s, &run.run_id, &bytes))
    });

    let rust_values = measure(&s, || one_node(&s, &run.run_id, &value, &value));
    let rust_text = measure(&s, || one_node_from_text(&s, &run.run_id, &bytes));
    s.dispose(Duration::from_secs(1));

    let c_ns = std::env::var("GM_C_BENCH").ok().and_then(|exe| {
        let out = std::process::Command::new(&exe).arg(&path).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.split_whitespace()
            .nth(1)
            .and_then(|n| n.parse::<f64>().ok())
    });
    println!();
    println!(
        "one tool node (start + finish, {} B in and out), app-thread CPU, best of 5 x 10000, ns per node:",
        bytes.len()
    );
    println!("  {:<38} {:>8.0}", "Rust API (values)", rust_values);
    println!(
        "  {:<38} {:>8.0}",
        "Rust API (parsing the same JSON text)", rust_text
    );
    match c_ns {
        Some(c) => {
            println!("  {:<38} {:>8.0}", "C ABI (JSON text in and out)", c);
            println!("  C ABI vs Rust API (values): {:+.1}%   vs Rust from text: {:+.1}%   (goal <= +10%)",
                (c / rust_values - 1.0) * 100.0, (c / rust_text - 1.0) * 100.0);
        }
        None => {
            println!("  C ABI: set GM_C_BENCH to the built ffi/benches/tool_node.c (make bench-c)")
        }
    }
}
