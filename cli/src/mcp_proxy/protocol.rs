//! The pure half of `graphmind mcp-proxy`: what a JSON-RPC frame is, which graph node it
//! maps to, how the run is labelled, how an injected value becomes a typed MCP result, and
//! the server-stderr ring. No I/O here, so every rule is unit-tested without a child.

#[cfg(test)]
use graphmind_core::event::NodeKind;
use graphmind_core::json::{self, Map, Value};
use std::collections::VecDeque;

/// JSON-RPC error code the proxy answers with when the debugger aborts a request.
pub const GRAPHMIND_ABORTED_CODE: i64 = -32099;
/// The session node every request hangs off.
pub const SESSION_NODE_ID: &str = "mcp:session";
/// Longest run label before it is trimmed from the left.
pub const LABEL_MAX_CHARS: usize = 64;
/// Lines of server stderr kept (reference: `STDERR_RING_MAX_LINES`).
pub const STDERR_RING_MAX_LINES: usize = 200;
/// Bytes of server stderr kept (reference: `STDERR_RING_MAX_BYTES`).
pub const STDERR_RING_MAX_BYTES: usize = 32 * 1024;
/// Lines of the ring printed when the server exits before answering.
pub const STDERR_TAIL_LINES: usize = 40;
/// Non-JSON-RPC stdout lines recorded as nodes (reference: `STDOUT_NOISE_MAX_RECORDED`).
pub const STDOUT_NOISE_MAX_RECORDED: usize = 25;
/// Bytes of each recorded stdout line quoted (reference: `STDOUT_NOISE_QUOTE_BYTES`).
pub const STDOUT_NOISE_QUOTE_BYTES: usize = 200;
/// Characters of a failed tool result's content quoted into the error message.
pub const ERROR_CONTENT_QUOTE_CHARS: usize = 500;

/// One classified frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// Has `method` and `id`: a request awaiting an answer.
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// Has `method` and no `id`.
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// Has `id` and `result` or `error`.
    Response {
        id: Value,
        result: Option<Value>,
        error: Option<Value>,
    },
    /// A JSON array (batches, removed in MCP 2025-06-18): relayed, not gated.
    Batch,
    /// Valid JSON that is no JSON-RPC message.
    Other,
}

/// Strips one trailing `\n` and `\r`.
pub fn frame_body(raw: &[u8]) -> &[u8] {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    raw.strip_suffix(b"\r").unwrap_or(raw)
}

/// Parses and classifies one line; `None` when it is not JSON at all (stdout noise).
pub fn classify(raw: &[u8]) -> Option<(Frame, Value)> {
    let body = frame_body(raw);
    let value = json::parse(body).ok()?;
    let frame = match &value {
        Value::Array(_) => Frame::Batch,
        Value::Object(m) => classify_object(m),
        _ => Frame::Other,
    };
    Some((frame, value))
}

/// Classifies one already-parsed value (a batch member): an object is a request,
/// notification or response; anything else (a nested array included) is `Other`.
pub fn classify_value(value: &Value) -> Frame {
    match value {
        Value::Object(m) => classify_object(m),
        _ => Frame::Other,
    }
}

fn classify_object(m: &Map) -> Frame {
    let id = m
        .get("id")
        .filter(|v| matches!(v, Value::String(_) | Value::Number(_)))
        .cloned();
    match (m.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) => Frame::Request {
            id,
            method: method.to_owned(),
            params: m.get("params").cloned(),
        },
        (Some(method), None) if !m.contains_key("id") => Frame::Notification {
            method: method.to_owned(),
            params: m.get("params").cloned(),
        },
        (None, Some(id)) if m.contains_key("result") || m.contains_key("error") => {
            Frame::Response {
                id,
                result: m.get("result").cloned(),
                error: m.get("error").cloned(),
            }
        }
        _ => Frame::Other,
    }
}

/// A request id as a map key: `s:<text>` or `n:<number>` so `"1"` and `1` differ.
pub fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => format!("s:{}", s.to_string_lossy()),
        other => format!("n:{}", json::to_string(other)),
    }
}

/// A request id as people read it (stderr notices, `--trace`): a string id as its text, a
/// number in JavaScript's spelling (`7.0` reads `7`), as the reference prints `String(id)`.
pub fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.to_string_lossy().into_owned(),
        other => json::to_string(other),
    }
}

/// The graph node a method maps to: `(node_id, kind, name)` (the core's rule, shared with
/// the Node `wrapServer`).
pub use graphmind_core::mcp::request_node as map_method;

