//! The payload budget: an event payload whose JSON is over [`MAX_PAYLOAD_BYTES`] is degraded
//! to a smaller payload that keeps its JSON types (and, with a known event type, stays a
//! valid payload of that type), instead of being dropped.
//!
//! [`serialize_payload`] tries, in order (see `docs/shrink.md`):
//! 1. the plain JSON, when it fits;
//! 2. the field trim: biggest top-level fields shrunk first, marker fields merged in;
//! 3. for a known event type, the skeleton: only the schema's fields, hard-shrunk;
//! 4. the whole-payload marker `{__graphmindTruncated, bytes, preview}`.
//!
//! Units follow the reference exactly: the budget and the top-level `bytes` count UTF-8
//! bytes; field sizes in the trim, a shrunk object's own `bytes`, previews and string cuts
//! count UTF-16 code units.

pub use crate::value::depth;
mod measure;
mod schema;

use std::collections::HashSet;

use crate::json::{to_string, JsStr, JsStrBuilder, Map, Value};
use measure::{json_prefix, measure, write_capped, Size};
use schema::{object_matches, payload_fields, plan_entry, Field, PlanEntry};

/// Largest payload, in UTF-8 bytes of its JSON, that is stored or sent unchanged (512 KiB).
pub const MAX_PAYLOAD_BYTES: usize = 512 * 1024;

/// Length, in UTF-16 code units, of every preview and every shortened string.
pub const PREVIEW_CHARS: usize = 2000;

/// Appended to a string that was cut short.
pub const TRUNCATION_SUFFIX: &str = "…[graphmind: truncated]";

/// Depth (inside one shrunk field) at which an object is replaced by a "deeply nested" marker.
pub const MAX_SHRINK_DEPTH: usize = 6;

/// Most keys the field shrink keeps from any one object (the first ones, in key order).
pub const MAX_SHRINK_KEYS: usize = 256;

/// Most top-level fields a payload may have for the field trim to be attempted.
pub const MAX_TRIM_FIELDS: usize = 4096;

/// Longest string, in UTF-16 code units, the skeleton keeps on its first two attempts.
pub const SKELETON_CHARS: usize = 256;

/// The skeleton's string length on its last, smallest attempt.
pub const SKELETON_MIN_CHARS: usize = 32;

/// Skeleton attempts, largest first: (string length, keep the preview and the fields list).
const SKELETON_ATTEMPTS: [(usize, bool); 3] = [
    (SKELETON_CHARS, true),
    (SKELETON_CHARS, false),
    (SKELETON_MIN_CHARS, false),
];

/// The marker key every shrunk payload or object carries.
use depth::MARKER;

/// Largest whole-payload marker that can be produced (bytes): the marker's fixed text, a
/// 20-digit size and a preview of [`PREVIEW_CHARS`] units at 3 bytes each (a lone surrogate
/// at the cut costs 6). Any budget at least this large always holds the result.
pub const MAX_MARKER_BYTES: usize = 37 + 20 + 12 + 3 * PREVIEW_CHARS + 3 + 2;

/// A payload serialized within its budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Serialized {
    /// The JSON text to send or store (`JSON.stringify`'s spelling).
    pub json: String,
    /// Whether the payload had to be shrunk.
    pub truncated: bool,
    /// UTF-8 bytes of the original payload's JSON.
    pub original_bytes: usize,
}

/// The JSON of the object `payload` with `text` written as it is in place of the member
/// `key` (a placeholder there keeps the member's place), when the whole fits in
/// `max_bytes`; `None` when it does not (or `payload` is not an object), and the member
/// must be read and the payload shrunk as usual. `text` must be JSON in the core's compact
/// spelling ([`crate::host_value::HostValue::Stringified`]).
pub(crate) fn serialize_with_verbatim(
    payload: &Value,
    key: &str,
    text: &str,
    max_bytes: usize,
) -> Option<String> {
    let map = payload.as_object()?;
    if text.len() > max_bytes {
        return None;
    }
    let mut json = String::with_capacity(text.len() + 256);
    json.push('{');
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        crate::json::write_string(k, &mut json);
        json.push(':');
        if k.as_bytes() == key.as_bytes() {
            json.push_str(text);
        } else if !write_capped(v, &mut json, max_bytes) {
            return None;
        }
    }
    json.push('}');
    (json.len() <= max_bytes).then_some(json)
}

