//! `graphmind mcp [--db PATH] [--port P]`: a read-only MCP server over stdio that lets a
//! coding agent read recorded runs. It opens the SQLite database read-only and needs no
//! running GraphMind server. Tools: `list_runs`, `get_run`, `get_node`, `find_errors`,
//! each annotated `readOnlyHint: true`; a user error is an `isError: true` tool result.

use crate::storage::{self, RunRow};
use graphmind_core::json::{self, Map, Value};
use rusqlite::{Connection, OpenFlags};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// `limit` when none is given.
pub const DEFAULT_LIMIT: i64 = 20;
/// Largest `limit` honoured.
pub const MAX_LIMIT: i64 = 100;
/// Characters of JSON kept of one input/output payload in `get_node`.
pub const PAYLOAD_PREVIEW_CHARS: usize = 4000;
/// Most recent instances listed per node in `get_node`.
pub const MAX_INSTANCES: usize = 25;
/// The MCP revision answered when the client asks for one we do not know.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
const KNOWN_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(k, v);
    }
    Value::Object(m)
}

fn s(v: &str) -> Value {
    Value::from(v)
}

/// A user-facing tool failure, answered as an `isError` result.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

/// Epoch milliseconds as an ISO-8601 UTC timestamp (`2026-11-30T16:34:13.000Z`).
pub fn iso(ms: f64) -> String {
    let ms = ms.max(0.0) as i64;
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

fn encode(c: char, out: &mut String) {
    if c.is_ascii_alphanumeric() || "-_.!~*'()".contains(c) {
        out.push(c);
    } else {
        let mut b = [0u8; 4];
        for byte in c.encode_utf8(&mut b).bytes() {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
}

fn component(v: &str) -> String {
    let mut out = String::new();
    v.chars().for_each(|c| encode(c, &mut out));
    out
}

/// `http://127.0.0.1:P/#/run/<id>`.
pub fn run_link(base: &str, run_id: &str) -> String {
    format!("{base}/#/run/{}", component(run_id))
}

/// `http://127.0.0.1:P/#/run/<id>/node/<id>`.
pub fn node_link(base: &str, run_id: &str, node_id: &str) -> String {
    format!(
        "{base}/#/run/{}/node/{}",
        component(run_id),
        component(node_id)
    )
}

/// A payload as JSON, cut to `max` characters (a string marked as a preview when cut).
pub fn compact_payload(v: &Value, max: usize) -> Value {
    let text = json::to_string(v);
    if text.chars().count() <= max {
        return v.clone();
    }
    let preview: String = text.chars().take(max).collect();
    obj(vec![
        ("preview", Value::from(preview)),
        ("truncated", Value::Bool(true)),
        ("chars", Value::from(text.chars().count() as u64)),
    ])
}

#[derive(Default)]
struct Instance {
    instance_id: String,
    started_at: f64,
    status: String,
    duration_ms: Option<Value>,
    input: Option<Value>,
    output: Option<Value>,
    error: Option<Value>,
    usage: Option<Value>,
}

struct Node {
    node_id: String,
    kind: String,
    name: String,
    parent_id: Option<String>,
    instances: Vec<Instance>,
}

struct ErrorEntry {
    node_id: String,
    error: Value,
    at: f64,
}

struct RunModel {
    order: Vec<String>,
    nodes: std::collections::HashMap<String, Node>,
    errors: Vec<ErrorEntry>,
}

fn string(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

fn build_model(events: &[storage::StoredEvent]) -> RunModel {
    let mut model = RunModel {
        order: vec![],
        nodes: Default::default(),
        errors: vec![],
    };
    for e in events {
        let Ok(env) = json::parse_str(&e.frame) else {
            continue;
        };
        let ts = env.get("ts").and_then(Value::as_f64).unwrap_or(0.0);
        let Some(p) = env.get("payload") else {
            continue;
        };
        let Some(node_id) = string(p.get("nodeId")) else {
            continue;
        };
        let instance_id = string(p.get("instanceId")).unwrap_or_else(|| node_id.clone());
        let kind = env.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "node.started" && !model.nodes.contains_key(&node_id) {
            model.order.push(node_id.clone());
            model.nodes.insert(
                node_id.clone(),
                Node {
                    node_id: node_id.clone(),
                    kind: string(p.get("kind")).unwrap_or_else(|| "custom".into()),
                    name: string(p.get("name")).unwrap_or_else(|| node_id.clone()),
                    parent_id: string(p.get("parentId")),
                    instances: vec![],
                },
            );
        }
        let Some(node) = model.nodes.get_mut(&node_id) else {
            continue;
        };
        let find = |node: &mut Node| {
            node.instances
                .iter()
                .rposition(|i| i.instance_id == instance_id)
        };
        match kind {
            "node.started" => node.instances.push(Instance {
                instance_id: instance_id.clone(),
                started_at: ts,
                status: "running".into(),
                input: p.get("input").cloned(),
                ..Default::default()
            }),
            "node.finished" => {
                if let Some(i) = find(node) {
                    let inst = &mut node.instances[i];
                    inst.status = string(p.get("status")).unwrap_or_else(|| "ok".into());
                    inst.duration_ms = p.get("durationMs").cloned();
                    inst.output = p.get("output").cloned();
                    inst.usage = p.get("usage").cloned();
                }
            }
            "node.error" => {
                let error = p.get("error").cloned().unwrap_or(Value::Null);
                if let Some(i) = find(node) {
                    node.instances[i].error = Some(error.clone());
                    if node.instances[i].status == "running" {
                        node.instances[i].status = "error".into();
                    }
                }
                model.errors.push(ErrorEntry {
                    node_id: node_id.clone(),
                    error,
                    at: ts,
                });
            }
            _ => {}
        }
    }
    model
}

fn node_status(n: &Node) -> &str {
    n.instances
        .last()
        .map(|i| i.status.as_str())
        .unwrap_or("running")
}

fn node_duration(n: &Node) -> Option<f64> {
    let ds: Vec<f64> = n
        .instances
        .iter()
        .filter_map(|i| i.duration_ms.as_ref().and_then(Value::as_f64))
        .collect();
    if ds.is_empty() {
        None
    } else {
        Some(ds.iter().sum())
    }
}

fn last_error(n: &Node) -> Option<&Value> {
    n.instances.iter().rev().find_map(|i| i.error.as_ref())
}

/// The tool handlers over one read-only connection.
pub struct Tools {
    conn: Connection,
    base: String,
}

fn read_limit(args: &Value) -> Result<i64, ToolError> {
    match args.get("limit") {
        None | Some(Value::Null) => Ok(DEFAULT_LIMIT),
        Some(v) => match v.as_f64() {
            Some(f) if f.fract() == 0.0 && f >= 1.0 => Ok((f as i64).min(MAX_LIMIT)),
            _ => Err(ToolError(format!(
                "\"limit\" must be a positive integer (got {})",
                json::to_string(v)
            ))),
        },
    }
}

fn read_string(args: &Value, key: &str) -> Result<String, ToolError> {
    match args.get(key).and_then(Value::as_str) {
        Some(v) if !v.is_empty() => Ok(v.to_owned()),
        _ => Err(ToolError(format!(
            "\"{key}\" must be a non-empty string (got {})",
            args.get(key)
                .map(json::to_string)
                .unwrap_or_else(|| "undefined".into())
        ))),
    }
}

impl Tools {
    /// Opens `db` read-only; `port` is the viewer the deep links point at.
    pub fn open(db: &Path, port: u16) -> rusqlite::Result<Tools> {
        let conn = Connection::open_with_flags(
            db,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(Tools {
            conn,
            base: format!("http://127.0.0.1:{port}"),
        })
    }

    fn db<T>(&self, r: rusqlite::Result<T>) -> Result<T, ToolError> {
        r.map_err(|e| ToolError(format!("cannot read the GraphMind database: {e}")))
    }

    fn run_json(&self, r: &RunRow) -> Value {
        obj(vec![
            ("id", s(&r.id)),
            ("app", s(&r.app)),
            ("status", s(&r.status)),
            ("source", s(&r.source)),
            ("startedAt", Value::from(iso(r.started_at))),
            (
                "finishedAt",
                r.finished_at
                    .map(|f| Value::from(iso(f)))
                    .unwrap_or(Value::Null),
            ),
            ("eventCount", Value::from(r.event_count)),
            ("errorCount", Value::from(r.error_count)),
            ("link", Value::from(run_link(&self.base, &r.id))),
        ])
    }

    fn require_run(&self, id: &str) -> Result<RunRow, ToolError> {
        self.db(storage::get_run(&self.conn, id))?.ok_or_else(|| {
            ToolError(format!(
                "run \"{id}\" not found — call list_runs to see what exists"
            ))
        })
    }

    fn model(&self, id: &str) -> Result<RunModel, ToolError> {
        Ok(build_model(
            &self
                .db(storage::list_events(&self.conn, id, -1, None))?
                .events,
        ))
    }

    /// `list_runs({limit?})`.
    pub fn list_runs(&self, args: &Value) -> Result<Value, ToolError> {
        let limit = read_limit(args)?;
        let all = self.db(storage::list_runs(&self.conn))?;
        let mut out = vec![
            ("total", Value::from(all.len() as u64)),
            (
                "runs",
                Value::Array(
                    all.iter()
                        .take(limit as usize)
                        .map(|r| self.run_json(r))
                        .collect(),
                ),
            ),
        ];
        if all.is_empty() {
            out.push((
                "note",
                s("no runs recorded yet — run an instrumented app while `graphmind` is serving"),
            ));
        }
        Ok(obj(out))
    }

    /// `get_run({runId})`.
    pub fn get_run(&self, args: &Value) -> Result<Value, ToolError> {
        let id = read_string(args, "runId")?;
        let run = self.require_run(&id)?;
        let model = self.model(&id)?;
        let nodes = model
            .order
            .iter()
            .filter_map(|k| model.nodes.get(k))
            .map(|n| {
                let mut v = vec![
                    ("nodeId", s(&n.node_id)),
                    ("kind", s(&n.kind)),
                    ("name", s(&n.name)),
                ];
                if let Some(p) = &n.parent_id {
                    v.push(("parentId", s(p)));
                }
                v.push(("status", s(node_status(n))));
                v.push(("executions", Value::from(n.instances.len() as u64)));
                if let Some(d) = node_duration(n) {
                    v.push(("durationMs", Value::from(d)));
                }
                if let Some(m) = last_error(n).and_then(|e| e.get("message")) {
                    v.push(("errorMessage", m.clone()));
                }
                v.push(("link", Value::from(node_link(&self.base, &id, &n.node_id))));
                obj(v)
            })
            .collect();
        Ok(obj(vec![
            ("run", self.run_json(&run)),
            ("nodes", Value::Array(nodes)),
        ]))
    }

    /// `get_node({runId, nodeId})`.
    pub fn get_node(&self, args: &Value) -> Result<Value, ToolError> {
        let id = read_string(args, "runId")?;
        let node_id = read_string(args, "nodeId")?;
        let run = self.require_run(&id)?;
        let model = self.model(&id)?;
        let Some(n) = model.nodes.get(&node_id) else {
            let known = if model.order.is_empty() {
                "(none)".to_owned()
            } else {
                model.order.join(", ")
            };
            return Err(ToolError(format!(
                "node \"{node_id}\" not found in run \"{id}\" — known nodeIds: {known}"
            )));
        };
        let omitted = n.instances.len().saturating_sub(MAX_INSTANCES);
        let instances = n.instances[omitted..]
            .iter()
            .map(|i| {
                let mut v = vec![
                    ("instanceId", s(&i.instance_id)),
                    ("startedAt", Value::from(iso(i.started_at))),
                    ("status", s(&i.status)),
                ];
                if let Some(d) = &i.duration_ms {
                    v.push(("durationMs", d.clone()));
                }
                v.push((
                    "input",
                    i.input
                        .as_ref()
                        .map(|x| compact_payload(x, PAYLOAD_PREVIEW_CHARS))
                        .unwrap_or(Value::Null),
                ));
                if let Some(o) = &i.output {
                    v.push(("output", compact_payload(o, PAYLOAD_PREVIEW_CHARS)));
                }
                if let Some(u) = &i.usage {
                    v.push(("usage", u.clone()));
                }
                if let Some(e) = &i.error {
                    v.push(("error", e.clone()));
                }
                obj(v)
            })
            .collect();
        let mut v = vec![
            ("runId", s(&id)),
            ("runStatus", s(&run.status)),
            ("app", s(&run.app)),
            ("nodeId", s(&n.node_id)),
            ("kind", s(&n.kind)),
            ("name", s(&n.name)),
        ];
        if let Some(p) = &n.parent_id {
            v.push(("parentId", s(p)));
        }
        v.push(("status", s(node_status(n))));
        v.push(("executions", Value::from(n.instances.len() as u64)));
        if let Some(d) = node_duration(n) {
            v.push(("totalDurationMs", Value::from(d)));
        }
        if let Some(e) = last_error(n) {
            v.push(("error", e.clone()));
        }
        v.push(("instances", Value::Array(instances)));
        if omitted > 0 {
            v.push(("instancesOmitted", Value::from(omitted as u64)));
        }
        v.push(("link", Value::from(node_link(&self.base, &id, &n.node_id))));
        Ok(obj(v))
    }

    /// `find_errors({limit?})`: failed nodes, newest runs first, newest error first.
    pub fn find_errors(&self, args: &Value) -> Result<Value, ToolError> {
        let limit = read_limit(args)? as usize;
        let mut errors = vec![];
        let mut scanned = 0u64;
        for run in self.db(storage::list_runs(&self.conn))? {
            if errors.len() >= limit {
                break;
            }
            scanned += 1;
            if run.error_count == 0 {
                continue;
            }
            let model = self.model(&run.id)?;
            for e in model.errors.iter().rev() {
                if errors.len() >= limit {
                    break;
                }
                let mut v = vec![
                    ("runId", s(&run.id)),
                    ("app", s(&run.app)),
                    ("runStatus", s(&run.status)),
                    ("nodeId", s(&e.node_id)),
                ];
                if let Some(n) = model.nodes.get(&e.node_id) {
                    v.push(("nodeKind", s(&n.kind)));
                    v.push(("nodeName", s(&n.name)));
                }
                v.push((
                    "message",
                    e.error.get("message").cloned().unwrap_or(Value::Null),
                ));
                v.push((
                    "errorName",
                    e.error.get("name").cloned().unwrap_or(Value::Null),
                ));
                v.push(("at", Value::from(iso(e.at))));
                v.push((
                    "link",
                    Value::from(node_link(&self.base, &run.id, &e.node_id)),
                ));
                errors.push(obj(v));
            }
        }
        let empty = errors.is_empty();
        let mut out = vec![
            ("errors", Value::Array(errors)),
            ("scannedRuns", Value::from(scanned)),
        ];
        if empty {
            out.push(("note", s("no failed nodes recorded in any run")));
        }
        Ok(obj(out))
    }

    /// Calls tool `name`; `Err` is a user error (an `isError` result).
    pub fn call(&self, name: &str, args: &Value) -> Result<Value, ToolError> {
        match name {
            "list_runs" => self.list_runs(args),
            "get_run" => self.get_run(args),
            "get_node" => self.get_node(args),
            "find_errors" => self.find_errors(args),
            other => Err(ToolError(format!("unknown tool \"{other}\" — the tools are list_runs, get_run, get_node, find_errors"))),
        }
    }
}

fn schema(props: Vec<(&str, Value)>, required: &[&str]) -> Value {
    obj(vec![
        ("type", s("object")),
        ("properties", obj(props)),
        (
            "required",
            Value::Array(required.iter().map(|r| s(r)).collect()),
        ),
        ("additionalProperties", Value::Bool(false)),
    ])
}

/// The `tools/list` result.
pub fn tool_list() -> Value {
    let limit = || {
        obj(vec![
            ("type", s("integer")),
            ("minimum", Value::from(1i64)),
            ("maximum", Value::from(MAX_LIMIT)),
            (
                "description",
                s("How many to return (default 20, at most 100)"),
            ),
        ])
    };
    let string = |d: &str| obj(vec![("type", s("string")), ("description", s(d))]);
    let tool = |name: &str, title: &str, description: &str, input: Value| {
        obj(vec![
            ("name", s(name)),
            ("title", s(title)),
            ("description", s(description)),
            ("inputSchema", input),
            (
                "annotations",
                obj(vec![
                    ("title", s(title)),
                    ("readOnlyHint", Value::Bool(true)),
                    ("destructiveHint", Value::Bool(false)),
                    ("idempotentHint", Value::Bool(true)),
                    ("openWorldHint", Value::Bool(false)),
                ]),
            ),
        ])
    };
    Value::Array(vec![
        tool("list_runs", "List GraphMind runs", "Recent recorded agent runs, most recent first, each with a viewer link.", schema(vec![("limit", limit())], &[])),
        tool("get_run", "Get a GraphMind run", "One run's summary and its nodes (status, executions, duration, last error, link).", schema(vec![("runId", string("Run id from list_runs"))], &[ "runId"])),
        tool(
            "get_node",
            "Get a GraphMind node",
            "One node of a run in detail: the 25 most recent executions with input/output previews (4,000 characters each) and errors.",
            schema(vec![("runId", string("Run id")), ("nodeId", string("Node id from get_run, e.g. tool:search"))], &["runId", "nodeId"]),
        ),
        tool("find_errors", "Find GraphMind errors", "Recent failed nodes across runs, newest first, each with a viewer link.", schema(vec![("limit", limit())], &[])),
    ])
}

fn text_result(value: &Value, is_error: bool) -> Value {
    let text = match value {
        Value::String(t) => t.to_string_lossy().into_owned(),
        other => json::to_string(other),
    };
    let mut v = vec![(
        "content",
        Value::Array(vec![obj(vec![
            ("type", s("text")),
            ("text", Value::from(text)),
        ])]),
    )];
    if is_error {
        v.push(("isError", Value::Bool(true)));
    }
    obj(v)
}

/// Answers one JSON-RPC line; `None` for a notification or an unparseable line.
pub fn handle_line(tools: Option<&Tools>, open_error: &str, line: &[u8]) -> Option<Vec<u8>> {
    let msg = json::parse(crate::mcp_proxy::protocol::frame_body(line)).ok()?;
    let id = msg.get("id").cloned()?;
    let method = msg.get("method").and_then(Value::as_str)?.to_owned();
    let params = msg
        .get("params")
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    let result = match method.as_str() {
        "initialize" => {
            let asked = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or(PROTOCOL_VERSION);
            let version = if KNOWN_VERSIONS.contains(&asked) {
                asked
            } else {
                PROTOCOL_VERSION
            };
            Ok(obj(vec![
                ("protocolVersion", s(version)),
                ("capabilities", obj(vec![("tools", obj(vec![("listChanged", Value::Bool(false))]))])),
                ("serverInfo", obj(vec![("name", s("graphmind")), ("version", s(crate::hub::VERSION))])),
                ("instructions", s("Read-only access to runs recorded by the GraphMind debugger: list_runs, get_run, get_node, find_errors.")),
            ]))
        }
        "ping" => Ok(obj(vec![])),
        "tools/list" => Ok(obj(vec![("tools", tool_list())])),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params
                .get("arguments")
                .cloned()
                .unwrap_or(Value::Object(Map::new()));
            let out = match tools {
                Some(t) => t.call(name, &args),
                None => Err(ToolError(open_error.to_owned())),
            };
            Ok(match out {
                Ok(v) => text_result(&v, false),
                Err(e) => text_result(&Value::from(e.0), true),
            })
        }
        other => Err((-32601i64, format!("Method not found: {other}"))),
    };
    let frame = match result {
        Ok(r) => obj(vec![("jsonrpc", s("2.0")), ("id", id), ("result", r)]),
        Err((code, message)) => obj(vec![
            ("jsonrpc", s("2.0")),
            ("id", id),
            (
                "error",
                obj(vec![
                    ("code", Value::from(code)),
                    ("message", Value::from(message)),
                ]),
            ),
        ]),
    };
    let mut out = json::to_string(&frame).into_bytes();
    out.push(b'\n');
    Some(out)
}

/// Runs `graphmind mcp` with its parsed arguments (`crate::args`); returns the exit code.
pub fn main(args: crate::args::McpArgs) -> i32 {
    let crate::args::McpArgs { db, port } = args;
    let port = port.unwrap_or(crate::config::DEFAULT_PORT);
    // The same database rules as `serve` (--db, then GRAPHMIND_DB, then ~/.graphmind).
    let flags = graphmind_core::config::ServerFlags {
        db,
        ..Default::default()
    };
    let path: PathBuf = match crate::config::resolve(&flags) {
        Ok(config) => {
            crate::telemetry::record_command("mcp", &config);
            config.db_path
        }
        Err(e) => return usage_error(&e.to_string()),
    };
    let (tools, open_error) = match Tools::open(&path, port) {
        Ok(t) => (Some(t), String::new()),
        Err(e) => (None, format!("cannot open the GraphMind database {} read-only ({e}); record a run with `graphmind` serving first, or pass --db", path.display())),
    };
    if tools.is_none() {
        eprintln!("graphmind mcp: {open_error}");
    }
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut line = Vec::new();
    let mut reader = stdin.lock();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return 0,
            Ok(_) => {
                if let Some(reply) = handle_line(tools.as_ref(), &open_error, &line) {
                    if out.write_all(&reply).and_then(|_| out.flush()).is_err() {
                        return 0;
                    }
                }
            }
        }
    }
}

fn usage_error(msg: &str) -> i32 {
    eprintln!("graphmind mcp: {msg}");
    2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_and_links() {
        assert_eq!(iso(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_796_056_453_123.0), "2026-11-30T16:34:13.123Z");
        assert_eq!(
            node_link("http://127.0.0.1:4747", "run_1", "tool:a b"),
            "http://127.0.0.1:4747/#/run/run_1/node/tool%3Aa%20b"
        );
    }

    #[test]
    fn previews_and_protocol() {
        let big = Value::from("x".repeat(5000));
        let p = compact_payload(&big, PAYLOAD_PREVIEW_CHARS);
        assert_eq!(p.get("truncated").and_then(Value::as_bool), Some(true));
        assert_eq!(
            p.get("preview")
                .and_then(Value::as_str)
                .map(|s| s.chars().count()),
            Some(4000)
        );
        let list = handle_line(
            None,
            "x",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n",
        )
        .unwrap();
        let v = json::parse(&list).unwrap();
        let tools = v
            .get("result")
            .and_then(|r| r.get("tools"))
            .and_then(Value::as_array)
            .unwrap();
        assert_eq!(tools.len(), 4);
        assert!(tools.iter().all(|t| t
            .get("annotations")
            .and_then(|a| a.get("readOnlyHint"))
            .and_then(Value::as_bool)
            == Some(true)));
        let err = handle_line(None, "no db", b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"list_runs\"}}").unwrap();
        assert!(String::from_utf8(err).unwrap().contains("\"isError\":true"));
        assert!(handle_line(
            None,
            "",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"
        )
        .is_none());
    }
}
