//! Spans in, spans out.
//!
//! `graphmind import FILE` loads an OTLP/JSON export (`{resourceSpans:[...]}`, camelCase
//! or snake_case, `instrumentationLibrarySpans` accepted) or a flat OpenInference span list
//! (a JSON array, `{spans:[...]}`, `{data:[...]}` or JSON Lines) as ONE read-only run with
//! `source = "import"`. Each span is classified by dialect (AI SDK telemetry, OTel GenAI
//! semantic conventions, OpenInference; spans of no dialect are skipped and counted) and
//! becomes `node.started` / `node.error`? / `node.finished` at its own times, between a
//! `run.started` and a `run.finished`. Every import gets a fresh `imp_<12 hex>` run id.
//!
//! `graphmind record --format otlp` goes the other way (`otlp_map`, the one span mapping),
//! so a run exported that way imports back.

use crate::storage;
use crate::util::new_token;
use graphmind_core::event::{
    Message, RunFinished, RunStarted, RunStatus, SdkInfo, PROTOCOL_VERSION,
};
use graphmind_core::json::{self, Map, Value};
use std::collections::{HashMap, HashSet};
use std::path::Path;

// -- import ---------------------------------------------------------------------------------

/// One span, container-independent.
#[derive(Debug, Clone)]
pub struct Span {
    /// Span id (synthetic when absent).
    pub id: String,
    /// Parent span id.
    pub parent: Option<String>,
    /// Span name.
    pub name: String,
    /// Start, epoch ms.
    pub start: f64,
    /// End, epoch ms.
    pub end: f64,
    /// Attributes, flattened to dotted keys.
    pub attrs: Map,
    /// `(name, message, stack)` when the span failed.
    pub error: Option<(String, String, Option<String>)>,
}

fn get<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().find_map(|k| v.get(k))
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.to_string_lossy().into_owned()),
        Value::Number(_) => Some(json::to_string(v)),
        _ => None,
    }
}

/// An OTLP `AnyValue` as plain JSON (`intValue` may be a string).
fn from_any(v: &Value) -> Value {
    if let Some(s) = get(v, &["stringValue", "string_value"]) {
        return s.clone();
    }
    if let Some(b) = get(v, &["boolValue", "bool_value"]) {
        return b.clone();
    }
    if let Some(i) = get(v, &["intValue", "int_value"]) {
        return match i {
            Value::String(s) => s
                .as_str()
                .and_then(|t| t.parse::<i64>().ok())
                .map(Value::from)
                .unwrap_or_else(|| i.clone()),
            other => other.clone(),
        };
    }
    if let Some(d) = get(v, &["doubleValue", "double_value"]) {
        return d.clone();
    }
    if let Some(a) = get(v, &["arrayValue", "array_value"]) {
        let items = a
            .get("values")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        return Value::Array(items.iter().map(from_any).collect());
    }
    if let Some(kv) = get(v, &["kvlistValue", "kvlist_value"]) {
        let mut m = Map::new();
        for e in kv
            .get("values")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
        {
            if let (Some(k), Some(val)) = (e.get("key").and_then(Value::as_str), e.get("value")) {
                m.insert(k, from_any(val));
            }
        }
        return Value::Object(m);
    }
    Value::Null
}

fn otlp_attrs(list: Option<&Value>) -> Map {
    let mut m = Map::new();
    for e in list.and_then(Value::as_array).cloned().unwrap_or_default() {
        if let (Some(k), Some(v)) = (e.get("key").and_then(Value::as_str), e.get("value")) {
            m.insert(k, from_any(v));
        }
    }
    m
}

fn flatten_into(prefix: &str, v: &Value, out: &mut Map) {
    match v {
        Value::Object(o) => {
            for (k, child) in o.iter() {
                let key = if prefix.is_empty() {
                    k.to_string_lossy().into_owned()
                } else {
                    format!("{prefix}.{}", k.to_string_lossy())
                };
                flatten_into(&key, child, out);
            }
        }
        other if !prefix.is_empty() => {
            out.insert(prefix, other.clone());
        }
        _ => {}
    }
}

fn nanos_to_ms(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::String(s) => s
            .as_str()?
            .parse::<u128>()
            .ok()
            .map(|n| (n / 1_000_000) as f64),
        n => n.as_f64().map(|f| (f / 1e6).floor()),
    }
}

