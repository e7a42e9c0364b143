//! Misuse every binding gets refused by the core: a step driven out of order
//! (`Step::check`), nothing recorded for a finished step, a run finished twice (the first
//! finish wins), and `emit` of a payload its wire schema refuses. "Nothing recorded" is the
//! session's `seq`, which every emitted event takes.

use graphmind_core::config::{self, EnvSnapshot, Options, SdkFlavor};
use graphmind_core::event::{ErrorInfo, NodeKind};
use graphmind_core::gate::GateDecision;
use graphmind_core::json::{self, Value};
use graphmind_core::session::{check_emit, NodeRef, RunOutcome, Session};
use graphmind_core::step::{Next, Step, StepCall};
use std::sync::Arc;

fn detached() -> Session {
    // Port 9 (discard) on loopback: nothing listens, the session records detached.
    let options = Options {
        url: Some("ws://127.0.0.1:9/ingest".into()),
        ..Options::default()
    };
    let config = config::resolve(&options, &EnvSnapshot::new(), SdkFlavor::Native);
    Session::new(config, Arc::new(|_: &str| {}))
}

#[test]
fn a_step_refuses_calls_out_of_order_and_records_nothing_once_finished() {
    let session = detached();
    let run = session.start_run("steps", None);
    let mut step = Step::start(
        &session,
        Some(&run.run_id),
        NodeRef::new(NodeKind::Tool, "t"),
        None,
        Some(Value::from(1i64)),
        true,
    );
    for early in [
        StepCall::After,
        StepCall::Error,
        StepCall::OnBefore,
        StepCall::OnAfter,
    ] {
        assert!(
            step.check(early).is_err(),
            "{early:?} before the before gate"
        );
    }
    step.check(StepCall::Before).unwrap();
    let _ = step.before();
    assert!(
        step.check(StepCall::Before).is_err(),
        "the before gate twice"
    );
    step.check(StepCall::OnBefore).unwrap();
    assert_eq!(
        step.on_before(GateDecision::proceed()),
        Next::Run { input: None }
    );
    assert!(step.check(StepCall::OnBefore).is_err(), "a decision twice");
    step.check(StepCall::Error).unwrap();
    let _ = step.error(ErrorInfo::new("E", "first"));
    step.check(StepCall::OnError).unwrap();
    let retry = GateDecision {
        action: graphmind_core::gate::ResumeAction::Retry,
        ..GateDecision::proceed()
    };
    assert_eq!(step.on_error(retry), Next::Run { input: None });
    // A retry goes back to the function or to the before gate.
    step.check(StepCall::Before).unwrap();
    step.check(StepCall::After).unwrap();
    let _ = step.after();
    step.check(StepCall::OnAfter).unwrap();
    assert_eq!(
        step.on_after(GateDecision::proceed(), Some(Value::from(2i64))),
        Next::ReturnResult
    );
    assert!(step.is_finished());
    let seq = session.stats().seq;
    for late in [
        StepCall::Before,
        StepCall::After,
        StepCall::Error,
        StepCall::OnAfter,
        StepCall::UngatedError,
    ] {
        let refused = step.check(late).unwrap_err();
        assert!(refused.to_string().contains("finished"), "{refused}");
    }
    // The methods themselves record nothing for a finished step (no node.error, no pause).
    let _ = step.error(ErrorInfo::new("E", "late"));
    let _ = step.on_after(GateDecision::proceed(), Some(Value::from(3i64)));
    drop(step);
    assert_eq!(
        session.stats().seq,
        seq,
        "nothing recorded after the step finished"
    );
    session.dispose(std::time::Duration::from_millis(200));
}

#[test]
fn the_first_finish_of_a_run_wins() {
    let session = detached();
    let run = session.start_run("twice", None);
    assert!(session.finish_run(&run, RunOutcome::Ok));
    let seq = session.stats().seq;
    assert!(!session.finish_run(&run, RunOutcome::Error(ErrorInfo::new("E", "late"))));
    assert_eq!(session.stats().seq, seq, "no second run.finished");
    assert!(run.signal.is_finished());
    assert!(!session.is_disposed());
    session.dispose(std::time::Duration::from_millis(200));
    assert!(session.is_disposed());
}

#[test]
fn emit_refuses_what_the_server_would_drop() {
    let hint = |text: &str| check_emit("graph.hint", &json::parse_str(text).unwrap());
    assert!(hint(r#"{"nodes":[]}"#).is_ok());
    for bad in ["[1,2]", r#"{"nodes":7}"#, r#"{}"#, r#"{"nodes":[1]}"#] {
        assert!(hint(bad).is_err(), "{bad}");
    }
    assert!(check_emit("exec.paused", &Value::Object(Default::default())).is_err());
    assert!(check_emit("no.such.type", &Value::Object(Default::default())).is_err());
    let session = detached();
    let seq = session.stats().seq;
    assert_eq!(
        session.emit(None, "graph.hint", json::parse_str("[1]").unwrap()),
        None
    );
    assert_eq!(session.stats().seq, seq, "a refused emit takes no seq");
    session.dispose(std::time::Duration::from_millis(200));
}
