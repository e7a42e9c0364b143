//! A strict JSON parser (RFC 8259, as JavaScript's `JSON.parse` reads it) into [`Value`],
//! and [`validate`], the same grammar without building anything.
//!
//! It never panics and never overflows the stack: nesting deeper than [`MAX_JSON_DEPTH`]
//! is refused with an error. Escaped lone surrogates (`"\ud800"`) are kept, as JavaScript
//! keeps them. A repeated key keeps its first position and its last value, as in
//! JavaScript.
//!
//! One grammar serves both: [`Parser`] is generic over a [`Sink`] that either builds the
//! values ([`Build`]) or drops them ([`Check`]), so `validate(x).is_ok() == parse(x).is_ok()`
//! by construction (and `core/tests/json_validate.rs` checks it on JSONTestSuite).

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
    document::<Build>(input, NO_CUT)
}

/// Parses a value a binding hands over as JSON text (a node's input or output, an emitted
/// payload), of any depth: a container at [`crate::value::depth::MAX_VALUE_DEPTH`] or
/// deeper becomes [`crate::value::depth::depth_cut_marker`]. The cut part is skipped by
/// matching its brackets and strings (without recursion, so any depth is safe), not
/// checked against the whole grammar.
pub fn parse_value_text(input: &[u8]) -> Result<Value, ParseError> {
    document::<Build>(input, crate::value::depth::MAX_VALUE_DEPTH)
}

/// The `cut` of a parse that refuses nesting past [`MAX_JSON_DEPTH`] instead.
const NO_CUT: usize = usize::MAX;

/// Parses one JSON document from a string.
pub fn parse_str(input: &str) -> Result<Value, ParseError> {
    parse(input.as_bytes())
}

/// Most key paths [`parse_with_opaque`] takes (one bit each in the parser's mask).
pub const MAX_OPAQUE_PATHS: usize = 64;

/// [`parse`], except that the value at each key path in `opaque` (object keys from the
/// root, e.g. `["payload", "input"]`; the first [`MAX_OPAQUE_PATHS`] are used) is checked
/// against the grammar exactly as [`parse`] checks it, same errors and nesting limit, but
/// not built: it is [`Value::Null`] in the result. So `parse_with_opaque(x, p).is_ok() ==
/// parse(x).is_ok()`, and the rest of the document is the same. For a reader that needs a
/// document's small fields and keeps its text as it arrived (a spool's envelopes, whose
/// `input` and `output` are most of their bytes). Text, not bytes: its UTF-8 was checked
/// where it was read.
pub fn parse_with_opaque(input: &str, opaque: &[&[&str]]) -> Result<Value, ParseError> {
    let opaque = &opaque[..opaque.len().min(MAX_OPAQUE_PATHS)];
    document_with::<Build>(input.as_bytes(), NO_CUT, opaque)
}

/// Checks that `input` is one JSON document [`parse`] accepts, with the same error it would
/// give, without building the value (no allocation): for callers that hand the text on and
/// have it parsed later, elsewhere, but must refuse bad text now.
pub fn validate(input: &[u8]) -> Result<(), ParseError> {
    document::<Check>(input, NO_CUT)
}

fn document<S: Sink>(input: &[u8], cut: usize) -> Result<S::Value, ParseError> {
    if let Err(e) = std::str::from_utf8(input) {
        return Err(ParseError {
            kind: ParseErrorKind::InvalidUtf8,
            offset: e.valid_up_to(),
        });
    }
    document_with::<S>(input, cut, &[])
}

/// [`document`] on bytes known to be UTF-8.
fn document_with<S: Sink>(
    input: &[u8],
    cut: usize,
    opaque: &[&[&str]],
) -> Result<S::Value, ParseError> {
    let mut parser = Parser::<S> {
        bytes: input,
        pos: 0,
        cut,
        opaque,
        sink: std::marker::PhantomData,
    };
    parser.skip_ws();
    let track = match opaque.len() {
        0 => Track::NONE,
        n => Track {
            mask: u64::MAX >> (u64::BITS as usize - n),
            matched: 0,
        },
    };
    let value = parser.value(0, track)?;
    parser.skip_ws();
    if parser.pos != input.len() {
        return Err(parser.error(ParseErrorKind::TrailingCharacters));
    }
    Ok(value)
}

