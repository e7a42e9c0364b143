//! Edited input and the inject guard: the pure checks a held call's edited input
//! (`exec.resume.input`) or an injected output goes through before it may run.
//!
//! - [`proposed_value_refusal`]: a value carrying the redaction placeholder or a truncation
//!   marker is a pre-filled copy of something its sender never saw in full; it is refused
//!   (`placeholder` / `truncated`) wherever it appears, by a test over its compact JSON text.
//! - [`prototype_key_refusal`]: the two deep-merge pollution payloads (an own `__proto__`
//!   key, a `constructor.prototype` path) are refused (`shape`) at any depth.
//! - [`normalize_validation`]: a validator is host code; whatever it returns is read into
//!   one of the two documented verdicts, with a short printable message.
//! - [`merge_edited_input`]: the default edit rule for tool arguments.
//!
//! Nothing here panics. Codes and messages never quote the values they judge.

use crate::json::{self, JsStr, Map, Value};
use crate::redact::REDACTED;

/// `exec.refused.message` is cut to this many UTF-16 code units.
pub const MAX_REFUSAL_MESSAGE: usize = 200;

/// The suffix the shrinker appends to a cut string.
pub const TRUNCATION_SUFFIX: &str = "…[graphmind: truncated]";

/// How the read-only MCP server's `get_node` preview note begins.
pub const MCP_PREVIEW_NOTE_PREFIX: &str = "payload truncated: showing first ";

/// Why an edit was refused: the wire's closed vocabulary (`exec.refused.code`).
pub use crate::event::RefusalCode;

/// A refusal the client itself decided: a code and a message that quotes no value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct EditRefusal {
    /// The wire code.
    pub code: RefusalCode,
    /// What `exec.refused.message` says.
    pub message: String,
}

impl EditRefusal {
    fn new(code: RefusalCode, message: impl Into<String>) -> Self {
        EditRefusal {
            code,
            message: message.into(),
        }
    }
}

/// A validator's verdict, in one of the two documented shapes.
#[derive(Clone, Debug, PartialEq)]
pub enum InputValidation {
    /// Run the call with this value.
    Accepted(Value),
    /// Refuse the edit (the gate stays held).
    Refused {
        /// The wire code.
        code: RefusalCode,
        /// A sanitised message, when there is one.
        message: Option<JsStr>,
    },
}

impl InputValidation {
    /// The verdict as JSON: `{ok: true, value}` or `{ok: false, code, message?}`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::with_capacity(3);
        match self {
            InputValidation::Accepted(v) => {
                m.push_unique("ok".into(), Value::Bool(true));
                m.push_unique("value".into(), v.clone());
            }
            InputValidation::Refused { code, message } => {
                m.push_unique("ok".into(), Value::Bool(false));
                m.push_unique("code".into(), Value::from(code.as_str()));
                if let Some(msg) = message {
                    m.push_unique("message".into(), Value::String(msg.clone()));
                }
            }
        }
        Value::Object(m)
    }
}

impl From<EditRefusal> for InputValidation {
    fn from(r: EditRefusal) -> Self {
        InputValidation::Refused {
            code: r.code,
            message: Some(JsStr::from(r.message)),
        }
    }
}

/// The message of a validator that failed or returned something unreadable.
pub const VALIDATOR_FAILED_MESSAGE: &str = "the input could not be validated";

/// What a validator that raises, fails or returns garbage amounts to.
pub fn validator_failed() -> InputValidation {
    InputValidation::Refused {
        code: RefusalCode::Shape,
        message: Some(VALIDATOR_FAILED_MESSAGE.into()),
    }
}

// -- placeholders and truncation markers ------------------------------------------------

/// Markers found as plain substrings of the compact JSON text. The LangGraph and MCP ones
/// are written with their quotes, so they match a real key/value pair and never the
/// escaped text of a string that merely mentions them.
const TRUNCATION_MARKERS: [&str; 5] = [
    "__graphmindTruncated",
    TRUNCATION_SUFFIX,
    "\"__graphmind\":\"truncated\"",
    "\"__graphmind\":\"unserializable\"",
    "\"note\":\"payload truncated: showing first ",
];

