//! [`JsStr`]: a string that can hold whatever a JavaScript, Python or Ruby string holds.
//!
//! Payload values come from languages whose strings may contain a lone UTF-16 surrogate
//! (`"\ud800x"` is a valid JavaScript string and a valid JSON escape). A Rust `String`
//! cannot hold one, so payload strings are stored as WTF-8: UTF-8 that may also encode a
//! lone surrogate (U+D800..U+DFFF) as its three-byte sequence. A paired surrogate is always
//! stored as the four-byte UTF-8 of its code point, so a `JsStr` without lone surrogates
//! is byte-for-byte valid UTF-8.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

/// An immutable WTF-8 string (UTF-8 plus lone surrogates).
///
/// Strings up to [`INLINE_BYTES`] bytes (most object keys and many values) are stored in
/// the value itself, without an allocation: a kilobyte of JSON holds dozens of them, and
/// their allocations (made on the application thread, freed on the session's worker) were
/// a good part of what converting a host value cost.
#[derive(Clone)]
pub struct JsStr(Repr);

/// The longest string stored inline (the size of the heap form's pointer and length, plus
/// the enum's spare bytes: a `JsStr` is 24 bytes either way).
pub const INLINE_BYTES: usize = 22;

#[derive(Clone)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE_BYTES] },
    Heap(Box<[u8]>),
}

impl Repr {
    #[inline]
    fn of(bytes: &[u8]) -> Repr {
        if bytes.len() <= INLINE_BYTES {
            let mut inline = [0u8; INLINE_BYTES];
            inline[..bytes.len()].copy_from_slice(bytes);
            Repr::Inline {
                len: bytes.len() as u8,
                bytes: inline,
            }
        } else {
            Repr::Heap(bytes.into())
        }
    }

    #[inline]
    fn of_vec(bytes: Vec<u8>) -> Repr {
        if bytes.len() <= INLINE_BYTES {
            Repr::of(&bytes)
        } else {
            Repr::Heap(bytes.into_boxed_slice())
        }
    }
}

impl PartialEq for JsStr {
    #[inline]
    fn eq(&self, other: &JsStr) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for JsStr {}

impl std::hash::Hash for JsStr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl Default for JsStr {
    fn default() -> Self {
        JsStr::new()
    }
}

impl JsStr {
    /// The empty string.
    pub fn new() -> Self {
        JsStr(Repr::of(&[]))
    }

    /// Builds a string from UTF-16 code units; unpaired surrogates are kept as they are.
    pub fn from_utf16(units: &[u16]) -> Self {
        let mut builder = JsStrBuilder::with_capacity(units.len());
        for unit in units {
            builder.push_utf16_unit(*unit);
        }
        builder.finish()
    }

    /// A string from bytes the caller already knows to be UTF-8 (the parser validates its
    /// whole input once, then slices it at ASCII quotes, which are always char boundaries).
    pub(crate) fn from_utf8_checked_elsewhere(bytes: &[u8]) -> Self {
        debug_assert!(std::str::from_utf8(bytes).is_ok());
        JsStr(Repr::of(bytes))
    }

    /// Wraps WTF-8 bytes, checking that they are well-formed WTF-8.
    pub fn from_wtf8(bytes: &[u8]) -> Option<Self> {
        if is_wtf8(bytes) {
            Some(JsStr(Repr::of(bytes)))
        } else {
            None
        }
    }

