//! Canonical JSON: the one spelling of a value that the loop guard compares.
//!
//! Two values that an agent would consider "the same arguments" canonicalise to the same
//! text: object keys sorted by UTF-16 code units (JavaScript's default `sort`), no white
//! space, numbers in ECMAScript's shortest round-trip spelling (`1.0` → `1`, `-0` → `0`,
//! `1e21` → `1e+21`, NaN and infinities → `null`), strings escaped exactly as
//! `JSON.stringify` escapes them (controls and lone surrogates as lowercase `\uXXXX`,
//! everything else non-ASCII raw), and every object member whose key is in an ignore list
//! removed at every nesting level. For plain JSON without ignored keys this is RFC 8785
//! (JCS) text.
//!
//! Rules the reference leaves to the host language, and what we do:
//! - Integers ([`Number::Int`], [`Number::BigInt`]) are written with all their digits, as
//!   the Python reference writes an `int` and the TypeScript reference a `bigint`. A
//!   JavaScript number is a [`Number::Float`] and follows ECMAScript spelling.
//! - Containers nested deeper than [`MAX_CANONICAL_DEPTH`] are not walked: they are written
//!   as the string [`DEPTH_MARKER`], as both references do. The walk therefore never
//!   recurses more than that many levels, whatever the value.
//! - A Rust [`Value`] cannot hold a cycle. Bindings that convert host objects replace a
//!   reference back to an enclosing object by the string [`CIRCULAR_MARKER`] and a value
//!   they cannot read faithfully by [`UNSERIALIZABLE_MARKER`] (and then report the input as
//!   unreadable to the loop guard), so every language produces the reference's text.
//!
//! The writer is generic over a byte [`Sink`] so that the fingerprint can stream the text
//! straight into SHA-256 without building a `String`.

use crate::json::{self, cmp_utf16_bytes, JsStr, Number, ParseError, Value};

mod text;

/// Keys removed at every depth unless the caller passes its own list: MCP's per-request
/// `_meta` (clients put a fresh `progressToken` in it on every call).
pub const DEFAULT_IGNORE_KEYS: &[&str] = &["_meta"];

/// Containers nested deeper than this (the top-level value is depth 0) are written as
/// [`DEPTH_MARKER`] instead of being walked (`MAX_DEPTH` in the reference).
pub const MAX_CANONICAL_DEPTH: usize = 64;

/// The string that stands for a container nested deeper than [`MAX_CANONICAL_DEPTH`].
pub const DEPTH_MARKER: &str = "[depth]";

/// The string a binding writes for a reference back to an enclosing host object (a cycle).
pub const CIRCULAR_MARKER: &str = "[circular]";

/// The string a binding writes for a host value it cannot read faithfully (a throwing
/// getter or `toJSON`). The loop guard must then be told the input is unreadable.
pub const UNSERIALIZABLE_MARKER: &str = "[unserializable]";

/// Where canonical text goes: a buffer, or a hasher.
pub trait Sink {
    /// Appends bytes (always a whole UTF-8 sequence or ASCII).
    fn put(&mut self, bytes: &[u8]);

