//! The protocol v1 envelope: writing one around an already-serialized payload, and a
//! tolerant parser that sorts any inbound frame into one of four outcomes.
//!
//! ```text
//! {"gm":1,"seq":0,"ts":1756254187512,"runId":"run_…","type":"node.started","payload":{…}}
//! ```
//!
//! The parser decides in the reference's order and never panics:
//!
//! 1. not JSON, or not shaped like an envelope            -> [`ParseOutcome::Invalid`]
//! 2. `gm` differs from [`PROTOCOL_VERSION`]              -> [`ParseOutcome::VersionMismatch`]
//! 3. `type` is not one protocol v1 defines                -> [`ParseOutcome::UnknownType`]
//! 4. known type whose payload breaks its schema           -> [`ParseOutcome::Invalid`]
//! 5. otherwise                                            -> [`ParseOutcome::Ok`]
//!
//! "Shaped like an envelope" means: a JSON object with `gm` a safe integer, `seq` a safe
//! integer >= 0, `ts` a safe integer >= 0 (epoch milliseconds), `runId` a string without
//! lone surrogates, and `type` a string. `payload` may be absent at this stage (a future
//! type need not carry one); a known type requires it to be an object matching its schema.
//! Unknown envelope fields and unknown payload fields never fail and are kept: the
//! parsed envelope holds the whole object as it arrived.

use crate::event::{MessageType, PROTOCOL_VERSION};
use crate::json::{self, JsStr, Map, Value};
use std::fmt;

/// The largest integer JavaScript represents exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// Writes one envelope frame around a payload that is already JSON text (the session
/// shrinks and serializes the payload first). Keys in the wire order
/// `gm, seq, ts, runId, type, payload`; strings escaped as `JSON.stringify` escapes them.
/// `payload_json` is inserted verbatim and must be one JSON value.
pub fn encode_envelope(
    gm: u32,
    seq: u64,
    ts: u64,
    run_id: &str,
    msg_type: &str,
    payload_json: &str,
) -> String {
    let mut out = String::with_capacity(64 + run_id.len() + msg_type.len() + payload_json.len());
    use std::fmt::Write;
    let _ = write!(out, "{{\"gm\":{gm},\"seq\":{seq},\"ts\":{ts},\"runId\":");
    json::write_string(&JsStr::from(run_id), &mut out);
    out.push_str(",\"type\":");
    json::write_string(&JsStr::from(msg_type), &mut out);
    out.push_str(",\"payload\":");
    out.push_str(payload_json);
    out.push('}');
    out
}

/// One problem found in a frame: where (`payload.nodes.0.kind`; empty for the frame
/// itself) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseIssue {
    /// Dotted path into the envelope; array indexes are numbers.
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for ParseIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Why a frame was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// One line: the frame is not JSON, not an envelope, or has a bad payload for its type.
    pub reason: String,
    /// Every problem found (empty when the frame is not JSON).
    pub issues: Vec<ParseIssue>,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)?;
        for (i, issue) in self.issues.iter().enumerate() {
            f.write_str(if i == 0 { ": " } else { "; " })?;
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

/// A structurally valid envelope, with the whole object kept as it arrived.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    /// The envelope object, every field in arrival order (unknown ones included).
    pub object: Map,
    /// `seq`.
    pub seq: u64,
    /// `ts` (epoch ms).
    pub ts: u64,
    /// `runId`.
    pub run_id: String,
    /// `type` as sent (lossy only for lone surrogates, which no known type has).
    pub type_name: String,
    /// `type`, when protocol v1 defines it.
    pub message_type: Option<MessageType>,
}

impl Envelope {
    /// The payload, when the frame carries one (always an object for a known type).
    pub fn payload(&self) -> Option<&Value> {
        self.object.get("payload")
    }

    /// The payload as an object.
    pub fn payload_object(&self) -> Option<&Map> {
        self.payload().and_then(Value::as_object)
    }

    /// The envelope as a JSON value (unchanged).
    pub fn into_value(self) -> Value {
        Value::Object(self.object)
    }

