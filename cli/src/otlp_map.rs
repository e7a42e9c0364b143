//! The one span mapping: a run's stored envelopes as OpenTelemetry spans, typed as the
//! `opentelemetry-proto` messages. `record --format otlp` writes them as OTLP/JSON (the
//! crate's serde mapping: hex ids, nanoseconds and 64-bit integers as strings); the live
//! export (`otlp_export`) encodes the same messages as OTLP/HTTP protobuf, or JSON when
//! asked, with no text in between.
//!
//! One resource (`service.name` = the app), one scope (`graphmind` and our version), a root
//! span for the run and one span per node execution, carrying the OpenInference attributes
//! (`openinference.span.kind`, `input.value`, `output.value`, `llm.token_count.*`, ...) and,
//! beside them, the OpenTelemetry GenAI semantic conventions (`gen_ai.*`).

use crate::storage::RunRow;
use graphmind_core::json::{self, Value};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span, Status};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// OTLP status codes (`opentelemetry.proto.trace.v1.Status.StatusCode`).
const STATUS_OK: i32 = 1;
const STATUS_ERROR: i32 = 2;
/// Every span is `SPAN_KIND_INTERNAL`: the app's steps, not RPC edges.
const SPAN_KIND_INTERNAL: i32 = 1;
/// Bytes of a trace id and of a span id.
const TRACE_ID_BYTES: usize = 16;
/// Bytes of a span id.
pub const SPAN_ID_BYTES: usize = 8;

fn id_bytes(seed: &str, bytes: usize) -> Vec<u8> {
    Sha256::digest(seed.as_bytes())[..bytes].to_vec()
}

/// The trace id of a run (every span of the run shares it).
pub fn trace_id(run_id: &str) -> Vec<u8> {
    id_bytes(run_id, TRACE_ID_BYTES)
}

/// The span id of one node execution (`instance` is `payload.instanceId`, or the node id
/// when there is none).
pub fn node_span_id(run_id: &str, node_id: &str, instance: &str) -> Vec<u8> {
    id_bytes(&format!("{run_id}/{node_id}/{instance}"), SPAN_ID_BYTES)
}

/// The span id of the run's root span.
pub fn run_span_id(run_id: &str) -> Vec<u8> {
    id_bytes(&format!("{run_id}/run"), SPAN_ID_BYTES)
}

fn any_value(v: &Value) -> AnyValue {
    let value = match v {
        Value::String(s) => any_value::Value::StringValue(s.to_string()),
        Value::Bool(b) => any_value::Value::BoolValue(*b),
        Value::Number(_) => match v.as_i64() {
            Some(i) => any_value::Value::IntValue(i),
            None => any_value::Value::DoubleValue(v.as_f64().unwrap_or(0.0)),
        },
        other => any_value::Value::StringValue(json::to_string(other)),
    };
    AnyValue { value: Some(value) }
}

fn attr(key: &str, v: &Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(any_value(v)),
        ..Default::default()
    }
}

fn attr_str(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.to_owned())),
        }),
        ..Default::default()
    }
}

/// An attribute whose value is an array of strings (`arrayValue`).
fn attr_strings(key: &str, items: &[&str]) -> KeyValue {
    let values = items
        .iter()
        .map(|s| AnyValue {
            value: Some(any_value::Value::StringValue((*s).to_owned())),
        })
        .collect();
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::ArrayValue(ArrayValue { values })),
        }),
        ..Default::default()
    }
}

/// One node execution, gathered from its `node.started` and its end.
struct Exec<'a> {
    node_id: &'a str,
    instance: &'a str,
    name: &'a str,
    kind: &'a str,
    parent: Option<&'a str>,
    start: f64,
    end: Option<f64>,
    input: Option<&'a Value>,
    output: Option<&'a Value>,
    usage: Option<&'a Value>,
    error: Option<&'a Value>,
}