    /// The WTF-8 bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..*len as usize],
            Repr::Heap(bytes) => bytes,
        }
    }

    /// The string as `&str` when it holds no lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(self.as_bytes()).ok()
    }

    /// The string with every lone surrogate replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> Cow<'_, str> {
        match self.as_str() {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(
                self.code_points()
                    .map(|cp| char::from_u32(cp).unwrap_or('\u{FFFD}'))
                    .collect(),
            ),
        }
    }

    /// Length in WTF-8 bytes; equals the UTF-8 length JavaScript's `Buffer.byteLength`
    /// reports (a lone surrogate counts 3, as its replacement character does).
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the string is empty.
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }

    /// Whether the string contains a lone surrogate.
    pub fn has_lone_surrogate(&self) -> bool {
        self.as_str().is_none()
    }

    /// Code points, lone surrogates included (as 0xD800..=0xDFFF).
    pub fn code_points(&self) -> CodePoints<'_> {
        CodePoints {
            bytes: self.as_bytes(),
            pos: 0,
        }
    }

    /// UTF-16 code units, as a JavaScript string would hold them.
    pub fn utf16_units(&self) -> impl Iterator<Item = u16> + '_ {
        self.code_points().flat_map(|cp| {
            if cp >= 0x10000 {
                let v = cp - 0x10000;
                [
                    Some(0xD800 | (v >> 10) as u16),
                    Some(0xDC00 | (v & 0x3FF) as u16),
                ]
            } else {
                [Some(cp as u16), None]
            }
            .into_iter()
            .flatten()
        })
    }

    /// Length in UTF-16 code units (JavaScript's `length`).
    pub fn utf16_len(&self) -> usize {
        utf16_len_of_wtf8(self.as_bytes())
    }

    /// Compares by UTF-16 code units, the order of JavaScript's default `sort`.
    pub fn cmp_utf16(&self, other: &JsStr) -> Ordering {
        cmp_utf16_bytes(self.as_bytes(), other.as_bytes())
    }

    /// JavaScript's `slice(start, end)` in UTF-16 units; may split a surrogate pair, which
    /// leaves a lone surrogate, exactly as JavaScript does.
    pub fn slice_utf16(&self, start: usize, end: usize) -> JsStr {
        if let Some(s) = self.as_str() {
            if s.is_ascii() {
                let end = end.min(s.len());
                let start = start.min(end);
                return JsStr::from(&s[start..end]);
            }
        }
        let mut builder = JsStrBuilder::with_capacity(end.saturating_sub(start).min(self.len()));
        for (i, unit) in self.utf16_units().enumerate() {
            if i >= end {
                break;
            }
            if i >= start {
                builder.push_utf16_unit(unit);
            }
        }
        builder.finish()
    }
}

/// Compares two WTF-8 byte strings in UTF-16 code-unit order.
///
/// UTF-8 byte order equals code-point order, which differs from UTF-16 order only where a
/// supplementary character (stored as a surrogate pair, 0xD800..) meets a BMP character in
/// 0xE000..=0xFFFF. Comparing code points with that one correction gives UTF-16 order.
pub fn cmp_utf16_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let mut ia = CodePoints { bytes: a, pos: 0 };
    let mut ib = CodePoints { bytes: b, pos: 0 };
    // Fast path: skip the common ASCII prefix byte-wise.
    let common = a
        .iter()
        .zip(b.iter())
        .take_while(|(x, y)| x == y && **x < 0x80)
        .count();
    ia.pos = common;
    ib.pos = common;
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x == y => continue,
            (Some(x), Some(y)) => {
                // From the first different code point on, compare the UTF-16 units. Their
                // first units can tie (a lone high surrogate against a pair that starts
                // with it): the next units, which may belong to the next code point,
                // decide.
                let a_units = std::iter::once(x).chain(ia).flat_map(utf16_units);
                let b_units = std::iter::once(y).chain(ib).flat_map(utf16_units);
                return a_units.cmp(b_units);
            }
        }
    }
}

/// The one or two UTF-16 units of a code point (a lone surrogate is one unit).
fn utf16_units(cp: u32) -> impl Iterator<Item = u32> {
    let (units, n) = if cp >= 0x10000 {
        let c = cp - 0x10000;
        ([0xD800 | (c >> 10), 0xDC00 | (c & 0x3FF)], 2)
    } else {
        ([cp, 0], 1)
    };
    units.into_iter().take(n)
}

fn utf16_len_of_wtf8(bytes: &[u8]) -> usize {
    // Every lead byte counts one unit; a 4-byte lead counts two; continuation bytes none.
    bytes
        .iter()
        .map(|&b| match b {
            0x80..=0xBF => 0,
            0xF0..=0xFF => 2,
            _ => 1,
        })
        .sum()
}