    /// Appends `"body"` followed by `after` (`body` needs no escaping). A sink may do it
    /// in one step.
    #[inline]
    fn put_quoted(&mut self, body: &[u8], after: &[u8]) {
        self.put(b"\"");
        self.put(body);
        self.put(b"\"");
        self.put(after);
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// The canonical JSON of `value`, with the default ignore keys ([`DEFAULT_IGNORE_KEYS`]).
pub fn canonical_json(value: &Value) -> String {
    canonical_json_with(value, DEFAULT_IGNORE_KEYS)
}

/// The canonical JSON of `value`, removing object members whose key is in `ignore_keys`
/// (exact match) at every depth. An empty list removes nothing.
pub fn canonical_json_with(value: &Value, ignore_keys: &[&str]) -> String {
    let mut out = Vec::with_capacity(128);
    write_canonical(value, ignore_keys, &mut out);
    into_string(out)
}

/// The canonical string a fingerprint hashes: the array `[nodeId, input]`, an absent input
/// written as `null`.
pub fn canonical_call(node_id: &str, input: Option<&Value>, ignore_keys: &[&str]) -> String {
    let mut out = Vec::with_capacity(128);
    write_canonical_call(node_id.as_bytes(), input, ignore_keys, &mut out);
    into_string(out)
}

/// [`canonical_call`] for a node id that may hold lone surrogates.
pub fn canonical_call_js(node_id: &JsStr, input: Option<&Value>, ignore_keys: &[&str]) -> String {
    let mut out = Vec::with_capacity(128);
    write_canonical_call(node_id.as_bytes(), input, ignore_keys, &mut out);
    into_string(out)
}

/// The canonical JSON of JSON `text` (UTF-8), removing `ignore_keys` at every depth: the
/// same as parsing it and calling [`canonical_json_with`], faster for text whose tokens
/// are already canonical (as `JSON.stringify` writes them), which is copied with only its
/// members reordered (see `canonical/text.rs`).
pub fn canonical_json_text<K: AsRef<str>>(
    text: &[u8],
    ignore_keys: &[K],
) -> Result<String, ParseError> {
    let prepared = Prepared::new(text, ignore_keys)?;
    let mut out = Vec::with_capacity(text.len() + 2);
    prepared.write(ignore_keys, &mut out);
    Ok(into_string(out))
}

/// JSON text made ready to be written canonically: its checked tokens when they are
/// already canonical, else its parsed value. Preparing finds every error, so writing
/// cannot fail half-way.
pub(crate) enum Prepared<'t> {
    Tokens(text::Tape<'t>),
    Parsed(Value),
}

impl<'t> Prepared<'t> {
    /// Prepares `text` for [`Prepared::write`] with the same `ignore_keys`.
    pub(crate) fn new<K: AsRef<str>>(
        text: &'t [u8],
        ignore_keys: &[K],
    ) -> Result<Self, ParseError> {
        match text::canonical_tokens(text, ignore_keys) {
            Some(tape) => Ok(Prepared::Tokens(tape)),
            None => json::parse(text).map(Prepared::Parsed),
        }
    }

    /// Writes the canonical text.
    pub(crate) fn write<S: Sink, K: AsRef<str>>(&self, ignore_keys: &[K], sink: &mut S) {
        match self {
            Prepared::Tokens(tape) => tape.write(sink),
            Prepared::Parsed(value) => write_canonical(value, ignore_keys, sink),
        }
    }
}

/// Writes the canonical JSON of `value` into `sink`.
pub fn write_canonical<S: Sink, K: AsRef<str>>(value: &Value, ignore_keys: &[K], sink: &mut S) {
    let mut walker = Walker {
        sink,
        ignore: ignore_keys,
        scratch: Vec::with_capacity(32),
    };
    walker.value(value, 0);
}

/// Writes `[nodeId,input]` canonically into `sink`; `node_id` is WTF-8.
pub(crate) fn write_canonical_call<S: Sink, K: AsRef<str>>(
    node_id: &[u8],
    input: Option<&Value>,
    ignore_keys: &[K],
    sink: &mut S,
) {
    write_call(node_id, sink, |sink| match input {
        None => sink.put(b"null"),
        Some(v) => write_canonical(v, ignore_keys, sink),
    });
}

/// [`write_canonical_call`] with the input as prepared JSON text.
pub(crate) fn write_canonical_call_prepared<S: Sink, K: AsRef<str>>(
    node_id: &[u8],
    input: Option<&Prepared<'_>>,
    ignore_keys: &[K],
    sink: &mut S,
) {
    write_call(node_id, sink, |sink| match input {
        None => sink.put(b"null"),
        Some(prepared) => prepared.write(ignore_keys, sink),
    });
}

/// `[nodeId,` then what `input` writes, then `]`.
fn write_call<S: Sink>(node_id: &[u8], sink: &mut S, input: impl FnOnce(&mut S)) {
    sink.put(b"[");
    write_escaped(node_id, sink);
    sink.put(b",");
    input(sink);
    sink.put(b"]");
}

fn into_string(bytes: Vec<u8>) -> String {
    // Lone surrogates are always escaped, so the text is valid UTF-8.
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

struct Walker<'v, 'i, 's, S: Sink, K: AsRef<str>> {
    sink: &'s mut S,
    ignore: &'i [K],
    /// Sorted member lists of the objects being written, stacked: each object uses the
    /// tail it pushed and truncates it when done.
    scratch: Vec<(u64, &'v JsStr, &'v Value)>,
}

impl<'v, S: Sink, K: AsRef<str>> Walker<'v, '_, '_, S, K> {
    fn value(&mut self, value: &'v Value, depth: usize) {
        match value {
            Value::Null => self.sink.put(b"null"),
            Value::Bool(true) => self.sink.put(b"true"),
            Value::Bool(false) => self.sink.put(b"false"),
            Value::Number(n) => write_number(n, self.sink),
            Value::String(s) => write_escaped(s.as_bytes(), self.sink),
            Value::Array(items) => {
                if depth > MAX_CANONICAL_DEPTH {
                    write_escaped(DEPTH_MARKER.as_bytes(), self.sink);
                    return;
                }
                self.sink.put(b"[");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.sink.put(b",");
                    }
                    self.value(item, depth + 1);
                }
                self.sink.put(b"]");
            }
            Value::Object(map) => {
                if depth > MAX_CANONICAL_DEPTH {
                    write_escaped(DEPTH_MARKER.as_bytes(), self.sink);
                    return;
                }
                let start = self.scratch.len();
                let ignore = self.ignore;
                for (k, v) in map.iter() {
                    if !is_ignored(k.as_bytes(), ignore) {
                        self.scratch.push((head_word(k.as_bytes()), k, v));
                    }
                }
                let members = &mut self.scratch[start..];
                if members.len() > 1 {
                    members.sort_unstable_by(|a, b| {
                        cmp_keys(a.0, a.1.as_bytes(), b.0, b.1.as_bytes())
                    });
                }
                let end = self.scratch.len();
                self.sink.put(b"{");
                for i in start..end {
                    let (_, k, v) = self.scratch[i];
                    if i > start {
                        self.sink.put(b",");
                    }
                    write_escaped_then(k.as_bytes(), b":", self.sink);
                    self.value(v, depth + 1);
                }
                self.scratch.truncate(start);
                self.sink.put(b"}");
            }
        }
    }
}

