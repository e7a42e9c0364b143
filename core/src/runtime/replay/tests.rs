//! Replay decisions on a real session (no socket: detached).

use super::*;
use crate::config::{self, EnvSnapshot, Options, SdkFlavor};
use crate::event::NodeKind;
use crate::gate::GateDecision;
use crate::json;
use crate::session::NodeRef;
use crate::step::{Next, Step};

const RECORDED: &str = r#"{"gm":1,"seq":0,"ts":1,"runId":"run_rec","type":"run.started","payload":{"app":"native","sdk":{"name":"rust","version":"0"},"meta":{"name":"agent"}}}
{"gm":1,"seq":1,"ts":1,"runId":"run_rec","type":"node.started","payload":{"nodeId":"tool:search","kind":"tool","name":"search","instanceId":"a","input":{"q":"x"}}}
{"gm":1,"seq":2,"ts":1,"runId":"run_rec","type":"node.finished","payload":{"nodeId":"tool:search","instanceId":"a","output":{"hits":3},"durationMs":1,"status":"ok"}}
{"gm":1,"seq":3,"ts":1,"runId":"run_rec","type":"node.started","payload":{"nodeId":"tool:book","kind":"tool","name":"book","instanceId":"b","input":{"id":1}}}
{"gm":1,"seq":4,"ts":1,"runId":"run_rec","type":"node.error","payload":{"nodeId":"tool:book","instanceId":"b","error":{"name":"ValueError","message":"sold out"}}}
{"gm":1,"seq":5,"ts":1,"runId":"run_rec","type":"node.finished","payload":{"nodeId":"tool:book","instanceId":"b","durationMs":1,"status":"error"}}
{"gm":1,"seq":6,"ts":1,"runId":"run_rec","type":"node.started","payload":{"nodeId":"tool:search","kind":"tool","name":"search","instanceId":"c","input":{"q":"y"}}}
{"gm":1,"seq":7,"ts":1,"runId":"run_rec","type":"node.finished","payload":{"nodeId":"tool:search","instanceId":"c","output":{"hits":1},"durationMs":1,"status":"ok"}}
"#;

fn session() -> Session {
    let mut config = config::resolve(&Options::default(), &EnvSnapshot::new(), SdkFlavor::Native);
    config.url = "ws://127.0.0.1:1/ingest".into();
    Session::new(config, std::sync::Arc::new(|_: &str| {}))
}

fn file() -> String {
    let path = std::env::temp_dir().join(format!("gm-replay-{}.ndjson", crate::event::new_id("t")));
    std::fs::write(&path, RECORDED).unwrap();
    path.to_string_lossy().into_owned()
}

fn call(s: &Session, run: &str, tool: &str, input: &str) -> Next {
    let mut step = Step::start(
        s,
        Some(run),
        NodeRef::new(NodeKind::Tool, tool),
        None,
        Some(json::parse_str(input).unwrap()),
        true,
    );
    let _ = step.before();
    step.on_before(GateDecision::proceed())
}

