//! Packed values: the binary form of a JSON value that a binding writes on the application
//! thread in place of JSON text, for the session's worker to decode
//! ([`crate::host_value::HostValue::Packed`]).
//!
//! Text costs the writer an escape check per string and a shortest-spelling search per
//! double, and the reader a parse; a packed value is a tag per value, numbers as their
//! eight bytes, strings and keys as a length and their UTF-8 bytes, and containers as their
//! member count: nothing to escape, spell or scan for. It never leaves the process and has
//! no version: the writer and the reader are this module.
//!
//! Layout (integers little-endian): `0` null, `1` true, `2` false, `3` + i64, `4` + f64
//! (finite), `5` + string, `6` + u32 count + values (array), `7` + u32 count + (string,
//! value) pairs (object), where a string is a u32 byte length and UTF-8 bytes.
//!
//! The reader trusts nothing: a truncated buffer, an unknown tag, bytes that are not UTF-8,
//! a non-finite double, nesting past [`MAX_JSON_DEPTH`] or bytes after the value are an
//! error, and a repeated key is resolved as the JSON parser resolves it.

use super::{JsStr, Number, ObjectEntries, Value, MAX_JSON_DEPTH};
use thiserror::Error;

const TAG_NULL: u8 = 0;
const TAG_TRUE: u8 = 1;
const TAG_FALSE: u8 = 2;
const TAG_INT: u8 = 3;
const TAG_FLOAT: u8 = 4;
const TAG_STRING: u8 = 5;
const TAG_ARRAY: u8 = 6;
const TAG_OBJECT: u8 = 7;

/// How deep a binding packs a value; a deeper one is converted instead (well inside the
/// reader's [`MAX_JSON_DEPTH`]).
pub const MAX_PACKED_DEPTH: usize = 128;

/// The most items the reader reserves room for ahead of a container.
const PREALLOCATED_ITEMS: usize = 64;

/// Strings up to this many bytes are copied with fixed-size moves rather than a `memcpy`
/// call (most keys and many values).
const SHORT_STRING: usize = 16;

/// Why packed bytes could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PackedError {
    /// The bytes end inside a value.
    #[error("packed value ends early")]
    Truncated,
    /// A byte where a value starts is no tag.
    #[error("unknown packed tag {0}")]
    UnknownTag(u8),
    /// A string's bytes are not UTF-8.
    #[error("a packed string is not UTF-8")]
    NotUtf8,
    /// A double that JSON cannot hold.
    #[error("a packed double is not finite")]
    NotFinite,
    /// Containers nested deeper than [`MAX_JSON_DEPTH`].
    #[error("packed value nested deeper than {MAX_JSON_DEPTH}")]
    TooDeep,
    /// Bytes after the value.
    #[error("bytes after the packed value")]
    Trailing,
}

/// Writes packed values into a buffer a binding reuses from call to call.
#[derive(Debug, Default)]
pub struct PackedWriter {
    bytes: Vec<u8>,
}

impl PackedWriter {
    /// An empty writer.
    pub const fn new() -> Self {
        PackedWriter { bytes: Vec::new() }
    }

    /// Forgets what was written, keeping the buffer.
    #[inline]
    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    /// What was written.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The buffer's capacity (a binding drops a buffer that one huge value grew).
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// `null`.
    #[inline]
    pub fn null(&mut self) {
        self.bytes.push(TAG_NULL);
    }

    /// `true` or `false`.
    #[inline]
    pub fn bool(&mut self, b: bool) {
        self.bytes.push(if b { TAG_TRUE } else { TAG_FALSE });
    }

    /// An integer.
    #[inline]
    pub fn int(&mut self, i: i64) {
        self.tagged_word(TAG_INT, i.to_le_bytes());
    }

    /// A double; `false`, writing nothing, for NaN and the infinities (JSON has none).
    #[inline]
    pub fn float(&mut self, f: f64) -> bool {
        if !f.is_finite() {
            return false;
        }
        self.tagged_word(TAG_FLOAT, f.to_le_bytes());
        true
    }