    /// The envelope written back as compact JSON, fields in arrival order.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(128);
        out.push('{');
        for (i, (k, v)) in self.object.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            json::write_string(k, &mut out);
            out.push(':');
            json::write_value(v, &mut out);
        }
        out.push('}');
        out
    }
}

/// The parser's verdict on one frame.
#[derive(Clone, Debug, PartialEq)]
pub enum ParseOutcome {
    /// A known message type with a valid payload.
    Ok(Envelope),
    /// A structurally valid envelope of a type this version does not know: tolerate it
    /// (forward compatibility); its payload is opaque.
    UnknownType(Envelope),
    /// The sender speaks another major version: reject.
    VersionMismatch {
        /// The `gm` received.
        received: i64,
        /// Ours.
        supported: u32,
    },
    /// Not JSON, not an envelope, or a known type with a bad payload.
    Invalid(Invalid),
}

impl ParseOutcome {
    /// `ok`, `unknown-type`, `version-mismatch` or `invalid`: the reference's names.
    pub fn kind(&self) -> &'static str {
        match self {
            ParseOutcome::Ok(_) => "ok",
            ParseOutcome::UnknownType(_) => "unknown-type",
            ParseOutcome::VersionMismatch { .. } => "version-mismatch",
            ParseOutcome::Invalid(_) => "invalid",
        }
    }

    /// The envelope, for `Ok` and `UnknownType`.
    pub fn envelope(&self) -> Option<&Envelope> {
        match self {
            ParseOutcome::Ok(e) | ParseOutcome::UnknownType(e) => Some(e),
            _ => None,
        }
    }

    /// The refusal, for `Invalid`.
    pub fn invalid(&self) -> Option<&Invalid> {
        match self {
            ParseOutcome::Invalid(i) => Some(i),
            _ => None,
        }
    }
}

/// The reason given when a frame is JSON but not shaped like an envelope.
pub const REASON_NOT_AN_ENVELOPE: &str = "not a structurally valid GraphMind envelope";

/// Parses one text frame. Never panics; nesting deeper than
/// [`json::MAX_JSON_DEPTH`] is refused as not JSON.
pub fn parse_envelope(bytes: &[u8]) -> ParseOutcome {
    match json::parse(bytes) {
        Ok(value) => parse_envelope_value(value),
        Err(e) => not_json(e),
    }
}

/// The payload members no protocol v1 schema constrains (any value wherever a type declares
/// them): an app's `input` and `output`, usually most of a frame's bytes.
const UNCONSTRAINED_PAYLOAD_MEMBERS: &[&[&str]] = &[&["payload", "input"], &["payload", "output"]];

/// [`parse_envelope`]'s verdict, the same outcome, reason and issues, without building the
/// payload's `input` and `output`: they are checked as JSON (as [`parse_envelope`] checks
/// them) and are `null` in the returned object. For a receiver that stores the frame's text
/// as it arrived and reads only the envelope's fields and the payload's small ones (the
/// spool import); the returned object must not be written back as the frame.
pub fn check_envelope(text: &str) -> ParseOutcome {
    match json::parse_with_opaque(text, UNCONSTRAINED_PAYLOAD_MEMBERS) {
        Ok(value) => parse_envelope_value(value),
        Err(e) => not_json(e),
    }
}

fn not_json(e: json::ParseError) -> ParseOutcome {
    ParseOutcome::Invalid(Invalid {
        reason: format!("frame is not valid JSON: {e}"),
        issues: Vec::new(),
    })
}