/// One piece of a recording-bound pattern.
#[derive(Clone, Copy)]
enum Piece {
    Lit(&'static str),
    /// One or more ASCII digits.
    Digits,
}

/// A recording-bound marker of the Python SDK, as a pattern over the compact JSON text:
/// what may stand before it, its body, and what may follow it.
struct BoundMarker {
    /// `None`: anything; else the bytes allowed right before it, and whether the start of
    /// the text is allowed too.
    before: Option<(&'static [u8], bool)>,
    body: &'static [Piece],
    /// `None`: anything; else the bytes allowed right after it, and whether the end of the
    /// text is allowed too.
    after: Option<(&'static [u8], bool)>,
}

/// Where a value or member can start / end in compact JSON.
const VALUE_BEFORE: Option<(&[u8], bool)> = Some((b"[:,", true));
const VALUE_AFTER: Option<(&[u8], bool)> = Some((b",]}", true));

const PYTHON_BOUND_MARKERS: [BoundMarker; 5] = [
    // `…[truncated]"`: a string cut at 20,000 characters.
    BoundMarker {
        before: None,
        body: &[Piece::Lit("…[truncated]\"")],
        after: None,
    },
    // `"<N bytes>"` as a whole value.
    BoundMarker {
        before: VALUE_BEFORE,
        body: &[Piece::Lit("\"<"), Piece::Digits, Piece::Lit(" bytes>\"")],
        after: VALUE_AFTER,
    },
    // `"…[depth limit]"` as a whole value.
    BoundMarker {
        before: VALUE_BEFORE,
        body: &[Piece::Lit("\"…[depth limit]\"")],
        after: VALUE_AFTER,
    },
    // `"…":"[N more keys]"` as an object member.
    BoundMarker {
        before: Some((b"{,", false)),
        body: &[
            Piece::Lit("\"…\":\"["),
            Piece::Digits,
            Piece::Lit(" more keys]\""),
        ],
        after: Some((b",}", false)),
    },
    // `"…[N more]"` as a whole value.
    BoundMarker {
        before: VALUE_BEFORE,
        body: &[Piece::Lit("\"…["), Piece::Digits, Piece::Lit(" more]\"")],
        after: VALUE_AFTER,
    },
];

impl BoundMarker {
    /// Whether the marker occurs anywhere in `text`.
    fn found_in(&self, text: &str) -> bool {
        let Piece::Lit(first) = self.body[0] else {
            return false;
        };
        let bytes = text.as_bytes();
        let mut from = 0;
        while let Some(offset) = text[from..].find(first) {
            let start = from + offset;
            // No first literal can overlap itself, and this stays on a char boundary.
            from = start + first.len();
            let before_ok = match self.before {
                None => true,
                Some((set, edge)) => {
                    if start == 0 {
                        edge
                    } else {
                        set.contains(&bytes[start - 1])
                    }
                }
            };
            if !before_ok {
                continue;
            }
            let Some(end) = self.body_end(bytes, start) else {
                continue;
            };
            let after_ok = match self.after {
                None => true,
                Some((set, edge)) => {
                    if end == bytes.len() {
                        edge
                    } else {
                        set.contains(&bytes[end])
                    }
                }
            };
            if after_ok {
                return true;
            }
        }
        false
    }

    /// Where the body ends when it matches at `start`.
    fn body_end(&self, text: &[u8], start: usize) -> Option<usize> {
        let mut pos = start;
        for piece in self.body {
            match piece {
                Piece::Lit(lit) => {
                    if !text[pos..].starts_with(lit.as_bytes()) {
                        return None;
                    }
                    pos += lit.len();
                }
                Piece::Digits => {
                    let n = text[pos..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit())
                        .count();
                    if n == 0 {
                        return None;
                    }
                    pos += n;
                }
            }
        }
        Some(pos)
    }
}

/// The refusal code for a proposed input or inject output: `placeholder` when its compact
/// JSON text contains `"__REDACTED__"`; else `truncated` when it contains a truncation
/// marker (the shrink's, LangGraph's, the MCP preview's, or a Python recording bound);
/// `None` when clean.
pub fn proposed_value_refusal(value: &Value) -> Option<RefusalCode> {
    let text = json::to_string(value);
    if text.contains(REDACTED) {
        return Some(RefusalCode::Placeholder);
    }
    if TRUNCATION_MARKERS.iter().any(|m| text.contains(m))
        || PYTHON_BOUND_MARKERS.iter().any(|m| m.found_in(&text))
    {
        return Some(RefusalCode::Truncated);
    }
    None
}

/// [`proposed_value_refusal`] with the message `exec.refused` carries.
pub fn check_proposed_value(value: &Value) -> Result<(), EditRefusal> {
    match proposed_value_refusal(value) {
        None => Ok(()),
        Some(RefusalCode::Placeholder) => Err(EditRefusal::new(
            RefusalCode::Placeholder,
            "the value contains redacted content (\"__REDACTED__\"); replace it before running",
        )),
        Some(code) => Err(EditRefusal::new(
            code,
            "the value contains a truncated preview, not the full value; replace it before running",
        )),
    }
}

// -- prototype pollution ---------------------------------------------------------------

/// A deep-merge pollution path found in an edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollutionPath {
    /// An object with an own `"__proto__"` key.
    Proto,
    /// A `"constructor"` key holding an object that has a `"prototype"` key.
    ConstructorPrototype,
}

impl PollutionPath {
    fn message(self, subject: &str) -> String {
        match self {
            PollutionPath::Proto => format!("{subject} may not contain a \"__proto__\" key"),
            PollutionPath::ConstructorPrototype => {
                format!("{subject} may not contain a \"constructor.prototype\" path")
            }
        }
    }
}

/// The first deep-merge pollution path in `value` at any depth (objects and arrays
/// walked), if any.
pub fn pollution_path(value: &Value) -> Option<PollutionPath> {
    let mut stack: Vec<&Value> = vec![value];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(m) => {
                if m.contains_key("__proto__") {
                    return Some(PollutionPath::Proto);
                }
                if let Some(Value::Object(ctor)) = m.get("constructor") {
                    if ctor.contains_key("prototype") {
                        return Some(PollutionPath::ConstructorPrototype);
                    }
                }
                stack.extend(
                    m.values()
                        .filter(|v| matches!(v, Value::Object(_) | Value::Array(_))),
                );
            }
            Value::Array(items) => {
                stack.extend(
                    items
                        .iter()
                        .filter(|v| matches!(v, Value::Object(_) | Value::Array(_))),
                );
            }
            _ => {}
        }
    }
    None
}