/// The OpenTelemetry GenAI semantic-convention attributes (`gen_ai.*`) of one node
/// execution, written beside the OpenInference ones: the operation (`chat` for an llm
/// node, `execute_tool` for a tool, `invoke_agent` for an agent; other kinds have none),
/// the provider (as `gen_ai.provider.name` and the older `gen_ai.system`), the request and
/// response model, the token counts, the finish reason as the provider reported it, and
/// the tool's name and call id. The OpenInference `llm.provider` / `llm.model_name` come
/// from the same values.
fn gen_ai_attrs(x: &Exec, out: &mut Vec<KeyValue>) {
    let text = |v: Option<&Value>, k: &str| {
        v.and_then(|v| v.get(k))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    match x.kind {
        "llm" => {
            out.push(attr_str("gen_ai.operation.name", "chat"));
            if let Some(p) = text(x.input, "provider") {
                out.push(attr_str("gen_ai.provider.name", &p));
                out.push(attr_str("gen_ai.system", &p));
                out.push(attr_str("llm.provider", &p));
            }
            let request_model = text(x.input, "model");
            let response_model = text(x.output, "model");
            if let Some(m) = &request_model {
                out.push(attr_str("gen_ai.request.model", m));
            }
            if let Some(m) = &response_model {
                out.push(attr_str("gen_ai.response.model", m));
            }
            if let Some(m) = response_model.as_ref().or(request_model.as_ref()) {
                out.push(attr_str("llm.model_name", m));
            }
            if let Some(r) =
                text(x.output, "rawFinishReason").or_else(|| text(x.output, "finishReason"))
            {
                out.push(attr_strings(
                    "gen_ai.response.finish_reasons",
                    &[r.as_str()],
                ));
            }
        }
        "tool" => {
            out.push(attr_str("gen_ai.operation.name", "execute_tool"));
            out.push(attr_str("gen_ai.tool.name", x.name));
            if x.instance != x.node_id {
                out.push(attr_str("gen_ai.tool.call.id", x.instance));
            }
        }
        "agent" => {
            out.push(attr_str("gen_ai.operation.name", "invoke_agent"));
            out.push(attr_str("gen_ai.agent.name", x.name));
        }
        _ => {}
    }
    if let Some(u) = x.usage {
        for (k, key) in [
            ("inputTokens", "gen_ai.usage.input_tokens"),
            ("outputTokens", "gen_ai.usage.output_tokens"),
        ] {
            if let Some(n) = u.get(k) {
                out.push(attr(key, n));
            }
        }
    }
}

fn ms_to_ns(ms: f64) -> u64 {
    (ms.max(0.0) as u64).saturating_mul(1_000_000)
}

fn oi_kind(kind: &str) -> &'static str {
    match kind {
        "llm" => "LLM",
        "tool" => "TOOL",
        "agent" => "AGENT",
        "retriever" => "RETRIEVER",
        _ => "CHAIN",
    }
}

/// The execution a `node.started` opens: its payload `p`, at `ts`.
fn started_exec(p: Option<&Value>, ts: f64) -> Exec<'_> {
    let s = |k: &str| p.and_then(|p| p.get(k)).and_then(Value::as_str);
    let node = s("nodeId").unwrap_or("");
    Exec {
        node_id: node,
        instance: s("instanceId").unwrap_or(node),
        name: s("name").unwrap_or(node),
        kind: s("kind").unwrap_or("custom"),
        parent: s("parentId"),
        start: ts,
        end: None,
        input: p.and_then(|p| p.get("input")),
        output: None,
        usage: None,
        error: None,
    }
}

/// Ends `x` with a `node.finished` or `node.error` (`kind`) of payload `p` at `ts`.
fn end_exec<'a>(x: &mut Exec<'a>, kind: &str, p: Option<&'a Value>, ts: f64) {
    if kind == "node.error" {
        x.error = p.and_then(|p| p.get("error"));
    } else {
        x.end = Some(ts);
        x.output = p.and_then(|p| p.get("output"));
        x.usage = p.and_then(|p| p.get("usage"));
    }
    x.end.get_or_insert(ts);
}

/// The node executions of `envelopes`, in start order; and when the run finished, if said.
fn executions<'a>(envelopes: &[&'a Value]) -> (Vec<Exec<'a>>, Option<f64>) {
    let mut execs: Vec<Exec> = Vec::new();
    let mut open: HashMap<(&str, &str), usize> = HashMap::new();
    let mut latest_of_node: HashMap<&str, usize> = HashMap::new();
    let mut run_end = None;
    for e in envelopes {
        let kind = e.get("type").and_then(Value::as_str).unwrap_or("");
        let ts = e.get("ts").and_then(Value::as_f64).unwrap_or(0.0);
        let p = e.get("payload");
        let s = |k: &str| p.and_then(|p| p.get(k)).and_then(Value::as_str);
        let node = s("nodeId").unwrap_or("");
        let instance = s("instanceId").unwrap_or(node);
        match kind {
            "node.started" => {
                let idx = execs.len();
                execs.push(started_exec(p, ts));
                open.insert((node, instance), idx);
                latest_of_node.insert(node, idx);
            }
            "node.finished" | "node.error" => {
                let idx = open
                    .get(&(node, instance))
                    .copied()
                    .or_else(|| latest_of_node.get(node).copied());
                if let Some(x) = idx.and_then(|i| execs.get_mut(i)) {
                    end_exec(x, kind, p, ts);
                }
            }
            "run.finished" => run_end = Some(ts),
            _ => {}
        }
    }
    (execs, run_end)
}