/// ISO 8601 (`2024-05-01T12:00:00.123Z`, offsets allowed) or an epoch number whose unit is
/// guessed by magnitude (ns >= 1e17, µs >= 1e14, ms >= 1e11, else seconds), as epoch ms.
fn time_ms(v: Option<&Value>) -> Option<f64> {
    let v = v?;
    if let Some(n) = v.as_f64() {
        return Some(if n >= 1e17 {
            (n / 1e6).floor()
        } else if n >= 1e14 {
            (n / 1e3).floor()
        } else if n >= 1e11 {
            n
        } else {
            n * 1000.0
        });
    }
    let s = v.as_str()?.trim();
    if let Ok(n) = s.parse::<f64>() {
        return time_ms(Some(&Value::from(n)));
    }
    parse_iso(s)
}

fn parse_iso(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !(b[10] == b'T' || b[10] == b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d, h, mi, se) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    let mut rest = &s[19..];
    let mut frac_ms = 0.0;
    if let Some(f) = rest.strip_prefix('.') {
        let digits: String = f.chars().take_while(|c| c.is_ascii_digit()).collect();
        rest = &f[digits.len()..];
        frac_ms = format!("0.{digits}").parse::<f64>().unwrap_or(0.0) * 1000.0;
    }
    let offset_min = match rest {
        "" | "Z" | "z" => 0,
        r if (r.starts_with('+') || r.starts_with('-')) && r.len() >= 6 => {
            let sign = if r.starts_with('-') { -1 } else { 1 };
            sign * (r[1..3].parse::<i64>().ok()? * 60 + r[4..6].parse::<i64>().ok()?)
        }
        _ => return None,
    };
    // Days from civil (Howard Hinnant).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60;
    Some(secs as f64 * 1000.0 + frac_ms.floor())
}

fn is_error_status(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Number(_)) => v.and_then(Value::as_i64) == Some(2),
        Some(Value::String(s)) => matches!(s.as_str(), Some("2" | "STATUS_CODE_ERROR" | "ERROR")),
        _ => false,
    }
}

fn exception_of(events: Option<&Value>, otlp: bool) -> Option<(String, String, Option<String>)> {
    for e in events
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        if e.get("name").and_then(Value::as_str) != Some("exception") {
            continue;
        }
        let attrs = match e.get("attributes") {
            Some(Value::Array(_)) => otlp_attrs(e.get("attributes")),
            Some(v @ Value::Object(_)) => {
                let mut m = Map::new();
                flatten_into("", v, &mut m);
                m
            }
            _ => Map::new(),
        };
        let _ = otlp;
        let s = |k: &str| attrs.get(k).and_then(text_of);
        return Some((
            s("exception.type").unwrap_or_else(|| "Error".into()),
            s("exception.message").unwrap_or_default(),
            s("exception.stacktrace"),
        ));
    }
    None
}