/// Serializes `payload`, shrinking it when its JSON exceeds `max_bytes` UTF-8 bytes.
///
/// With `event_type` a known event type and a valid payload of it, the result is a valid
/// payload of that type and fits any `max_bytes >= 4096`. Whatever the input, the result
/// fits any `max_bytes >= MAX_MARKER_BYTES`. Idempotent: a shrunk result fed back in fits
/// and comes back unchanged.
pub fn serialize_payload(
    payload: &Value,
    max_bytes: usize,
    event_type: Option<&str>,
) -> Serialized {
    // Tier 1: the plain JSON, written once; writing stops as soon as it cannot fit.
    let mut json = String::new();
    if write_capped(payload, &mut json, max_bytes) {
        return Serialized {
            original_bytes: json.len(),
            json,
            truncated: false,
        };
    }
    drop(json);

    let fields = event_type.and_then(payload_fields);
    let shrunk = |json: String, original_bytes| Serialized {
        json,
        truncated: true,
        original_bytes,
    };

    let (total, field_sizes) = match payload {
        Value::Object(map) => {
            let sizes: Vec<Size> = map.values().map(measure).collect();
            let mut total = 2 + map.len() + map.len().saturating_sub(1);
            for ((k, _), size) in map.iter().zip(&sizes) {
                total += measure::measure_string(k).bytes + size.bytes;
            }
            (total, sizes)
        }
        other => (measure(other).bytes, Vec::new()),
    };
    let preview = json_prefix(payload, PREVIEW_CHARS);

    if let Value::Object(map) = payload {
        // Tier 2: the field trim.
        if map.len() <= MAX_TRIM_FIELDS {
            if let Some((json, result)) =
                truncate_fields(map, &field_sizes, max_bytes, total, &preview)
            {
                if fields.is_none_or(|fields| object_matches(fields, &result)) {
                    return shrunk(json, total);
                }
            }
        }
        // Tier 3: the skeleton of a known event type.
        if let Some(fields) = fields {
            if let Some(json) = skeleton(map, fields, max_bytes, total, &preview) {
                return shrunk(json, total);
            }
        }
    }

    // Tier 4: the whole-payload marker.
    let mut marker = Map::with_capacity(3);
    marker.push_unique(MARKER.into(), Value::Bool(true));
    marker.push_unique("bytes".into(), count(total));
    marker.push_unique("preview".into(), Value::String(preview));
    shrunk(to_string(&Value::Object(marker)), total)
}

/// Whether `payload` is a valid payload of `event_type`; an event type the protocol does not
/// know is not judged (`true`).
pub fn is_valid_event_payload(event_type: &str, payload: &Value) -> bool {
    match (payload_fields(event_type), payload) {
        (None, _) => true,
        (Some(fields), Value::Object(map)) => object_matches(fields, map),
        (Some(_), _) => false,
    }
}

/// The skeleton plan of a known event type, in the conformance fixture's notation: an object
/// of the schema's keys in declaration order, each `null` (required), a nested plan (a
/// required loose object) or `"optional"`.
pub fn skeleton_plan(event_type: &str) -> Option<Value> {
    fn plan(fields: &'static [Field]) -> Value {
        let mut map = Map::with_capacity(fields.len());
        for field in fields {
            let entry = match plan_entry(field) {
                PlanEntry::Required => Value::Null,
                PlanEntry::Nested(nested) => plan(nested),
                PlanEntry::Optional => Value::from("optional"),
            };
            map.push_unique(field.key.into(), entry);
        }
        Value::Object(map)
    }
    payload_fields(event_type).map(plan)
}