/// Classifies an already-decoded frame. Never panics.
pub fn parse_envelope_value(value: Value) -> ParseOutcome {
    let object = match value {
        Value::Object(m) => m,
        other => {
            return invalid(
                REASON_NOT_AN_ENVELOPE,
                vec![issue(
                    "",
                    format!("expected an object, received {}", other.type_name()),
                )],
            )
        }
    };

    // Step 1: the raw shape every envelope has, whatever its type.
    let mut issues = Vec::new();
    let gm = check_int(&object, "gm", IntRule::Any, &mut issues);
    let seq = check_int(&object, "seq", IntRule::NonNegative, &mut issues);
    let ts = check_int(&object, "ts", IntRule::NonNegative, &mut issues);
    let run_id = match object.get("runId") {
        Some(Value::String(s)) => match s.as_str() {
            Some(s) => Some(s.to_owned()),
            None => {
                issues.push(issue("runId", "runId must not contain lone surrogates"));
                None
            }
        },
        other => {
            issues.push(issue("runId", expected("a string", other)));
            None
        }
    };
    let type_name = match object.get("type") {
        Some(Value::String(s)) => Some(s.to_string_lossy().into_owned()),
        other => {
            issues.push(issue("type", expected("a string", other)));
            None
        }
    };
    let (Some(gm), Some(seq), Some(ts), Some(run_id), Some(type_name)) =
        (gm, seq, ts, run_id, type_name)
    else {
        return invalid(REASON_NOT_AN_ENVELOPE, issues);
    };

    // Step 2: the major version.
    if gm != i64::from(PROTOCOL_VERSION) {
        return ParseOutcome::VersionMismatch {
            received: gm,
            supported: PROTOCOL_VERSION,
        };
    }

    // Step 3: a type we do not know is tolerated, opaque.
    let message_type = match object
        .get("type")
        .and_then(Value::as_str)
        .and_then(MessageType::parse)
    {
        Some(t) => t,
        None => {
            return ParseOutcome::UnknownType(Envelope {
                object,
                seq: seq as u64,
                ts: ts as u64,
                run_id,
                type_name,
                message_type: None,
            })
        }
    };

    // Step 4: a known type's payload must match its schema.
    let mut issues = Vec::new();
    let mut path = String::from("payload");
    match object.get("payload") {
        Some(payload) => schema::check(
            &schema::payload_shape(message_type),
            payload,
            &mut path,
            &mut issues,
        ),
        None => issues.push(issue("payload", expected("an object", None))),
    }
    if !issues.is_empty() {
        return invalid(
            &format!("invalid payload for message type \"{type_name}\""),
            issues,
        );
    }
    ParseOutcome::Ok(Envelope {
        object,
        seq: seq as u64,
        ts: ts as u64,
        run_id,
        type_name,
        message_type: Some(message_type),
    })
}

/// Checks a payload against its message type's wire schema, as a receiver's
/// [`parse_envelope`] will: a sender refuses what the server would drop (a dropped frame
/// leaves a hole in the sequence). `Err` says what is wrong, as the server would.
pub fn check_payload(message_type: MessageType, payload: &Value) -> Result<(), Invalid> {
    let mut issues = Vec::new();
    let mut path = String::from("payload");
    schema::check(
        &schema::payload_shape(message_type),
        payload,
        &mut path,
        &mut issues,
    );
    if issues.is_empty() {
        Ok(())
    } else {
        Err(Invalid {
            reason: format!(
                "invalid payload for message type \"{}\"",
                message_type.as_str()
            ),
            issues,
        })
    }
}

fn invalid(reason: &str, issues: Vec<ParseIssue>) -> ParseOutcome {
    ParseOutcome::Invalid(Invalid {
        reason: reason.to_owned(),
        issues,
    })
}