/// Spans of an OTLP/JSON document, and the first resource's `service.name`.
pub fn parse_otlp(doc: &Value) -> Option<(Vec<Span>, Option<String>)> {
    let resources = get(doc, &["resourceSpans", "resource_spans"])?.as_array()?;
    let mut spans = Vec::new();
    let mut service = None;
    for rs in resources {
        let res_attrs = otlp_attrs(rs.get("resource").and_then(|r| r.get("attributes")));
        if service.is_none() {
            service = res_attrs
                .get("service.name")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        let scopes = get(
            rs,
            &[
                "scopeSpans",
                "scope_spans",
                "instrumentationLibrarySpans",
                "instrumentation_library_spans",
            ],
        )
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
        for ss in scopes {
            for sp in ss
                .get("spans")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
            {
                let id = get(&sp, &["spanId", "span_id"])
                    .and_then(text_of)
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(new_token);
                let parent = get(&sp, &["parentSpanId", "parent_span_id"])
                    .and_then(text_of)
                    .filter(|s| !s.is_empty());
                let start = nanos_to_ms(get(&sp, &["startTimeUnixNano", "start_time_unix_nano"]))
                    .unwrap_or(0.0);
                let end = nanos_to_ms(get(&sp, &["endTimeUnixNano", "end_time_unix_nano"]))
                    .unwrap_or(start);
                let status = sp.get("status");
                let failed = is_error_status(status.and_then(|s| s.get("code")));
                let error = failed.then(|| {
                    exception_of(sp.get("events"), true).unwrap_or_else(|| {
                        (
                            "Error".into(),
                            status
                                .and_then(|s| s.get("message"))
                                .and_then(text_of)
                                .unwrap_or_else(|| "span failed".into()),
                            None,
                        )
                    })
                });
                spans.push(Span {
                    id,
                    parent,
                    name: sp.get("name").and_then(text_of).unwrap_or_default(),
                    start,
                    end,
                    attrs: otlp_attrs(sp.get("attributes")),
                    error,
                });
            }
        }
    }
    Some((spans, service))
}

/// Spans of a flat (OpenInference / Phoenix-style) span list.
pub fn parse_flat(items: &[Value]) -> Vec<Span> {
    let mut out = Vec::new();
    for sp in items {
        if sp.as_object().is_none() {
            continue;
        }
        let id = sp
            .get("context")
            .and_then(|c| c.get("span_id"))
            .or_else(|| get(sp, &["span_id", "spanId", "id"]))
            .and_then(text_of)
            .unwrap_or_else(new_token);
        let parent = get(sp, &["parent_id", "parentId", "parent_span_id"])
            .and_then(text_of)
            .filter(|s| !s.is_empty());
        let start = time_ms(get(sp, &["start_time", "startTime"])).unwrap_or(0.0);
        let end = time_ms(get(sp, &["end_time", "endTime"])).unwrap_or(start);
        let mut attrs = Map::new();
        if let Some(a) = sp.get("attributes") {
            flatten_into("", a, &mut attrs);
        }
        if let Some(o) = sp.as_object() {
            for (k, v) in o.iter() {
                if let Some(rest) = k.as_str().and_then(|k| k.strip_prefix("attributes.")) {
                    attrs.insert(rest, v.clone());
                }
            }
        }
        if let Some(kind) = get(sp, &["span_kind", "spanKind", "kind"]).and_then(Value::as_str) {
            if attrs.get("openinference.span.kind").is_none() {
                attrs.insert("openinference.span.kind", Value::from(kind));
            }
        }
        let failed = is_error_status(get(sp, &["status_code", "statusCode"]))
            || is_error_status(sp.get("status").and_then(|s| s.get("code")));
        let error = failed.then(|| {
            exception_of(sp.get("events"), false).unwrap_or_else(|| {
                (
                    "Error".into(),
                    get(sp, &["status_message", "statusMessage"])
                        .and_then(text_of)
                        .unwrap_or_else(|| "span failed".into()),
                    None,
                )
            })
        });
        out.push(Span {
            id,
            parent,
            name: sp.get("name").and_then(text_of).unwrap_or_default(),
            start,
            end,
            attrs,
            error,
        });
    }
    out
}

/// What one span becomes.
struct Mapped {
    node_id: String,
    kind: &'static str,
    name: String,
    instance: String,
    input: Option<Value>,
    output: Option<Value>,
    usage: Option<(f64, f64)>,
    model: Option<String>,
}

/// A string that looks like a JSON object or array is parsed; anything else is kept.
fn maybe_json(v: &Value) -> Value {
    if let Some(s) = v.as_str() {
        let t = s.trim_start();
        if t.starts_with('{') || t.starts_with('[') {
            if let Ok(p) = json::parse_str(s) {
                return p;
            }
        }
    }
    v.clone()
}

fn classify(sp: &Span) -> Option<Mapped> {
    let a = &sp.attrs;
    let s = |k: &str| a.get(k).and_then(text_of);
    let n = |k: &str| {
        a.get(k).and_then(|v| {
            v.as_f64()
                .or_else(|| v.as_str().and_then(|t| t.parse().ok()))
        })
    };
    let usage = |i: &[&str], o: &[&str]| {
        let inp = i.iter().find_map(|k| n(k));
        let out = o.iter().find_map(|k| n(k));
        (inp.is_some() || out.is_some()).then(|| (inp.unwrap_or(0.0), out.unwrap_or(0.0)))
    };
    let base = |node_id: String, kind: &'static str, name: String| Mapped {
        node_id,
        kind,
        name,
        instance: sp.id.clone(),
        input: None,
        output: None,
        usage: None,
        model: None,
    };
    // 1. AI SDK telemetry.
    let op = s("ai.operationId").or_else(|| {
        s("operation.name").and_then(|o| {
            o.split(' ')
                .next()
                .filter(|f| f.starts_with("ai."))
                .map(str::to_owned)
        })
    });
    if let Some(op) = op {
        let mut m = if op.ends_with(".doGenerate") || op.ends_with(".doStream") {
            let mut m = base("llm:step".into(), "llm", "step".into());
            m.input = a.get("ai.prompt.messages").map(maybe_json);
            m.usage = usage(
                &[
                    "ai.usage.promptTokens",
                    "ai.usage.inputTokens",
                    "gen_ai.usage.input_tokens",
                ],
                &[
                    "ai.usage.completionTokens",
                    "ai.usage.outputTokens",
                    "gen_ai.usage.output_tokens",
                ],
            );
            m
        } else if op == "ai.toolCall" {
            let name = s("ai.toolCall.name").unwrap_or_else(|| sp.name.clone());
            let mut m = base(format!("tool:{name}"), "tool", name);
            m.instance = s("ai.toolCall.id").unwrap_or_else(|| sp.id.clone());
            m.input = a.get("ai.toolCall.args").map(maybe_json);
            m.output = a.get("ai.toolCall.result").map(maybe_json);
            m
        } else if matches!(
            op.as_str(),
            "ai.generateText" | "ai.streamText" | "ai.generateObject" | "ai.streamObject"
        ) {
            let name = s("ai.telemetry.functionId")
                .or_else(|| s("resource.name"))
                .unwrap_or_else(|| op.trim_start_matches("ai.").to_owned());
            let mut m = base(format!("agent:{name}"), "agent", name);
            m.input = a.get("ai.prompt").map(maybe_json);
            m
        } else {
            let name = op.trim_start_matches("ai.").to_owned();
            base(format!("custom:{name}"), "custom", name)
        };
        if m.output.is_none() {
            m.output = a
                .get("ai.response.text")
                .or_else(|| a.get("ai.response.object"))
                .or_else(|| a.get("ai.response.toolCalls"))
                .map(maybe_json);
        }
        m.model = s("ai.response.model")
            .or_else(|| s("ai.model.id"))
            .or_else(|| s("gen_ai.request.model"));
        return Some(m);
    }
    // 2. OTel GenAI semantic conventions.
    if let Some(op) = s("gen_ai.operation.name") {
        let mut m = match op.as_str() {
            "invoke_agent" => {
                let name = s("gen_ai.agent.name").unwrap_or_else(|| sp.name.clone());
                base(format!("agent:{name}"), "agent", name)
            }
            "chat" | "generate_content" | "text_completion" => {
                base("llm:step".into(), "llm", "step".into())
            }
            "execute_tool" => {
                let name = s("gen_ai.tool.name").unwrap_or_else(|| sp.name.clone());
                let mut m = base(format!("tool:{name}"), "tool", name);
                m.instance = s("gen_ai.tool.call.id").unwrap_or_else(|| sp.id.clone());
                m.input = a.get("gen_ai.tool.call.arguments").map(maybe_json);
                m.output = a.get("gen_ai.tool.call.result").map(maybe_json);
                m
            }
            other => base(format!("custom:{other}"), "custom", other.to_owned()),
        };
        m.usage = usage(
            &["gen_ai.usage.input_tokens"],
            &["gen_ai.usage.output_tokens"],
        );
        if m.input.is_none() {
            m.input = a
                .get("gen_ai.input.messages")
                .or_else(|| a.get("input.value"))
                .map(maybe_json);
        }
        if m.output.is_none() {
            m.output = a
                .get("gen_ai.output.messages")
                .or_else(|| a.get("output.value"))
                .map(maybe_json);
        }
        m.model = s("gen_ai.response.model").or_else(|| s("gen_ai.request.model"));
        return Some(m);
    }
    // 3. OpenInference.
    let kind = s("openinference.span.kind")?.to_ascii_uppercase();
    let mut m = match kind.as_str() {
        "LLM" => {
            let mut m = base("llm:step".into(), "llm", "step".into());
            m.usage = usage(&["llm.token_count.prompt"], &["llm.token_count.completion"]);
            m.model = s("llm.model_name");
            m
        }
        "TOOL" => {
            let name = s("tool.name").unwrap_or_else(|| sp.name.clone());
            base(format!("tool:{name}"), "tool", name)
        }
        "AGENT" => base(format!("agent:{}", sp.name), "agent", sp.name.clone()),
        _ => base(format!("custom:{}", sp.name), "custom", sp.name.clone()),
    };
    m.input = a
        .get("input.value")
        .map(maybe_json)
        .or_else(|| messages(a, "llm.input_messages"));
    m.output = a
        .get("output.value")
        .map(maybe_json)
        .or_else(|| messages(a, "llm.output_messages"));
    Some(m)
}