fn base_name(path: &str) -> &str {
    let trimmed = path.trim_end_matches(['/', '\\']);
    match trimmed.rfind(['/', '\\']) {
        Some(i) => &trimmed[i + 1..],
        None => trimmed,
    }
}

fn trim_left(full: String, max: usize) -> String {
    let n = full.chars().count();
    if n <= max {
        return full;
    }
    let tail: String = full.chars().skip(n - (max - 1)).collect();
    format!("…{tail}")
}

/// The run's label: the command's base name and its arguments, bare paths shortened to
/// their file names, trimmed from the left past [`LABEL_MAX_CHARS`].
pub fn command_label(command: &str, args: &[String]) -> String {
    let base = base_name(command);
    let mut parts = vec![if base.is_empty() {
        command.to_owned()
    } else {
        base.to_owned()
    }];
    for a in args {
        if !a.starts_with('-') && a.contains(['/', '\\']) {
            parts.push(base_name(a).to_owned());
        } else {
            parts.push(a.clone());
        }
    }
    trim_left(parts.join(" "), LABEL_MAX_CHARS)
}

/// Whether an argument is a path (kept as its file name under hidden inputs): no flag, no
/// URL, no `key=value`, and either a separator or a file extension.
pub fn is_path_argument(arg: &str) -> bool {
    if arg.is_empty()
        || arg.starts_with('-')
        || arg.contains("://")
        || arg.contains('=')
        || arg.contains(char::is_whitespace)
    {
        return false;
    }
    if arg.contains(['/', '\\']) {
        return true;
    }
    match arg.rfind('.') {
        Some(i) => {
            i > 0 && i + 1 < arg.len() && arg[i + 1..].chars().all(|c| c.is_ascii_alphanumeric())
        }
        None => false,
    }
}

/// The label under `GRAPHMIND_HIDE_INPUTS`: the command's name and the file names of path
/// arguments only. Flags, a flag's separate value, URLs and `key=value` pairs are dropped.
pub fn hidden_command_label(command: &str, args: &[String]) -> String {
    let base = base_name(command);
    let mut parts = vec![if base.is_empty() {
        command.to_owned()
    } else {
        base.to_owned()
    }];
    let mut after_flag = false;
    for a in args {
        let is_flag = a.starts_with('-');
        if !is_flag && !after_flag && is_path_argument(a) {
            parts.push(base_name(a).to_owned());
        }
        // `--flag value`: the next word is the flag's value, unless the flag is `--x=y`.
        after_flag = is_flag && !a.contains('=') && a.len() > 1;
    }
    trim_left(parts.join(" "), LABEL_MAX_CHARS)
}

