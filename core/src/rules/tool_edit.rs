//! Tool-argument edits as one rule: what the session runs when a debugger edits a held tool
//! call's arguments, and what a skin's helpers (`validateInput`, `toolSchemaCheck`,
//! `editedArgs`) answer with, so a check made outside a gate says exactly what the gate
//! would.
//!
//! - [`check_edit`]: the whole check of a proposed input, in the session's order: the
//!   placeholder / truncation guard, the deep-merge pollution paths, the merge into the live
//!   arguments ([`edit_input::merge_edited_input`]), then the tool's JSON Schema
//!   ([`InputSchema`]).
//! - [`edited_args`]: the arguments a decision hands the call (an accepted edit rides only on
//!   `continue` at `before` or `retry` at `after` / `error`).
//! - [`describe_issues`]: a validator's issues (zod 3 / 4, any Standard Schema), run by the
//!   host because only the host can run them, as one short refusal message that names the
//!   field (a JSON pointer) and the problem, never a value and never the validator's own
//!   message (it may quote what it received).
//!
//! Nothing here panics.

use crate::edit_input::{self, EditRefusal, InputValidation};
use crate::edit_schema::InputSchema;
use crate::event::{RefusalCode, ResumeAction};
use crate::json::{JsStr, Value};

pub use crate::edit_schema::SCHEMA_REFUSAL_PREFIX;

/// At most this many path segments of an issue are read.
const MAX_PATH_SEGMENTS: usize = 32;

/// A key longer than this many characters is shortened in a message.
const MAX_KEY_IN_MESSAGE: usize = 48;

/// At most this many unrecognised keys are named.
const MAX_NAMED_KEYS: usize = 3;

/// The whole check of an edited tool input, as the session runs it at a held gate: refused
/// when it carries a placeholder or truncation marker, a pollution path, is not an object,
/// or (merged into `live`, which contributes nothing when `input_hidden`) does not match
/// `schema`. `Ok` holds the merged arguments the call runs with.
pub fn check_edit(
    live: Option<&Value>,
    proposed: Option<&Value>,
    input_hidden: bool,
    schema: Option<&InputSchema>,
) -> Result<Value, EditRefusal> {
    if let Some(value) = proposed {
        edit_input::check_proposed_value(value)?;
    }
    // The merge refuses a non-object and the pollution paths at any depth (`shape`).
    let merged = edit_input::merge_edited_input(live, proposed, input_hidden)?;
    if let Some(schema) = schema {
        schema.check(&merged)?;
    }
    Ok(merged)
}

/// [`check_edit`] as a validation verdict (`{ok: true, value}` / `{ok: false, code, message}`).
pub fn validate_edit(
    live: Option<&Value>,
    proposed: Option<&Value>,
    input_hidden: bool,
    schema: Option<&InputSchema>,
) -> InputValidation {
    match check_edit(live, proposed, input_hidden, schema) {
        Ok(merged) => InputValidation::Accepted(merged),
        Err(refusal) => refusal.into(),
    }
}

/// [`InputSchema::check`] as a verdict: the value itself when it matches.
pub fn schema_verdict(schema: &InputSchema, value: &Value) -> InputValidation {
    match schema.check(value) {
        Ok(()) => InputValidation::Accepted(value.clone()),
        Err(refusal) => refusal.into(),
    }
}

/// The edited arguments a decision (`{action, output?, input?}`, as a binding hands it out)
/// carries: its `input` on `continue` or `retry`, else `None` (the call keeps its own).
pub fn edited_args(decision: &Value) -> Option<&Value> {
    let action = decision
        .get("action")?
        .as_str()
        .and_then(ResumeAction::parse)?;
    match action {
        ResumeAction::Continue | ResumeAction::Retry => decision.get("input"),
        _ => None,
    }
}

// -- validator issues ----------------------------------------------------------------------

/// One segment of an issue's path.
enum Segment {
    Key(String),
    Index(i64),
}

