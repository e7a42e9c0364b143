//! `graphmind serve --otlp-endpoint` into a real OpenTelemetry backend: Arize Phoenix
//! (`arize-phoenix` from PyPI, installed by scripts/setup.sh into `.venv-phoenix`), started
//! here on 127.0.0.1 with free ports and its own temporary working dir. A live run (an llm
//! node and a failing tool under it) is exported over OTLP/HTTP protobuf, and the spans are
//! read back through Phoenix's own REST API (`GET /v1/projects/default/spans`): names,
//! kinds, parentage, token counts, errors, the OpenInference and `gen_ai.*` attributes.
//! Then 1,000 more llm nodes measure the spans per second into Phoenix. Bounded: Phoenix
//! starts in about 10 s, the whole test takes well under a minute.

mod common;
use common::*;
use serde_json::Value as J;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long Phoenix may take to answer `/healthz`.
const STARTUP: Duration = Duration::from_secs(45);
/// How many llm nodes the throughput figure sends.
const FIGURE_NODES: usize = 1_000;

/// The `phoenix` executable of the set-up's venv, or `None` (with a loud message) when the
/// set-up could not create that venv and said so in `.venv-phoenix.skipped`.
fn phoenix_bin() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = std::env::var("GRAPHMIND_PHOENIX")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join(".venv-phoenix/bin/phoenix"));
    if bin.exists() {
        return Some(bin);
    }
    if let Ok(why) = std::fs::read_to_string(root.join(".venv-phoenix.skipped")) {
        eprintln!(
            "\n!!! SKIPPED: the Phoenix test: the set-up could not create .venv-phoenix: {}\n",
            why.trim()
        );
        return None;
    }
    panic!("Phoenix is missing: run `make setup` (it installs arize-phoenix into .venv-phoenix), or point GRAPHMIND_PHOENIX at a `phoenix` executable");
}

