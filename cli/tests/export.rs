//! `record` (secret redaction, the loop fingerprint, the summary line,
//! `--no-redact-secrets`, `--format otlp`) and `import` (OTLP/JSON, OpenInference) against
//! the real binary.

mod common;
use common::*;
use graphmind_core::json::{parse_str, Value};

fn secret_run(srv: &Server) -> Vec<String> {
    let mut app = srv.ingest();
    app.hello("exporter", None);
    let frames = vec![
        app.event("run_x", "run.started", r#"{"app":"exporter","sdk":{"name":"t","version":"0"},"meta":{"api_key":"sk-live-1"}}"#),
        app.event(
            "run_x",
            "node.started",
            r#"{"nodeId":"llm:step","kind":"llm","name":"step","instanceId":"c1","input":{"headers":{"Authorization":"Bearer abc","x-api-key":"k2"},"max_tokens":512,"token_count":7,"accessToken":"t3","password":"","secret":null}}"#,
        ),
        app.event("run_x", "exec.paused", r#"{"pauseId":"p1","nodeId":"tool:x","point":"before","reason":"loop","loop":{"repeats":3,"firstSeq":1,"lastSeq":2,"fingerprint":"9f86d081884c7d65"}}"#),
        app.event("run_x", "node.error", r#"{"nodeId":"tool:x","error":{"name":"E","message":"password=hunter2 is wrong"}}"#),
        app.event("run_x", "run.finished", r#"{"status":"error"}"#),
    ];
    srv.wait_run("run_x", |r| i(r, &["eventCount"]) == Some(5));
    frames
}

#[test]
fn record_redacts_secret_keys_blanks_the_fingerprint_and_says_so() {
    let srv = Server::start(&[], &[]);
    let frames = secret_run(&srv);
    let db = srv.db.to_str().unwrap().to_owned();
    let o = srv.cli(&["record", "run_x", "--out", "-", "--db", &db], &[]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(
        lines[0].contains(r#""meta":{"api_key":"__REDACTED__"}"#),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(r#""input":{"headers":{"Authorization":"__REDACTED__","x-api-key":"__REDACTED__"},"max_tokens":512,"token_count":"__REDACTED__","accessToken":"__REDACTED__","password":"","secret":null}"#),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].contains(r#""fingerprint":"__REDACTED__""#) && lines[2].contains(r#""repeats":3"#)
    );
    assert_eq!(
        lines[3], frames[3],
        "values are not inspected: an error message is exported as recorded"
    );
    assert_eq!(lines[4], frames[4], "an untouched frame is byte for byte");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("redacted 5 values under 5 distinct keys (--no-redact-secrets keeps them)"),
        "{err}"
    );
    assert!(
        !out.contains("sk-live-1")
            && !out.contains("Bearer abc")
            && !out.contains("9f86d081884c7d65")
    );

    let o = srv.cli(
        &[
            "record",
            "run_x",
            "--out",
            "-",
            "--no-redact-secrets",
            "--db",
            &db,
        ],
        &[],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        out,
        frames.iter().map(|f| format!("{f}\n")).collect::<String>(),
        "verbatim"
    );
    assert!(!String::from_utf8_lossy(&o.stderr).contains("redacted "));
}

/// Every `src`/`href` attribute value in the page.
fn references(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in [" src=", " href="] {
        let mut at = 0;
        while let Some(p) = html[at..].find(attr) {
            let v = &html[at + p + attr.len()..];
            let v = v.trim_start_matches(['"', '\'']);
            out.push(
                v.chars()
                    .take_while(|c| !matches!(c, '"' | '\'' | ' ' | '>'))
                    .collect(),
            );
            at += p + attr.len();
        }
    }
    out
}

/// The run JSON carried by the page.
fn embedded_run(html: &str) -> Value {
    let open = r#"<script type="application/json" id="graphmind-run">"#;
    let start = html.find(open).expect("the run element") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    parse_str(&html[start..end]).expect("the run element holds JSON")
}

#[test]
fn record_html_is_one_self_contained_redacted_page() {
    let srv = Server::start(&[], &[]);
    let frames = secret_run(&srv);
    let mut app = srv.ingest();
    app.hello("exporter2", None);
    app.event("run_y", "node.finished", r#"{"nodeId":"tool:x","instanceId":"i","durationMs":1,"status":"ok","output":"</script><script>alert(1)</script><!-- & \u2028"}"#);
    srv.wait_run("run_y", |r| i(r, &["eventCount"]) == Some(1));
    let db = srv.db.to_str().unwrap().to_owned();

    // A small stand-in build, so this test does not depend on npm.
    let dist = srv.dir.join("dist");
    std::fs::create_dir_all(dist.join("assets")).unwrap();
    std::fs::write(
        dist.join("index.html"),
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\" /><title>GraphMind</title><link rel=\"icon\" href=\"data:,\" />\n<script type=\"module\" crossorigin src=\"./assets/index-T.js\"></script>\n<link rel=\"stylesheet\" crossorigin href=\"./assets/index-T.css\"></head><body><div id=\"bar\"></div></body></html>\n",
    )
    .unwrap();
    std::fs::write(
        dist.join("assets/index-T.js"),
        "globalThis.__booted = document.getElementById('graphmind-run') !== null;",
    )
    .unwrap();
    std::fs::write(dist.join("assets/index-T.css"), "body{background:#0a0a0c}").unwrap();
    let out = srv.dir.join("run.html");
    let out_s = out.to_str().unwrap();
    let dist_s = dist.to_str().unwrap();
    let o = srv.cli(
        &["record", "run_x", "--html", "--out", out_s, "--db", &db],
        &[("GRAPHMIND_VIEWER_DIST", dist_s)],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("redacted 5 values under 5 distinct keys (--no-redact-secrets keeps them)"),
        "{err}"
    );
    assert!(err.contains(&format!("→ {out_s}")), "{err}");
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(
        html.contains("globalThis.__booted") && html.contains("body{background:#0a0a0c}"),
        "JS and CSS inlined"
    );
    assert!(
        references(&html).iter().all(|r| r.starts_with("data:")),
        "self-contained: {:?}",
        references(&html)
    );
    assert!(!html.contains("<link rel=\"stylesheet\""));
    assert!(
        html.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';")
    );
    assert!(html.contains("<title>exporter · GraphMind run run_x</title>"));
    for secret in [
        "sk-live-1",
        "Bearer abc",
        "\"k2\"",
        "\"t3\"",
        "9f86d081884c7d65",
    ] {
        assert!(!html.contains(secret), "{secret} leaked");
    }
    let run = embedded_run(&html);
    assert_eq!(s(&run, &["run", "id"]), Some("run_x"));
    assert_eq!(s(&run, &["run", "app"]), Some("exporter"));
    assert_eq!(s(&run, &["run", "status"]), Some("error"));
    let events = run.get("events").and_then(Value::as_array).unwrap();
    assert_eq!(events.len(), 5);
    assert_eq!(
        s(&events[2], &["payload", "loop", "fingerprint"]),
        Some("__REDACTED__")
    );
    assert_eq!(
        to_json(&events[4]),
        frames[4],
        "an untouched envelope is carried as stored"
    );

    // Payload text that would close the element is escaped; it reads back the same.
    let o = srv.cli(
        &["record", "run_y", "--html", "--out", "-", "--db", &db],
        &[("GRAPHMIND_VIEWER_DIST", dist_s)],
    );
    assert!(o.status.success());
    let html = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        html.matches("</script>").count(),
        2,
        "the data element and the bundle, nothing else"
    );
    assert!(!html.contains("<!-- &"));
    let run = embedded_run(&html);
    let events = run.get("events").and_then(Value::as_array).unwrap();
    assert_eq!(
        s(&events[0], &["payload", "output"]),
        Some("</script><script>alert(1)</script><!-- & \u{2028}")
    );

    // --no-redact-secrets keeps the values; the default file name is graphmind-run-<id>.html.
    let o = srv.cli(
        &[
            "record",
            "run_x",
            "--html",
            "--no-redact-secrets",
            "--db",
            &db,
        ],
        &[("GRAPHMIND_VIEWER_DIST", dist_s)],
    );
    assert!(o.status.success());
    let default_name = std::env::current_dir()
        .unwrap()
        .join("graphmind-run-run_x.html");
    let raw = std::fs::read_to_string(&default_name).unwrap();
    let _ = std::fs::remove_file(&default_name);
    assert!(raw.contains("sk-live-1") && raw.contains("9f86d081884c7d65"));

    // A folder that is not a viewer build, or a build that would load something: refused.
    let o = srv.cli(
        &["record", "run_x", "--html", "--out", out_s, "--db", &db],
        &[(
            "GRAPHMIND_VIEWER_DIST",
            srv.dir.join("nope").to_str().unwrap(),
        )],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no viewer build"));
    std::fs::write(
        dist.join("index.html"),
        std::fs::read_to_string(dist.join("index.html"))
            .unwrap()
            .replace("./assets/index-T.css", "https://cdn.example/x.css"),
    )
    .unwrap();
    let o = srv.cli(
        &["record", "run_x", "--html", "--out", out_s, "--db", &db],
        &[("GRAPHMIND_VIEWER_DIST", dist_s)],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a local file"));
}

/// With the real viewer build (when `make viewer` has run): the page carries the built
/// bundle, and nothing in it is fetched.
#[test]
fn record_html_with_the_real_viewer_build() {
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../viewer/dist");
    if !dist.join("index.html").is_file() {
        eprintln!("viewer/dist not built: the browser test (viewer/test/export.test.mjs) covers it; make viewer");
        return;
    }
    let srv = Server::start(&[], &[]);
    secret_run(&srv);
    let db = srv.db.to_str().unwrap().to_owned();
    let o = srv.cli(
        &["record", "run_x", "--html", "--out", "-", "--db", &db],
        &[("GRAPHMIND_VIEWER_DIST", dist.to_str().unwrap())],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = String::from_utf8(o.stdout).unwrap();
    assert!(
        references(&html).iter().all(|r| r.starts_with("data:")),
        "{:?}",
        references(&html)
    );
    assert!(html.contains("<script type=\"module\">") && html.contains("<style>"));
    assert!(
        html.contains("graphmind-run"),
        "the bundle looks for the run element"
    );
    assert!(!html.contains("sk-live-1"));
    assert_eq!(
        embedded_run(&html)
            .get("events")
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(5)
    );
}

#[test]
fn record_as_otlp_and_import_it_back_as_a_read_only_run() {
    let srv = Server::start(&[], &[]);
    let mut app = srv.ingest();
    app.hello("agent-app", None);
    app.event(
        "run_o",
        "run.started",
        r#"{"app":"agent-app","sdk":{"name":"t","version":"0"}}"#,
    );
    app.event("run_o", "node.started", r#"{"nodeId":"llm:step","kind":"llm","name":"step","instanceId":"l1","input":{"prompt":"hi"}}"#);
    app.event("run_o", "node.finished", r#"{"nodeId":"llm:step","instanceId":"l1","durationMs":1,"status":"ok","output":"hello","usage":{"inputTokens":3,"outputTokens":5}}"#);
    app.event("run_o", "node.started", r#"{"nodeId":"tool:search","parentId":"llm:step","kind":"tool","name":"search","instanceId":"t1","input":{"q":"x","api_key":"k"}}"#);
    app.event("run_o", "node.error", r#"{"nodeId":"tool:search","instanceId":"t1","error":{"name":"Timeout","message":"took too long"}}"#);
    app.event("run_o", "run.finished", r#"{"status":"error"}"#);
    srv.wait_run("run_o", |r| i(r, &["eventCount"]) == Some(6));
    let db = srv.db.to_str().unwrap().to_owned();
    let file = srv.dir.join("run.otlp.json");
    let o = srv.cli(
        &[
            "record",
            "run_o",
            "--format",
            "otlp",
            "--out",
            file.to_str().unwrap(),
            "--db",
            &db,
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&file).unwrap();
    let doc = parse_str(&text).unwrap();
    let spans = doc.get("resourceSpans").and_then(Value::as_array).unwrap()[0]
        .get("scopeSpans")
        .and_then(Value::as_array)
        .unwrap()[0]
        .get("spans")
        .and_then(Value::as_array)
        .unwrap()
        .clone();
    assert_eq!(spans.len(), 3, "the run and its two node executions");
    assert!(text.contains(r#"{"key":"service.name","value":{"stringValue":"agent-app"}}"#));
    assert!(text.contains(r#"{"key":"llm.token_count.prompt","value":{"intValue":"3"}}"#));
    assert!(
        text.contains(r#"{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}}"#),
        "GenAI conventions beside OpenInference"
    );
    assert!(text.contains(r#"{"key":"gen_ai.usage.output_tokens","value":{"intValue":"5"}}"#));
    assert!(text.contains(r#"{"key":"gen_ai.tool.call.id","value":{"stringValue":"t1"}}"#));
    let tool = spans
        .iter()
        .find(|sp| sp.get("name").and_then(Value::as_str) == Some("search"))
        .unwrap();
    assert_eq!(
        to_json(tool.get("status").unwrap()),
        r#"{"message":"took too long","code":2}"#
    );
    assert!(!text.contains("\\\"k\\\""), "redaction applies to OTLP too");

    // Import it: one run, source import, the same nodes.
    let o = srv.cli(&["import", file.to_str().unwrap(), "--db", &db], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout);
    let id = said
        .split("as run ")
        .nth(1)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_owned();
    assert!(id.starts_with("imp_") && id.len() == 16, "{id}");
    let run = srv.wait_run(&id, |_| true);
    assert_eq!(
        (
            s(&run, &["source"]),
            s(&run, &["app"]),
            s(&run, &["status"])
        ),
        (Some("import"), Some("agent-app"), Some("error")),
        "the run span failed"
    );
    let events = srv.get_json(&format!("/api/runs/{id}/events"));
    let evs = events.get("events").and_then(Value::as_array).unwrap();
    let types: Vec<&str> = evs.iter().map(|e| s(e, &["type"]).unwrap()).collect();
    // The run's own span (agent:agent-app) failed too, so it carries a node.error.
    assert_eq!(
        types,
        [
            "run.started",
            "node.started",
            "node.started",
            "node.finished",
            "node.started",
            "node.error",
            "node.finished",
            "node.error",
            "node.finished",
            "run.finished"
        ]
    );
    let tool = evs
        .iter()
        .find(|e| {
            s(e, &["payload", "nodeId"]) == Some("tool:search")
                && s(e, &["type"]) == Some("node.started")
        })
        .unwrap();
    assert_eq!(s(tool, &["payload", "parentId"]), Some("llm:step"));
    assert_eq!(s(&evs[0], &["payload", "meta", "source"]), Some("import"));

    // Read-only: frames an app sends into it are not stored.
    let mut intruder = srv.ingest();
    intruder.hello("intruder", None);
    intruder.seq = 50;
    intruder.event(
        &id,
        "node.started",
        r#"{"nodeId":"x","kind":"tool","name":"x","instanceId":"i"}"#,
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(i(&srv.wait_run(&id, |_| true), &["eventCount"]), Some(10));
}

#[test]
fn import_reads_openinference_span_lists_and_jsonl_and_refuses_garbage() {
    let srv = Server::start(&[], &[]);
    let db = srv.db.to_str().unwrap().to_owned();
    let list = srv.dir.join("phoenix.json");
    std::fs::write(
        &list,
        r#"[{"name":"agent","context":{"span_id":"a"},"span_kind":"AGENT","start_time":"2024-05-01T12:00:00Z","end_time":"2024-05-01T12:00:03Z","attributes":{"input":{"value":"plan a trip"}}},
            {"name":"ChatOpenAI","context":{"span_id":"b"},"parent_id":"a","span_kind":"LLM","start_time":"2024-05-01T12:00:01Z","end_time":"2024-05-01T12:00:02Z","attributes":{"llm":{"model_name":"gpt","token_count":{"prompt":10,"completion":20}},"output":{"value":"{\"ok\":true}"}},"status_code":"ERROR","status_message":"rate limited"}]"#,
    )
    .unwrap();
    let o = srv.cli(&["import", list.to_str().unwrap(), "--db", &db], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("(openinference)") && out.contains("2 span(s) as nodes"),
        "{out}"
    );
    let id = out
        .split("as run ")
        .nth(1)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_owned();
    let run = srv.wait_run(&id, |_| true);
    assert_eq!(
        (
            s(&run, &["app"]),
            s(&run, &["status"]),
            i(&run, &["errorCount"])
        ),
        (Some("agent"), Some("ok"), Some(1))
    );
    assert_eq!(i(&run, &["startedAt"]), Some(1_714_564_800_000));

    let jsonl = srv.dir.join("spans.jsonl");
    std::fs::write(&jsonl, "{\"name\":\"t\",\"span_id\":\"1\",\"span_kind\":\"TOOL\",\"start_time\":1714564800}\n{\"name\":\"GET /\",\"span_id\":\"2\"}\n").unwrap();
    let o = srv.cli(&["import", jsonl.to_str().unwrap(), "--db", &db], &[]);
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("Skipped 1 span(s) of no known dialect: GET /")
    );

    let bad = srv.dir.join("bad.json");
    std::fs::write(&bad, r#"{"hello":"world"}"#).unwrap();
    let o = srv.cli(&["import", bad.to_str().unwrap(), "--db", &db], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("not an OTLP/JSON export or a span list: found an object with keys hello"));
    let o = srv.cli(&["import", "/nonexistent.json", "--db", &db], &[]);
    assert_eq!(o.status.code(), Some(1));
}
