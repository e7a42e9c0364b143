//! A host's own cap on the payloads it records (LangGraph's `maxPayloadChars`): a node
//! input or output whose JSON text is longer than the cap is recorded as a preview,
//! `{"__graphmind": "truncated", "preview": <its first max characters>, "chars": <length>}`.
//!
//! Without a cap nothing changes: the session already shrinks every event to the wire
//! budget at emit (`crate::shrink`). The cap is for hosts whose states are large and whose
//! users want them short on the canvas. It applies to what is recorded only; the app's
//! values are never touched.

use crate::host_value::HostValue;
use crate::json::{self, Map, Value};

/// The marker key of a capped payload.
pub const MARKER_KEY: &str = "__graphmind";
/// The marker value of a capped payload.
pub const TRUNCATED: &str = "truncated";

/// `value`, or its preview when its JSON text is longer than `max_chars` characters (a
/// string: the string itself). `None`: no cap.
pub fn cap_value(value: Value, max_chars: Option<usize>) -> Value {
    let Some(max) = max_chars else { return value };
    match &value {
        Value::String(s) => {
            let text = s.to_string_lossy();
            preview_if_longer(&text, max).unwrap_or(value)
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => value,
        _ => preview_if_longer(&json::to_string(&value), max).unwrap_or(value),
    }
}

/// [`cap_value`] of a value as a binding hands it over: JSON text is measured without
/// being parsed (a value within the cap costs one pass over its bytes).
pub fn cap_host(value: HostValue, max_chars: Option<usize>) -> HostValue {
    let Some(max) = max_chars else { return value };
    match value {
        HostValue::Text(bytes) => {
            if char_count(&bytes) <= max {
                return HostValue::Text(bytes);
            }
            HostValue::Built(cap_value(
                HostValue::Text(bytes).into_value().value,
                Some(max),
            ))
        }
        other => HostValue::Built(cap_value(other.into_value().value, Some(max))),
    }
}

fn char_count(bytes: &[u8]) -> usize {
    // UTF-8: every byte that is not a continuation byte starts a character.
    bytes.iter().filter(|b| (**b & 0xC0) != 0x80).count()
}

fn preview_if_longer(text: &str, max: usize) -> Option<Value> {
    let chars = text.chars().count();
    if chars <= max {
        return None;
    }
    let preview: String = text.chars().take(max).collect();
    let mut out = Map::with_capacity(3);
    out.insert(MARKER_KEY, Value::from(TRUNCATED));
    out.insert("preview", Value::from(preview));
    out.insert("chars", Value::from(chars as u64));
    Some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> HostValue {
        HostValue::Text(s.as_bytes().to_vec())
    }

    #[test]
    fn within_the_cap_or_without_one_nothing_changes() {
        assert_eq!(
            cap_host(text(r#"{"a":"bc"}"#), Some(10)),
            text(r#"{"a":"bc"}"#)
        );
        assert_eq!(
            cap_host(text(r#"{"a":"long"}"#), None),
            text(r#"{"a":"long"}"#)
        );
        assert_eq!(cap_value(Value::from(12i64), Some(1)), Value::from(12i64));
    }

    #[test]
    fn longer_values_become_a_preview_with_their_length() {
        let capped = cap_host(text(r#"{"state":"ééééé"}"#), Some(5));
        let HostValue::Built(v) = capped else {
            panic!("built")
        };
        assert_eq!(
            json::to_string(&v),
            r#"{"__graphmind":"truncated","preview":"{\"sta","chars":17}"#
        );
        let s = cap_value(Value::from("abcdef"), Some(3));
        assert_eq!(
            json::to_string(&s),
            r#"{"__graphmind":"truncated","preview":"abc","chars":6}"#
        );
    }
}