fn count(n: usize) -> Value {
    Value::from(n as u64)
}

/// `s` if it has at most `chars` UTF-16 units, else its first `chars` units (a surrogate pair
/// may be split) followed by [`TRUNCATION_SUFFIX`]. The second value says whether it was cut.
fn cut(s: &JsStr, chars: usize) -> (JsStr, bool) {
    // Every code point is at most 3 bytes per unit: a string of at most `chars` bytes has at
    // most `chars` units, one of more than `3 * chars` bytes more than `chars` units.
    let long = s.len() > chars && (s.len() > 3 * chars || s.utf16_len() > chars);
    if !long {
        return (s.clone(), false);
    }
    let mut builder = JsStrBuilder::with_capacity(3 * chars + TRUNCATION_SUFFIX.len());
    for unit in s.utf16_units().take(chars) {
        builder.push_utf16_unit(unit);
    }
    builder.push_str(TRUNCATION_SUFFIX);
    (builder.finish(), true)
}

/// The marker of an object nested too deep to shrink further (the depth cut's marker).
fn deeply_nested() -> Value {
    depth::depth_cut_marker()
}

/// Shrinks one value inside an oversized field, keeping its JSON type: a long string is cut,
/// an array becomes `[]`, an object keeps its first [`MAX_SHRINK_KEYS`] keys, each shrunk in
/// turn (a capped object says how many it dropped).
fn shrink_value(value: &Value, depth: usize) -> Value {
    match value {
        Value::String(s) => Value::String(cut(s, PREVIEW_CHARS).0),
        Value::Array(_) => Value::Array(Vec::new()),
        Value::Object(map) => {
            if depth >= MAX_SHRINK_DEPTH {
                return deeply_nested();
            }
            let (mut shrunk, dropped) = shrink_entries(map, depth);
            if dropped > 0 {
                shrunk.insert(MARKER, Value::Bool(true));
                shrunk.insert("keysDropped", count(dropped));
            }
            Value::Object(shrunk)
        }
        scalar => scalar.clone(),
    }
}

fn shrink_entries(map: &Map, depth: usize) -> (Map, usize) {
    let kept = map.len().min(MAX_SHRINK_KEYS);
    let mut shrunk = Map::with_capacity(kept + 4);
    for (k, v) in map.iter().take(kept) {
        shrunk.push_unique(k.clone(), shrink_value(v, depth + 1));
    }
    (shrunk, map.len() - kept)
}

/// Shrinks one top-level field; an object also gets the marker with its own size (UTF-16
/// units of its JSON) and preview.
fn shrink_field(value: &Value, size: Size) -> Value {
    match value {
        Value::Object(map) => {
            let (mut shrunk, dropped) = shrink_entries(map, 0);
            shrunk.insert(MARKER, Value::Bool(true));
            shrunk.insert("bytes", count(size.units));
            shrunk.insert("preview", Value::String(json_prefix(value, PREVIEW_CHARS)));
            if dropped > 0 {
                shrunk.insert("keysDropped", count(dropped));
            }
            Value::Object(shrunk)
        }
        other => shrink_value(other, 0),
    }
}