/// What the parser makes of each piece it reads.
trait Sink {
    type Value;
    type Str;
    /// A string with escapes, being decoded.
    type StrAcc;
    type Array;
    type Object;
    fn null() -> Self::Value;
    fn boolean(b: bool) -> Self::Value;
    fn string(s: Self::Str) -> Self::Value;
    /// A string without escapes (valid UTF-8, checked up front).
    fn plain_str(bytes: &[u8]) -> Self::Str;
    /// Starts decoding a string whose escape-free prefix is `prefix`.
    fn str_acc(prefix: &[u8], spare: usize) -> Self::StrAcc;
    fn push_utf8(acc: &mut Self::StrAcc, bytes: &[u8]);
    fn push_unit(acc: &mut Self::StrAcc, unit: u16);
    fn finish_str(acc: Self::StrAcc) -> Self::Str;
    /// Whether a decoded key is `name` (for [`parse_with_opaque`]'s key paths).
    fn key_is(key: &Self::Str, name: &str) -> bool;
    /// A number of valid grammar; `None` when it cannot be represented.
    fn number(text: &str, is_integer: bool) -> Option<Self::Value>;
    fn array() -> Self::Array;
    fn array_push(array: &mut Self::Array, item: Self::Value);
    fn array_end(array: Self::Array) -> Self::Value;
    fn object() -> Self::Object;
    fn object_insert(object: &mut Self::Object, key: Self::Str, value: Self::Value);
    fn object_end(object: Self::Object) -> Self::Value;
    /// What a container cut for depth becomes.
    fn cut_marker() -> Self::Value;
}

/// Builds [`Value`]s.
enum Build {}

/// An object being parsed: its members in first-seen order, and past
/// [`OBJECT_INDEX_AFTER`] keys an index to find a repeated key in O(1).
#[derive(Default)]
pub(crate) struct ObjectEntries {
    entries: Vec<(JsStr, Value)>,
    index: Option<std::collections::HashMap<JsStr, usize>>,
}

impl ObjectEntries {
    /// Room for `n` members.
    pub(crate) fn with_capacity(n: usize) -> Self {
        ObjectEntries {
            entries: Vec::with_capacity(n),
            index: None,
        }
    }