fn is_wtf8(bytes: &[u8]) -> bool {
    let mut i = 0;
    let mut prev_high = false;
    while i < bytes.len() {
        let b = bytes[i];
        let (len, min) = match b {
            0x00..=0x7F => (1, 0),
            0xC2..=0xDF => (2, 0x80),
            0xE0..=0xEF => (3, 0x800),
            0xF0..=0xF4 => (4, 0x10000),
            _ => return false,
        };
        if i + len > bytes.len() {
            return false;
        }
        let mut cp = if len == 1 {
            b as u32
        } else {
            (b as u32) & (0x7F >> len)
        };
        for k in 1..len {
            let c = bytes[i + k];
            if c & 0xC0 != 0x80 {
                return false;
            }
            cp = (cp << 6) | (c as u32 & 0x3F);
        }
        if cp < min || cp > 0x10FFFF {
            return false;
        }
        let is_high = (0xD800..0xDC00).contains(&cp);
        let is_low = (0xDC00..0xE000).contains(&cp);
        // A high surrogate directly followed by a low one must be stored as a pair.
        if is_low && prev_high {
            return false;
        }
        prev_high = is_high;
        i += len;
    }
    true
}

/// Iterator over the code points of a WTF-8 string.
pub struct CodePoints<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Iterator for CodePoints<'_> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        let bytes = self.bytes;
        let b = *bytes.get(self.pos)?;
        let (len, mut cp) = match b {
            0x00..=0x7F => {
                self.pos += 1;
                return Some(b as u32);
            }
            0xC0..=0xDF => (2, (b & 0x1F) as u32),
            0xE0..=0xEF => (3, (b & 0x0F) as u32),
            _ => (4, (b & 0x07) as u32),
        };
        for k in 1..len {
            cp = (cp << 6) | (bytes[self.pos + k] & 0x3F) as u32;
        }
        self.pos += len;
        Some(cp)
    }
}

/// Builds a [`JsStr`] piece by piece, pairing surrogates that arrive as separate units.
#[derive(Default)]
pub struct JsStrBuilder {
    bytes: Vec<u8>,
    pending_high: Option<u16>,
}

impl JsStrBuilder {
    /// An empty builder with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        JsStrBuilder {
            bytes: Vec::with_capacity(capacity),
            pending_high: None,
        }
    }

    /// Appends UTF-8 text.
    pub fn push_str(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        self.flush_high();
        self.bytes.extend_from_slice(s.as_bytes());
    }

    /// Appends raw UTF-8 bytes the caller knows to be valid UTF-8.
    pub(crate) fn push_utf8_bytes(&mut self, s: &[u8]) {
        // Nothing to append must not cut a pending high surrogate from its low half.
        if s.is_empty() {
            return;
        }
        self.flush_high();
        self.bytes.extend_from_slice(s);
    }

    /// Appends a code point (a lone surrogate is allowed).
    pub fn push_code_point(&mut self, cp: u32) {
        if cp < 0x10000 {
            self.push_utf16_unit(cp as u16);
        } else {
            self.flush_high();
            encode_wtf8(cp, &mut self.bytes);
        }
    }

    /// Appends one UTF-16 code unit, joining it with a preceding high surrogate.
    pub fn push_utf16_unit(&mut self, unit: u16) {
        match unit {
            0xD800..=0xDBFF => {
                self.flush_high();
                self.pending_high = Some(unit);
            }
            0xDC00..=0xDFFF => {
                if let Some(high) = self.pending_high.take() {
                    let cp = 0x10000 + (((high as u32) - 0xD800) << 10) + ((unit as u32) - 0xDC00);
                    encode_wtf8(cp, &mut self.bytes);
                } else {
                    encode_wtf8(unit as u32, &mut self.bytes);
                }
            }
            _ => {
                self.flush_high();
                if unit < 0x80 {
                    self.bytes.push(unit as u8);
                } else {
                    encode_wtf8(unit as u32, &mut self.bytes);
                }
            }
        }
    }

    fn flush_high(&mut self) {
        if let Some(high) = self.pending_high.take() {
            encode_wtf8(high as u32, &mut self.bytes);
        }
    }

    /// The finished string.
    pub fn finish(mut self) -> JsStr {
        self.flush_high();
        JsStr(Repr::of_vec(self.bytes))
    }
}