/// Tier 2: shrink the biggest top-level fields (by UTF-16 length of their JSON) until the
/// rest is at most half the budget, then merge the marker in. `None` when nothing needed
/// shrinking or the result still does not fit.
fn truncate_fields(
    map: &Map,
    sizes: &[Size],
    max_bytes: usize,
    total: usize,
    preview: &JsStr,
) -> Option<(String, Map)> {
    let mut order: Vec<usize> = (0..map.len()).collect();
    // Biggest first; a stable sort keeps key order among equal sizes.
    order.sort_by(|a, b| sizes[*b].units.cmp(&sizes[*a].units));

    let entries: Vec<(&JsStr, &Value)> = map.iter().collect();
    let mut replaced: Vec<Option<Value>> = vec![None; map.len()];
    let mut dropped = Vec::new();
    // Mixed units on purpose (as the reference): a UTF-8 total minus UTF-16 field lengths.
    let mut remaining = total as i128;
    for idx in order {
        if 2 * remaining <= max_bytes as i128 {
            break;
        }
        replaced[idx] = Some(shrink_field(entries[idx].1, sizes[idx]));
        dropped.push(Value::String(entries[idx].0.clone()));
        remaining -= sizes[idx].units as i128;
    }
    if dropped.is_empty() {
        return None;
    }

    let mut result = Map::with_capacity(map.len() + 4);
    for ((k, v), new) in entries.into_iter().zip(replaced) {
        result.push_unique(k.clone(), new.unwrap_or_else(|| v.clone()));
    }
    // Keys named like the marker keep their position and take the marker's value.
    result.insert(MARKER, Value::Bool(true));
    result.insert("bytes", count(total));
    result.insert("preview", Value::String(preview.clone()));
    result.insert("fields", Value::Array(dropped));
    let result = Value::Object(result);
    let mut json = String::new();
    if !write_capped(&result, &mut json, max_bytes) {
        return None;
    }
    match result {
        Value::Object(map) => Some((json, map)),
        _ => unreachable!(),
    }
}

/// The omitted-value marker of the skeleton.
fn omitted() -> Value {
    let mut map = Map::with_capacity(3);
    map.push_unique(MARKER.into(), Value::Bool(true));
    map.push_unique("bytes".into(), count(0));
    map.push_unique("preview".into(), Value::from("[omitted]"));
    Value::Object(map)
}

/// The planned keys of `map`, hard-shrunk, in declaration order, and which of them were kept
/// exactly as they were.
fn keep_planned<'a>(map: &'a Map, fields: &'static [Field], chars: usize) -> (Map, Vec<&'a JsStr>) {
    let mut out = Map::with_capacity(fields.len() + 4);
    let mut verbatim = Vec::new();
    for field in fields {
        let Some((key, child)) = map.iter().find(|(k, _)| *k == field.key) else {
            continue;
        };
        let entry = plan_entry(field);
        if matches!(entry, PlanEntry::Optional)
            && !matches!(child, Value::String(_) | Value::Number(_) | Value::Bool(_))
        {
            continue;
        }
        let nested = match entry {
            PlanEntry::Nested(nested) => Some(nested),
            _ => None,
        };
        let (value, same) = hard_shrink(child, nested, chars);
        out.push_unique(key.clone(), value);
        if same {
            verbatim.push(key);
        }
    }
    (out, verbatim)
}

/// Hard-shrinks one kept value; the flag says whether the result equals the original.
fn hard_shrink(value: &Value, nested: Option<&'static [Field]>, chars: usize) -> (Value, bool) {
    match (value, nested) {
        (Value::String(s), _) => {
            let (s, was_cut) = cut(s, chars);
            (Value::String(s), !was_cut)
        }
        (Value::Number(_) | Value::Bool(_) | Value::Null, _) => (value.clone(), true),
        (Value::Array(items), _) => (Value::Array(Vec::new()), items.is_empty()),
        (Value::Object(map), Some(fields)) => {
            let (out, verbatim) = keep_planned(map, fields, chars);
            let same = verbatim.len() == out.len() && map.len() <= out.len();
            (Value::Object(out), same)
        }
        (Value::Object(_), None) => (omitted(), false),
    }
}

