//! Sizes and prefixes of a value's JSON text, without writing the whole text.
//!
//! The shrink needs, for a payload that may be many megabytes, the UTF-8 length of its JSON
//! text, the UTF-16 length of each top-level field's JSON text, and the first
//! [`PREVIEW_CHARS`](super::PREVIEW_CHARS) UTF-16 units of some of those texts. Building the
//! texts to measure them would cost a serialization (and its memory) each; these functions
//! count instead, and write only as much text as a prefix needs. Every count matches what
//! [`crate::json::write_value`] (`JSON.stringify`) would produce.

use crate::json::{write_string, write_value, JsStr, Number, Value};

/// The length of a JSON text in both units the shrink uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Size {
    /// UTF-8 bytes.
    pub bytes: usize,
    /// UTF-16 code units (JavaScript's `length`).
    pub units: usize,
}

impl Size {
    const fn ascii(n: usize) -> Size {
        Size { bytes: n, units: n }
    }

    fn add(&mut self, other: Size) {
        self.bytes += other.bytes;
        self.units += other.units;
    }
}

/// The size of `value`'s JSON text.
pub(crate) fn measure(value: &Value) -> Size {
    match value {
        Value::Null => Size::ascii(4),
        Value::Bool(true) => Size::ascii(4),
        Value::Bool(false) => Size::ascii(5),
        Value::Number(n) => Size::ascii(number_len(n)),
        Value::String(s) => measure_string(s),
        Value::Array(items) => {
            let mut size = Size::ascii(2 + items.len().saturating_sub(1));
            for item in items {
                size.add(measure(item));
            }
            size
        }
        Value::Object(map) => {
            // Braces, one colon per entry, commas between entries.
            let mut size = Size::ascii(2 + map.len() + map.len().saturating_sub(1));
            for (k, v) in map.iter() {
                size.add(measure_string(k));
                size.add(measure(v));
            }
            size
        }
    }
}

/// Length of a number's JSON spelling (always ASCII).
fn number_len(n: &Number) -> usize {
    match n {
        Number::Int(i) => {
            let mut len = usize::from(*i < 0);
            let mut v = i.unsigned_abs();
            loop {
                len += 1;
                v /= 10;
                if v == 0 {
                    break len;
                }
            }
        }
        Number::Float(f) if !f.is_finite() => 4,
        Number::Float(f) if *f == 0.0 => 1,
        Number::Float(f) => ryu_js::Buffer::new().format_finite(*f).len(),
        Number::BigInt(digits) => digits.len(),
    }
}