/// Refusal (`shape`) for an edited input that holds a pollution path at any depth; the
/// session applies it to every edit, with or without an adapter validator.
pub fn prototype_key_refusal(value: &Value) -> Option<EditRefusal> {
    pollution_path(value)
        .map(|p| EditRefusal::new(RefusalCode::Shape, p.message("the edited input")))
}

// -- short wire text ---------------------------------------------------------------------

/// C0/C1 controls and the bidi marks, overrides and isolates.
fn unprintable(unit: u16) -> bool {
    matches!(unit, 0x0000..=0x001f | 0x007f..=0x009f | 0x200e | 0x200f | 0x202a..=0x202e | 0x2066..=0x2069)
}

/// JavaScript's `\s` (and what `String.prototype.trim` removes).
fn js_whitespace(unit: u16) -> bool {
    matches!(
        unit,
        0x0009..=0x000d
            | 0x0020
            | 0x00a0
            | 0x1680
            | 0x2000..=0x200a
            | 0x2028
            | 0x2029
            | 0x202f
            | 0x205f
            | 0x3000
            | 0xfeff
    )
}

/// Short free text fit for the wire (a refusal message): unprintable characters become
/// spaces, whitespace runs collapse to one space, the ends are trimmed, and text longer
/// than [`MAX_REFUSAL_MESSAGE`] UTF-16 code units is cut to one fewer (never splitting a
/// surrogate pair) plus `…`. `None` when it is not a string or nothing is left.
pub fn sanitize_short_text(message: Option<&Value>) -> Option<JsStr> {
    match message {
        Some(Value::String(s)) => sanitize_text(s),
        _ => None,
    }
}