/// UTF-16 code-unit order of two WTF-8 keys. UTF-8 byte order agrees with it wherever the
/// first difference involves an ASCII byte (which is always at a character boundary), the
/// common case for keys; anything else goes to the full comparison.
#[inline]
fn cmp_keys(wa: u64, a: &[u8], wb: u64, b: &[u8]) -> std::cmp::Ordering {
    // `wa`, `wb`: the first eight bytes, zero-padded, as big-endian words (head_word):
    // comparing them compares the prefixes byte by byte (a zero pad stands for "ended",
    // which sorts first).
    if wa != wb {
        let i = ((wa ^ wb).leading_zeros() / 8) as usize;
        let (x, y) = (
            a.get(i).copied().unwrap_or(0),
            b.get(i).copied().unwrap_or(0),
        );
        if x < 0x80 || y < 0x80 {
            return wa.cmp(&wb);
        }
    }
    match a.iter().zip(b).position(|(x, y)| x != y) {
        None => a.len().cmp(&b.len()),
        Some(i) if a[i] < 0x80 || b[i] < 0x80 => a[i].cmp(&b[i]),
        Some(_) => cmp_utf16_bytes(a, b),
    }
}

#[inline]
fn head_word(bytes: &[u8]) -> u64 {
    if let Some(head) = bytes.first_chunk::<8>() {
        return u64::from_be_bytes(*head);
    }
    // Shifts rather than a copy: a variable-length copy becomes a memcpy call.
    let mut word = 0u64;
    for (i, &b) in bytes.iter().enumerate() {
        word |= (b as u64) << (56 - 8 * i);
    }
    word
}

/// Whether an object member whose key has these bytes is left out (exact match against
/// `ignore`).
#[inline]
pub(crate) fn is_ignored<K: AsRef<str>>(key: &[u8], ignore: &[K]) -> bool {
    ignore.iter().any(|k| k.as_ref().as_bytes() == key)
}

/// Writes a number in the canonical spelling: integers with all their digits, doubles as
/// ECMAScript spells them, non-finite doubles as `null`.
pub(crate) fn write_number<S: Sink>(n: &Number, sink: &mut S) {
    match n {
        Number::Int(i) => write_i64(*i, sink),
        Number::Float(f) => write_f64(*f, sink),
        Number::BigInt(digits) => sink.put(digits.as_bytes()),
    }
}

#[inline]
fn write_i64<S: Sink>(i: i64, sink: &mut S) {
    if (0..10).contains(&i) {
        sink.put(&DIGITS[i as usize..i as usize + 1]); // most integers an app holds
        return;
    }
    sink.put(itoa::Buffer::new().format(i).as_bytes());
}

/// The ten decimal digits, for one-digit numbers.
const DIGITS: &[u8; 10] = b"0123456789";

#[inline]
fn write_f64<S: Sink>(f: f64, sink: &mut S) {
    if !f.is_finite() {
        sink.put(b"null");
    } else if f == 0.0 {
        sink.put(b"0");
    } else if f.fract() == 0.0 && f.abs() < 1e15 {
        // Integral and below 2^53: the digits are the integer's (the common case).
        write_i64(f as i64, sink);
    } else {
        let mut buf = ryu_js::Buffer::new();
        sink.put(buf.format_finite(f).as_bytes());
    }
}

/// The crate's one table of JSON string escapes (0 nothing, 1 a two-character escape,
/// 2 a `\u00XX` escape, 3 maybe a lone surrogate).
use crate::json::ESCAPE_CLASS as ESCAPE;
use crate::json::{is_plain, needs_attention};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes WTF-8 `bytes` as a quoted JSON string with `JSON.stringify`'s escapes.
#[inline]
pub(crate) fn write_escaped<S: Sink>(bytes: &[u8], sink: &mut S) {
    write_escaped_then(bytes, b"", sink);
}

