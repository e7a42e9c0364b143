//! Writes [`Value`]s as JSON text exactly as JavaScript's `JSON.stringify` would: compact,
//! keys in insertion order, non-ASCII characters raw, lone surrogates and control characters
//! escaped as lowercase `\uXXXX`, numbers in ECMAScript's shortest round-trip spelling, and
//! non-finite numbers as `null`.

use super::string::JsStr;
use super::value::{Number, Value};
use crate::canonical::Sink;

/// The compact JSON text of `value`.
pub fn to_string(value: &Value) -> String {
    let mut out = String::with_capacity(128);
    write_value(value, &mut out);
    out
}

/// Appends the compact JSON text of `value` to `out`.
pub fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_value(v, out);
            }
            out.push('}');
        }
    }
}

/// Appends a number in ECMAScript's `Number.prototype.toString` spelling (`1e+21`, `1e-7`,
/// `-0` as `0`); NaN and infinities become `null`, as `JSON.stringify` writes them.
/// Integers beyond 64 bits keep all their digits. (The canonical writer's spelling: one
/// rule for both.)
pub fn write_number(n: &Number, out: &mut String) {
    crate::canonical::write_number(n, &mut AsciiSink(out));
}

/// Appends a double in ECMAScript spelling, `null` when not finite.
pub fn write_f64(f: f64, out: &mut String) {
    write_number(&Number::Float(f), out);
}

/// Appends the ASCII the number writer produces to a `String`.
struct AsciiSink<'a>(&'a mut String);

impl Sink for AsciiSink<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        // Numbers are spelled in ASCII only; anything else would be a bug, shown as U+FFFD.
        match std::str::from_utf8(bytes) {
            Ok(s) => self.0.push_str(s),
            Err(_) => self.0.push('\u{FFFD}'),
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// How `JSON.stringify` treats each byte of a (WTF-8) string: [`ESCAPE_NONE`] copied,
/// [`ESCAPE_SHORT`] a two-character escape (`\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`),
/// [`ESCAPE_UNICODE`] a `\u00XX` escape, [`ESCAPE_MAYBE_SURROGATE`] the lead byte 0xED,
/// which starts a lone surrogate (escaped as `\uDXXX`) when the next byte is >= 0xA0.
/// Every JSON writer of the crate (this one, the canonical form, the shrink's size
/// measures) reads this one table.
pub(crate) static ESCAPE_CLASS: [u8; 256] = {
    let mut t = [ESCAPE_NONE; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = ESCAPE_UNICODE;
        i += 1;
    }
    t[b'\n' as usize] = ESCAPE_SHORT;
    t[b'\r' as usize] = ESCAPE_SHORT;
    t[b'\t' as usize] = ESCAPE_SHORT;
    t[0x08] = ESCAPE_SHORT;
    t[0x0C] = ESCAPE_SHORT;
    t[b'"' as usize] = ESCAPE_SHORT;
    t[b'\\' as usize] = ESCAPE_SHORT;
    t[0xED] = ESCAPE_MAYBE_SURROGATE;
    t
};

/// [`ESCAPE_CLASS`]: copied as it is.
pub(crate) const ESCAPE_NONE: u8 = 0;
/// [`ESCAPE_CLASS`]: a two-character escape.
pub(crate) const ESCAPE_SHORT: u8 = 1;
/// [`ESCAPE_CLASS`]: a six-character `\u00XX` escape.
pub(crate) const ESCAPE_UNICODE: u8 = 2;
/// [`ESCAPE_CLASS`]: 0xED, a lone surrogate's lead byte when the next byte is >= 0xA0.
pub(crate) const ESCAPE_MAYBE_SURROGATE: u8 = 3;

/// Whether any byte of `word` is below 0x20, `"`, `\\` or 0xED (SWAR; may not say which).
#[inline]
pub(crate) fn needs_attention(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    #[inline]
    fn has_zero(x: u64) -> u64 {
        x.wrapping_sub(ONES) & !x & HIGHS
    }
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    let quote = has_zero(word ^ (ONES * b'"' as u64));
    let backslash = has_zero(word ^ (ONES * b'\\' as u64));
    let ed = has_zero(word ^ (ONES * 0xED));
    (below_space | quote | backslash | ed) != 0
}

/// No byte of `bytes` needs an escape (checked eight at a time).
#[inline]
pub(crate) fn is_plain(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        if needs_attention(u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]))) {
            return false;
        }
    }
    // The tail (0..=7 bytes) as overlapping fixed-size loads, padded with a plain byte:
    // every byte is looked at, some twice, none is copied.
    let rest = chunks.remainder();
    let n = rest.len();
    const PLAIN: u32 = u32::from_le_bytes([b'a'; 4]);
    let word = if n >= 4 {
        let lo = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let hi = u32::from_le_bytes([rest[n - 4], rest[n - 3], rest[n - 2], rest[n - 1]]);
        lo as u64 | (hi as u64) << 32
    } else if n > 0 {
        let lo = u32::from_le_bytes([rest[0], rest[n / 2], rest[n - 1], b'a']);
        lo as u64 | (PLAIN as u64) << 32
    } else {
        return true;
    };
    !needs_attention(word)
}