/// Whether a result is an MCP tool result reporting failure (`isError: true`).
pub fn is_error_result(result: Option<&Value>) -> bool {
    result
        .and_then(|r| r.get("isError"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// `(name, message)` of a failed call. `hide_results`: a failed result's content is not
/// quoted; the message says it is hidden. JSON-RPC error messages are always kept.
pub fn describe_failure(
    method: &str,
    error: Option<&Value>,
    result: Option<&Value>,
    hide_results: bool,
) -> (String, String) {
    if let Some(e) = error {
        let code = e
            .get("code")
            .map(json::to_string)
            .unwrap_or_else(|| "?".into());
        let message = e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        return (format!("JsonRpcError({code})"), message);
    }
    if hide_results {
        return ("McpToolError".into(), format!("{method} returned isError: true (content hidden by GRAPHMIND_HIDE_TOOL_RESULTS / GRAPHMIND_HIDE_OUTPUTS)"));
    }
    let detail = match result.and_then(|r| r.get("content")) {
        Some(Value::String(s)) => s.to_string_lossy().into_owned(),
        Some(v) => json::to_string(v),
        None => String::new(),
    };
    let detail: String = detail.chars().take(ERROR_CONTENT_QUOTE_CHARS).collect();
    let message = if detail.is_empty() {
        format!("{method} returned isError: true")
    } else {
        format!("{method} returned isError: true — {detail}")
    };
    ("McpToolError".into(), message)
}

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(k, v);
    }
    Value::Object(m)
}

pub use graphmind_core::mcp::lift_injected as coerce_injected;

/// A response frame (with its trailing newline) answering `id` with `result`; a `result`
/// that is itself a whole frame (has `jsonrpc`) is sent as it is, except that its `id` is
/// always the request's (kept in place when present, appended otherwise), so the
/// requester can match it.
pub fn result_frame(id: &Value, result: Value) -> Vec<u8> {
    let whole_frame = result.get("jsonrpc").and_then(Value::as_str).is_some();
    let frame = match result {
        Value::Object(mut whole) if whole_frame => {
            whole.insert("id", id.clone());
            Value::Object(whole)
        }
        result => obj(vec![
            ("jsonrpc", Value::from("2.0")),
            ("id", id.clone()),
            ("result", result),
        ]),
    };
    let mut out = json::to_string(&frame).into_bytes();
    out.push(b'\n');
    out
}

/// A JSON-RPC error response frame (with its trailing newline).
pub fn error_frame(id: &Value, code: i64, message: &str) -> Vec<u8> {
    let error = obj(vec![
        ("code", Value::from(code)),
        ("message", Value::from(message)),
    ]);
    let frame = obj(vec![
        ("jsonrpc", Value::from("2.0")),
        ("id", id.clone()),
        ("error", error),
    ]);
    let mut out = json::to_string(&frame).into_bytes();
    out.push(b'\n');
    out
}

/// The request frame `original` with its `params` replaced by `params` (an edited input).
pub fn with_params(original: &Value, params: Value) -> Vec<u8> {
    let mut frame = original.clone();
    if let Value::Object(m) = &mut frame {
        m.insert("params", params);
    }
    let mut out = json::to_string(&frame).into_bytes();
    out.push(b'\n');
    out
}

/// The params a `tools/call` runs with after an edit: the edited params, with the original
/// `name` and `_meta` put back when the edit left them out (a hidden input is edited by full
/// replacement, and a tool call without its name cannot run). Other methods: the edit as is.
pub fn edited_params(method: &str, original: Option<&Value>, edited: Value) -> Value {
    match edited {
        Value::Object(mut out) if method == "tools/call" => {
            for key in ["name", "_meta"] {
                if !out.contains_key(key) {
                    if let Some(v) = original.and_then(|o| o.get(key)) {
                        out.insert(key, v.clone());
                    }
                }
            }
            Value::Object(out)
        }
        other => other,
    }
}

/// What the terminal shows when the server exits with `count` requests unanswered (the
/// first being `method`): one line, then the last [`STDERR_TAIL_LINES`] lines of its stderr.
pub fn exit_notice(reason: &str, method: &str, count: usize, ring: &StderrRing) -> Vec<String> {
    let tail = ring.tail(STDERR_TAIL_LINES);
    let head = format!(
        "graphmind mcp-proxy: {reason} before answering {method} ({count} request(s) unanswered)"
    );
    if tail.is_empty() {
        return vec![format!("{head}; it wrote nothing to stderr")];
    }
    let mut out = vec![format!(
        "{head}; the last {} line(s) of its stderr:",
        tail.len()
    )];
    out.extend(tail.iter().map(|l| format!("  | {l}")));
    out
}

/// `--trace`: the line printed for one frame, `[client->server] -> tools/call #1`.
pub fn trace_line(direction: &str, message: &str) -> String {
    format!("[{direction}] {message}")
}

/// The first `max` bytes of `line` (cut on a character boundary) and whether it was cut.
pub fn quote_bytes(line: &[u8], max: usize) -> (String, bool) {
    let text = String::from_utf8_lossy(frame_body(line));
    if text.len() <= max {
        return (text.into_owned(), false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_owned(), true)
}

/// The last lines of the server's stderr, bounded by lines and bytes (oldest dropped).
#[derive(Debug, Default)]
pub struct StderrRing {
    lines: VecDeque<String>,
    bytes: usize,
    partial: Vec<u8>,
    /// Lines dropped to stay within the bounds.
    pub dropped: u64,
}

impl StderrRing {
    /// An empty ring.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk of stderr; complete lines enter the ring.
    pub fn push(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..i]);
            let line = std::mem::take(&mut self.partial);
            self.push_line(String::from_utf8_lossy(frame_body(&line)).into_owned());
            rest = &rest[i + 1..];
        }
        self.partial.extend_from_slice(rest);
        if self.partial.len() > STDERR_RING_MAX_BYTES {
            let line = std::mem::take(&mut self.partial);
            self.push_line(String::from_utf8_lossy(&line).into_owned());
        }
    }

    fn push_line(&mut self, mut line: String) {
        if line.len() > STDERR_RING_MAX_BYTES {
            let mut start = line.len() - STDERR_RING_MAX_BYTES;
            while !line.is_char_boundary(start) {
                start += 1;
            }
            line = line[start..].to_owned();
        }
        self.bytes += line.len() + 1;
        self.lines.push_back(line);
        while self.lines.len() > STDERR_RING_MAX_LINES || self.bytes > STDERR_RING_MAX_BYTES {
            match self.lines.pop_front() {
                Some(old) => {
                    self.bytes -= old.len() + 1;
                    self.dropped += 1;
                }
                None => break,
            }
        }
    }

    /// Ends the stream: an unterminated last line enters the ring.
    pub fn finish(&mut self) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.push_line(String::from_utf8_lossy(&line).into_owned());
        }
    }

    /// Every kept line, oldest first.
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().map(String::as_str)
    }

    /// The last `n` kept lines.
    pub fn tail(&self, n: usize) -> Vec<&str> {
        let skip = self.lines.len().saturating_sub(n);
        self.lines.iter().skip(skip).map(String::as_str).collect()
    }

    /// Kept lines.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn classifies_frames() {
        let (f, _) = classify(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}\n").unwrap();
        assert!(matches!(f, Frame::Request { ref method, .. } if method == "tools/call"));
        let (f, _) =
            classify(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\r\n")
                .unwrap();
        assert!(matches!(f, Frame::Notification { .. }));
        let (f, _) = classify(b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}").unwrap();
        assert!(matches!(f, Frame::Response { .. }));
        assert_eq!(classify(b"[1]").unwrap().0, Frame::Batch);
        assert_eq!(classify(b"42").unwrap().0, Frame::Other);
        assert!(classify(b"hello world").is_none());
        assert_ne!(id_key(&Value::from("1")), id_key(&Value::from(1i64)));
    }

    #[test]
    fn maps_methods_to_nodes() {
        let p = json::parse_str(r#"{"name":"echo","uri":"file:///a"}"#).unwrap();
        assert_eq!(
            map_method("tools/call", Some(&p)),
            ("tool:echo".into(), NodeKind::Tool, "echo".into())
        );
        assert_eq!(
            map_method("resources/read", Some(&p)).0,
            "resource:file:///a"
        );
        assert_eq!(map_method("prompts/get", Some(&p)).1, NodeKind::Prompt);
        assert_eq!(map_method("sampling/createMessage", None).0, "llm:sampling");
        assert_eq!(
            map_method("tools/list", None),
            (
                "mcp:tools/list".into(),
                NodeKind::Custom,
                "tools/list".into()
            )
        );
        assert_eq!(map_method("tools/call", None).0, "tool:unknown");
    }

    #[test]
    fn labels() {
        assert_eq!(
            command_label(
                "/usr/bin/node",
                &s(&["/home/me/srv/build/server.js", "--port=3"])
            ),
            "node server.js --port=3"
        );
        let hidden = hidden_command_label(
            "/usr/bin/python3",
            &s(&[
                "-m",
                "pkg",
                "/etc/conf/app.toml",
                "--token",
                "abc.def",
                "KEY=secret",
                "https://x.y/z",
                "data.json",
                "--x=/a/b",
            ]),
        );
        assert_eq!(hidden, "python3 app.toml data.json");
        let long = command_label("x", &s(&[&"a".repeat(100)]));
        assert_eq!(long.chars().count(), LABEL_MAX_CHARS);
        assert!(long.starts_with('…'));
    }

    #[test]
    fn failures_are_described_and_hidden_results_are_not_quoted() {
        let r =
            json::parse_str(r#"{"isError":true,"content":[{"type":"text","text":"boom secret"}]}"#)
                .unwrap();
        assert!(is_error_result(Some(&r)));
        let (n, m) = describe_failure("tools/call", None, Some(&r), false);
        assert_eq!(n, "McpToolError");
        assert!(m.contains("boom secret"));
        let (_, m) = describe_failure("tools/call", None, Some(&r), true);
        assert!(!m.contains("boom") && m.contains("hidden"));
        let e = json::parse_str(r#"{"code":-32601,"message":"no such method"}"#).unwrap();
        assert_eq!(
            describe_failure("x", Some(&e), None, true),
            ("JsonRpcError(-32601)".into(), "no such method".into())
        );
    }

    #[test]
    fn injected_values_take_the_result_shape() {
        let t = coerce_injected("tools/call", None, Value::from("hi"));
        assert_eq!(
            json::to_string(&t),
            r#"{"content":[{"type":"text","text":"hi"}]}"#
        );
        let o = coerce_injected("tools/call", None, json::parse_str(r#"{"a":1}"#).unwrap());
        assert_eq!(
            json::to_string(&o),
            r#"{"content":[{"type":"text","text":"{\"a\":1}"}],"structuredContent":{"a":1}}"#
        );
        let keep = json::parse_str(r#"{"content":[]}"#).unwrap();
        assert_eq!(coerce_injected("tools/call", None, keep.clone()), keep);
        let p = json::parse_str(r#"{"uri":"file:///x"}"#).unwrap();
        let r = coerce_injected("resources/read", Some(&p), Value::from("t"));
        assert_eq!(
            json::to_string(&r),
            r#"{"contents":[{"uri":"file:///x","text":"t"}]}"#
        );
        assert_eq!(
            coerce_injected("ping", None, Value::from(1i64)),
            Value::from(1i64)
        );
        let whole =
            json::parse_str(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}"#)
                .unwrap();
        assert_eq!(
            result_frame(&Value::from("q"), whole),
            b"{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"error\":{\"code\":-1,\"message\":\"m\"}}\n"
        );
        let no_id = json::parse_str(r#"{"jsonrpc":"2.0","result":{}}"#).unwrap();
        assert_eq!(
            result_frame(&Value::from(3i64), no_id),
            b"{\"jsonrpc\":\"2.0\",\"result\":{},\"id\":3}\n"
        );
        assert_eq!(
            (
                id_text(&Value::from("three")),
                id_text(&json::parse_str("7.0").unwrap())
            ),
            ("three".into(), "7".into())
        );
        let frame = result_frame(&Value::from(7i64), Value::from("x"));
        assert_eq!(frame, b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"x\"}\n");
        assert_eq!(
            error_frame(&Value::from("a"), -32099, "m"),
            b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"error\":{\"code\":-32099,\"message\":\"m\"}}\n"
        );
    }

    #[test]
    fn edited_tool_params_keep_the_tool_name_and_trace_lines_name_the_direction() {
        let original = json::parse_str(
            r#"{"name":"echo","arguments":{"message":"a"},"_meta":{"progressToken":1}}"#,
        )
        .unwrap();
        let full = json::parse_str(r#"{"arguments":{"message":"b"}}"#).unwrap();
        let out = edited_params("tools/call", Some(&original), full);
        assert_eq!(
            json::to_string(&out),
            r#"{"arguments":{"message":"b"},"name":"echo","_meta":{"progressToken":1}}"#
        );
        let renamed = json::parse_str(r#"{"name":"other","arguments":{},"_meta":null}"#).unwrap();
        assert_eq!(
            edited_params("tools/call", Some(&original), renamed.clone()),
            renamed,
            "what the edit says stays"
        );
        let other = json::parse_str(r#"{"uri":"x"}"#).unwrap();
        assert_eq!(
            edited_params("resources/read", Some(&original), other.clone()),
            other
        );
        assert_eq!(
            trace_line("client->server", "-> tools/call #1"),
            "[client->server] -> tools/call #1"
        );
    }

    #[test]
    fn stderr_ring_is_bounded() {
        let mut ring = StderrRing::new();
        for i in 0..250 {
            ring.push(format!("line {i}\n").as_bytes());
        }
        assert_eq!(ring.len(), STDERR_RING_MAX_LINES);
        assert_eq!(ring.tail(1), vec!["line 249"]);
        assert_eq!(ring.dropped, 50);
        let notice = exit_notice("the MCP server exited with code 1", "initialize", 1, &ring);
        assert_eq!(notice.len(), 1 + STDERR_TAIL_LINES);
        assert_eq!(notice[0], "graphmind mcp-proxy: the MCP server exited with code 1 before answering initialize (1 request(s) unanswered); the last 40 line(s) of its stderr:");
        assert_eq!(
            (notice[1].as_str(), notice[40].as_str()),
            ("  | line 210", "  | line 249")
        );
        assert_eq!(exit_notice("r", "m", 2, &StderrRing::new()), vec!["graphmind mcp-proxy: r before answering m (2 request(s) unanswered); it wrote nothing to stderr"]);
        let mut big = StderrRing::new();
        for _ in 0..100 {
            big.push(&[b'x'; 1000]);
            big.push(b"\n");
        }
        assert!(big.lines().map(|l| l.len() + 1).sum::<usize>() <= STDERR_RING_MAX_BYTES);
        big.push(b"tail");
        big.finish();
        assert_eq!(big.tail(1), vec!["tail"]);
        assert_eq!(quote_bytes("héllo\n".as_bytes(), 2), ("h".into(), true));
    }
}