/// [`write_escaped`], then `after`.
#[inline]
fn write_escaped_then<S: Sink>(bytes: &[u8], after: &[u8], sink: &mut S) {
    if is_plain(bytes) {
        sink.put_quoted(bytes, after);
    } else {
        write_escaped_slow(bytes, sink);
        sink.put(after);
    }
}

fn write_escaped_slow<S: Sink>(bytes: &[u8], sink: &mut S) {
    sink.put(b"\"");
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Skip eight plain bytes at a time.
        while i + 8 <= bytes.len() {
            let word = u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
            if needs_attention(word) {
                break;
            }
            i += 8;
        }
        if i >= bytes.len() {
            break;
        }
        let b = bytes[i];
        let class = ESCAPE[b as usize];
        if class == 0 {
            i += 1;
            continue;
        }
        if class == 3 {
            // 0xED 0xA0..=0xBF encodes a surrogate (U+D800..U+DFFF), which in WTF-8 is
            // always a lone one; 0xED 0x80..=0x9F is ordinary text.
            match bytes.get(i + 1) {
                Some(&next) if next >= 0xA0 => {}
                _ => {
                    i += 1;
                    continue;
                }
            }
        }
        sink.put(&bytes[run..i]);
        match class {
            1 => {
                let esc: &[u8] = match b {
                    b'"' => b"\\\"",
                    b'\\' => b"\\\\",
                    b'\n' => b"\\n",
                    b'\r' => b"\\r",
                    b'\t' => b"\\t",
                    0x08 => b"\\b",
                    _ => b"\\f",
                };
                sink.put(esc);
                i += 1;
            }
            2 => {
                sink.put(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 0xF) as usize],
                ]);
                i += 1;
            }
            _ => {
                let unit = (0xDu32 << 12)
                    | ((bytes[i + 1] as u32 & 0x3F) << 6)
                    | (bytes.get(i + 2).copied().unwrap_or(0x80) as u32 & 0x3F);
                sink.put(&[
                    b'\\',
                    b'u',
                    HEX[((unit >> 12) & 0xF) as usize],
                    HEX[((unit >> 8) & 0xF) as usize],
                    HEX[((unit >> 4) & 0xF) as usize],
                    HEX[(unit & 0xF) as usize],
                ]);
                i = (i + 3).min(bytes.len());
            }
        }
        run = i;
    }
    sink.put(&bytes[run..]);
    sink.put(b"\"");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse_str, to_string};

    #[test]
    fn sorts_and_strips() {
        let v = parse_str(r#"{"b":1,"_meta":{"x":1},"a":[{"_meta":2,"z":1.0,"y":-0.0}]}"#).unwrap();
        assert_eq!(canonical_json(&v), r#"{"a":[{"y":0,"z":1}],"b":1}"#);
        assert_eq!(
            canonical_json_with(&v, &[]),
            r#"{"_meta":{"x":1},"a":[{"_meta":2,"y":0,"z":1}],"b":1}"#
        );
    }

    #[test]
    fn escapes_like_the_json_writer() {
        let v =
            parse_str(r#""a\"\\\/\b\f\n\r\t\u0001\u001f\u007fé😀\ud800\udfff\ud83d\ude00x\udbff""#)
                .unwrap();
        assert_eq!(canonical_json(&v), to_string(&v));
    }

    #[test]
    fn integral_doubles_match_ryu_js() {
        for f in [
            1.0,
            -1.0,
            123456789.0,
            999999999999999.0,
            -999999999999999.0,
            0.5,
            1e15,
            1e16,
            1e21,
        ] {
            let mut out = Vec::new();
            write_f64(f, &mut out);
            let mut reference = String::new();
            crate::json::write_f64(f, &mut reference);
            assert_eq!(String::from_utf8(out).unwrap(), reference, "{f}");
        }
    }

    #[test]
    fn integers_keep_every_digit() {
        let mut out = Vec::new();
        write_i64(i64::MIN, &mut out);
        assert_eq!(out, b"-9223372036854775808");
        let v = Value::Number(Number::BigInt("123456789012345678901234567890".into()));
        assert_eq!(canonical_json(&v), "123456789012345678901234567890");
    }

    #[test]
    fn deep_containers_become_the_depth_marker() {
        let mut v = Value::Array(vec![]);
        for _ in 0..70 {
            v = Value::Array(vec![v]);
        }
        let text = canonical_json(&v);
        assert_eq!(
            text,
            format!("{}\"[depth]\"{}", "[".repeat(65), "]".repeat(65))
        );
    }
}