/// Appends `s` as a quoted JSON string with `JSON.stringify`'s escapes.
pub fn write_string(s: &JsStr, out: &mut String) {
    let bytes = s.as_bytes();
    if is_plain(bytes) {
        // Most strings need no escape: found eight bytes at a time, copied in one piece.
        out.push('"');
        push_utf8(out, bytes);
        out.push('"');
        return;
    }
    out.push('"');
    let mut run_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escape: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x08 => Some("\\b"),
            0x0C => Some("\\f"),
            0x00..=0x1F => Some(""),
            // 0xED 0xA0..=0xBF starts an encoded (lone) surrogate.
            0xED if bytes.get(i + 1).is_some_and(|&n| n >= 0xA0) => Some(""),
            _ => None,
        };
        match escape {
            None => i += 1,
            Some(text) => {
                push_utf8(out, &bytes[run_start..i]);
                if !text.is_empty() {
                    out.push_str(text);
                    i += 1;
                } else if b < 0x20 {
                    push_unicode_escape(out, b as u32);
                    i += 1;
                } else {
                    let cp = ((b as u32 & 0x0F) << 12)
                        | ((bytes[i + 1] as u32 & 0x3F) << 6)
                        | (bytes.get(i + 2).copied().unwrap_or(0x80) as u32 & 0x3F);
                    push_unicode_escape(out, cp);
                    i += 3;
                }
                run_start = i;
            }
        }
    }
    push_utf8(out, &bytes[run_start..]);
    out.push('"');
}

fn push_unicode_escape(out: &mut String, unit: u32) {
    out.push_str("\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((unit >> shift) & 0xF) as usize] as char);
    }
}

#[inline]
fn push_utf8(out: &mut String, bytes: &[u8]) {
    // Runs between escapes never contain a lone surrogate, so they are valid UTF-8.
    match std::str::from_utf8(bytes) {
        Ok(s) => out.push_str(s),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_str;

    fn f(x: f64) -> String {
        let mut s = String::new();
        write_f64(x, &mut s);
        s
    }

    #[test]
    fn numbers_are_spelled_as_javascript_does() {
        assert_eq!(f(1.0), "1");
        assert_eq!(f(-0.0), "0");
        assert_eq!(f(1e21), "1e+21");
        assert_eq!(f(1e-7), "1e-7");
        assert_eq!(f(123456789012345680000.0), "123456789012345680000");
        assert_eq!(f(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(f(f64::NAN), "null");
        assert_eq!(f(f64::NEG_INFINITY), "null");
    }

    #[test]
    fn every_special_byte_at_every_position_is_escaped_whether_the_word_scan_or_the_bytes_see_it() {
        // The plain-string shortcut (eight bytes at a time) against the canonical writer's
        // escapes, for each character that needs one (and 0xED's ordinary and surrogate
        // uses) at every position of strings up to 24 characters.
        let specials: Vec<u16> = (0u16..0x20)
            .chain([
                b'"' as u16,
                b'\\' as u16,
                0xD7FF,
                0xD800,
                0xDFFF,
                0xE9,
                0x7F,
            ])
            .collect();
        for filler in ["abcdefgh", "é✓😀ün"] {
            let chars: Vec<char> = filler.chars().collect();
            for len in 0..24usize {
                for special in &specials {
                    for at in 0..=len {
                        let mut units: Vec<u16> = Vec::new();
                        for i in 0..len {
                            if i == at {
                                units.push(*special);
                            }
                            let mut buf = [0u16; 2];
                            units.extend_from_slice(chars[i % chars.len()].encode_utf16(&mut buf));
                        }
                        if at == len {
                            units.push(*special);
                        }
                        let s = JsStr::from_utf16(&units);
                        let mut ours = String::new();
                        write_string(&s, &mut ours);
                        let mut theirs = Vec::new();
                        crate::canonical::write_escaped(s.as_bytes(), &mut theirs);
                        assert_eq!(ours.as_bytes(), &theirs[..], "{units:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn strings_are_escaped_as_json_stringify_does() {
        // `\ud800\udfff` is a valid pair (U+103FF), written raw as JSON.stringify does; a
        // lone high and a lone low surrogate stay escaped.
        let v =
            parse_str(r#""a\"\\\/\b\f\n\r\t\u0001\u001fé😀\ud800\udfff\udfff\ud800x""#).unwrap();
        assert_eq!(
            to_string(&v),
            "\"a\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\\u001fé😀\u{103FF}\\udfff\\ud800x\""
        );
    }

    #[test]
    fn round_trips_documents() {
        let text = r#"{"z":[1,-2.5,true,false,null,{}],"a":"x","":[]}"#;
        assert_eq!(to_string(&parse_str(text).unwrap()), text);
    }
}
