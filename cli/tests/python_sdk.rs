//! Interop: the reference Python SDK (graphmind-ai 0.5.1, installed by `make setup` into
//! `.venv-ref`) attaches to our server, is stored, is held at a breakpoint set by a viewer,
//! and is released by an `inject` resume with the injected output.

mod common;
use common::*;
use graphmind_core::json::{parse_str, Value};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SCRIPT: &str = r#"
import json, sys, graphmind as gm
g = gm.configure(app="py-interop")
print(json.dumps({"attached": g.ready(timeout=5)}), flush=True)

@gm.tool
def lookup(city: str) -> str:
    return "real:" + city

with gm.run(sys.argv[1]) as ctx:
    print(json.dumps({"runId": ctx.run_id}), flush=True)
    out = lookup("Paris")
print(json.dumps({"result": out}), flush=True)
g.dispose()
"#;

fn reference_python() -> PathBuf {
    let candidates = [
        std::env::var("GRAPHMIND_REF_PYTHON")
            .ok()
            .map(PathBuf::from),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv-ref/bin/python")),
    ];
    for c in candidates.into_iter().flatten() {
        if c.exists() {
            return c;
        }
    }
    panic!("the reference Python SDK is missing: run `make setup` (it installs graphmind-ai 0.5.1 into .venv-ref), or point GRAPHMIND_REF_PYTHON at a python that can `import graphmind`");
}

struct Py {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Py {
    fn start(port: u16, dir: &std::path::Path, run_name: &str) -> Py {
        let script = dir.join("interop.py");
        std::fs::write(&script, SCRIPT).unwrap();
        let mut child = Command::new(reference_python())
            .arg(&script)
            .arg(run_name)
            .env("GRAPHMIND_URL", format!("ws://127.0.0.1:{port}/ingest"))
            .env_remove("GRAPHMIND_DISABLED")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the reference Python SDK");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Py { child, lines }
    }

    fn line(&self) -> Value {
        let l = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .expect("python printed a line");
        parse_str(&l).unwrap_or_else(|_| panic!("python printed {l:?}"))
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn reference_python_sdk_is_stored_held_and_released_with_an_injected_output() {
    let srv = Server::start(&[], &[]);

    // 1. A plain run: stored, with its tool node.
    let py = Py::start(srv.port, &srv.dir, "first");
    assert_eq!(
        py.line().get("attached").and_then(Value::as_bool),
        Some(true)
    );
    let run_id = s(&py.line(), &["runId"]).unwrap().to_owned();
    assert_eq!(s(&py.line(), &["result"]), Some("real:Paris"));
    let run = srv.wait_run(&run_id, |r| s(r, &["status"]) == Some("ok"));
    assert_eq!(s(&run, &["app"]), Some("py-interop"));
    let events = srv.get_json(&format!("/api/runs/{run_id}/events"));
    let tool = events
        .get("events")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .find(|e| {
            s(e, &["type"]) == Some("node.started")
                && s(e, &["payload", "nodeId"]) == Some("tool:lookup")
        });
    let tool = tool.expect("the tool node is stored");
    assert_eq!(s(tool, &["payload", "kind"]), Some("tool"));
    assert_eq!(s(tool, &["payload", "input", "city"]), Some("Paris"));
    drop(py);

    // 2. A viewer sets a breakpoint on the tool; the next run holds there.
    let mut ui = srv.ui();
    ui.recv_type("welcome");
    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(
            0,
            "*",
            "breakpoint.set",
            r#"{"matcher":{"kind":"tool","name":"lookup"}}"#
        )
    ));
    ui.recv_type("state");
    ui.send(r#"{"type":"subscribe","runId":"*"}"#);
    ui.recv_type("runs");

    let py = Py::start(srv.port, &srv.dir, "second");
    assert_eq!(
        py.line().get("attached").and_then(Value::as_bool),
        Some(true)
    );
    let held_run = s(&py.line(), &["runId"]).unwrap().to_owned();
    ui.send(&format!(r#"{{"type":"subscribe","runId":"{held_run}"}}"#));
    let deadline = Instant::now() + Duration::from_secs(20);
    let pause_id = loop {
        assert!(Instant::now() < deadline, "the tool was never held");
        if let Some(m) = ui.recv_within(Duration::from_millis(200)) {
            if s(&m, &["type"]) == Some("event")
                && s(&m, &["envelope", "type"]) == Some("exec.paused")
            {
                assert_eq!(
                    s(&m, &["envelope", "payload", "nodeId"]),
                    Some("tool:lookup")
                );
                assert_eq!(s(&m, &["envelope", "payload", "point"]), Some("before"));
                break s(&m, &["envelope", "payload", "pauseId"])
                    .unwrap()
                    .to_owned();
            }
        }
    };
    // Held: the script has not printed its result.
    assert!(
        py.lines.recv_timeout(Duration::from_millis(300)).is_err(),
        "the tool is held"
    );

    ui.send(&format!(
        r#"{{"type":"control","envelope":{}}}"#,
        frame(
            1,
            &held_run,
            "exec.resume",
            &format!(r#"{{"pauseId":"{pause_id}","action":"inject","output":"injected:Paris"}}"#)
        )
    ));
    let result = ui.recv_type("resume.result");
    assert_eq!(
        s(&result, &["outcome"]),
        Some("resumed"),
        "{}",
        to_json(&result)
    );
    assert_eq!(s(&py.line(), &["result"]), Some("injected:Paris"));

    let run = srv.wait_run(&held_run, |r| s(r, &["status"]) == Some("ok"));
    assert!(i(&run, &["eventCount"]).unwrap() >= 6);
    let events = srv.get_json(&format!("/api/runs/{held_run}/events"));
    let resumed = events
        .get("events")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .any(|e| {
            s(e, &["type"]) == Some("exec.resumed")
                && s(e, &["payload", "action"]) == Some("inject")
        });
    assert!(resumed, "the app recorded exec.resumed with action inject");
}