/// [`sanitize_short_text`] for a string.
pub fn sanitize_text(text: &JsStr) -> Option<JsStr> {
    let mut units: Vec<u16> = Vec::with_capacity(text.len());
    let mut in_space = false;
    for unit in text.utf16_units() {
        if unprintable(unit) || js_whitespace(unit) {
            if !in_space {
                units.push(0x20);
                in_space = true;
            }
        } else {
            units.push(unit);
            in_space = false;
        }
    }
    let start = units.iter().position(|&u| u != 0x20).unwrap_or(units.len());
    let end = units
        .iter()
        .rposition(|&u| u != 0x20)
        .map_or(start, |i| i + 1);
    let mut units = units[start..end].to_vec();
    if units.len() > MAX_REFUSAL_MESSAGE {
        let mut cut = MAX_REFUSAL_MESSAGE - 1;
        if (0xd800..=0xdbff).contains(&units[cut - 1]) {
            cut -= 1;
        }
        units.truncate(cut);
        units.push(0x2026);
    }
    if units.is_empty() {
        None
    } else {
        Some(JsStr::from_utf16(&units))
    }
}

// -- validator results -------------------------------------------------------------------

/// One read of a validator's result into a documented verdict. Anything that is not
/// `{ok: true, value}` or `{ok: false, code}` with a known code is a `shape` refusal with a
/// generic message; `ok` must be the boolean itself; extra fields are dropped; a message
/// goes through [`sanitize_short_text`]. `None` is a validator that returned nothing.
pub fn normalize_validation(result: Option<&Value>) -> InputValidation {
    let Some(Value::Object(r)) = result else {
        return validator_failed();
    };
    match r.get("ok") {
        Some(Value::Bool(true)) => match r.get("value") {
            Some(v) => InputValidation::Accepted(v.clone()),
            None => validator_failed(),
        },
        Some(Value::Bool(false)) => {
            let Some(code) = r
                .get("code")
                .and_then(Value::as_str)
                .and_then(RefusalCode::parse)
            else {
                return validator_failed();
            };
            InputValidation::Refused {
                code,
                message: sanitize_short_text(r.get("message")),
            }
        }
        _ => validator_failed(),
    }
}

// -- the default edit rule for tool arguments ------------------------------------------

/// The default edit rule for tool arguments: `edit` must be a JSON object; its top-level
/// keys replace the live ones (in the live input's key order, new keys after) and every
/// key it does not mention keeps its LIVE value; nested values are replaced whole. A live
/// input that is absent or not an object contributes no keys, and neither does any live
/// input when `input_hidden` (a switch hides it from the record, so only a full
/// replacement may run: merging would let repeated guesses probe the hidden values).
///
/// Refused (`shape`): an edit that is absent or not an object, or that holds a
/// `__proto__` key or a `constructor.prototype` path at any depth.
pub fn merge_edited_input(
    live: Option<&Value>,
    edit: Option<&Value>,
    input_hidden: bool,
) -> Result<Value, EditRefusal> {
    let Some(Value::Object(proposed)) = edit else {
        return Err(EditRefusal::new(
            RefusalCode::Shape,
            "the edited arguments must be a JSON object",
        ));
    };
    if let Some(path) = pollution_path(edit.unwrap_or(&Value::Null)) {
        return Err(EditRefusal::new(
            RefusalCode::Shape,
            path.message("the edited arguments"),
        ));
    }
    let mut out = match live {
        Some(Value::Object(base)) if !input_hidden => base.clone(),
        _ => Map::with_capacity(proposed.len()),
    };
    for (k, v) in proposed.iter() {
        out.insert(k.clone(), v.clone());
    }
    Ok(Value::Object(out))
}
