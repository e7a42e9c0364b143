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