    /// Adds a member. A repeated key: the last value wins at the first key's place
    /// (JSON.parse). A linear scan per key is quadratic; past a few keys an index finds a
    /// repeat in O(1).
    #[inline]
    pub(crate) fn insert(&mut self, key: JsStr, value: Value) {
        let entries = &mut self.entries;
        if entries.len() < OBJECT_INDEX_AFTER {
            match entries.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => entries.push((key, value)),
            }
            return;
        }
        let idx = self.index.get_or_insert_with(|| {
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

    /// The object.
    #[inline]
    pub(crate) fn into_value(self) -> Value {
        Value::Object(Map::from_unique_entries(self.entries))
    }
}

impl Sink for Build {
    type Value = Value;
    type Str = JsStr;
    type StrAcc = JsStrBuilder;
    type Array = Vec<Value>;
    type Object = ObjectEntries;
    #[inline]
    fn null() -> Value {
        Value::Null
    }
    #[inline]
    fn boolean(b: bool) -> Value {
        Value::Bool(b)
    }
    #[inline]
    fn string(s: JsStr) -> Value {
        Value::String(s)
    }
    #[inline]
    fn plain_str(bytes: &[u8]) -> JsStr {
        JsStr::from_utf8_checked_elsewhere(bytes)
    }
    #[inline]
    fn str_acc(prefix: &[u8], spare: usize) -> JsStrBuilder {
        let mut out = JsStrBuilder::with_capacity(prefix.len() + spare);
        out.push_utf8_bytes(prefix);
        out
    }
    #[inline]
    fn push_utf8(acc: &mut JsStrBuilder, bytes: &[u8]) {
        acc.push_utf8_bytes(bytes);
    }
    #[inline]
    fn push_unit(acc: &mut JsStrBuilder, unit: u16) {
        acc.push_utf16_unit(unit);
    }
    #[inline]
    fn finish_str(acc: JsStrBuilder) -> JsStr {
        acc.finish()
    }
    #[inline]
    fn key_is(key: &JsStr, name: &str) -> bool {
        *key == name
    }
    #[inline]
    fn number(text: &str, is_integer: bool) -> Option<Value> {
        number_value(text, is_integer).map(Value::Number)
    }
    #[inline]
    fn array() -> Vec<Value> {
        Vec::new()
    }
    #[inline]
    fn array_push(array: &mut Vec<Value>, item: Value) {
        array.push(item);
    }
    #[inline]
    fn array_end(array: Vec<Value>) -> Value {
        Value::Array(array)
    }
    #[inline]
    fn object() -> ObjectEntries {
        ObjectEntries::default()
    }
    #[inline]
    fn object_insert(object: &mut ObjectEntries, key: JsStr, value: Value) {
        object.insert(key, value);
    }
    #[inline]
    fn object_end(object: ObjectEntries) -> Value {
        object.into_value()
    }
    fn cut_marker() -> Value {
        crate::value::depth::depth_cut_marker()
    }
}

/// Builds nothing: [`validate`].
enum Check {}

impl Sink for Check {
    type Value = ();
    type Str = ();
    type StrAcc = ();
    type Array = ();
    type Object = ();
    fn null() {}
    fn boolean(_: bool) {}
    fn string(_: ()) {}
    fn plain_str(_: &[u8]) {}
    fn str_acc(_: &[u8], _: usize) {}
    fn push_utf8(_: &mut (), _: &[u8]) {}
    fn push_unit(_: &mut (), _: u16) {}
    fn finish_str(_: ()) {}
    fn key_is(_: &(), _: &str) -> bool {
        false // nothing is tracked where nothing is built
    }
    fn number(_: &str, _: bool) -> Option<()> {
        // Every number of valid grammar parses (an overflowing one as an infinity).
        Some(())
    }
    fn array() {}
    fn array_push(_: &mut (), _: ()) {}
    fn array_end(_: ()) {}
    fn object() {}
    fn object_insert(_: &mut (), _: (), _: ()) {}
    fn object_end(_: ()) {}
    fn cut_marker() {}
}

struct Parser<'a, S> {
    bytes: &'a [u8],
    pos: usize,
    /// Containers at this level or deeper are skipped and become [`Sink::cut_marker`].
    cut: usize,
    /// Key paths whose values are checked, not built ([`parse_with_opaque`]).
    opaque: &'a [&'a [&'a str]],
    sink: std::marker::PhantomData<S>,
}

/// Where a value sits relative to [`Parser::opaque`]: the paths (one bit each) whose first
/// `matched` keys are the keys leading to it.
#[derive(Clone, Copy)]
struct Track {
    mask: u64,
    matched: usize,
}

impl Track {
    /// On no opaque path.
    const NONE: Track = Track {
        mask: 0,
        matched: 0,
    };
}

impl<'a, S: Sink> Parser<'a, S> {
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

    fn expect_literal(&mut self, literal: &[u8]) -> Result<(), ParseError> {
        for &expected in literal {
            if self.peek() != Some(expected) {
                return Err(self.unexpected());
            }
            self.pos += 1;
        }
        Ok(())
    }

    fn value(&mut self, depth: usize, track: Track) -> Result<S::Value, ParseError> {
        match self.peek() {
            None => Err(self.error(ParseErrorKind::UnexpectedEnd)),
            Some(b'n') => self.expect_literal(b"null").map(|()| S::null()),
            Some(b't') => self.expect_literal(b"true").map(|()| S::boolean(true)),
            Some(b'f') => self.expect_literal(b"false").map(|()| S::boolean(false)),
            Some(b'"') => Ok(S::string(self.string()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'[') => self.array(depth + 1),
            Some(b'{') => self.object(depth + 1, track),
            Some(_) => Err(self.unexpected()),
        }
    }

    fn array(&mut self, depth: usize) -> Result<S::Value, ParseError> {
        if depth >= self.cut {
            return self.skip_container().map(|()| S::cut_marker());
        }
        if depth > MAX_JSON_DEPTH {
            return Err(self.error(ParseErrorKind::TooDeep));
        }
        self.pos += 1; // '['
        let mut items = S::array();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(S::array_end(items));
        }
        loop {
            self.skip_ws();
            let item = self.value(depth, Track::NONE)?;
            S::array_push(&mut items, item);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(S::array_end(items));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    fn object(&mut self, depth: usize, track: Track) -> Result<S::Value, ParseError> {
        if depth >= self.cut {
            return self.skip_container().map(|()| S::cut_marker());
        }
        if depth > MAX_JSON_DEPTH {
            return Err(self.error(ParseErrorKind::TooDeep));
        }
        self.pos += 1; // '{'
        let mut object = S::object();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(S::object_end(object));
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
            let value = if track.mask == 0 {
                self.value(depth, Track::NONE)?
            } else {
                self.member(depth, track, &key)?
            };
            S::object_insert(&mut object, key, value);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(S::object_end(object));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    /// The value of the member `key` of an object on an opaque path: checked without
    /// building when a path ends at it, else parsed following the paths that go on.
    fn member(&mut self, depth: usize, track: Track, key: &S::Str) -> Result<S::Value, ParseError> {
        let (mut mask, mut whole) = (0u64, false);
        for (i, path) in self.opaque.iter().enumerate() {
            if track.mask & (1 << i) != 0
                && path.get(track.matched).is_some_and(|k| S::key_is(key, k))
            {
                mask |= 1 << i;
                whole |= path.len() == track.matched + 1;
            }
        }
        if !whole {
            let next = Track {
                mask,
                matched: track.matched + 1,
            };
            return self.value(depth, next);
        }
        // The same grammar, errors and depth accounting, building nothing.
        let mut check = Parser::<Check> {
            bytes: self.bytes,
            pos: self.pos,
            cut: NO_CUT,
            opaque: &[],
            sink: std::marker::PhantomData,
        };
        check.value(depth, Track::NONE)?;
        self.pos = check.pos;
        Ok(S::null())
    }

    /// Skips the container starting at `pos` by matching brackets outside strings.
    fn skip_container(&mut self) -> Result<(), ParseError> {
        let mut open = 0usize;
        while let Some(b) = self.peek() {
            self.pos += 1;
            match b {
                b'[' | b'{' => open += 1,
                b']' | b'}' => {
                    open -= 1;
                    if open == 0 {
                        return Ok(());
                    }
                }
                b'"' => loop {
                    match self.peek() {
                        None => return Err(self.error(ParseErrorKind::UnexpectedEnd)),
                        Some(b'\\') => self.pos = (self.pos + 2).min(self.bytes.len()),
                        Some(b'"') => {
                            self.pos += 1;
                            break;
                        }
                        Some(_) => self.pos += 1,
                    }
                },
                _ => {}
            }
        }
        Err(self.error(ParseErrorKind::UnexpectedEnd))
    }

    fn string(&mut self) -> Result<S::Str, ParseError> {
        self.pos += 1; // opening quote
        let start = self.pos;
        // Fast path: no escapes.
        self.skip_plain_string_bytes();
        while let Some(b) = self.peek() {
            match b {
                b'"' => {
                    let s = &self.bytes[start..self.pos];
                    self.pos += 1;
                    // Valid UTF-8 was checked up front, and quotes are char boundaries.
                    return Ok(S::plain_str(s));
                }
                b'\\' => break,
                0x00..=0x1F => return Err(self.error(ParseErrorKind::ControlCharacter)),
                _ => self.pos += 1,
            }
        }
        let mut out = S::str_acc(&self.bytes[start..self.pos], 16);
        loop {
            let run_start = self.pos;
            self.skip_plain_string_bytes();
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            S::push_utf8(&mut out, &self.bytes[run_start..self.pos]);
            match self.peek() {
                None => return Err(self.error(ParseErrorKind::UnexpectedEnd)),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(S::finish_str(out));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let escaped = match self.peek() {
                        None => return Err(self.error(ParseErrorKind::UnexpectedEnd)),
                        Some(e) => e,
                    };
                    self.pos += 1;
                    let unit = match escaped {
                        b'"' => b'"' as u16,
                        b'\\' => b'\\' as u16,
                        b'/' => b'/' as u16,
                        b'b' => 0x08,
                        b'f' => 0x0C,
                        b'n' => b'\n' as u16,
                        b'r' => b'\r' as u16,
                        b't' => b'\t' as u16,
                        b'u' => self.hex4()?,
                        _ => {
                            self.pos -= 1;
                            return Err(self.error(ParseErrorKind::InvalidEscape));
                        }
                    };
                    S::push_unit(&mut out, unit);
                }
                Some(_) => return Err(self.error(ParseErrorKind::ControlCharacter)),
            }
        }
    }

    /// Skips string content that needs no attention (no `"`, `\\` or control character)
    /// eight bytes at a time; stops at or before the first byte that does.
    #[inline]
    fn skip_plain_string_bytes(&mut self) {
        self.pos = skip_plain_string_bytes(self.bytes, self.pos);
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

    fn number(&mut self) -> Result<S::Value, ParseError> {
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
        S::number(text, is_integer).ok_or(ParseError {
            kind: ParseErrorKind::InvalidNumber,
            offset: start,
        })
    }
}

/// The number a token of valid JSON number grammar stands for: an integer literal that fits
/// an `i64` is an [`Number::Int`], anything else the nearest double (`None` if Rust cannot
/// read it, which valid grammar never gives).
#[inline]
pub(crate) fn number_value(text: &str, is_integer: bool) -> Option<Number> {
    if is_integer {
        if let Ok(i) = text.parse::<i64>() {
            return Some(Number::Int(i));
        }
    }
    text.parse::<f64>().ok().map(Number::Float)
}

/// From `pos`, skips string content that needs no attention (no `"`, `\\` or byte below
/// 0x20) eight bytes at a time; returns a position at or before the first byte that does
/// (the caller looks at the remaining bytes one by one).
#[inline]
pub(crate) fn skip_plain_string_bytes(bytes: &[u8], mut pos: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = bytes.get(pos..pos + 8) {
        let w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let quote = w ^ (ONES * u64::from(b'"'));
        let backslash = w ^ (ONES * u64::from(b'\\'));
        // A byte's high bit is set when it is zero (or below 0x20): exact for the lowest
        // such byte, which is all that is used.
        let found = (quote.wrapping_sub(ONES) & !quote
            | backslash.wrapping_sub(ONES) & !backslash
            | w.wrapping_sub(ONES * 0x20) & !w)
            & HIGHS;
        if found != 0 {
            return pos + (found.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    pos
}

/// How deeply the containers of `text` nest (0 for a scalar), reading only brackets and
/// strings: for text a trusted writer produced (`JSON.stringify`), whose grammar is not in
/// doubt. `None` when a string or a container is left open, or a bracket closes nothing.
pub fn nesting_depth(text: &[u8]) -> Option<usize> {
    let (mut depth, mut deepest, mut pos) = (0usize, 0usize, 0usize);
    while let Some(&b) = text.get(pos) {
        pos += 1;
        match b {
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.checked_sub(1)?,
            b'"' => loop {
                pos = skip_plain_string_bytes(text, pos);
                match text.get(pos)? {
                    b'"' => {
                        pos += 1;
                        break;
                    }
                    b'\\' => pos += 2,
                    _ => pos += 1,
                }
            },
            _ => {}
        }
    }
    (depth == 0).then_some(deepest)
}

/// Whether the containers of `text` nest less deeply than `limit`: [`nesting_depth`]
/// below `limit`, for text a trusted writer produced (`JSON.stringify`). The opening
/// brackets anywhere in the text bound its depth from above, counted in one vectorized
/// pass; only when that bound reaches `limit`, or the opening and closing
/// brackets do not pair up (a bracket inside a string, or text left open), are the strings
/// read ([`nesting_depth`]). Reading every string was a quarter of the worker's time for a
/// 1 KB tool call.
pub fn nests_less_than(text: &[u8], limit: usize) -> bool {
    // Byte counters over short chunks, so the loop runs sixteen bytes a step; `| 0x20`
    // folds `[` onto `{` and `]` onto `}` (and no other byte onto either).
    let (mut opens, mut closes) = (0usize, 0usize);
    for chunk in text.chunks(u8::MAX as usize) {
        let (mut o, mut c) = (0u8, 0u8);
        for &b in chunk {
            o += u8::from(b | 0x20 == b'{');
            c += u8::from(b | 0x20 == b'}');
        }
        opens += usize::from(o);
        closes += usize::from(c);
    }
    if opens < limit && opens == closes {
        return true;
    }
    nesting_depth(text).is_some_and(|depth| depth < limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_depth_reads_brackets_outside_strings_only() {
        assert_eq!(nesting_depth(b"1"), Some(0));
        assert_eq!(nesting_depth(br#"{"a":[1,{"b":"]]}}[[\"x"}]}"#), Some(3));
        assert_eq!(nesting_depth(br#"["\\",["#), None);
        assert_eq!(nesting_depth(br#"["open"#), None);
        assert_eq!(nesting_depth(b"]"), None);
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        assert_eq!(nesting_depth(deep.as_bytes()), Some(300));
    }

    #[test]
    fn nests_less_than_agrees_with_the_depth_of_balanced_text() {
        let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
        let texts = [
            "1",
            r#"{"a":[1,{"b":"]]}}[[\"x"}]}"#,
            r#"{"a":"[[[[[[","b":{}}"#,
            r#"[[[["{{{{"]]]]"#,
            deep.as_str(),
            r#"{"k":[{"a":1},{"b":[2,3]}],"s":"}"}"#,
        ];
        for text in texts {
            let depth = nesting_depth(text.as_bytes()).expect(text);
            for limit in 0..45 {
                assert_eq!(
                    nests_less_than(text.as_bytes(), limit),
                    depth < limit,
                    "{text} under {limit}"
                );
            }
        }
        // Left open, or a bracket in a string unpaired: read as nesting_depth reads it.
        assert!(!nests_less_than(br#"["open"#, 10));
        assert!(!nests_less_than(br#"["\",["#, 10));
        assert!(nests_less_than(br#"["[",1]"#, 10));
        assert!(!nests_less_than(br#"["[",[[1]]]"#, 3));
    }

    #[test]
    fn the_word_scan_stops_exactly_at_the_first_byte_that_needs_attention() {
        // Against a byte-at-a-time scan: every special byte (quote, backslash, each control
        // character) at every position of strings up to 40 bytes, among plain ASCII and
        // UTF-8 continuation bytes (>= 0x80, which must never look special).
        let fillers: [&[u8]; 3] = [b"abcdefgh", "é✓😀ünï".as_bytes(), b"\x7f~ !#[]"];
        let specials: Vec<u8> = (0u8..0x20).chain([b'"', b'\\']).collect();
        for filler in fillers {
            for len in 0..40usize {
                let plain: Vec<u8> = (0..len).map(|i| filler[i % filler.len()]).collect();
                let mut cases = vec![(plain.clone(), len)];
                for at in 0..len {
                    for &s in &specials {
                        let mut bytes = plain.clone();
                        bytes[at] = s;
                        cases.push((bytes, at));
                    }
                }
                for (bytes, first) in cases {
                    let mut p = Parser::<Check> {
                        bytes: &bytes,
                        pos: 0,
                        cut: NO_CUT,
                        opaque: &[],
                        sink: std::marker::PhantomData,
                    };
                    p.skip_plain_string_bytes();
                    assert!(
                        p.pos <= first,
                        "{bytes:?}: skipped past byte {first} to {}",
                        p.pos
                    );
                    assert!(
                        p.pos == first || bytes.len() - p.pos < 8,
                        "{bytes:?}: stopped early at {}",
                        p.pos
                    );
                }
            }
        }
    }

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