/// Tier 3: the skeleton of a known event type: its schema's keys only, hard-shrunk, then the
/// marker. Three attempts, smaller each time; the first that fits and validates wins.
fn skeleton(
    map: &Map,
    fields: &'static [Field],
    max_bytes: usize,
    total: usize,
    preview: &JsStr,
) -> Option<String> {
    for (chars, full) in SKELETON_ATTEMPTS {
        let (mut out, verbatim) = keep_planned(map, fields, chars);
        out.insert(MARKER, Value::Bool(true));
        out.insert("bytes", count(total));
        out.insert(
            "preview",
            Value::String(if full { preview.clone() } else { JsStr::new() }),
        );
        if full {
            let verbatim: HashSet<&JsStr> = verbatim.into_iter().collect();
            let mut listed = Vec::new();
            // Each listed name costs at least its length in the result: once the names
            // alone exceed the budget this attempt cannot fit.
            let mut units = 0usize;
            for key in map.keys() {
                if verbatim.contains(key) {
                    continue;
                }
                listed.push(Value::String(key.clone()));
                units += key.utf16_len();
                if units > max_bytes {
                    break;
                }
            }
            if units > max_bytes {
                continue;
            }
            out.insert("fields", Value::Array(listed));
        }
        let mut json = String::new();
        let out_value = Value::Object(out);
        if !write_capped(&out_value, &mut json, max_bytes) {
            continue;
        }
        let Value::Object(out) = &out_value else {
            unreachable!()
        };
        if !object_matches(fields, out) {
            continue;
        }
        return Some(json);
    }
    None
}

/// Remembers which event types already warned about a shrunk payload, so that each warns
/// once.
#[derive(Debug, Default)]
pub struct ShrinkWarnings {
    budget: HashSet<String>,
    invalid: HashSet<String>,
}

impl ShrinkWarnings {
    /// No event type has warned yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The warning for a payload of `event_type` shrunk from `original_bytes` bytes, the
    /// first time for this event type; `None` afterwards.
    pub fn shrunk(&mut self, event_type: &str, original_bytes: usize) -> Option<String> {
        if !self.budget.insert(event_type.to_owned()) {
            return None;
        }
        Some(format!(
            "an event of {original_bytes} bytes was shrunk to a preview (the debugger stores at most {} KB per payload)",
            MAX_PAYLOAD_BYTES / 1024
        ))
    }

    /// The warning for a payload of `event_type` that could not be shrunk to a valid event
    /// (it was not valid to begin with), the first time for this event type.
    pub fn invalid(&mut self, event_type: &str, original_bytes: usize) -> Option<String> {
        if !self.invalid.insert(event_type.to_owned()) {
            return None;
        }
        Some(format!(
            "a {event_type} event of {original_bytes} bytes could not be shrunk to a valid event (the debugger \
             stores at most {} KB per payload, and this payload is not a valid {event_type} event); the \
             debugger will drop it",
            MAX_PAYLOAD_BYTES / 1024
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_counts_utf16_units_and_may_split_a_pair() {
        let s = JsStr::from("a😀b");
        assert!(!cut(&s, 4).1);
        assert!(cut(&s, 3).1);
        let (short, was_cut) = cut(&s, 2);
        assert!(was_cut);
        assert_eq!(
            short.utf16_units().take(2).collect::<Vec<_>>(),
            vec![0x61, 0xD83D]
        );
        assert!(short.has_lone_surrogate());
    }

    #[test]
    fn warnings_are_once_per_event_type() {
        let mut w = ShrinkWarnings::new();
        assert_eq!(
            w.shrunk("node.finished", 17000091).as_deref(),
            Some("an event of 17000091 bytes was shrunk to a preview (the debugger stores at most 512 KB per payload)")
        );
        assert_eq!(w.shrunk("node.finished", 1), None);
        assert!(w.shrunk("node.started", 1).is_some());
        assert!(w.invalid("node.started", 1).is_some());
        assert!(w.invalid("node.started", 1).is_none());
    }

    #[test]
    fn marker_bound_holds() {
        let worst = Value::from("\u{1}".repeat(5000));
        let out = serialize_payload(&worst, 100, None);
        assert!(out.json.len() <= MAX_MARKER_BYTES);
        let worst = Value::from("中".repeat(5000));
        let out = serialize_payload(&worst, 100, None);
        assert!(out.json.len() <= MAX_MARKER_BYTES, "{}", out.json.len());
    }
}