    /// A string from its UTF-8 bytes; `false` past 4 GiB.
    #[inline]
    pub fn string(&mut self, utf8: &[u8]) -> bool {
        self.bytes.push(TAG_STRING);
        self.key(utf8)
    }

    /// An object member's key (UTF-8 bytes), before its value; `false` past 4 GiB.
    #[inline]
    pub fn key(&mut self, utf8: &[u8]) -> bool {
        let Ok(len) = u32::try_from(utf8.len()) else {
            return false;
        };
        let n = utf8.len();
        self.bytes.reserve(4 + n.max(SHORT_STRING));
        let at = self.bytes.len();
        // SAFETY: `reserve` left room for 4 + max(n, SHORT_STRING) bytes past `at`; the
        // length goes to `at..at + 4` and the bytes to `at + 4..at + 4 + n`, the fixed-size
        // moves for short strings writing only inside that range (overlapping each other
        // when n is not a multiple of their size) and reading only inside `utf8`.
        unsafe {
            let dst = self.bytes.as_mut_ptr().add(at);
            std::ptr::copy_nonoverlapping(len.to_le_bytes().as_ptr(), dst, 4);
            let (src, dst) = (utf8.as_ptr(), dst.add(4));
            if n > SHORT_STRING {
                std::ptr::copy_nonoverlapping(src, dst, n);
            } else if n >= 8 {
                std::ptr::copy_nonoverlapping(src, dst, 8);
                std::ptr::copy_nonoverlapping(src.add(n - 8), dst.add(n - 8), 8);
            } else if n >= 4 {
                std::ptr::copy_nonoverlapping(src, dst, 4);
                std::ptr::copy_nonoverlapping(src.add(n - 4), dst.add(n - 4), 4);
            } else {
                for i in 0..n {
                    *dst.add(i) = *src.add(i);
                }
            }
            self.bytes.set_len(at + 4 + n);
        }
        true
    }

    /// An array of `len` values, which follow; `false` past `u32::MAX` of them.
    #[inline]
    pub fn array(&mut self, len: usize) -> bool {
        self.container(TAG_ARRAY, len)
    }

    /// An object of `len` members, which follow as [`PackedWriter::key`] then the value;
    /// `false` past `u32::MAX` of them.
    #[inline]
    pub fn object(&mut self, len: usize) -> bool {
        self.container(TAG_OBJECT, len)
    }

    #[inline]
    fn container(&mut self, tag: u8, len: usize) -> bool {
        let Ok(len) = u32::try_from(len) else {
            return false;
        };
        let l = len.to_le_bytes();
        self.bytes.extend_from_slice(&[tag, l[0], l[1], l[2], l[3]]);
        true
    }

    #[inline]
    fn tagged_word(&mut self, tag: u8, w: [u8; 8]) {
        self.bytes
            .extend_from_slice(&[tag, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
    }
}

/// Reads a packed value back (the whole of `bytes`).
pub fn decode(bytes: &[u8]) -> Result<Value, PackedError> {
    let mut reader = Reader { bytes, pos: 0 };
    let value = reader.value(0)?;
    if reader.pos != bytes.len() {
        return Err(PackedError::Trailing);
    }
    Ok(value)
}

struct Reader<'b> {
    bytes: &'b [u8],
    pos: usize,
}

impl<'b> Reader<'b> {
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'b [u8], PackedError> {
        let end = self.pos.checked_add(n).ok_or(PackedError::Truncated)?;
        let piece = self
            .bytes
            .get(self.pos..end)
            .ok_or(PackedError::Truncated)?;
        self.pos = end;
        Ok(piece)
    }

    #[inline]
    fn word(&mut self) -> Result<[u8; 8], PackedError> {
        let piece = self.take(8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(piece);
        Ok(w)
    }

    #[inline]
    fn count(&mut self) -> Result<usize, PackedError> {
        let piece = self.take(4)?;
        Ok(u32::from_le_bytes([piece[0], piece[1], piece[2], piece[3]]) as usize)
    }

    #[inline]
    fn string(&mut self) -> Result<JsStr, PackedError> {
        let len = self.count()?;
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes).map_err(|_| PackedError::NotUtf8)?;
        Ok(JsStr::from_utf8_checked_elsewhere(bytes))
    }