/// Extra bytes (= extra units) an ASCII byte costs once escaped: `\"`, `\\`, `\n` cost one
/// more, other controls `\u00XX` five more (from the crate's one escape table).
const ASCII_EXTRA: [u8; 128] = {
    let mut table = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        table[b] = match crate::json::ESCAPE_CLASS[b] {
            crate::json::ESCAPE_SHORT => 1,
            crate::json::ESCAPE_UNICODE => 5,
            _ => 0,
        };
        b += 1;
    }
    table
};

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Whether any byte of `word` needs more than the plain count: non-ASCII, a control, `"` or `\`.
#[inline]
fn word_is_special(word: u64) -> bool {
    let has_high = word & HI;
    let below_space = word.wrapping_sub(LO * 0x20) & !word & HI;
    let quote = word ^ (LO * b'"' as u64);
    let has_quote = quote.wrapping_sub(LO) & !quote & HI;
    let backslash = word ^ (LO * b'\\' as u64);
    let has_backslash = backslash.wrapping_sub(LO) & !backslash & HI;
    (has_high | below_space | has_quote | has_backslash) != 0
}

/// The size of a string's JSON text, quotes included. Kept out of line: left to the
/// compiler, this loop ran about half as fast on a 17 MB string once the bounded writer
/// below was merged (`cargo bench -p graphmind-core --bench shrink`, `string-17MB`: 11-12
/// ms against 6-10 ms before; 6.5-8.3 ms out of line).
#[inline(never)]
pub(crate) fn measure_string(s: &JsStr) -> Size {
    let bytes = s.as_bytes();
    let mut size = Size::ascii(2 + bytes.len());
    // Units start equal to bytes; each continuation byte takes one unit back, each 4-byte
    // lead (a surrogate pair) adds one back, escapes add their extra to both.
    let mut fewer_units = 0usize;
    let mut extra = 0usize;
    let mut lone = 0usize;
    let mut i = 0;
    let n = bytes.len();
    while i + 8 <= n {
        let word = u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
        if !word_is_special(word) {
            i += 8;
            continue;
        }
        for k in i..i + 8 {
            let b = bytes[k];
            if b < 0x80 {
                extra += ASCII_EXTRA[b as usize] as usize;
            } else if b < 0xC0 {
                fewer_units = fewer_units.wrapping_add(1);
            } else if b >= 0xF0 {
                fewer_units = fewer_units.wrapping_sub(1);
            } else if b == 0xED && bytes.get(k + 1).is_some_and(|&next| next >= 0xA0) {
                lone += 1;
            }
        }
        i += 8;
    }
    for k in i..n {
        let b = bytes[k];
        if b < 0x80 {
            extra += ASCII_EXTRA[b as usize] as usize;
        } else if b < 0xC0 {
            fewer_units = fewer_units.wrapping_add(1);
        } else if b >= 0xF0 {
            fewer_units = fewer_units.wrapping_sub(1);
        } else if b == 0xED && bytes.get(k + 1).is_some_and(|&next| next >= 0xA0) {
            lone += 1;
        }
    }
    // A lone surrogate: 3 WTF-8 bytes (1 unit, 2 continuation bytes already taken back)
    // become the 6 ASCII bytes of `\udXXX`.
    size.bytes += extra + 3 * lone;
    size.units = size.units.wrapping_sub(fewer_units) + extra + 5 * lone;
    size
}

/// Writes `value`'s JSON text into `out` unless it would exceed `cap` bytes; returns whether
/// it was written whole. The text is exactly [`crate::json::write_value`]'s. Stops early, at
/// the first element past the cap, and never copies a string that cannot fit.
pub(crate) fn write_capped(value: &Value, out: &mut String, cap: usize) -> bool {
    write_bounded(value, out, &Capped(cap))
}

/// The first `units` UTF-16 units of `value`'s JSON text (all of it when shorter), as
/// JavaScript's `text.slice(0, units)` gives them: the cut may split a surrogate pair.
pub(crate) fn json_prefix(value: &Value, units: usize) -> JsStr {
    // Every UTF-16 unit of JSON text is at most 3 UTF-8 bytes, so `3 * units` correct bytes
    // hold at least `units` units.
    let need = units.saturating_mul(3);
    let mut out = String::new();
    write_bounded(value, &mut out, &Prefix(need));
    JsStr::from(out).slice_utf16(0, units)
}

/// Where a bounded write of JSON text stops.
trait Bound {
    /// Whether the write may go on with `out` as it is.
    fn open(&self, out: &str) -> bool;
    /// Writes the string (or key) `s`, or as much of it as the bound needs; false: stop.
    fn string(&self, s: &JsStr, out: &mut String) -> bool;
}

/// Stop as soon as the text passes this many bytes ([`write_capped`]).
struct Capped(usize);

impl Bound for Capped {
    fn open(&self, out: &str) -> bool {
        out.len() <= self.0
    }

    fn string(&self, s: &JsStr, out: &mut String) -> bool {
        // A string's JSON is at least its WTF-8 length plus the quotes.
        if out.len() + s.len() + 2 > self.0 {
            return false;
        }
        write_string(s, out);
        self.open(out)
    }
}

/// Stop once the text holds at least this many bytes ([`json_prefix`]). Text after that
/// byte may be wrong (a cut string gets its closing quote early) and is never read.
struct Prefix(usize);

impl Bound for Prefix {
    fn open(&self, out: &str) -> bool {
        out.len() < self.0
    }

    fn string(&self, s: &JsStr, out: &mut String) -> bool {
        write_string_prefix(s, out, self.0)
    }
}

/// Writes `value`'s JSON text as [`crate::json::write_value`] does until `bound` says stop;
/// returns whether the whole text was written within it.
fn write_bounded(value: &Value, out: &mut String, bound: &impl Bound) -> bool {
    // No check on entry: every element's write ends with one, and what a value writes past
    // the bound is never read.
    match value {
        Value::String(s) => return bound.string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !write_bounded(item, out, bound) {
                    return false;
                }
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !bound.string(k, out) {
                    return false;
                }
                out.push(':');
                if !write_bounded(v, out, bound) {
                    return false;
                }
            }
            out.push('}');
        }
        scalar => write_value(scalar, out),
    }
    bound.open(out)
}

fn write_string_prefix(s: &JsStr, out: &mut String, need: usize) -> bool {
    let room = need.saturating_sub(out.len());
    let bytes = s.as_bytes();
    if bytes.len() <= room {
        write_string(s, out);
        return out.len() < need;
    }
    // Escaping never shortens a code point, so `room` bytes of the string (cut on a code
    // point boundary) give at least `room` - 3 correct bytes; one more code point covers it.
    let mut end = (room + 4).min(bytes.len());
    while end < bytes.len() && (0x80..0xC0).contains(&bytes[end]) {
        end += 1;
    }
    match JsStr::from_wtf8(&bytes[..end]) {
        Some(head) => write_string(&head, out),
        // Cannot happen for a well-formed `JsStr`; the whole string is correct too.
        None => write_string(s, out),
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse_str, to_string};

    fn check(text: &str) {
        let value = parse_str(text).unwrap();
        let json = to_string(&value);
        let js = JsStr::from(json.clone());
        assert_eq!(
            measure(&value),
            Size {
                bytes: json.len(),
                units: js.utf16_len()
            },
            "{text}"
        );
        for units in [0, 1, 2, 5, 17, 100, 2000] {
            assert_eq!(
                json_prefix(&value, units),
                js.slice_utf16(0, units),
                "{text} @ {units}"
            );
        }
        let mut out = String::new();
        assert!(write_capped(&value, &mut out, json.len()));
        assert_eq!(out, json);
        let mut out = String::new();
        assert!(json.is_empty() || !write_capped(&value, &mut out, json.len() - 1));
    }

    #[test]
    fn sizes_and_prefixes_match_the_written_text() {
        check(r#"{"a":"x\"\\\n\u0001é中😀\ud800\udc00z","b":[1,-2.5,1e21,true,null,{}],"":[]}"#);
        check(r#""\ud83d""#);
        check(r#"["\udfff\ud800", "ab\ud800", 123456789012345678901234567890]"#);
        check(&format!(
            r#"{{"big":"{}","t":"{}"}}"#,
            "é😀\\u0002".repeat(900),
            "x".repeat(40)
        ));
        check("0");
    }
}