fn encode_wtf8(cp: u32, out: &mut Vec<u8>) {
    if cp < 0x80 {
        out.push(cp as u8);
    } else if cp < 0x800 {
        out.extend_from_slice(&[0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8]);
    } else if cp < 0x10000 {
        out.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    } else {
        out.extend_from_slice(&[
            0xF0 | (cp >> 18) as u8,
            0x80 | ((cp >> 12) & 0x3F) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    }
}

impl From<&str> for JsStr {
    #[inline]
    fn from(s: &str) -> Self {
        JsStr(Repr::of(s.as_bytes()))
    }
}

impl From<String> for JsStr {
    #[inline]
    fn from(s: String) -> Self {
        JsStr(Repr::of_vec(s.into_bytes()))
    }
}

impl PartialEq<str> for JsStr {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for JsStr {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Debug for JsStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string_lossy(), f)
    }
}

impl fmt::Display for JsStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_is_utf16_unit_order_even_where_a_lone_surrogate_meets_a_pair() {
        // Found in review: U+D83D U+E000 sorts after U+1F600 (D83D DE00) in UTF-16 order.
        let lone = JsStr::from_utf16(&[0xD83D, 0xE000]);
        let pair = JsStr::from_utf16(&[0xD83D, 0xDE00]);
        assert_eq!(
            cmp_utf16_bytes(lone.as_bytes(), pair.as_bytes()),
            Ordering::Greater
        );
        assert_eq!(
            cmp_utf16_bytes(pair.as_bytes(), lone.as_bytes()),
            Ordering::Less
        );
        // Against the order of the unit sequences themselves, on every pair of short
        // sequences over units that meet at those boundaries.
        let alphabet = [
            0x41u16, 0xD7FF, 0xD83D, 0xD800, 0xDBFF, 0xDC00, 0xDE00, 0xDFFF, 0xE000, 0xFFFF,
        ];
        let mut seqs: Vec<Vec<u16>> = vec![vec![]];
        for len in 1..=3 {
            let mut next = Vec::new();
            for s in seqs.iter().filter(|s| s.len() == len - 1) {
                for &u in &alphabet {
                    let mut t = s.clone();
                    t.push(u);
                    next.push(t);
                }
            }
            seqs.extend(next);
        }
        for a in &seqs {
            for b in &seqs {
                let (x, y) = (JsStr::from_utf16(a), JsStr::from_utf16(b));
                assert_eq!(
                    cmp_utf16_bytes(x.as_bytes(), y.as_bytes()),
                    a.cmp(b),
                    "{a:x?} vs {b:x?}"
                );
            }
        }
    }

    #[test]
    fn lone_surrogates_round_trip_through_utf16() {
        let units = [0x61, 0xD800, 0x62, 0xD83D, 0xDE00, 0xDC00];
        let s = JsStr::from_utf16(&units);
        assert_eq!(s.utf16_units().collect::<Vec<_>>(), units);
        assert_eq!(s.utf16_len(), 6);
        assert!(s.has_lone_surrogate());
        assert_eq!(s.to_string_lossy(), "a\u{FFFD}b😀\u{FFFD}");
    }

    #[test]
    fn slicing_can_split_a_pair_like_javascript() {
        let s = JsStr::from("a😀b");
        let cut = s.slice_utf16(0, 2);
        assert_eq!(cut.utf16_units().collect::<Vec<_>>(), vec![0x61, 0xD83D]);
        assert!(cut.has_lone_surrogate());
        assert_eq!(s.slice_utf16(1, 3), JsStr::from("😀"));
    }

    #[test]
    fn utf16_order_differs_from_code_point_order_above_the_bmp() {
        let emoji = JsStr::from("😀");
        let private = JsStr::from("\u{E000}");
        assert_eq!(emoji.cmp_utf16(&private), Ordering::Less);
        assert_eq!(
            JsStr::from("a").cmp_utf16(&JsStr::from("ab")),
            Ordering::Less
        );
        assert_eq!(
            JsStr::from("b").cmp_utf16(&JsStr::from("ab")),
            Ordering::Greater
        );
    }

    #[test]
    fn wtf8_validation_rejects_split_pairs_and_bad_utf8() {
        assert!(JsStr::from_wtf8(b"\xED\xA0\x80").is_some());
        assert!(JsStr::from_wtf8(b"\xED\xA0\x80\xED\xB0\x80").is_none());
        assert!(JsStr::from_wtf8(b"\xC0\x80").is_none());
        assert!(JsStr::from_wtf8(b"\xFF").is_none());
    }
}
