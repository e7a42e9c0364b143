//! The loop guard behind a detached session: its updates run on the worker (nothing can
//! hold a call, so the application thread does not pay for keying inputs and outputs), and
//! the warning still comes once per streak, after the events that caused it.

use graphmind_core::config::{self, EnvSnapshot, Options, SdkFlavor};
use graphmind_core::event::NodeKind;
use graphmind_core::json::{self, Value};
use graphmind_core::session::{NodeRef, Session};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn detached(lines: Arc<Mutex<Vec<String>>>) -> Session {
    // Port 9 (discard) on loopback: nothing listens, the session stays detached.
    let options = Options {
        url: Some("ws://127.0.0.1:9/ingest".into()),
        ..Options::default()
    };
    let config = config::resolve(&options, &EnvSnapshot::new(), SdkFlavor::Native);
    Session::new(
        config,
        Arc::new(move |line: &str| lines.lock().unwrap().push(line.to_string())),
    )
}

fn call(session: &Session, run_id: &str, input: &str) {
    let node = NodeRef::new(NodeKind::Tool, "search");
    let input: Value = json::parse_str(input).unwrap();
    session.node_started(Some(run_id), &node, None, Some(input));
    session.node_finished(
        Some(run_id),
        &node,
        Some(Value::from("same answer")),
        1.0,
        false,
    );
}

fn loop_warnings(lines: &Mutex<Vec<String>>) -> usize {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("possible loop: search (tool:search)"))
        .count()
}

#[test]
fn a_detached_loop_is_warned_about_once_from_the_worker() {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let session = detached(lines.clone());
    let run = session.start_run("loop", None);
    call(&session, &run.run_id, r#"{"q":"a","page":1}"#);
    call(&session, &run.run_id, r#"{"page":1,"q":"a"}"#); // same arguments, other key order
    assert!(session.flush(Duration::from_secs(5)));
    assert_eq!(loop_warnings(&lines), 0, "two calls are not a loop");
    call(&session, &run.run_id, r#"{"q":"a","page":1}"#);
    assert!(session.flush(Duration::from_secs(5)));
    assert_eq!(
        loop_warnings(&lines),
        1,
        "the third identical call warns: {:?}",
        lines.lock().unwrap()
    );
    call(&session, &run.run_id, r#"{"q":"a","page":1}"#);
    assert!(session.flush(Duration::from_secs(5)));
    assert_eq!(loop_warnings(&lines), 1, "once per streak");
    call(&session, &run.run_id, r#"{"q":"b","page":1}"#);
    assert!(session.flush(Duration::from_secs(5)));
    assert_eq!(loop_warnings(&lines), 1);
    session.dispose(Duration::from_secs(2));
}

#[test]
fn events_dropped_while_the_worker_is_behind_keep_the_guard_s_books() {
    // A flood outpaces the worker: past the detached queue's bound, node events are
    // dropped. Their loop-guard updates are made on the calling thread instead (a dropped
    // finish closes its call), so the guard neither leaks open calls nor misses a loop.
    let lines = Arc::new(Mutex::new(Vec::new()));
    let session = detached(lines.clone());
    let run = session.start_run("flood", None);
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(4096));
    let mut attempts = 0;
    while session.stats().lost == 0 && attempts < 20 {
        for n in 0..5_000 {
            call(
                &session,
                &run.run_id,
                &big.replace("blob", &format!("b{n}")),
            );
        }
        attempts += 1;
    }
    assert!(
        session.stats().lost > 0,
        "the flood never outpaced the worker"
    );
    assert!(session.flush(Duration::from_secs(30)));
    assert_eq!(
        session.loop_open_calls(&run.run_id),
        0,
        "every finished call closed, dropped or not"
    );
    let before = loop_warnings(&lines);
    for _ in 0..3 {
        call(&session, &run.run_id, r#"{"q":"after the flood"}"#);
    }
    assert!(session.flush(Duration::from_secs(5)));
    assert_eq!(
        loop_warnings(&lines),
        before + 1,
        "the guard still sees the third identical call: {:?}",
        lines
            .lock()
            .unwrap()
            .iter()
            .rev()
            .take(3)
            .collect::<Vec<_>>()
    );
    session.dispose(Duration::from_secs(2));
}

/// A run that finishes right after its calls: the worker, which feeds the guard while
/// detached, still sees every call of the run before the run's books are forgotten (they
/// were forgotten on the application thread at `finish_run`, racing the worker, and the
/// loop went unwarned about whenever the worker was behind).
#[test]
fn a_run_finished_right_after_its_loop_is_still_warned_about() {
    use graphmind_core::session::RunOutcome;
    for round in 0..40 {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let session = detached(lines.clone());
        let run = session.start_run("short", None);
        for i in 0..3 {
            if i > 0 {
                // Slow enough that the worker takes the first calls before the run ends.
                std::thread::sleep(Duration::from_millis(3));
            }
            call(&session, &run.run_id, r#"{"q":"a"}"#);
        }
        session.finish_run(&run, RunOutcome::Ok);
        assert!(session.flush(Duration::from_secs(5)));
        assert_eq!(
            loop_warnings(&lines),
            1,
            "round {round}: {:?}",
            lines.lock().unwrap()
        );
        session.dispose(Duration::from_secs(1));
    }
}
