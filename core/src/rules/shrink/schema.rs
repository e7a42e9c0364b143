//! The payload definition of every known event type, as one declarative table.
//!
//! The shrink needs two things from the wire schema: whether a (shrunk) payload is still a
//! valid payload of its event type, and the skeleton plan of a type (which keys a last-resort
//! skeleton may keep). Both come from the same table here, so they cannot disagree.
//!
//! The table follows the protocol's payload definitions (the `$defs` of
//! `tests/vectors/reference/wire-schema.json`): every object is loose (unknown keys are
//! allowed), numbers must be finite, integers must be safe integers (at most 2^53 - 1).

use crate::event::{
    LoopKind, NodeKind, PausePoint, PauseReason, RefusalCode, ResumeAction, RunStatus, SmartRule,
    TokenChannel,
};
use crate::json::{Map, Number, Value};

/// What a value must look like.
#[derive(Debug)]
pub(crate) enum Shape {
    /// Anything (`z.unknown()`).
    Any,
    /// A string.
    Str,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// A boolean.
    Bool,
    /// A finite number >= 0.
    NonNegNumber,
    /// A safe integer >= 0.
    NonNegInt,
    /// A safe integer > 0.
    PosInt,
    /// Any object (a record of unknown values; not a planned object).
    Record,
    /// An array whose items all have this shape.
    Array(&'static Shape),
    /// A loose object with these declared fields, in declaration order.
    Object(&'static [Field]),
}

/// One declared field of a loose object.
#[derive(Debug)]
pub(crate) struct Field {
    pub key: &'static str,
    pub required: bool,
    pub shape: Shape,
}

const fn req(key: &'static str, shape: Shape) -> Field {
    Field {
        key,
        required: true,
        shape,
    }
}

const fn opt(key: &'static str, shape: Shape) -> Field {
    Field {
        key,
        required: false,
        shape,
    }
}

const SDK_INFO: &[Field] = &[req("name", Shape::Str), req("version", Shape::Str)];

const ERROR_INFO_FIELDS: &[Field] = &[
    req("name", Shape::Str),
    req("message", Shape::Str),
    opt("stack", Shape::Str),
];

const REDACTION: &[Field] = &[
    req("count", Shape::NonNegInt),
    req("keys", Shape::Array(&Shape::Str)),
];

const TOKEN_USAGE: &[Field] = &[
    req("inputTokens", Shape::NonNegInt),
    req("outputTokens", Shape::NonNegInt),
    opt("inclusive", Shape::Bool),
    opt("cacheReadTokens", Shape::NonNegInt),
    opt("cacheWriteTokens", Shape::NonNegInt),
    opt("reasoningTokens", Shape::NonNegInt),
];

const TOKEN_DELTA: &[Field] = &[
    req("t", Shape::Enum(TokenChannel::NAMES)),
    req("v", Shape::Str),
];

const GRAPH_NODE_HINT: &[Field] = &[
    req("nodeId", Shape::Str),
    req("kind", Shape::Enum(NodeKind::NAMES)),
    req("name", Shape::Str),
    opt("parentId", Shape::Str),
];

const LOOP_INFO: &[Field] = &[
    req("repeats", Shape::NonNegInt),
    req("firstSeq", Shape::NonNegInt),
    req("lastSeq", Shape::NonNegInt),
    req("fingerprint", Shape::Str),
    opt("kind", Shape::Enum(LoopKind::NAMES)),
    opt("period", Shape::PosInt),
    opt("laps", Shape::PosInt),
];

const SMART_INFO: &[Field] = &[
    req("rule", Shape::Enum(SmartRule::NAMES)),
    opt("detail", Shape::Str),
];

const EDITED: &[Field] = &[req("after", Shape::Any)];

/// The payload of every known event type, in the protocol's order.
pub(crate) const EVENT_PAYLOADS: &[(&str, &[Field])] = &[
    (
        "run.started",
        &[
            req("app", Shape::Str),
            req("sdk", Shape::Object(SDK_INFO)),
            opt("meta", Shape::Record),
        ],
    ),
    (
        "run.finished",
        &[
            req("status", Shape::Enum(RunStatus::NAMES)),
            opt("error", Shape::Object(ERROR_INFO_FIELDS)),
        ],
    ),
    (
        "graph.hint",
        &[req("nodes", Shape::Array(&Shape::Object(GRAPH_NODE_HINT)))],
    ),
    (
        "node.started",
        &[
            req("nodeId", Shape::Str),
            opt("parentId", Shape::Str),
            req("kind", Shape::Enum(NodeKind::NAMES)),
            req("name", Shape::Str),
            req("instanceId", Shape::Str),
            opt("input", Shape::Any),
            opt("collapsed", Shape::Bool),
            opt("redaction", Shape::Object(REDACTION)),
        ],
    ),
    (
        "node.token",
        &[
            req("nodeId", Shape::Str),
            req("deltas", Shape::Array(&Shape::Object(TOKEN_DELTA))),
            opt("redaction", Shape::Object(REDACTION)),
        ],
    ),
    (
        "node.finished",
        &[
            req("nodeId", Shape::Str),
            opt("instanceId", Shape::Str),
            opt("output", Shape::Any),
            opt("usage", Shape::Object(TOKEN_USAGE)),
            req("durationMs", Shape::NonNegNumber),
            opt("heldMs", Shape::NonNegNumber),
            req("status", Shape::Enum(RunStatus::NAMES)),
            opt("redaction", Shape::Object(REDACTION)),
        ],
    ),
    (
        "node.error",
        &[
            req("nodeId", Shape::Str),
            opt("instanceId", Shape::Str),
            req("error", Shape::Object(ERROR_INFO_FIELDS)),
            opt("heldMs", Shape::NonNegNumber),
        ],
    ),
    (
        "exec.paused",
        &[
            req("pauseId", Shape::Str),
            req("nodeId", Shape::Str),
            req("point", Shape::Enum(PausePoint::NAMES)),
            opt("reason", Shape::Enum(PauseReason::NAMES)),
            opt("loop", Shape::Object(LOOP_INFO)),
            opt("smart", Shape::Object(SMART_INFO)),
            opt("editable", Shape::Bool),
        ],
    ),
    (
        "exec.refused",
        &[
            req("pauseId", Shape::Str),
            req("code", Shape::Enum(RefusalCode::NAMES)),
            opt("message", Shape::Str),
            opt("requestId", Shape::Str),
        ],
    ),
    (
        "exec.resumed",
        &[
            req("pauseId", Shape::Str),
            req("action", Shape::Enum(ResumeAction::NAMES)),
            opt("edited", Shape::Object(EDITED)),
            opt("requestId", Shape::Str),
            opt("principal", Shape::Str),
        ],
    ),
];

/// The declared fields of a known event type's payload.
pub(crate) fn payload_fields(event_type: &str) -> Option<&'static [Field]> {
    EVENT_PAYLOADS
        .iter()
        .find(|(name, _)| *name == event_type)
        .map(|(_, fields)| *fields)
}

/// The largest safe integer of JavaScript (2^53 - 1).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

fn finite_number(n: &Number) -> Option<f64> {
    let f = n.as_f64();
    f.is_finite().then_some(f)
}

fn safe_integer(n: &Number) -> Option<f64> {
    match n {
        Number::Int(i) => (i.unsigned_abs() <= MAX_SAFE_INTEGER as u64).then_some(*i as f64),
        Number::Float(f) => {
            (f.is_finite() && f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER).then_some(*f)
        }
        // Beyond 64 bits is never a safe integer.
        Number::BigInt(_) => None,
    }
}

/// Whether `value` has `shape`.
pub(crate) fn matches(shape: &Shape, value: &Value) -> bool {
    match (shape, value) {
        (Shape::Any, _) => true,
        (Shape::Str, Value::String(_)) => true,
        (Shape::Enum(names), Value::String(s)) => names.iter().any(|name| s == name),
        (Shape::Bool, Value::Bool(_)) => true,
        (Shape::NonNegNumber, Value::Number(n)) => finite_number(n).is_some_and(|f| f >= 0.0),
        (Shape::NonNegInt, Value::Number(n)) => safe_integer(n).is_some_and(|f| f >= 0.0),
        (Shape::PosInt, Value::Number(n)) => safe_integer(n).is_some_and(|f| f > 0.0),
        (Shape::Record, Value::Object(_)) => true,
        (Shape::Array(item), Value::Array(items)) => items.iter().all(|v| matches(item, v)),
        (Shape::Object(fields), Value::Object(map)) => object_matches(fields, map),
        _ => false,
    }
}

/// Whether `map` satisfies the declared `fields` of a loose object.
pub(crate) fn object_matches(fields: &[Field], map: &Map) -> bool {
    fields.iter().all(|field| match map.get(field.key) {
        Some(value) => matches(&field.shape, value),
        None => !field.required,
    })
}

/// How the skeleton treats one declared field.
pub(crate) enum PlanEntry {
    /// Required: kept, hard-shrunk.
    Required,
    /// Required loose object: kept as an object of its own planned keys.
    Nested(&'static [Field]),
    /// Optional: kept (hard-shrunk) only when it holds a string, number or boolean.
    Optional,
}

/// The skeleton's treatment of `field`.
pub(crate) fn plan_entry(field: &'static Field) -> PlanEntry {
    match (&field.shape, field.required) {
        (_, false) => PlanEntry::Optional,
        (Shape::Object(fields), true) => PlanEntry::Nested(fields),
        (_, true) => PlanEntry::Required,
    }
}