/// An issue's path: keys, indices, or `{key}` objects (Standard Schema), at most
/// [`MAX_PATH_SEGMENTS`].
fn read_path(raw: Option<&Value>) -> Vec<Segment> {
    let Some(Value::Array(items)) = raw else {
        return Vec::new();
    };
    items
        .iter()
        .take(MAX_PATH_SEGMENTS)
        .filter_map(|entry| {
            let segment = match entry {
                Value::Object(m) => m.get("key")?,
                other => other,
            };
            match segment {
                Value::String(s) => Some(Segment::Key(s.to_string_lossy().into_owned())),
                Value::Number(n) => {
                    let f = n.as_f64();
                    (f.fract() == 0.0 && f.is_finite()).then_some(Segment::Index(f as i64))
                }
                _ => None,
            }
        })
        .collect()
}

/// A key as a JSON pointer segment (`~` and `/` escaped), shortened past
/// [`MAX_KEY_IN_MESSAGE`] characters.
fn pointer_segment(key: &str) -> String {
    let escaped = key.replace('~', "~0").replace('/', "~1");
    if escaped.chars().count() > MAX_KEY_IN_MESSAGE {
        let cut: String = escaped.chars().take(MAX_KEY_IN_MESSAGE - 1).collect();
        format!("{cut}…")
    } else {
        escaped
    }
}

/// The path as a JSON pointer (`/` for the arguments object itself).
fn pointer(path: &[Segment]) -> String {
    if path.is_empty() {
        return "/".into();
    }
    let mut out = String::new();
    for segment in path {
        out.push('/');
        match segment {
            Segment::Key(k) => out.push_str(&pointer_segment(k)),
            Segment::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
}

/// The value at `path` inside `root` (`None` when absent).
fn value_at<'a>(root: Option<&'a Value>, path: &[Segment]) -> Option<&'a Value> {
    let mut current = root?;
    for segment in path {
        current = match (segment, current) {
            (Segment::Key(k), Value::Object(m)) => m.get(k)?,
            (Segment::Index(i), Value::Array(items)) => items.get(usize::try_from(*i).ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// A value's JSON type for a message (`integer` for whole numbers). Never the value.
fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Number(n) if n.as_f64().fract() == 0.0 => "integer",
        other => other.type_name(),
    }
}

/// A short identifier from an issue (a type or format name), else `None`: a field that could
/// carry a value is never echoed.
fn identifier(value: Option<&Value>) -> Option<&str> {
    let s = value?.as_str()?;
    let mut chars = s.chars();
    let first = chars.next()?;
    let ok = s.len() <= 32
        && (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' '));
    ok.then_some(s)
}

/// A schema bound (a finite number, or a bigint's digits) as text.
fn bound(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::Number(n) if n.as_f64().is_finite() => {
            Some(crate::json::to_string(&Value::Number(n.clone())))
        }
        Value::String(s) => {
            let s = s.as_str()?;
            let digits = s.strip_prefix('-').unwrap_or(s);
            (!digits.is_empty() && digits.len() <= 40 && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.to_string())
        }
        _ => None,
    }
}

/// A size issue (`too_small` / `too_big`) in words.
fn size_problem(issue: &Value, big: bool) -> String {
    let origin = identifier(issue.get("origin")).or_else(|| identifier(issue.get("type")));
    let limit = bound(issue.get(if big { "maximum" } else { "minimum" }));
    let (what, unit) = match (origin, big) {
        (Some("string"), false) => ("too short", " characters"),
        (Some("string"), true) => ("too long", " characters"),
        (Some("array" | "set"), false) => ("too few items", ""),
        (Some("array" | "set"), true) => ("too many items", ""),
        (Some("date"), false) => return "too early".into(),
        (Some("date"), true) => return "too late".into(),
        (_, false) => ("too small", ""),
        (_, true) => ("too large", ""),
    };
    match limit {
        Some(n) => format!(
            "{what} ({} {n}{unit})",
            if big { "at most" } else { "at least" }
        ),
        None => what.into(),
    }
}