fn issue(path: &str, message: impl Into<String>) -> ParseIssue {
    ParseIssue {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn describe(value: Option<&Value>) -> String {
    match value {
        None => "nothing (the field is missing)".to_owned(),
        Some(Value::Number(n)) => format!("the number {}", {
            let mut s = String::new();
            json::write_number(n, &mut s);
            s
        }),
        Some(v) => v.type_name().to_owned(),
    }
}

fn expected(what: &str, got: Option<&Value>) -> String {
    format!("expected {what}, received {}", describe(got))
}

#[derive(Clone, Copy)]
enum IntRule {
    Any,
    NonNegative,
}

/// A field that must be a safe integer (JavaScript's `Number.isSafeInteger`).
fn check_int(object: &Map, key: &str, rule: IntRule, issues: &mut Vec<ParseIssue>) -> Option<i64> {
    let value = object.get(key);
    let Some(x) = value.and_then(Value::as_f64) else {
        issues.push(issue(key, expected("an integer", value)));
        return None;
    };
    if !is_safe_integer(x) {
        issues.push(issue(key, expected("a safe integer", value)));
        return None;
    }
    if matches!(rule, IntRule::NonNegative) && x < 0.0 {
        issues.push(issue(key, expected("an integer >= 0", value)));
        return None;
    }
    Some(x as i64)
}

/// `Number.isSafeInteger(x)`.
pub fn is_safe_integer(x: f64) -> bool {
    x.is_finite() && x.fract() == 0.0 && x.abs() <= MAX_SAFE_INTEGER as f64
}

/// The payload schemas of protocol v1, as data, and a checker that mirrors the reference's
/// loose-object validation (unknown fields pass; `null` is not an absent optional field).
mod schema {
    use super::{expected, is_safe_integer, issue, ParseIssue};
    use crate::event::{
        LoopKind, MessageType, NodeKind, PausePoint, PauseReason, RefusalCode, ResumeAction,
        RunMode, RunStatus, SmartRule, TokenChannel,
    };
    use crate::json::Value;

    /// What a value must be.
    pub(super) enum Ty {
        /// Anything, including absent-as-present.
        Any,
        Str,
        Bool,
        /// A finite number >= 0.
        NumNonNeg,
        /// A safe integer.
        Int,
        /// A safe integer >= 0.
        IntNonNeg,
        /// A safe integer > 0.
        IntPos,
        /// One of these strings.
        Enum(&'static [&'static str]),
        Array(&'static Ty),
        /// An object whose values may be anything (`z.record`).
        Record,
        Object(&'static [Field]),
    }

    /// One named property of a loose object.
    pub(super) struct Field {
        name: &'static str,
        ty: Ty,
        required: bool,
    }

    const fn req(name: &'static str, ty: Ty) -> Field {
        Field {
            name,
            ty,
            required: true,
        }
    }
    const fn opt(name: &'static str, ty: Ty) -> Field {
        Field {
            name,
            ty,
            required: false,
        }
    }

    macro_rules! names {
        ($t:ty) => {{
            const N: usize = <$t>::ALL.len();
            const fn build() -> [&'static str; N] {
                let mut out = [""; N];
                let mut i = 0;
                while i < N {
                    out[i] = <$t>::ALL[i].as_str();
                    i += 1;
                }
                out
            }
            const OUT: [&'static str; N] = build();
            &OUT
        }};
    }

    const NODE_KIND: Ty = Ty::Enum(names!(NodeKind));
    const RUN_STATUS: Ty = Ty::Enum(names!(RunStatus));
    const PAUSE_POINT: Ty = Ty::Enum(names!(PausePoint));
    const RESUME_ACTION: Ty = Ty::Enum(names!(ResumeAction));
    const RUN_MODE: Ty = Ty::Enum(names!(RunMode));

    const SDK_INFO: &[Field] = &[req("name", Ty::Str), req("version", Ty::Str)];
    const ERROR_INFO: &[Field] = &[
        req("name", Ty::Str),
        req("message", Ty::Str),
        opt("stack", Ty::Str),
    ];
    const TOKEN_USAGE: &[Field] = &[
        req("inputTokens", Ty::IntNonNeg),
        req("outputTokens", Ty::IntNonNeg),
        opt("inclusive", Ty::Bool),
        opt("cacheReadTokens", Ty::IntNonNeg),
        opt("cacheWriteTokens", Ty::IntNonNeg),
        opt("reasoningTokens", Ty::IntNonNeg),
    ];
    const TOKEN_DELTA: &[Field] = &[req("t", Ty::Enum(names!(TokenChannel))), req("v", Ty::Str)];
    const MATCHER: &[Field] = &[
        opt("kind", NODE_KIND),
        opt("name", Ty::Str),
        opt("point", PAUSE_POINT),
    ];
    const NODE_HINT: &[Field] = &[
        req("nodeId", Ty::Str),
        req("kind", NODE_KIND),
        req("name", Ty::Str),
        opt("parentId", Ty::Str),
    ];
    const REDACTION: &[Field] = &[
        req("count", Ty::IntNonNeg),
        req("keys", Ty::Array(&Ty::Str)),
    ];
    const LOOP_INFO: &[Field] = &[
        req("repeats", Ty::IntNonNeg),
        req("firstSeq", Ty::IntNonNeg),
        req("lastSeq", Ty::IntNonNeg),
        req("fingerprint", Ty::Str),
        opt("kind", Ty::Enum(names!(LoopKind))),
        opt("period", Ty::IntPos),
        opt("laps", Ty::IntPos),
    ];
    const SMART_INFO: &[Field] = &[
        req("rule", Ty::Enum(names!(SmartRule))),
        opt("detail", Ty::Str),
    ];

    const RUN_STARTED: &[Field] = &[
        req("app", Ty::Str),
        req("sdk", Ty::Object(SDK_INFO)),
        opt("meta", Ty::Record),
    ];
    const RUN_FINISHED: &[Field] = &[
        req("status", RUN_STATUS),
        opt("error", Ty::Object(ERROR_INFO)),
    ];
    const GRAPH_HINT: &[Field] = &[req("nodes", Ty::Array(&Ty::Object(NODE_HINT)))];
    const NODE_STARTED: &[Field] = &[
        req("nodeId", Ty::Str),
        opt("parentId", Ty::Str),
        req("kind", NODE_KIND),
        req("name", Ty::Str),
        req("instanceId", Ty::Str),
        opt("input", Ty::Any),
        opt("collapsed", Ty::Bool),
        opt("redaction", Ty::Object(REDACTION)),
    ];
    const NODE_TOKEN: &[Field] = &[
        req("nodeId", Ty::Str),
        req("deltas", Ty::Array(&Ty::Object(TOKEN_DELTA))),
        opt("redaction", Ty::Object(REDACTION)),
    ];
    const NODE_FINISHED: &[Field] = &[
        req("nodeId", Ty::Str),
        opt("instanceId", Ty::Str),
        opt("output", Ty::Any),
        opt("usage", Ty::Object(TOKEN_USAGE)),
        req("durationMs", Ty::NumNonNeg),
        opt("heldMs", Ty::NumNonNeg),
        req("status", RUN_STATUS),
        opt("redaction", Ty::Object(REDACTION)),
    ];
    const NODE_ERROR: &[Field] = &[
        req("nodeId", Ty::Str),
        opt("instanceId", Ty::Str),
        req("error", Ty::Object(ERROR_INFO)),
        opt("heldMs", Ty::NumNonNeg),
    ];
    const EXEC_PAUSED: &[Field] = &[
        req("pauseId", Ty::Str),
        req("nodeId", Ty::Str),
        req("point", PAUSE_POINT),
        opt("reason", Ty::Enum(names!(PauseReason))),
        opt("loop", Ty::Object(LOOP_INFO)),
        opt("smart", Ty::Object(SMART_INFO)),
        opt("editable", Ty::Bool),
    ];
    const EXEC_REFUSED: &[Field] = &[
        req("pauseId", Ty::Str),
        req("code", Ty::Enum(names!(RefusalCode))),
        opt("message", Ty::Str),
        opt("requestId", Ty::Str),
    ];
    const EDITED: &[Field] = &[req("after", Ty::Any)];
    const EXEC_RESUMED: &[Field] = &[
        req("pauseId", Ty::Str),
        req("action", RESUME_ACTION),
        opt("edited", Ty::Object(EDITED)),
        opt("requestId", Ty::Str),
        opt("principal", Ty::Str),
    ];
    const EXEC_RESUME: &[Field] = &[
        req("pauseId", Ty::Str),
        req("action", RESUME_ACTION),
        opt("output", Ty::Any),
        opt("input", Ty::Any),
        opt("requestId", Ty::Str),
    ];
    const BREAKPOINT: &[Field] = &[req("matcher", Ty::Object(MATCHER))];
    const MODE_SET: &[Field] = &[req("mode", RUN_MODE)];
    const HELLO_VERSIONS: &[Field] = &[req("protocol", Ty::Int), req("client", Ty::Str)];
    const HELLO: &[Field] = &[
        req("versions", Ty::Object(HELLO_VERSIONS)),
        req("capabilities", Ty::Array(&Ty::Str)),
        opt("app", Ty::Str),
        opt("sdk", Ty::Object(SDK_INFO)),
        opt("resumeToken", Ty::Str),
    ];
    const ACK_VERSIONS: &[Field] = &[req("protocol", Ty::Int), req("viewer", Ty::Str)];
    const HELLO_ACK: &[Field] = &[
        req("versions", Ty::Object(ACK_VERSIONS)),
        req("capabilities", Ty::Array(&Ty::Str)),
        req("breakpoints", Ty::Array(&Ty::Object(MATCHER))),
        req("mode", RUN_MODE),
        opt("sessionToken", Ty::Str),
        opt("hubCapabilities", Ty::Array(&Ty::Str)),
    ];

    /// The payload schema of a message type.
    pub(super) fn payload_shape(t: MessageType) -> Ty {
        use MessageType::*;
        Ty::Object(match t {
            RunStarted => RUN_STARTED,
            RunFinished => RUN_FINISHED,
            GraphHint => GRAPH_HINT,
            NodeStarted => NODE_STARTED,
            NodeToken => NODE_TOKEN,
            NodeFinished => NODE_FINISHED,
            NodeError => NODE_ERROR,
            ExecPaused => EXEC_PAUSED,
            ExecRefused => EXEC_REFUSED,
            ExecResumed => EXEC_RESUMED,
            ExecResume => EXEC_RESUME,
            BreakpointSet | BreakpointClear => BREAKPOINT,
            ModeSet => MODE_SET,
            Hello => HELLO,
            HelloAck => HELLO_ACK,
        })
    }

    /// Whether every payload schema that declares `name` lets it be any value.
    #[cfg(test)]
    pub(super) fn any_wherever_declared(name: &str) -> bool {
        MessageType::ALL.iter().all(|&t| match payload_shape(t) {
            Ty::Object(fields) => fields
                .iter()
                .all(|f| f.name != name || matches!(f.ty, Ty::Any)),
            _ => false,
        })
    }

    /// Appends every way `value` breaks `ty` to `issues`. Recursion follows the schema,
    /// never the value, so its depth is bounded by the schema's.
    pub(super) fn check(ty: &Ty, value: &Value, path: &mut String, issues: &mut Vec<ParseIssue>) {
        let ok = match ty {
            Ty::Any => true,
            Ty::Str => matches!(value, Value::String(_)),
            Ty::Bool => matches!(value, Value::Bool(_)),
            Ty::NumNonNeg => finite(value).is_some_and(|x| x >= 0.0),
            Ty::Int => finite(value).is_some_and(is_safe_integer),
            Ty::IntNonNeg => finite(value).is_some_and(|x| is_safe_integer(x) && x >= 0.0),
            Ty::IntPos => finite(value).is_some_and(|x| is_safe_integer(x) && x > 0.0),
            Ty::Enum(names) => value.as_str().is_some_and(|s| names.contains(&s)),
            Ty::Record => matches!(value, Value::Object(_)),
            Ty::Array(item) => match value {
                Value::Array(items) => {
                    for (i, v) in items.iter().enumerate() {
                        let len = path.len();
                        path.push('.');
                        path.push_str(&i.to_string());
                        check(item, v, path, issues);
                        path.truncate(len);
                    }
                    true
                }
                _ => false,
            },
            Ty::Object(fields) => match value {
                Value::Object(map) => {
                    for field in fields.iter() {
                        let len = path.len();
                        if !path.is_empty() {
                            path.push('.');
                        }
                        path.push_str(field.name);
                        match map.get(field.name) {
                            Some(v) => check(&field.ty, v, path, issues),
                            None if field.required => {
                                issues.push(issue(path, expected(&describe_ty(&field.ty), None)))
                            }
                            None => {}
                        }
                        path.truncate(len);
                    }
                    true
                }
                _ => false,
            },
        };
        if !ok {
            issues.push(issue(path, expected(&describe_ty(ty), Some(value))));
        }
    }

    fn finite(value: &Value) -> Option<f64> {
        match value {
            Value::Number(n) => Some(n.as_f64()).filter(|x| x.is_finite()),
            _ => None,
        }
    }

    fn describe_ty(ty: &Ty) -> String {
        match ty {
            Ty::Any => "any value".into(),
            Ty::Str => "a string".into(),
            Ty::Bool => "a boolean".into(),
            Ty::NumNonNeg => "a finite number >= 0".into(),
            Ty::Int => "a safe integer".into(),
            Ty::IntNonNeg => "a safe integer >= 0".into(),
            Ty::IntPos => "a safe integer > 0".into(),
            Ty::Enum(names) => format!("one of {}", names.join(", ")),
            Ty::Array(_) => "an array".into(),
            Ty::Record | Ty::Object(_) => "an object".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_envelope_gives_parse_envelopes_verdict_without_building_input_and_output() {
        for path in UNCONSTRAINED_PAYLOAD_MEMBERS {
            assert!(schema::any_wherever_declared(path[1]), "{path:?}");
        }
        let frames: &[&str] = &[
            r#"{"gm":1,"seq":3,"ts":5,"runId":"r","type":"node.started","payload":{"nodeId":"tool:x","kind":"tool","name":"x","instanceId":"c","input":{"q":[1,{"a":"\u00e9"}]}}}"#,
            r#"{"gm":1,"seq":4,"ts":6,"runId":"r","type":"node.finished","payload":{"nodeId":"tool:x","durationMs":1,"status":"ok","output":"big","output":[1]}}"#,
            r#"{"gm":1,"seq":4,"ts":6,"runId":"r","type":"node.finished","payload":{"nodeId":"tool:x","durationMs":-1,"status":"ok","output":1}}"#,
            r#"{"gm":1,"seq":4,"ts":6,"runId":"r","type":"node.started","payload":{"nodeId":"tool:x","input":{"a":1}}}"#,
            r#"{"gm":1,"seq":4,"ts":6,"runId":"r","type":"node.started","payload":{"nodeId":"tool:x","kind":"tool","name":"x","instanceId":"c","input":{"a":01}}}"#,
            r#"{"gm":1,"seq":4,"ts":6,"runId":"r","type":"node.started","payload":{"nodeId":"tool:x","kind":"tool","name":"x","instanceId":"c","input":"\x"}}"#,
            r#"{"gm":2,"seq":0,"ts":0,"runId":"r","type":"x","payload":{"input":[}}"#,
            r#"{"gm":1,"seq":0,"ts":0,"runId":"r","type":"custom.x","payload":{"input":{"deep":[[[]]]},"output":null}}"#,
            r#"{"gm":1,"seq":0,"ts":0,"runId":"r","type":"exec.resume","payload":{"pauseId":"p","action":"continue","input":{"k":true}}}"#,
        ];
        for frame in frames {
            let (full, checked) = (parse_envelope(frame.as_bytes()), check_envelope(frame));
            assert_eq!(full.kind(), checked.kind(), "{frame}");
            assert_eq!(full.invalid(), checked.invalid());
            if let (Some(a), Some(b)) = (full.envelope(), checked.envelope()) {
                let payload = b.payload_object().unwrap();
                for key in ["input", "output"] {
                    let (was, now) = (a.payload_object().unwrap().get(key), payload.get(key));
                    assert_eq!(was.is_some(), now.is_some());
                    assert!(now.is_none_or(Value::is_null), "{key}: {now:?}");
                }
                assert_eq!(
                    (a.seq, a.ts, &a.run_id, &a.type_name),
                    (b.seq, b.ts, &b.run_id, &b.type_name)
                );
            }
        }
    }

    #[test]
    fn encodes_in_wire_order() {
        let s = encode_envelope(
            1,
            7,
            1_756_254_187_512,
            "run_\u{e9}\"x",
            "node.token",
            "{\"a\":1}",
        );
        assert_eq!(
            s,
            "{\"gm\":1,\"seq\":7,\"ts\":1756254187512,\"runId\":\"run_\u{e9}\\\"x\",\"type\":\"node.token\",\"payload\":{\"a\":1}}"
        );
    }

    #[test]
    fn safe_integers() {
        assert!(is_safe_integer(0.0));
        assert!(is_safe_integer(-0.0));
        assert!(is_safe_integer(9_007_199_254_740_991.0));
        assert!(!is_safe_integer(9_007_199_254_740_992.0));
        assert!(!is_safe_integer(1.5));
        assert!(!is_safe_integer(f64::INFINITY));
    }
}
