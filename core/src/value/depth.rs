//! The depth budget of a recorded value: how deeply a node's input or output, an emitted
//! payload or a run's meta may nest so that the whole frame around it (envelope, payload,
//! the viewer relay's wrapper, the HTTP API's list) stays within the server's nesting
//! limit ([`MAX_FRAME_DEPTH`]). Deeper containers are cut: the container at
//! [`MAX_VALUE_DEPTH`] is replaced by [`depth_cut_marker`], the shrink module's "deeply
//! nested" marker, so a cyclic or very deep value is recorded (cut, and marked as cut)
//! instead of the server refusing the frame and the node's events vanishing.

use crate::json::{Map, Value, MAX_JSON_DEPTH};

/// Deepest nesting the server accepts in one frame (its parser's limit).
pub const MAX_FRAME_DEPTH: usize = MAX_JSON_DEPTH;

/// Levels kept free for what wraps a value on its way: the envelope and its payload (2),
/// a field inside an LLM message list (up to 3 more), the viewer relay's `{type,
/// envelope}` and the API's `{events: [...]}` (3 more).
pub const ENVELOPE_DEPTH_RESERVE: usize = 8;

/// Deepest nesting of a recorded value, the cut marker included (a value that is itself a
/// container is at level 1).
pub const MAX_VALUE_DEPTH: usize = MAX_FRAME_DEPTH - ENVELOPE_DEPTH_RESERVE;

/// The marker key every shrunk or cut value carries.
pub(crate) const MARKER: &str = "__graphmindTruncated";

/// What the preview of a cut container says.
pub const DEPTH_CUT_PREVIEW: &str = "[deeply nested]";

/// Whether a container at `level` (1 for a top-level container) is cut.
#[inline]
pub fn is_cut_level(level: usize) -> bool {
    level >= MAX_VALUE_DEPTH
}

/// The marker that stands for a container nested too deep (or a cycle):
/// `{"__graphmindTruncated": true, "bytes": 0, "preview": "[deeply nested]"}`.
pub fn depth_cut_marker() -> Value {
    let mut map = Map::with_capacity(3);
    map.push_unique(MARKER.into(), Value::Bool(true));
    map.push_unique("bytes".into(), Value::from(0u64));
    map.push_unique("preview".into(), Value::from(DEPTH_CUT_PREVIEW));
    Value::Object(map)
}

/// Whether `value` is the cut marker.
pub fn is_depth_cut_marker(value: &Value) -> bool {
    *value == depth_cut_marker()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, parse_value_text, to_string};

    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    fn depth(v: &Value) -> usize {
        match v {
            Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
            Value::Object(map) => 1 + map.iter().map(|(_, v)| depth(v)).max().unwrap_or(0),
            _ => 0,
        }
    }

    #[test]
    fn the_budget_leaves_room_for_the_envelope() {
        assert_eq!(MAX_VALUE_DEPTH + ENVELOPE_DEPTH_RESERVE, MAX_FRAME_DEPTH);
        assert!(!is_cut_level(MAX_VALUE_DEPTH - 1));
        assert!(is_cut_level(MAX_VALUE_DEPTH));
    }

    #[test]
    fn the_marker_is_the_shrink_marker_and_parses_back() {
        let text = to_string(&depth_cut_marker());
        assert_eq!(
            text,
            r#"{"__graphmindTruncated":true,"bytes":0,"preview":"[deeply nested]"}"#
        );
        assert!(is_depth_cut_marker(&parse(text.as_bytes()).unwrap()));
        assert_eq!(depth(&parse(nested(3).as_bytes()).unwrap()), 3);
    }

    #[test]
    fn text_of_any_depth_is_cut_at_the_budget_and_marked() {
        for levels in [MAX_VALUE_DEPTH, 511, 512, 1000, 3000, 100_000] {
            let v = parse_value_text(nested(levels).as_bytes()).unwrap();
            assert_eq!(depth(&v), MAX_VALUE_DEPTH, "{levels} levels");
            let mut inner = &v;
            while let Value::Array(items) = inner {
                inner = &items[0];
            }
            assert!(
                is_depth_cut_marker(inner),
                "{levels} levels end in the marker"
            );
        }
        let shallow = nested(MAX_VALUE_DEPTH - 1);
        assert_eq!(
            parse_value_text(shallow.as_bytes()).unwrap(),
            parse(shallow.as_bytes()).unwrap()
        );
    }

    #[test]
    fn the_cut_part_skips_strings_with_brackets_and_the_rest_is_read() {
        let deep = format!(
            "{}\"a]}}\\\"[{{\"{}",
            "[".repeat(MAX_VALUE_DEPTH + 2),
            "]".repeat(MAX_VALUE_DEPTH + 2)
        );
        let text = format!("{{\"deep\":{deep},\"after\":[1,\"x\"]}}");
        let v = parse_value_text(text.as_bytes()).unwrap();
        assert_eq!(to_string(v.get("after").unwrap()), r#"[1,"x"]"#);
        assert!(
            parse_value_text(format!("{}\"", "[".repeat(MAX_VALUE_DEPTH + 1)).as_bytes()).is_err()
        );
        assert!(parse_value_text(b"[1,").is_err());
    }
}