/// What one issue says is wrong, from its code and bounds only; `at`: the value at its path.
fn issue_problem(issue: &Value, at: Option<&Value>) -> String {
    let code = issue.get("code").and_then(Value::as_str).unwrap_or("");
    match code {
        "invalid_type" => {
            let expected = identifier(issue.get("expected"));
            match (at, expected) {
                (None, Some(t)) => format!("missing (expected {t})"),
                (None, None) => "missing".into(),
                (Some(v), Some(t)) => format!("expected {t}, got {}", type_of(v)),
                (Some(v), None) => format!("the wrong type ({})", type_of(v)),
            }
        }
        "too_small" => size_problem(issue, false),
        "too_big" => size_problem(issue, true),
        "invalid_value" | "invalid_enum_value" | "invalid_literal" => "not an allowed value".into(),
        "unrecognized_keys" => {
            let keys: Vec<String> = match issue.get("keys") {
                Some(Value::Array(k)) => k
                    .iter()
                    .filter_map(|k| k.as_js_str().map(|s| s.to_string_lossy().into_owned()))
                    .collect(),
                _ => Vec::new(),
            };
            if keys.is_empty() {
                return "keys the schema does not allow".into();
            }
            let named: Vec<String> = keys
                .iter()
                .take(MAX_NAMED_KEYS)
                .map(|k| format!("\"{}\"", pointer_segment(k)))
                .collect();
            let more = if keys.len() > MAX_NAMED_KEYS {
                ", …"
            } else {
                ""
            };
            format!("keys the schema does not allow: {}{more}", named.join(", "))
        }
        "invalid_format" | "invalid_string" => {
            match identifier(issue.get("format")).or_else(|| identifier(issue.get("validation"))) {
                Some(f) => format!("not a valid {f}"),
                None => "not in the expected format".into(),
            }
        }
        "not_multiple_of" => {
            match bound(issue.get("divisor")).or_else(|| bound(issue.get("multipleOf"))) {
                Some(d) => format!("not a multiple of {d}"),
                None => "not an allowed multiple".into(),
            }
        }
        "invalid_union" | "invalid_union_discriminator" => "none of the allowed shapes".into(),
        "invalid_date" => "not a valid date".into(),
        "not_finite" => "not a finite number".into(),
        "custom" => "refused by a check of the tool's schema".into(),
        _ => "invalid".into(),
    }
}

/// A validator's issues (`value`: the arguments it judged, read only for the type at a path)
/// as one refusal message: the first issue's place and problem, and how many more there are.
/// Built from the issue's code, path and the schema's bounds only.
pub fn describe_issues(issues: &Value, value: Option<&Value>) -> JsStr {
    let generic = || JsStr::from(SCHEMA_REFUSAL_PREFIX);
    let Some(items) = issues.as_array() else {
        return generic();
    };
    let Some(first @ Value::Object(_)) = items.first() else {
        return generic();
    };
    let path = read_path(first.get("path"));
    let problem = issue_problem(first, value_at(value, &path));
    let more = match items.len() {
        0 | 1 => String::new(),
        n => format!("; {} more problem{}", n - 1, if n > 2 { "s" } else { "" }),
    };
    let text = format!(
        "{SCHEMA_REFUSAL_PREFIX} (at {}: {problem}{more})",
        pointer(&path)
    );
    edit_input::sanitize_text(&JsStr::from(text)).unwrap_or_else(generic)
}