#[test]
fn a_whole_run_is_answered_from_the_recording() {
    let s = session();
    let r = begin(
        &s,
        ReplaySpec {
            source: ReplaySource::File(file()),
            fork: None,
            output: None,
        },
    );
    assert_eq!(r.error, None);
    let run = s.start_run("agent", None);
    assert_eq!(
        call(&s, &run.run_id, "search", r#"{"q":"x"}"#),
        Next::ReturnInjected(json::parse_str(r#"{"hits":3}"#).unwrap())
    );
    match call(&s, &run.run_id, "book", r#"{"id":1}"#) {
        Next::Raise(e) => assert_eq!(e.message.to_string_lossy(), "sold out"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        call(&s, &run.run_id, "search", r#"{"q":"y"}"#),
        Next::ReturnInjected(json::parse_str(r#"{"hits":1}"#).unwrap())
    );
    let report = report(&s).unwrap();
    assert_eq!((report.replayed, report.live), (3, None));
    assert_eq!(report.replay_of.as_deref(), Some("run_rec"));
    end(&s);
}

#[test]
fn a_changed_input_diverges_and_the_rest_runs_live() {
    let s = session();
    begin(
        &s,
        ReplaySpec {
            source: ReplaySource::File(file()),
            fork: None,
            output: None,
        },
    );
    let run = s.start_run("agent", None);
    assert!(matches!(
        call(&s, &run.run_id, "search", r#"{"q":"x"}"#),
        Next::ReturnInjected(_)
    ));
    assert_eq!(
        call(&s, &run.run_id, "book", r#"{"id":2}"#),
        Next::Run { input: None }
    );
    assert_eq!(
        call(&s, &run.run_id, "search", r#"{"q":"y"}"#),
        Next::Run { input: None },
        "live after a divergence"
    );
    let mut live = report(&s).unwrap().live.unwrap();
    let recorded = live.remove(FIELD_RECORDED_KEY).unwrap();
    let now = live.remove(FIELD_LIVE_KEY).unwrap();
    assert_eq!(
        json::to_string(&Value::Object(live)),
        r#"{"reason":"diverged","at":"tool:book#1","differs":["input.id"]}"#
    );
    let keys = [recorded.as_str().unwrap(), now.as_str().unwrap()];
    assert_ne!(keys[0], keys[1], "the two match keys differ");
    assert!(keys.iter().all(|k| k.len() == 32), "{keys:?}");
    end(&s);
}

#[test]
fn a_fork_point_goes_live_with_the_edited_output_before_it() {
    let s = session();
    let spec = ReplaySpec {
        source: ReplaySource::File(file()),
        fork: Some(ForkPoint {
            node_id: "tool:search".into(),
            n: 2,
        }),
        output: Some(json::parse_str(r#"{"edited":true}"#).unwrap()),
    };
    begin(&s, spec);
    let run = s.start_run("agent", None);
    assert!(matches!(
        call(&s, &run.run_id, "search", r#"{"q":"x"}"#),
        Next::ReturnInjected(_)
    ));
    // tool:book#1 comes just before the fork point: its recorded error becomes the edit.
    assert_eq!(
        call(&s, &run.run_id, "book", r#"{"id":1}"#),
        Next::ReturnInjected(json::parse_str(r#"{"edited":true}"#).unwrap())
    );
    assert_eq!(
        call(&s, &run.run_id, "search", r#"{"q":"y"}"#),
        Next::Run { input: None }
    );
    end(&s);
}

#[test]
fn another_run_name_or_a_bad_file_runs_live() {
    let s = session();
    begin(
        &s,
        ReplaySpec {
            source: ReplaySource::File(file()),
            fork: None,
            output: None,
        },
    );
    let other = s.start_run("something-else", None);
    assert_eq!(
        call(&s, &other.run_id, "search", r#"{"q":"x"}"#),
        Next::Run { input: None }
    );
    end(&s);
    let bad = std::env::temp_dir().join("gm-replay-not-a-run.ndjson");
    std::fs::write(&bad, "hello\n").unwrap();
    let r = begin(
        &s,
        ReplaySpec {
            source: ReplaySource::File(bad.to_string_lossy().into()),
            fork: None,
            output: None,
        },
    );
    assert!(r.error.unwrap().contains("not an exported GraphMind run"));
    let run = s.start_run("agent", None);
    assert_eq!(
        call(&s, &run.run_id, "search", r#"{"q":"x"}"#),
        Next::Run { input: None }
    );
    end(&s);
}

#[test]
fn a_recording_of_another_app_runs_live() {
    let mut config = config::resolve(&Options::default(), &EnvSnapshot::new(), SdkFlavor::Python);
    config.app_name = "other".into();
    let s = Session::new(config, std::sync::Arc::new(|_: &str| {}));
    let r = begin(
        &s,
        ReplaySpec {
            source: ReplaySource::File(file()),
            fork: None,
            output: None,
        },
    );
    assert!(r.error.unwrap().contains("recorded by the app \"native\""));
    end(&s);
}