    /// Room to reserve ahead for a container of `count` items of at least `item_bytes`
    /// bytes each: no more than the bytes left could hold, and never more than
    /// [`PREALLOCATED_ITEMS`] (a longer container grows as it is read), so a corrupt count,
    /// even at every level of a deep nest, cannot make the reader allocate more than a
    /// small multiple of its input.
    #[inline]
    fn room(&self, count: usize, item_bytes: usize) -> usize {
        count
            .min((self.bytes.len() - self.pos) / item_bytes)
            .min(PREALLOCATED_ITEMS)
    }

    fn value(&mut self, depth: usize) -> Result<Value, PackedError> {
        let tag = *self.take(1)?.first().ok_or(PackedError::Truncated)?;
        Ok(match tag {
            TAG_NULL => Value::Null,
            TAG_TRUE => Value::Bool(true),
            TAG_FALSE => Value::Bool(false),
            TAG_INT => Value::Number(Number::Int(i64::from_le_bytes(self.word()?))),
            TAG_FLOAT => {
                let f = f64::from_le_bytes(self.word()?);
                if !f.is_finite() {
                    return Err(PackedError::NotFinite);
                }
                Value::Number(Number::Float(f))
            }
            TAG_STRING => Value::String(self.string()?),
            TAG_ARRAY | TAG_OBJECT if depth >= MAX_JSON_DEPTH => return Err(PackedError::TooDeep),
            TAG_ARRAY => {
                let n = self.count()?;
                let mut items = Vec::with_capacity(self.room(n, 1));
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Value::Array(items)
            }
            TAG_OBJECT => {
                let n = self.count()?;
                // A member is at least a key's length and a value's tag.
                let mut members = ObjectEntries::with_capacity(self.room(n, 5));
                for _ in 0..n {
                    let key = self.string()?;
                    let value = self.value(depth + 1)?;
                    members.insert(key, value);
                }
                members.into_value()
            }
            other => return Err(PackedError::UnknownTag(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    /// Writes `value` packed (as a binding would, walking it).
    fn pack(value: &Value, out: &mut PackedWriter) -> bool {
        match value {
            Value::Null => out.null(),
            Value::Bool(b) => out.bool(*b),
            Value::Number(Number::Int(i)) => out.int(*i),
            Value::Number(Number::Float(f)) => return out.float(*f),
            Value::Number(_) => return false,
            Value::String(s) => return s.as_str().is_some() && out.string(s.as_bytes()),
            Value::Array(items) => {
                out.array(items.len());
                return items.iter().all(|v| pack(v, out));
            }
            Value::Object(map) => {
                out.object(map.len());
                return map
                    .iter()
                    .all(|(k, v)| k.as_str().is_some() && out.key(k.as_bytes()) && pack(v, out));
            }
        }
        true
    }

    fn round_trip(value: &Value) -> Value {
        let mut out = PackedWriter::new();
        assert!(pack(value, &mut out), "{value:?}");
        decode(out.as_bytes()).unwrap()
    }

    #[test]
    fn values_read_back_as_written() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../bench/sample-1k.json"
        ))
        .unwrap();
        let sample = json::parse_str(&text).unwrap();
        assert_eq!(round_trip(&sample), sample);
        for text in [
            "null",
            "[true,false,0,-1,9007199254740993,-9223372036854775808,9223372036854775807]",
            "[0.5,-0.0,1e21,5e-324,1.7976931348623157e308,1.0]",
            r#"{"":"","a\"\\\n":"é😀\u2028","long key past sixteen bytes":"a value longer than sixteen bytes"}"#,
            r#"[[],{},[[{"x":[null]}]]]"#,
        ] {
            let value = json::parse_str(text).unwrap();
            let back = round_trip(&value);
            assert_eq!(json::to_string(&back), json::to_string(&value));
            assert_eq!(back, value);
        }
        // -0.0 stays a negative zero, 1.0 a double.
        let back = round_trip(&json::parse_str("[-0.0,1.0]").unwrap());
        let items = back.as_array().unwrap();
        assert!(
            matches!(items[0], Value::Number(Number::Float(f)) if f == 0.0 && f.is_sign_negative())
        );
        assert!(matches!(items[1], Value::Number(Number::Float(f)) if f == 1.0));
    }

    #[test]
    fn every_string_length_round_trips() {
        for n in 0..70 {
            let alphabet: Vec<char> = "abcdefghé✓".chars().collect();
            let s: String = (0..n).map(|i| alphabet[i % alphabet.len()]).collect();
            let mut out = PackedWriter::new();
            assert!(out.object(1) && out.key(s.as_bytes()) && out.string(s.as_bytes()));
            let back = decode(out.as_bytes()).unwrap();
            assert_eq!(
                back.as_object().unwrap().get(&s).and_then(Value::as_str),
                Some(s.as_str()),
                "{n}"
            );
        }
    }

    #[test]
    fn what_cannot_be_written_is_refused_by_the_writer() {
        let mut out = PackedWriter::new();
        for f in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(!out.float(f));
        }
        assert!(out.as_bytes().is_empty());
    }

    #[test]
    fn bad_bytes_are_an_error_never_a_panic() {
        let mut good = PackedWriter::new();
        assert!(pack(
            &json::parse_str(r#"{"k":[1,2.5,"s",null,true]}"#).unwrap(),
            &mut good
        ));
        let good = good.as_bytes().to_vec();
        // Every truncation is an error.
        for end in 0..good.len() {
            assert!(decode(&good[..end]).is_err(), "{end}");
        }
        let mut trailing = good.clone();
        trailing.push(TAG_NULL);
        assert_eq!(decode(&trailing), Err(PackedError::Trailing));
        assert_eq!(decode(&[9]), Err(PackedError::UnknownTag(9)));
        assert_eq!(
            decode(&[TAG_STRING, 1, 0, 0, 0, 0xFF]),
            Err(PackedError::NotUtf8)
        );
        let mut nan = vec![TAG_FLOAT];
        nan.extend_from_slice(&f64::NAN.to_le_bytes());
        assert_eq!(decode(&nan), Err(PackedError::NotFinite));
        // A huge count with nothing behind it: an error, and no huge allocation, even with
        // such a count at every level of a deep nest (each level reserves at most
        // PREALLOCATED_ITEMS).
        assert_eq!(
            decode(&[TAG_ARRAY, 0xFF, 0xFF, 0xFF, 0xFF]),
            Err(PackedError::Truncated)
        );
        for tag in [TAG_ARRAY, TAG_OBJECT] {
            let mut nest = Vec::new();
            for _ in 0..MAX_JSON_DEPTH - 1 {
                nest.extend_from_slice(&[tag, 0xFF, 0xFF, 0xFF, 0xFF]);
                if tag == TAG_OBJECT {
                    nest.extend_from_slice(&[0, 0, 0, 0]); // an empty key
                }
            }
            assert_eq!(decode(&nest), Err(PackedError::Truncated));
        }
        let mut deep = Vec::new();
        for _ in 0..=MAX_JSON_DEPTH {
            deep.extend_from_slice(&[TAG_ARRAY, 1, 0, 0, 0]);
        }
        deep.push(TAG_NULL);
        assert_eq!(decode(&deep), Err(PackedError::TooDeep));
        // Every single-byte corruption of a good value decodes or fails, never panics.
        for at in 0..good.len() {
            for b in [0u8, 1, 5, 7, 0x7F, 0xFF] {
                let mut bad = good.clone();
                bad[at] = b;
                let _ = decode(&bad);
            }
        }
    }

    #[test]
    fn a_repeated_key_resolves_as_the_parser_resolves_it() {
        let mut out = PackedWriter::new();
        assert!(out.object(3));
        for (k, v) in [("a", 1), ("b", 2), ("a", 3)] {
            assert!(out.key(k.as_bytes()));
            out.int(v);
        }
        assert_eq!(
            decode(out.as_bytes()).unwrap(),
            json::parse_str(r#"{"a":1,"b":2,"a":3}"#).unwrap()
        );
    }
}