fn node_span(x: &Exec, trace: &[u8], span_id: Vec<u8>, parent: Vec<u8>) -> Span {
    let mut attributes = vec![
        attr_str("openinference.span.kind", oi_kind(x.kind)),
        attr_str("graphmind.node.id", x.node_id),
        attr_str("graphmind.node.kind", x.kind),
    ];
    if x.kind == "tool" {
        attributes.push(attr_str("tool.name", x.name));
    }
    if let Some(i) = x.input {
        attributes.push(attr_str("input.value", &json::to_string(i)));
    }
    if let Some(o) = x.output {
        attributes.push(attr_str("output.value", &json::to_string(o)));
    }
    if let Some(u) = x.usage {
        for (k, key) in [
            ("inputTokens", "llm.token_count.prompt"),
            ("outputTokens", "llm.token_count.completion"),
        ] {
            if let Some(n) = u.get(k) {
                attributes.push(attr(key, n));
            }
        }
    }
    gen_ai_attrs(x, &mut attributes);
    let end = x.end.unwrap_or(x.start).max(x.start);
    let (status, events) = match x.error {
        Some(err) => {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("error");
            let mut ev = vec![attr_str("exception.message", message)];
            if let Some(n) = err.get("name").and_then(Value::as_str) {
                ev.push(attr_str("exception.type", n));
            }
            if let Some(st) = err.get("stack").and_then(Value::as_str) {
                ev.push(attr_str("exception.stacktrace", st));
            }
            let exception = span::Event {
                time_unix_nano: ms_to_ns(x.end.unwrap_or(x.start)),
                name: "exception".into(),
                attributes: ev,
                ..Default::default()
            };
            (
                Status {
                    message: message.to_owned(),
                    code: STATUS_ERROR,
                },
                vec![exception],
            )
        }
        None => (
            Status {
                code: STATUS_OK,
                ..Default::default()
            },
            Vec::new(),
        ),
    };
    Span {
        trace_id: trace.to_vec(),
        span_id,
        parent_span_id: parent,
        name: x.name.to_owned(),
        kind: SPAN_KIND_INTERNAL,
        start_time_unix_nano: ms_to_ns(x.start),
        end_time_unix_nano: ms_to_ns(end),
        attributes,
        events,
        status: Some(status),
        ..Default::default()
    }
}