/// Re-assembles flattened `prefix.N.message.role` style attributes into a list.
fn messages(a: &Map, prefix: &str) -> Option<Value> {
    let mut items: std::collections::BTreeMap<u64, Map> = Default::default();
    for (k, v) in a.iter() {
        let key = k.to_string_lossy();
        let Some(rest) = key.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else {
            continue;
        };
        let Some((idx, field)) = rest.split_once('.') else {
            continue;
        };
        let Ok(i) = idx.parse::<u64>() else { continue };
        let field = field.strip_prefix("message.").unwrap_or(field);
        items.entry(i).or_default().insert(field, v.clone());
    }
    (!items.is_empty()).then(|| Value::Array(items.into_values().map(Value::Object).collect()))
}

/// The envelopes of one imported run (before storage), and the spans skipped.
pub struct Converted {
    /// `(seq-ordered)` envelopes as text.
    pub frames: Vec<(f64, String, String, Option<String>)>,
    /// Names of spans no dialect recognized.
    pub skipped: Vec<String>,
    /// `ok` or `error`.
    pub status: &'static str,
    /// Run start / end.
    pub started: f64,
    /// App name used.
    pub app: String,
}

/// One synthesized event before numbering: (ts, phase 0 start / 1 finish, tie-break,
/// type, payload, node id).
type Item = (f64, u8, i64, &'static str, Value, Option<String>);

/// Builds the run's envelopes from spans (see the module doc).
pub fn convert(
    spans: &[Span],
    run_id: &str,
    app: &str,
    format: &str,
    file: &str,
) -> Result<Converted, String> {
    let mut seen = HashSet::new();
    let spans: Vec<&Span> = spans.iter().filter(|s| seen.insert(s.id.clone())).collect();
    let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.id.as_str(), *s)).collect();
    let mut mapped: HashMap<&str, Mapped> = HashMap::new();
    let mut skipped = Vec::new();
    for s in &spans {
        match classify(s) {
            Some(m) => {
                mapped.insert(s.id.as_str(), m);
            }
            None => skipped.push(s.name.clone()),
        }
    }
    if mapped.is_empty() {
        let names: Vec<&str> = spans.iter().take(10).map(|s| s.name.as_str()).collect();
        return Err(format!(
            "no span in the file is an AI SDK, OTel GenAI or OpenInference span ({} span(s) seen{}{})",
            spans.len(),
            if names.is_empty() { "" } else { ": " },
            names.join(", ")
        ));
    }
    // Nearest mapped ancestor and depth (cycles guarded).
    let ancestor = |id: &str| -> (Option<String>, usize) {
        let mut cur = by_id.get(id).and_then(|s| s.parent.clone());
        let mut guard = HashSet::new();
        let mut depth = 0;
        let mut found = None;
        while let Some(p) = cur {
            if !guard.insert(p.clone()) {
                break;
            }
            depth += 1;
            if found.is_none() {
                if let Some(m) = mapped.get(p.as_str()) {
                    found = Some(m.node_id.clone());
                }
            }
            cur = by_id.get(p.as_str()).and_then(|s| s.parent.clone());
        }
        (found, depth)
    };
    let mut items: Vec<Item> = Vec::new();
    let mut roots_failed = Vec::new();
    let mut any_failed = false;
    let mut start_min = f64::INFINITY;
    let mut end_max = f64::NEG_INFINITY;
    for s in &spans {
        let Some(m) = mapped.get(s.id.as_str()) else {
            continue;
        };
        let (parent, depth) = ancestor(&s.id);
        let end = s.end.max(s.start);
        start_min = start_min.min(s.start);
        end_max = end_max.max(end);
        let mut st = Map::new();
        st.insert("nodeId", Value::from(m.node_id.as_str()));
        if let Some(p) = &parent {
            st.insert("parentId", Value::from(p.as_str()));
        }
        st.insert("kind", Value::from(m.kind));
        st.insert("name", Value::from(m.name.as_str()));
        st.insert("instanceId", Value::from(m.instance.as_str()));
        if let Some(i) = &m.input {
            st.insert("input", i.clone());
        }
        if let Some(model) = &m.model {
            st.insert("model", Value::from(model.as_str()));
        }
        items.push((
            s.start,
            0,
            depth as i64,
            "node.started",
            Value::Object(st),
            Some(m.node_id.clone()),
        ));
        if let Some((name, message, stack)) = &s.error {
            any_failed = true;
            let mut e = Map::new();
            e.insert("name", Value::from(name.as_str()));
            e.insert("message", Value::from(message.as_str()));
            if let Some(st) = stack {
                e.insert("stack", Value::from(st.as_str()));
            }
            let mut p = Map::new();
            p.insert("nodeId", Value::from(m.node_id.as_str()));
            p.insert("instanceId", Value::from(m.instance.as_str()));
            p.insert("error", Value::Object(e));
            items.push((
                end,
                1,
                -(depth as i64) * 2 - 1,
                "node.error",
                Value::Object(p),
                Some(m.node_id.clone()),
            ));
        }
        let mut f = Map::new();
        f.insert("nodeId", Value::from(m.node_id.as_str()));
        f.insert("instanceId", Value::from(m.instance.as_str()));
        if let Some(o) = &m.output {
            f.insert("output", o.clone());
        }
        if let Some((i, o)) = m.usage {
            let mut u = Map::new();
            u.insert("inputTokens", Value::from(i));
            u.insert("outputTokens", Value::from(o));
            f.insert("usage", Value::Object(u));
        }
        f.insert("durationMs", Value::from(end - s.start));
        f.insert(
            "status",
            Value::from(if s.error.is_some() { "error" } else { "ok" }),
        );
        items.push((
            end,
            1,
            -(depth as i64) * 2,
            "node.finished",
            Value::Object(f),
            Some(m.node_id.clone()),
        ));
        if parent.is_none() {
            roots_failed.push(s.error.is_some());
        }
    }
    items.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let failed = match roots_failed[..] {
        [one] => one,
        _ => any_failed,
    };
    let status = if failed {
        RunStatus::Error
    } else {
        RunStatus::Ok
    };
    let mut frames = Vec::new();
    let frame = |seq: usize, ts: f64, kind: &str, payload: Value| {
        let mut m = Map::with_capacity(6);
        m.insert("gm", Value::from(i64::from(PROTOCOL_VERSION)));
        m.insert("seq", Value::from(seq as u64));
        m.insert("ts", Value::from(ts));
        m.insert("runId", Value::from(run_id));
        m.insert("type", Value::from(kind));
        m.insert("payload", payload);
        json::to_string(&Value::Object(m))
    };
    let started = payload_run_started(app, format, file);
    frames.push((
        start_min,
        "run.started".to_owned(),
        frame(0, start_min, "run.started", started),
        None,
    ));
    for (ts, _, _, kind, payload, node) in items {
        let seq = frames.len();
        frames.push((ts, kind.to_owned(), frame(seq, ts, kind, payload), node));
    }
    let seq = frames.len();
    let finished = RunFinished::new(status);
    frames.push((
        end_max,
        "run.finished".to_owned(),
        frame(seq, end_max, "run.finished", finished.into_value()),
        None,
    ));
    Ok(Converted {
        frames,
        skipped,
        status: status.as_str(),
        started: start_min,
        app: app.to_owned(),
    })
}

