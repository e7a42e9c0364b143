//! Small helpers shared by the server's modules: clocks, ids and JSON spelling.

use graphmind_core::json::{self, write_f64, write_string, JsStr, Map, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// Wall clock in epoch milliseconds, as an integer-valued `f64` (the envelope `ts`).
pub fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}

/// A fresh 32-hex-digit identifier (claim tokens, request ids) from the OS random source
/// (`graphmind_core::random`; the hashed fallback only if the OS refuses after the server's
/// own tokens were drawn at startup).
pub fn new_token() -> String {
    graphmind_core::random::to_hex(&graphmind_core::random::bytes_or_fallback::<16>())
}

/// `s` as a JSON string literal, spelled as `JSON.stringify` would.
pub fn js(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_string(&JsStr::from(s), &mut out);
    out
}

/// `f` as a JSON number, spelled as `JSON.stringify` would (`1756254187512`, not `...512.0`).
pub fn num(f: f64) -> String {
    let mut out = String::new();
    write_f64(f, &mut out);
    out
}

/// A JSON object of the server's own messages: `entries` in order (the core's [`Map`],
/// written as `JSON.stringify` would by [`text`]). Keys must be distinct.
pub fn object<const N: usize>(entries: [(&str, Value); N]) -> Map {
    let mut map = Map::with_capacity(N + 4);
    for (key, value) in entries {
        map.push_unique(key.into(), value);
    }
    map
}

/// Adds `key` to `map` when `value` is `Some` (an absent field is left out, never `null`).
pub fn put_opt<T: Into<Value>>(map: &mut Map, key: &str, value: Option<T>) {
    if let Some(v) = value {
        map.insert(key, v.into());
    }
}

/// `value` or JSON `null`.
pub fn or_null<T: Into<Value>>(value: Option<T>) -> Value {
    value.map_or(Value::Null, Into::into)
}

/// An array of strings.
pub fn strings<'a>(items: impl IntoIterator<Item = &'a str>) -> Value {
    Value::Array(items.into_iter().map(Value::from).collect())
}

/// The compact JSON text of an object.
pub fn text(map: Map) -> String {
    json::to_string(&Value::Object(map))
}