/// A Phoenix server, killed when dropped.
struct Phoenix {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Phoenix {
    fn start(bin: &PathBuf) -> Phoenix {
        let dir = temp_dir();
        let (port, grpc) = (free_port(), free_port());
        let log = dir.join("phoenix.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .current_dir(&dir)
            .env("PHOENIX_WORKING_DIR", dir.join("work"))
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc.to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("DO_NOT_TRACK", "1")
            .env_remove("PHOENIX_SQL_DATABASE_URL")
            .env_remove("PHOENIX_COLLECTOR_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start phoenix serve");
        let mut p = Phoenix { child, port, log };
        let deadline = Instant::now() + STARTUP;
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                && http_get(port, "/healthz").0 == 200
            {
                return p;
            }
            if let Ok(Some(st)) = p.child.try_wait() {
                panic!("phoenix exited ({st}) before answering: {}", p.log_tail());
            }
            assert!(
                Instant::now() < deadline,
                "phoenix did not answer /healthz within {STARTUP:?}: {}",
                p.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Every span of the `default` project, through the REST API (paged by 1,000).
    fn spans(&self) -> Vec<J> {
        let mut out = Vec::new();
        let mut cursor = String::new();
        loop {
            let (status, body) = http_get(
                self.port,
                &format!("/v1/projects/default/spans?limit=1000{cursor}"),
            );
            if status == 404 {
                return out; // no span yet: the project appears with the first one
            }
            assert_eq!(status, 200, "GET spans: {body}");
            let page: J = serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("spans page is not JSON ({e}): {body}"));
            out.extend(page["data"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(c) if !c.is_empty() => cursor = format!("&cursor={c}"),
                _ => return out,
            }
        }
    }

    /// The spans once there are at least `n` (or `within` passed).
    fn wait_spans(&self, n: usize, within: Duration) -> Vec<J> {
        let deadline = Instant::now() + within;
        loop {
            let got = self.spans();
            if got.len() >= n || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn a_live_run_reads_back_from_phoenix_with_names_kinds_parentage_tokens_and_errors() {
    let Some(bin) = phoenix_bin() else { return };
    let phoenix = Phoenix::start(&bin);
    let srv = Server::start(
        &[
            "--otlp-endpoint",
            &format!("http://127.0.0.1:{}", phoenix.port),
        ],
        &[],
    );

    let mut app = srv.ingest();
    app.hello("phoenix-app", None);
    let run = "run_phoenix";
    app.event(
        run,
        "run.started",
        r#"{"app":"phoenix-app","sdk":{"name":"t","version":"0"}}"#,
    );
    app.event(run, "node.started", r#"{"nodeId":"llm:chat","instanceId":"c1","kind":"llm","name":"chat","input":{"provider":"anthropic","model":"claude-x","messages":[{"role":"user","content":"hi"}],"api_key":"sk-live-secret"}}"#);
    app.event(run, "node.started", r#"{"nodeId":"tool:search","instanceId":"call_7","kind":"tool","name":"search","parentId":"llm:chat","input":{"q":"paris"}}"#);
    app.event(run, "node.error", r#"{"nodeId":"tool:search","instanceId":"call_7","error":{"name":"Timeout","message":"took too long"}}"#);
    app.event(run, "node.finished", r#"{"nodeId":"llm:chat","instanceId":"c1","durationMs":1,"status":"ok","output":{"text":"hello","finishReason":"tool-calls","rawFinishReason":"tool_use","model":"claude-x-1"},"usage":{"inputTokens":11,"outputTokens":4}}"#);
    app.event(run, "run.finished", r#"{"status":"error"}"#);

    let spans = phoenix.wait_spans(3, Duration::from_secs(15));
    assert_eq!(
        spans.len(),
        3,
        "root, llm, tool in Phoenix: {spans:#?}\n{}",
        phoenix.log_tail()
    );
    let by = |name: &str| {
        spans
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
    };
    let (root, chat, search) = (by("phoenix-app"), by("chat"), by("search"));
    let id = |s: &J| s["context"]["span_id"].as_str().unwrap().to_owned();
    assert!(root["parent_id"].is_null(), "{root}");
    assert_eq!(chat["parent_id"].as_str(), Some(id(root).as_str()));
    assert_eq!(search["parent_id"].as_str(), Some(id(chat).as_str()));
    assert!(spans
        .iter()
        .all(|s| s["context"]["trace_id"] == root["context"]["trace_id"]));
    assert_eq!(
        (
            root["span_kind"].as_str(),
            chat["span_kind"].as_str(),
            search["span_kind"].as_str()
        ),
        (Some("AGENT"), Some("LLM"), Some("TOOL"))
    );
    assert_eq!(search["status_code"], "ERROR");
    assert_eq!(search["status_message"], "took too long");
    assert_eq!(root["status_code"], "ERROR", "the run finished with error");
    assert_eq!(chat["status_code"], "OK");
    assert!(
        search["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "exception"
                && e["attributes"]["exception.message"] == "took too long"),
        "{search}"
    );

    let a = &chat["attributes"];
    assert_eq!(a["llm.token_count.prompt"], 11, "{a:#}");
    assert_eq!(a["llm.token_count.completion"], 4);
    assert_eq!(a["llm.model_name"], "claude-x-1");
    assert_eq!(a["llm.provider"], "anthropic");
    assert_eq!(a["gen_ai.operation.name"], "chat");
    assert_eq!(a["gen_ai.provider.name"], "anthropic");
    assert_eq!(a["gen_ai.request.model"], "claude-x");
    assert_eq!(a["gen_ai.response.model"], "claude-x-1");
    assert_eq!(a["gen_ai.usage.input_tokens"], 11);
    assert_eq!(a["gen_ai.usage.output_tokens"], 4);
    let reasons = &a["gen_ai.response.finish_reasons"];
    assert!(
        reasons == &serde_json::json!(["tool_use"])
            || a["gen_ai.response.finish_reasons.0"] == "tool_use",
        "{a:#}"
    );
    let input = a["input.value"].as_str().unwrap();
    assert!(
        input.contains("__REDACTED__") && !input.contains("sk-live-secret"),
        "{input}"
    );
    assert!(a["output.value"].as_str().unwrap().contains("hello"));
    let t = &search["attributes"];
    assert_eq!(t["tool.name"], "search", "{t:#}");
    assert_eq!(t["gen_ai.tool.name"], "search");
    assert_eq!(t["gen_ai.tool.call.id"], "call_7");
    assert_eq!(t["gen_ai.operation.name"], "execute_tool");
    assert_eq!(root["attributes"]["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(root["attributes"]["graphmind.run.id"], run);

    // The figure: spans per second into Phoenix, from the first event sent to the last
    // span readable through its API.
    let run = "run_phoenix_rate";
    let t = Instant::now();
    app.event(
        run,
        "run.started",
        r#"{"app":"phoenix-app","sdk":{"name":"t","version":"0"}}"#,
    );
    for n in 0..FIGURE_NODES {
        app.event(run, "node.started", &format!(r#"{{"nodeId":"llm:n{n}","instanceId":"i{n}","kind":"llm","name":"n{n}","input":{{"provider":"openai","model":"m"}}}}"#));
        app.event(run, "node.finished", &format!(r#"{{"nodeId":"llm:n{n}","instanceId":"i{n}","durationMs":1,"status":"ok","output":"ok","usage":{{"inputTokens":1,"outputTokens":1}}}}"#));
    }
    app.event(run, "run.finished", r#"{"status":"ok"}"#);
    let want = 3 + FIGURE_NODES + 1;
    let got = phoenix.wait_spans(want, Duration::from_secs(30)).len();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(
        got,
        want,
        "all spans reach Phoenix within 30 s\n{}",
        phoenix.log_tail()
    );
    let session = srv.get_json("/api/session");
    eprintln!(
        "FIGURE otlp into Phoenix: {} spans in {secs:.2} s = {:.0} spans/s (first event sent to last span readable through the REST API); session otlp = {}",
        FIGURE_NODES + 1,
        (FIGURE_NODES + 1) as f64 / secs,
        graphmind_core::json::to_string(session.get("otlp").unwrap())
    );
}