/// The `run.started` payload of an imported run: this tool as its SDK, and where it came
/// from in `meta`.
fn payload_run_started(app: &str, format: &str, file: &str) -> Value {
    let mut meta = Map::with_capacity(3);
    meta.insert("source", Value::from("import"));
    meta.insert("format", Value::from(format));
    meta.insert("file", Value::from(file));
    let mut started = RunStarted::new(app, SdkInfo::new("graphmind-import", crate::hub::VERSION));
    started.meta = Some(meta);
    started.into_value()
}

/// Reads a file as spans: `(spans, container format, service name)`.
pub fn read_spans(text: &str) -> Result<(Vec<Span>, &'static str, Option<String>), String> {
    match json::parse_str(text) {
        Ok(doc) => {
            if let Some((spans, service)) = parse_otlp(&doc) {
                return Ok((spans, "otlp", service));
            }
            if let Some(items) = doc.as_array() {
                return Ok((parse_flat(items), "openinference", None));
            }
            if let Some(items) = get(&doc, &["spans", "data"]).and_then(Value::as_array) {
                return Ok((parse_flat(items), "openinference", None));
            }
            let shape = match &doc {
                Value::Object(m) => format!(
                    "an object with keys {}",
                    m.iter()
                        .take(8)
                        .map(|(k, _)| k.to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => "a JSON value that is neither an object nor an array".into(),
            };
            Err(format!(
                "not an OTLP/JSON export or a span list: found {shape}"
            ))
        }
        Err(_) => {
            let mut items = Vec::new();
            for (n, line) in text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                items.push(json::parse_str(line).map_err(|_| {
                    format!(
                        "line {} is not JSON (expected OTLP/JSON, a JSON span list or JSON Lines)",
                        n + 1
                    )
                })?);
            }
            if items.is_empty() {
                return Err("the file is empty".into());
            }
            Ok((parse_flat(&items), "openinference", None))
        }
    }
}

/// The database `graphmind import` writes, or the exit code after saying why it cannot.
pub(crate) fn open_db(db: &Path) -> Result<rusqlite::Connection, i32> {
    storage::open(db).map_err(|e| {
        eprintln!("graphmind import: cannot open {}: {e}", db.display());
        1
    })
}

/// `graphmind import FILE`: stores the file's spans as one read-only run.
pub fn import_file(db: &Path, file: &str) -> i32 {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("graphmind import: cannot read {file}: {e}");
            return 1;
        }
    };
    let (spans, format, service) = match read_spans(&text) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("graphmind import: {e}");
            return 1;
        }
    };
    let base = Path::new(file)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.to_owned());
    let root_agent = spans
        .iter()
        .filter(|s| s.parent.is_none())
        .find_map(|s| classify(s).filter(|m| m.kind == "agent").map(|m| m.name));
    let app = service.or(root_agent).unwrap_or_else(|| base.clone());
    let run_id = format!("imp_{}", &new_token()[..12]);
    let conv = match convert(&spans, &run_id, &app, format, &base) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("graphmind import: {e}");
            return 1;
        }
    };
    let conn = match open_db(db) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let stored = (|| -> rusqlite::Result<()> {
        let tx = conn.unchecked_transaction()?;
        storage::ensure_run(&tx, &run_id, &conv.app, conv.started, 1, "import")?;
        let mut insert = storage::EventInserter::new(&tx)?;
        for (seq, (ts, kind, frame, node)) in conv.frames.iter().enumerate() {
            insert.insert(&run_id, seq as i64, *ts, kind, node.as_deref(), frame)?;
        }
        drop(insert);
        storage::mark_started(&tx, &run_id, &conv.app, conv.started)?;
        let end = conv.frames.last().map(|f| f.0).unwrap_or(conv.started);
        storage::mark_finished(&tx, &run_id, conv.status, end)?;
        tx.commit()
    })();
    if let Err(e) = stored {
        eprintln!("graphmind import: {e}");
        return 1;
    }
    let nodes = conv.frames.iter().filter(|f| f.1 == "node.started").count();
    let errors = conv.frames.iter().filter(|f| f.1 == "node.error").count();
    let duration = conv
        .frames
        .last()
        .map(|f| f.0 - conv.started)
        .unwrap_or(0.0)
        .max(0.0);
    println!(
        "Imported {base} ({format}) as run {run_id}: {nodes} span(s) as nodes, {errors} error(s), {} ms, status {}.",
        crate::util::num(duration),
        conv.status
    );
    if !conv.skipped.is_empty() {
        let mut names: Vec<&str> = conv.skipped.iter().map(String::as_str).collect();
        names.dedup();
        println!(
            "Skipped {} span(s) of no known dialect: {}",
            conv.skipped.len(),
            names
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    println!("Open it: http://127.0.0.1:{}/#/run/{run_id}  (read-only history; graphmind record {run_id} exports it)", crate::config::DEFAULT_PORT);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(
            parse_iso("2024-05-01T12:00:00.123Z"),
            Some(1_714_564_800_123.0)
        );
        assert_eq!(
            parse_iso("2024-05-01T14:00:00+02:00"),
            Some(1_714_564_800_000.0)
        );
        assert_eq!(
            time_ms(Some(&Value::from(1_714_564_800.0))),
            Some(1_714_564_800_000.0)
        );
        assert_eq!(
            time_ms(Some(&Value::from(1_714_564_800_123_000_000.0))),
            Some(1_714_564_800_123.0)
        );
        assert_eq!(
            nanos_to_ms(Some(&Value::from("1714564800123456789"))),
            Some(1_714_564_800_123.0)
        );
    }

    #[test]
    fn otlp_genai_spans_become_a_run() {
        let doc = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},"scopeSpans":[{"spans":[
          {"traceId":"t","spanId":"a","name":"agent","startTimeUnixNano":"1000000000","endTimeUnixNano":"5000000000","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"invoke_agent"}},{"key":"gen_ai.agent.name","value":{"stringValue":"planner"}}]},
          {"traceId":"t","spanId":"b","parentSpanId":"h","name":"chat","startTimeUnixNano":"2000000000","endTimeUnixNano":"3000000000","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":"12"}}]},
          {"traceId":"t","spanId":"h","parentSpanId":"a","name":"HTTP GET","startTimeUnixNano":"1500000000","endTimeUnixNano":"4000000000","attributes":[]},
          {"traceId":"t","spanId":"c","parentSpanId":"a","name":"t","startTimeUnixNano":"3000000000","endTimeUnixNano":"3500000000","status":{"code":2,"message":"bad"},"attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},{"key":"gen_ai.tool.name","value":{"stringValue":"search"}},{"key":"gen_ai.tool.call.arguments","value":{"stringValue":"{\"q\":1}"}}]}
        ]}]}]}"#;
        let (spans, format, service) = read_spans(doc).unwrap();
        assert_eq!(
            (format, service.as_deref(), spans.len()),
            ("otlp", Some("svc"), 4)
        );
        let c = convert(&spans, "imp_x", "svc", format, "f.json").unwrap();
        let kinds: Vec<&str> = c.frames.iter().map(|f| f.1.as_str()).collect();
        // At equal times starts come before finishes: the tool starts (3 s) before the LLM ends (3 s).
        assert_eq!(
            kinds,
            [
                "run.started",
                "node.started",
                "node.started",
                "node.started",
                "node.finished",
                "node.error",
                "node.finished",
                "node.finished",
                "run.finished"
            ]
        );
        assert_eq!(c.skipped, ["HTTP GET"]);
        assert_eq!(c.status, "ok", "one root, which succeeded");
        let llm = json::parse_str(&c.frames[2].2).unwrap();
        assert_eq!(
            llm.get("payload")
                .and_then(|p| p.get("parentId"))
                .and_then(Value::as_str),
            Some("agent:planner"),
            "skipped ancestors are climbed through"
        );
        let tool = json::parse_str(&c.frames[3].2).unwrap();
        assert_eq!(
            json::to_string(tool.get("payload").unwrap().get("input").unwrap()),
            r#"{"q":1}"#
        );
        for (i, f) in c.frames.iter().enumerate() {
            assert!(
                matches!(crate::envelope::parse_envelope(f.2.as_bytes()), crate::envelope::Parsed::Ok(e) if e.seq == i as u64),
                "{}",
                f.2
            );
        }
    }

    #[test]
    fn openinference_flat_list_and_jsonl() {
        let list = r#"[{"name":"llm","context":{"span_id":"1"},"span_kind":"LLM","start_time":"2024-05-01T12:00:00Z","end_time":"2024-05-01T12:00:01Z","attributes":{"llm":{"token_count":{"prompt":3,"completion":4},"model_name":"m"},"input":{"value":"hi"}}}]"#;
        let (spans, format, _) = read_spans(list).unwrap();
        assert_eq!(format, "openinference");
        let c = convert(&spans, "imp_y", "a", format, "f").unwrap();
        let fin = json::parse_str(&c.frames[2].2).unwrap();
        assert_eq!(
            json::to_string(fin.get("payload").unwrap().get("usage").unwrap()),
            r#"{"inputTokens":3,"outputTokens":4}"#
        );
        let jsonl = "{\"name\":\"t\",\"span_id\":\"1\",\"attributes\":{\"openinference.span.kind\":\"TOOL\"},\"start_time\":1714564800000}\n{\"name\":\"x\",\"span_id\":\"2\"}\n";
        let (spans, _, _) = read_spans(jsonl).unwrap();
        assert_eq!(spans.len(), 2);
        assert!(read_spans("{\"foo\":1}").unwrap_err().contains("keys foo"));
    }
}