/// [`describe_issues`] as a `schema` refusal verdict.
pub fn issues_verdict(issues: &Value, value: Option<&Value>) -> InputValidation {
    InputValidation::Refused {
        code: RefusalCode::Schema,
        message: Some(describe_issues(issues, value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_str;

    fn v(text: &str) -> Value {
        parse_str(text).unwrap()
    }

    #[test]
    fn the_whole_check_runs_in_the_sessions_order() {
        let schema = InputSchema::compile(&v(
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        ))
        .unwrap();
        let live = v(r#"{"city":"Faro","days":3}"#);
        let ok = check_edit(
            Some(&live),
            Some(&v(r#"{"city":"Porto"}"#)),
            false,
            Some(&schema),
        );
        assert_eq!(ok.unwrap(), v(r#"{"city":"Porto","days":3}"#));
        let refuse = |p: &str, hidden| {
            check_edit(Some(&live), Some(&v(p)), hidden, Some(&schema))
                .unwrap_err()
                .code
        };
        assert_eq!(
            refuse(r#"{"city":"__REDACTED__"}"#, false),
            RefusalCode::Placeholder
        );
        assert_eq!(
            refuse(r#"{"__proto__":{"x":1}}"#, false),
            RefusalCode::Shape
        );
        assert_eq!(refuse(r#"[1]"#, false), RefusalCode::Shape);
        assert_eq!(refuse(r#"{"city":7}"#, false), RefusalCode::Schema);
        // Hidden: the live city does not complete the edit, so `required` fails.
        assert_eq!(refuse(r#"{"days":4}"#, true), RefusalCode::Schema);
        assert_eq!(
            check_edit(None, None, false, None).unwrap_err().code,
            RefusalCode::Shape
        );
    }

    #[test]
    fn edited_args_ride_on_continue_and_retry_only() {
        assert_eq!(
            edited_args(&v(r#"{"action":"continue","input":{"a":1}}"#)),
            Some(&v(r#"{"a":1}"#))
        );
        assert_eq!(
            edited_args(&v(r#"{"action":"retry","input":null}"#)),
            Some(&Value::Null)
        );
        assert_eq!(edited_args(&v(r#"{"action":"continue"}"#)), None);
        assert_eq!(
            edited_args(&v(r#"{"action":"inject","output":1,"input":{"a":1}}"#)),
            None
        );
        assert_eq!(edited_args(&v(r#"{"action":"abort"}"#)), None);
        assert_eq!(edited_args(&v(r#"{"input":{}}"#)), None);
    }

    #[test]
    fn issues_name_the_place_and_the_problem_never_the_value() {
        let secret = "SECRET-9f3";
        let cases = [
            (
                r#"{"code":"invalid_type","expected":"string","path":["q"]}"#,
                r#"{"q":5}"#,
                "(at /q: expected string, got integer)",
            ),
            (
                r#"{"code":"invalid_type","expected":"string","path":["q"]}"#,
                "{}",
                "(at /q: missing (expected string))",
            ),
            (
                r#"{"code":"too_small","origin":"string","minimum":3,"path":["q"]}"#,
                r#"{"q":"a"}"#,
                "(at /q: too short (at least 3 characters))",
            ),
            (
                r#"{"code":"too_big","origin":"number","maximum":10,"path":["n"]}"#,
                "{}",
                "(at /n: too large (at most 10))",
            ),
            (
                r#"{"code":"too_small","type":"array","minimum":1,"path":["tags"]}"#,
                "{}",
                "(at /tags: too few items (at least 1))",
            ),
            (
                r#"{"code":"invalid_value","values":["SECRET-9f3"],"path":["m"]}"#,
                "{}",
                "(at /m: not an allowed value)",
            ),
            (
                r#"{"code":"unrecognized_keys","keys":["x","a/b"],"path":[]}"#,
                "{}",
                "(at /: keys the schema does not allow: \"x\", \"a~1b\")",
            ),
            (
                r#"{"code":"invalid_format","format":"email","path":["e"]}"#,
                "{}",
                "(at /e: not a valid email)",
            ),
            (
                r#"{"code":"custom","message":"bad SECRET-9f3","path":[{"key":"c"},0]}"#,
                "{}",
                "(at /c/0: refused by a check of the tool's schema)",
            ),
            (
                r#"{"message":"SECRET-9f3","path":["s"],"expected":"SECRET-9f3 x!"}"#,
                "{}",
                "(at /s: invalid)",
            ),
        ];
        for (issue, value, want) in cases {
            let got = describe_issues(&v(&format!("[{issue}]")), Some(&v(value))).to_string();
            assert!(
                got.starts_with(SCHEMA_REFUSAL_PREFIX) && got.ends_with(want),
                "{issue}: {got}"
            );
            assert!(!got.contains(secret), "{got}");
        }
        let two =
            describe_issues(&v(r#"[{"code":"custom","path":["a"]},{},{}]"#), None).to_string();
        assert!(two.ends_with("; 2 more problems)"), "{two}");
        assert_eq!(
            describe_issues(&v(r#""nope""#), None).to_string(),
            SCHEMA_REFUSAL_PREFIX
        );
        let long = describe_issues(
            &v(&format!(
                r#"[{{"code":"custom","path":["{}"]}}]"#,
                "k".repeat(300)
            )),
            None,
        );
        assert!(long.to_string().chars().count() <= edit_input::MAX_REFUSAL_MESSAGE);
    }
}