fn run_span(run: &RunRow, trace: &[u8], run_end: Option<f64>) -> Span {
    let failed = run.status == "error";
    Span {
        trace_id: trace.to_vec(),
        span_id: run_span_id(&run.id),
        name: run.app.clone(),
        kind: SPAN_KIND_INTERNAL,
        start_time_unix_nano: ms_to_ns(run.started_at),
        end_time_unix_nano: ms_to_ns(run_end.or(run.finished_at).unwrap_or(run.started_at)),
        attributes: vec![
            attr_str("openinference.span.kind", "AGENT"),
            attr_str("graphmind.run.id", &run.id),
            attr_str("gen_ai.operation.name", "invoke_agent"),
            attr_str("gen_ai.agent.name", &run.app),
        ],
        status: Some(Status {
            code: if failed { STATUS_ERROR } else { STATUS_OK },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The run's spans: its root span first, then one span per node execution in start order.
/// A node whose `parentId` names a node with a span in `envelopes` is that span's child;
/// every other node is a child of the run's span.
pub fn spans(run: &RunRow, envelopes: &[&Value]) -> Vec<Span> {
    let trace = trace_id(&run.id);
    let (execs, run_end) = executions(envelopes);
    let ids: HashMap<&str, &Exec> = execs.iter().map(|x| (x.node_id, x)).collect();
    let root = run_span_id(&run.id);
    let mut out = Vec::with_capacity(execs.len() + 1);
    out.push(run_span(run, &trace, run_end));
    for x in &execs {
        let parent = x.parent.and_then(|p| ids.get(p)).map_or_else(
            || root.clone(),
            |p| node_span_id(&run.id, p.node_id, p.instance),
        );
        let id = node_span_id(&run.id, x.node_id, x.instance);
        out.push(node_span(x, &trace, id, parent));
    }
    out
}

/// The ids of one live span: its trace, its own id and its parent's, all known to the
/// exporter before the span is built (it derives them once per run and per execution).
pub struct SpanIds<'a> {
    /// The run's trace id ([`trace_id`]).
    pub trace: &'a [u8],
    /// The execution's span id ([`node_span_id`]).
    pub span: [u8; SPAN_ID_BYTES],
    /// The parent's span id: the latest execution of `parentId` started so far, else the
    /// run's root span.
    pub parent: [u8; SPAN_ID_BYTES],
}

/// The one span of a node execution, built when it ends, from just what it needs: the
/// payload and time of its `node.started`, and the type (`node.finished` / `node.error`),
/// payload and time of its end. What the live export sends; the same mapping as
/// [`spans`].
pub fn finished_node_span(
    ids: &SpanIds,
    started: &Value,
    start_ts: f64,
    end_kind: &str,
    end: &Value,
    end_ts: f64,
) -> Span {
    let mut x = started_exec(Some(started), start_ts);
    end_exec(&mut x, end_kind, Some(end), end_ts);
    node_span(&x, ids.trace, ids.span.to_vec(), ids.parent.to_vec())
}

/// The span id of one node execution as a fixed array (see [`node_span_id`]).
pub fn node_span_id_array(run_id: &str, node_id: &str, instance: &str) -> [u8; SPAN_ID_BYTES] {
    let mut id = [0u8; SPAN_ID_BYTES];
    id.copy_from_slice(&node_span_id(run_id, node_id, instance));
    id
}

/// The span id of the run's root span as a fixed array (see [`run_span_id`]).
pub fn run_span_id_array(run_id: &str) -> [u8; SPAN_ID_BYTES] {
    let mut id = [0u8; SPAN_ID_BYTES];
    id.copy_from_slice(&run_span_id(run_id));
    id
}

/// The run's root span, as the live export sends it when the run finishes.
pub fn root_span_of(run: &RunRow) -> Span {
    run_span(run, &trace_id(&run.id), run.finished_at)
}

/// The resource of an app's spans (`service.name`).
pub fn resource(app: &str) -> Resource {
    Resource {
        attributes: vec![attr_str("service.name", app)],
        ..Default::default()
    }
}

/// Our instrumentation scope.
pub fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "graphmind".into(),
        version: crate::hub::VERSION.into(),
        ..Default::default()
    }
}

/// An export request holding `spans` under one resource per app (apps in first-seen order).
pub fn request<A: AsRef<str>, I: IntoIterator<Item = (A, Span)>>(
    spans: I,
) -> ExportTraceServiceRequest {
    let mut groups: Vec<ResourceSpans> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (app, span) in spans {
        let app = app.as_ref();
        let i = match index.get(app) {
            Some(&i) => i,
            None => {
                groups.push(ResourceSpans {
                    resource: Some(resource(app)),
                    scope_spans: vec![ScopeSpans {
                        scope: Some(scope()),
                        ..Default::default()
                    }],
                    ..Default::default()
                });
                index.insert(app.to_owned(), groups.len() - 1);
                groups.len() - 1
            }
        };
        groups[i].scope_spans[0].spans.push(span);
    }
    ExportTraceServiceRequest {
        resource_spans: groups,
    }
}

/// The whole run as one OTLP/JSON document (`record --format otlp`), newline-terminated.
pub fn to_json(run: &RunRow, envelopes: &[Value]) -> String {
    let refs: Vec<&Value> = envelopes.iter().collect();
    let req = request(spans(run, &refs).into_iter().map(|s| (run.app.clone(), s)));
    let mut doc = serde_json::to_string(&req).unwrap_or_else(|_| "{\"resourceSpans\":[]}".into());
    doc.push('\n');
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use prost::Message;

    fn run() -> RunRow {
        RunRow {
            id: "r1".into(),
            app: "app".into(),
            started_at: 1000.0,
            finished_at: Some(2000.0),
            status: "ok".into(),
            schema_version: 1,
            source: "live".into(),
            event_count: 4,
            error_count: 1,
        }
    }

    fn events() -> Vec<Value> {
        [
            r#"{"type":"node.started","ts":1100,"payload":{"nodeId":"n1","name":"chat","kind":"llm","input":{"q":1,"model":"m1","provider":"openai"}}}"#,
            r#"{"type":"node.finished","ts":1200,"payload":{"nodeId":"n1","output":"hi","usage":{"inputTokens":7,"outputTokens":3}}}"#,
            r#"{"type":"node.started","ts":1300,"payload":{"nodeId":"n2","name":"search","kind":"tool","parentId":"n1","instanceId":"c9"}}"#,
            r#"{"type":"node.error","ts":1400,"payload":{"nodeId":"n2","instanceId":"c9","error":{"message":"boom","name":"E"}}}"#,
        ]
        .iter()
        .map(|s| json::parse_str(s).unwrap())
        .collect()
    }

    fn get<'a>(sp: &'a Span, key: &str) -> Option<&'a Any> {
        sp.attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_ref())
            .and_then(|v| v.value.as_ref())
    }

    #[test]
    fn a_run_maps_to_its_root_and_one_span_per_execution_with_parentage() {
        let evs = events();
        let refs: Vec<&Value> = evs.iter().collect();
        let spans = spans(&run(), &refs);
        assert_eq!(spans.len(), 3);
        assert_eq!(spans[0].name, "app");
        assert_eq!(
            (spans[1].name.as_str(), spans[2].name.as_str()),
            ("chat", "search")
        );
        assert_eq!(spans[1].parent_span_id, spans[0].span_id);
        assert_eq!(spans[2].parent_span_id, spans[1].span_id);
        assert!(spans
            .iter()
            .all(|s| s.trace_id.len() == 16 && s.trace_id == spans[0].trace_id));
        assert_eq!(spans[1].start_time_unix_nano, 1_100_000_000);
        assert_eq!(
            get(&spans[1], "llm.token_count.prompt"),
            Some(&Any::IntValue(7))
        );
        assert_eq!(
            get(&spans[1], "gen_ai.request.model"),
            Some(&Any::StringValue("m1".into()))
        );
        assert_eq!(
            get(&spans[2], "gen_ai.tool.call.id"),
            Some(&Any::StringValue("c9".into()))
        );
        let status = spans[2].status.as_ref().unwrap();
        assert_eq!(
            (status.code, status.message.as_str()),
            (STATUS_ERROR, "boom")
        );
        assert_eq!(spans[2].events[0].name, "exception");
    }

    #[test]
    fn the_json_form_is_otlp_json_and_the_protobuf_form_decodes_back() {
        let doc = to_json(&run(), &events());
        assert!(
            doc.contains(r#"{"key":"llm.token_count.prompt","value":{"intValue":"7"}}"#),
            "{doc}"
        );
        assert!(doc.contains(r#""startTimeUnixNano":"1100000000""#));
        let back: ExportTraceServiceRequest = serde_json::from_str(&doc).unwrap();
        let body = back.encode_to_vec();
        let req = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        assert_eq!(req, back);
        assert_eq!(req.resource_spans[0].scope_spans[0].spans.len(), 3);
    }

    #[test]
    fn the_live_span_of_an_execution_is_the_span_record_writes_for_it() {
        let evs = events();
        let refs: Vec<&Value> = evs.iter().collect();
        let all = spans(&run(), &refs);
        let trace = trace_id("r1");
        let p = |i: usize| evs[i].get("payload").unwrap();
        let ts = |i: usize| evs[i].get("ts").and_then(Value::as_f64).unwrap();
        let chat = finished_node_span(
            &SpanIds {
                trace: &trace,
                span: node_span_id_array("r1", "n1", "n1"),
                parent: run_span_id_array("r1"),
            },
            p(0),
            ts(0),
            "node.finished",
            p(1),
            ts(1),
        );
        assert_eq!(chat, all[1]);
        let search = finished_node_span(
            &SpanIds {
                trace: &trace,
                span: node_span_id_array("r1", "n2", "c9"),
                parent: node_span_id_array("r1", "n1", "n1"),
            },
            p(2),
            ts(2),
            "node.error",
            p(3),
            ts(3),
        );
        assert_eq!(search, all[2]);
        assert_eq!(root_span_of(&run()).end_time_unix_nano, 2_000_000_000);
    }
}
