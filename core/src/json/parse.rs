//! A strict JSON parser (RFC 8259, as JavaScript's `JSON.parse` reads it) into [`Value`].
//!
//! It never panics and never overflows the stack: nesting deeper than [`MAX_JSON_DEPTH`]
//! is refused with an error. Escaped lone surrogates (`"\ud800"`) are kept, as JavaScript
//! keeps them. A repeated key keeps its first position and its last value, as in
//! JavaScript.

use super::string::{JsStr, JsStrBuilder};
use super::value::{Map, Number, Value};
use thiserror::Error;

/// How deeply arrays and objects may nest in a parsed document.
pub const MAX_JSON_DEPTH: usize = 512;

/// How many keys an object may have before the parser indexes them to find duplicates
/// (below it a linear scan is faster than hashing).
const OBJECT_INDEX_AFTER: usize = 16;

/// Why a document is not JSON.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{kind} at byte {offset}")]
pub struct ParseError {
    /// What is wrong.
    pub kind: ParseErrorKind,
    /// Byte offset into the input where it went wrong.
    pub offset: usize,
}

/// The kinds of [`ParseError`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseErrorKind {
    /// The input is not valid UTF-8.
    #[error("invalid UTF-8")]
    InvalidUtf8,
    /// The input ended inside a value.
    #[error("unexpected end of input")]
    UnexpectedEnd,
    /// A character that cannot start or continue a value here.
    #[error("unexpected character {0:?}")]
    UnexpectedChar(char),
    /// Something other than white space after the value.
    #[error("trailing characters after the JSON value")]
    TrailingCharacters,
    /// A malformed number.
    #[error("invalid number")]
    InvalidNumber,
    /// A malformed escape sequence in a string.
    #[error("invalid escape sequence")]
    InvalidEscape,
    /// A raw control character (below U+0020) inside a string.
    #[error("unescaped control character in string")]
    ControlCharacter,
    /// Nesting deeper than [`MAX_JSON_DEPTH`].
    #[error("nesting deeper than {MAX_JSON_DEPTH} levels")]
    TooDeep,
}

/// Parses one JSON document from UTF-8 bytes.
pub fn parse(input: &[u8]) -> Result<Value, ParseError> {
    if let Err(e) = std::str::from_utf8(input) {
        return Err(ParseError {
            kind: ParseErrorKind::InvalidUtf8,
            offset: e.valid_up_to(),
        });
    }
    let mut parser = Parser {
        bytes: input,
        pos: 0,
    };
    parser.skip_ws();
    let value = parser.value(0)?;
    parser.skip_ws();
    if parser.pos != input.len() {
        return Err(parser.error(ParseErrorKind::TrailingCharacters));
    }
    Ok(value)
}

/// Parses one JSON document from a string.
pub fn parse_str(input: &str) -> Result<Value, ParseError> {
    parse(input.as_bytes())
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, kind: ParseErrorKind) -> ParseError {
        ParseError {
            kind,
            offset: self.pos,
        }
    }

    fn unexpected(&self) -> ParseError {
        match self.peek_char() {
            Some(c) => self.error(ParseErrorKind::UnexpectedChar(c)),
            None => self.error(ParseErrorKind::UnexpectedEnd),
        }
    }

    fn peek_char(&self) -> Option<char> {
        // The input is valid UTF-8 and `pos` is always on a character boundary here.
        std::str::from_utf8(&self.bytes[self.pos..])
            .ok()
            .and_then(|s| s.chars().next())
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect_literal(&mut self, literal: &[u8], value: Value) -> Result<Value, ParseError> {
        for &expected in literal {
            if self.peek() != Some(expected) {
                return Err(self.unexpected());
            }
            self.pos += 1;
        }
        Ok(value)
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        match self.peek() {
            None => Err(self.error(ParseErrorKind::UnexpectedEnd)),
            Some(b'n') => self.expect_literal(b"null", Value::Null),
            Some(b't') => self.expect_literal(b"true", Value::Bool(true)),
            Some(b'f') => self.expect_literal(b"false", Value::Bool(false)),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'[') => self.array(depth + 1),
            Some(b'{') => self.object(depth + 1),
            Some(_) => Err(self.unexpected()),
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > MAX_JSON_DEPTH {
            return Err(self.error(ParseErrorKind::TooDeep));
        }
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > MAX_JSON_DEPTH {
            return Err(self.error(ParseErrorKind::TooDeep));
        }
        self.pos += 1; // '{'
        let map = Map::new();
        // Duplicate keys: the last value wins at the first key's place (JSON.parse). A linear
        // scan per key is quadratic; past a few keys an index finds a repeat in O(1).
        let mut index: Option<std::collections::HashMap<JsStr, usize>> = None;
        let mut entries: Vec<(JsStr, Value)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(map));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.unexpected());
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.unexpected());
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth)?;
            if entries.len() < OBJECT_INDEX_AFTER {
                match entries.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => slot.1 = value,
                    None => entries.push((key, value)),
                }
            } else {
                let idx = index.get_or_insert_with(|| {
                    entries
                        .iter()
                        .enumerate()
                        .map(|(i, (k, _))| (k.clone(), i))
                        .collect()
                });
                match idx.get(&key) {
                    Some(&i) => entries[i].1 = value,
                    None => {
                        idx.insert(key.clone(), entries.len());
                        entries.push((key, value));
                    }
                }
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(Map::from_unique_entries(entries)));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    fn string(&mut self) -> Result<JsStr, ParseError> {
        self.pos += 1; // opening quote
        let start = self.pos;
        // Fast path: no escapes.
        while let Some(b) = self.peek() {
            match b {
                b'"' => {
                    let s = &self.bytes[start..self.pos];
                    self.pos += 1;
                    // Valid UTF-8 was checked up front, and quotes are char boundaries.
                    return Ok(JsStr::from_utf8_checked_elsewhere(s));
                }
                b'\\' => break,
                0x00..=0x1F => return Err(self.error(ParseErrorKind::ControlCharacter)),
                _ => self.pos += 1,
            }
        }
        let mut out = JsStrBuilder::with_capacity(self.pos - start + 16);
        out.push_utf8_bytes(&self.bytes[start..self.pos]);
        loop {
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_utf8_bytes(&self.bytes[run_start..self.pos]);
            match self.peek() {
                None => return Err(self.error(ParseErrorKind::UnexpectedEnd)),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out.finish());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let escaped = match self.peek() {
                        None => return Err(self.error(ParseErrorKind::UnexpectedEnd)),
                        Some(e) => e,
                    };
                    self.pos += 1;
                    match escaped {
                        b'"' => out.push_utf16_unit(b'"' as u16),
                        b'\\' => out.push_utf16_unit(b'\\' as u16),
                        b'/' => out.push_utf16_unit(b'/' as u16),
                        b'b' => out.push_utf16_unit(0x08),
                        b'f' => out.push_utf16_unit(0x0C),
                        b'n' => out.push_utf16_unit(b'\n' as u16),
                        b'r' => out.push_utf16_unit(b'\r' as u16),
                        b't' => out.push_utf16_unit(b'\t' as u16),
                        b'u' => {
                            let unit = self.hex4()?;
                            out.push_utf16_unit(unit);
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.error(ParseErrorKind::InvalidEscape));
                        }
                    }
                }
                Some(_) => return Err(self.error(ParseErrorKind::ControlCharacter)),
            }
        }
    }

    fn hex4(&mut self) -> Result<u16, ParseError> {
        let mut unit: u16 = 0;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(b @ b'0'..=b'9') => b - b'0',
                Some(b @ b'a'..=b'f') => b - b'a' + 10,
                Some(b @ b'A'..=b'F') => b - b'A' + 10,
                None => return Err(self.error(ParseErrorKind::UnexpectedEnd)),
                Some(_) => return Err(self.error(ParseErrorKind::InvalidEscape)),
            };
            unit = (unit << 4) | digit as u16;
            self.pos += 1;
        }
        Ok(unit)
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                }
            }
            _ => return Err(self.error(ParseErrorKind::InvalidNumber)),
        }
        let mut is_integer = true;
        if self.peek() == Some(b'.') {
            is_integer = false;
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error(ParseErrorKind::InvalidNumber));
            }
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            is_integer = false;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error(ParseErrorKind::InvalidNumber));
            }
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
        }
        // The slice is ASCII by construction.
        let text = std::str::from_utf8(&self.bytes[start..self.pos]).unwrap_or("0");
        if is_integer {
            if let Ok(i) = text.parse::<i64>() {
                return Ok(Value::Number(Number::Int(i)));
            }
        }
        match text.parse::<f64>() {
            Ok(f) => Ok(Value::Number(Number::Float(f))),
            Err(_) => Err(ParseError {
                kind: ParseErrorKind::InvalidNumber,
                offset: start,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_documents_in_order() {
        let v = parse_str(r#"{"b":[1,2.5,"x"],"a":{"c":null,"d":true}}"#).unwrap();
        let keys: Vec<_> = v
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.to_string())
            .collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(
            v.get("b").unwrap().as_array().unwrap()[1].as_f64(),
            Some(2.5)
        );
    }

    #[test]
    fn repeated_key_keeps_first_position_and_last_value() {
        let v = parse_str(r#"{"a":1,"b":2,"a":3}"#).unwrap();
        let m = v.as_object().unwrap();
        assert_eq!(
            m.keys().map(|k| k.to_string()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(m.get("a").unwrap().as_i64(), Some(3));
    }

    #[test]
    fn keeps_escaped_lone_surrogates() {
        let v = parse_str(r#""a\ud800b\ud83d\ude00""#).unwrap();
        let s = v.as_js_str().unwrap();
        assert!(s.has_lone_surrogate());
        assert_eq!(
            s.utf16_units().collect::<Vec<_>>(),
            vec![0x61, 0xD800, 0x62, 0xD83D, 0xDE00]
        );
    }

    #[test]
    fn joins_an_escaped_surrogate_pair_into_one_character() {
        // As JSON.parse does: "\ud83d\ude00" is U+1F600, not two lone surrogates.
        for text in [
            r#""\ud83d\ude00""#,
            r#""x\ud83d\ude00""#,
            r#""\n\ud83d\ude00\u0041""#,
        ] {
            let v = parse_str(text).unwrap();
            let s = v.as_js_str().unwrap();
            assert!(!s.has_lone_surrogate(), "{text}");
            assert!(s.as_str().unwrap().contains('\u{1F600}'), "{text}");
        }
        assert_eq!(
            parse_str(r#""\ud83d\ude00""#).unwrap(),
            Value::from("\u{1F600}")
        );
    }

    #[test]
    fn refuses_deep_nesting_without_overflowing() {
        let deep = "[".repeat(100_000);
        assert_eq!(parse_str(&deep).unwrap_err().kind, ParseErrorKind::TooDeep);
        let ok = format!(
            "{}{}",
            "[".repeat(MAX_JSON_DEPTH),
            "]".repeat(MAX_JSON_DEPTH)
        );
        assert!(parse_str(&ok).is_ok());
    }

    #[test]
    fn reports_where_it_went_wrong() {
        let err = parse_str("[1,]").unwrap_err();
        assert_eq!(err.offset, 3);
        assert_eq!(err.to_string(), "unexpected character ']' at byte 3");
        assert_eq!(
            parse_str("01").unwrap_err().kind,
            ParseErrorKind::TrailingCharacters
        );
        assert_eq!(
            parse(b"\"\xff\"").unwrap_err().kind,
            ParseErrorKind::InvalidUtf8
        );
    }
}

#[cfg(test)]
mod object_index_tests {
    use super::super::{parse_str, to_string};

    #[test]
    fn duplicates_keep_the_first_place_and_the_last_value_on_both_sides_of_the_index() {
        let mut text = String::from("{");
        for i in 0..40 {
            text.push_str(&format!("\"k{i}\":{i},"));
        }
        text.push_str("\"k3\":\"late\",\"k30\":\"later\",\"z\":1}");
        let out = to_string(&parse_str(&text).unwrap());
        assert!(
            out.starts_with(r#"{"k0":0,"k1":1,"k2":2,"k3":"late","k4":4"#),
            "{out}"
        );
        assert!(out.contains(r#""k29":29,"k30":"later","k31":31"#), "{out}");
        assert!(out.ends_with(r#""k39":39,"z":1}"#), "{out}");
        assert_eq!(
            to_string(&parse_str(r#"{"a":1,"b":2,"a":3}"#).unwrap()),
            r#"{"a":3,"b":2}"#
        );
    }

    #[test]
    fn a_large_object_parses_in_linear_time() {
        let mut text = String::from("{");
        for i in 0..200_000 {
            text.push_str(&format!("\"k{i}\":1,"));
        }
        text.push_str("\"end\":0}");
        let started = std::time::Instant::now();
        let v = parse_str(&text).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 200_001);
        assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
    }
}
