//! Canonical text straight from JSON text whose tokens are already canonical.
//!
//! `JSON.stringify` (and this crate's own writer) spell every string and number exactly as
//! the canonical form does; only the order of object members differs. For such text,
//! [`canonical_tokens`] checks each token and records where it is (a flat tape, one pass),
//! and [`Tape::write`] then copies the tokens out with every object's members sorted: no
//! value tree, no string decoding, no number formatting.
//!
//! It vouches only for what it can check cheaply, and refuses everything else with `None`,
//! before writing anything, so the caller parses the text instead and the result is the
//! same by construction: a string escape other than the canonical ones (`\"`, `\\`,
//! `\b \f \n \r \t`, `\u00xx` in lowercase for the other controls), any escape in a key, a
//! number the canonical form would spell differently (`-0`, `1.0`, `1E2`), a repeated key,
//! a container nested deeper than [`MAX_CANONICAL_DEPTH`] (written as a marker), invalid
//! UTF-8, and anything that is not JSON. White space between tokens is skipped.

use super::{cmp_keys, head_word, is_ignored, write_number, Sink, MAX_CANONICAL_DEPTH};
use crate::json::{number_value, skip_plain_string_bytes, ESCAPE_CLASS, ESCAPE_SHORT};

/// Integer literals of at most this many digits are canonical as written without a
/// further check (they fit an `i64` with room to spare, and the canonical form writes an
/// `i64` with all its digits); longer ones are converted and written back to be sure.
const PLAIN_INTEGER_DIGITS: usize = 15;

/// `DBL_DIG`: a decimal of at most this many significant digits survives the round trip
/// through a double, so no two such decimals round to the same double.
const DOUBLE_DECIMAL_DIGITS: usize = 15;

/// One value of the text, in document order.
#[derive(Clone, Copy)]
enum Token {
    /// A string, number or literal: the bytes `start..end` of the text, copied as they are.
    Scalar { start: u32, end: u32 },
    /// An array whose elements are the tokens up to `next` (the token after the array).
    Array { next: u32 },
    /// An object whose members, sorted and without ignored keys, are
    /// `members[first..last]`; its values are tokens before `next`.
    Object { next: u32, first: u32, last: u32 },
}

/// An object member: its key (the bytes between the quotes, escape-free) and the token of
/// its value.
#[derive(Clone, Copy)]
struct Member {
    head: u64,
    key_start: u32,
    key_end: u32,
    value: u32,
}

/// The checked tokens of one JSON text, ready to be written canonically.
pub(crate) struct Tape<'t> {
    text: &'t [u8],
    tokens: Vec<Token>,
    members: Vec<Member>,
}

/// Checks that every token of `text` is canonical and records them, with the members of
/// every object sorted and those whose key is in `ignore` left out; `None` when the text
/// is anything else (the caller then parses it).
pub(crate) fn canonical_tokens<'t, K: AsRef<str>>(
    text: &'t [u8],
    ignore: &[K],
) -> Option<Tape<'t>> {
    if u32::try_from(text.len()).is_err() || std::str::from_utf8(text).is_err() {
        return None;
    }
    let mut scan = Scan {
        text,
        pos: 0,
        tokens: Vec::with_capacity(text.len() / 8 + 4),
        members: Vec::with_capacity(text.len() / 16 + 4),
        open: Vec::with_capacity(16),
        white: 0,
    };
    scan.value(0, ignore)?;
    scan.skip_white_space();
    if scan.pos != text.len() {
        return None;
    }
    Some(Tape {
        text,
        tokens: scan.tokens,
        members: scan.members,
    })
}

impl Tape<'_> {
    /// Writes the canonical text (never fails: everything was checked by the scan).
    pub(crate) fn write<S: Sink>(&self, sink: &mut S) {
        self.write_token(0, sink);
    }

    /// Writes token `at` and returns the index of the token after it (and its contents).
    fn write_token<S: Sink>(&self, at: usize, sink: &mut S) -> usize {
        match self.tokens[at] {
            Token::Scalar { start, end } => {
                sink.put(&self.text[start as usize..end as usize]);
                at + 1
            }
            Token::Array { next } => {
                sink.put(b"[");
                let mut i = at + 1;
                while i < next as usize {
                    if i > at + 1 {
                        sink.put(b",");
                    }
                    i = self.write_token(i, sink);
                }
                sink.put(b"]");
                next as usize
            }
            Token::Object { next, first, last } => {
                sink.put(b"{");
                for (n, m) in self.members[first as usize..last as usize]
                    .iter()
                    .enumerate()
                {
                    if n > 0 {
                        sink.put(b",");
                    }
                    sink.put_quoted(&self.text[m.key_start as usize..m.key_end as usize], b":");
                    self.write_token(m.value as usize, sink);
                }
                sink.put(b"}");
                next as usize
            }
        }
    }
}

struct Scan<'t> {
    text: &'t [u8],
    pos: usize,
    tokens: Vec<Token>,
    /// Sorted members of the objects already scanned.
    members: Vec<Member>,
    /// Members of the objects being scanned, stacked (an inner object's after its
    /// parent's).
    open: Vec<Member>,
    /// White-space bytes skipped so far: a container that saw none inside is copied as
    /// one piece when nothing in it moves (see [`Scan::verbatim`]).
    white: usize,
}

impl Scan<'_> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    #[inline]
    fn skip_white_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
            self.white += 1;
        }
    }

    fn value<K: AsRef<str>>(&mut self, depth: usize, ignore: &[K]) -> Option<()> {
        self.skip_white_space();
        let start = self.pos;
        match self.peek()? {
            b'{' => return self.object(depth, ignore),
            b'[' => return self.array(depth, ignore),
            b'"' => self.string(false)?,
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return None,
        }
        self.tokens.push(Token::Scalar {
            start: start as u32,
            end: self.pos as u32,
        });
        Some(())
    }

    fn array<K: AsRef<str>>(&mut self, depth: usize, ignore: &[K]) -> Option<()> {
        if depth > MAX_CANONICAL_DEPTH {
            return None;
        }
        let at = self.tokens.len();
        let (start, white) = (self.pos, self.white);
        self.tokens.push(Token::Array { next: 0 });
        self.pos += 1;
        self.skip_white_space();
        let mut elements = 0;
        if self.peek()? == b']' {
            self.pos += 1;
        } else {
            loop {
                self.value(depth + 1, ignore)?;
                elements += 1;
                self.skip_white_space();
                match self.peek()? {
                    b',' => self.pos += 1,
                    b']' => {
                        self.pos += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        if self.verbatim(at, elements, start, white) {
            return Some(());
        }
        self.tokens[at] = Token::Array {
            next: self.tokens.len() as u32,
        };
        Some(())
    }

    fn object<K: AsRef<str>>(&mut self, depth: usize, ignore: &[K]) -> Option<()> {
        if depth > MAX_CANONICAL_DEPTH {
            return None;
        }
        let at = self.tokens.len();
        let (start, white) = (self.pos, self.white);
        self.tokens.push(Token::Object {
            next: 0,
            first: 0,
            last: 0,
        });
        let open_from = self.open.len();
        self.pos += 1;
        self.skip_white_space();
        if self.peek()? == b'}' {
            self.pos += 1;
        } else {
            loop {
                self.skip_white_space();
                if self.peek()? != b'"' {
                    return None;
                }
                let key_start = self.pos + 1;
                self.string(true)?;
                let key_end = self.pos - 1;
                self.skip_white_space();
                if self.peek()? != b':' {
                    return None;
                }
                self.pos += 1;
                let value = self.tokens.len() as u32;
                self.value(depth + 1, ignore)?;
                self.open.push(Member {
                    head: head_word(&self.text[key_start..key_end]),
                    key_start: key_start as u32,
                    key_end: key_end as u32,
                    value,
                });
                self.skip_white_space();
                match self.peek()? {
                    b',' => self.pos += 1,
                    b'}' => {
                        self.pos += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        let text = self.text;
        let key = |m: &Member| &text[m.key_start as usize..m.key_end as usize];
        let order = |a: &Member, b: &Member| cmp_keys(a.head, key(a), b.head, key(b));
        let members = &mut self.open[open_from..];
        // Written in canonical order already (strictly: no key repeats), none ignored:
        // copied as written when its values are too.
        let sorted = members.windows(2).all(|w| order(&w[0], &w[1]).is_lt());
        if sorted && !members.iter().any(|m| is_ignored(key(m), ignore)) {
            let count = members.len();
            if self.verbatim(at, count, start, white) {
                self.open.truncate(open_from);
                return Some(());
            }
        }
        let members = &mut self.open[open_from..];
        if !sorted {
            members.sort_unstable_by(order);
            // A repeated key: the parser's rule (first place, last value) decides. Checked
            // before ignored keys are dropped, on purpose: a repeated `_meta` is parsed too
            // (rare, and then nothing about repeats is left to reason about here).
            if members.windows(2).any(|w| key(&w[0]) == key(&w[1])) {
                return None;
            }
        }
        let first = self.members.len() as u32;
        for m in self.open.drain(open_from..) {
            if !is_ignored(key(&m), ignore) {
                self.members.push(m);
            }
        }
        self.tokens[at] = Token::Object {
            next: self.tokens.len() as u32,
            first,
            last: self.members.len() as u32,
        };
        Some(())
    }

    /// Checks a string from its opening quote, leaving `pos` after the closing one. A key
    /// may have no escape at all (its bytes are then its content, for the sort and the
    /// ignore list); a value only the canonical ones.
    fn string(&mut self, is_key: bool) -> Option<()> {
        self.pos += 1;
        loop {
            self.pos = skip_plain_string_bytes(self.text, self.pos);
            let b = self.peek()?;
            self.pos += 1;
            match b {
                b'"' => return Some(()),
                b'\\' if !is_key => self.canonical_escape()?,
                b if b < 0x20 || b == b'\\' => return None,
                _ => {}
            }
        }
    }

    /// After a backslash: accepts the escape the canonical writer would write for the
    /// character, and nothing else.
    fn canonical_escape(&mut self) -> Option<()> {
        let b = self.peek()?;
        self.pos += 1;
        match b {
            b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => Some(()),
            b'u' => {
                let hex = self.text.get(self.pos..self.pos + 4)?;
                self.pos += 4;
                let digit = |d: u8| match d {
                    b'0'..=b'9' => Some(d - b'0'),
                    b'a'..=b'f' => Some(d - b'a' + 10),
                    _ => None,
                };
                if hex[0] != b'0' || hex[1] != b'0' {
                    return None; // a surrogate or an escaped printable character
                }
                let unit = digit(hex[2])? << 4 | digit(hex[3])?;
                // Controls with a two-character escape are written that way instead.
                (unit < 0x20 && ESCAPE_CLASS[unit as usize] != ESCAPE_SHORT).then_some(())
            }
            _ => None,
        }
    }

    /// A container whose token is `at`, opened at byte `start` when `white` bytes of white
    /// space had been skipped, has just closed with `children` values. If every value is a
    /// single token (nothing in it moves) and no white space was skipped inside, its
    /// canonical text is its text as written: it becomes one scalar token spanning it, so
    /// it is written in one copy. The caller has checked that its members (if any) are in
    /// canonical order and none is ignored.
    fn verbatim(&mut self, at: usize, children: usize, start: usize, white: usize) -> bool {
        if self.white != white || self.tokens.len() != at + 1 + children {
            return false;
        }
        self.tokens.truncate(at);
        self.tokens.push(Token::Scalar {
            start: start as u32,
            end: self.pos as u32,
        });
        true
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.text.get(self.pos..self.pos + word.len())? != word {
            return None;
        }
        self.pos += word.len();
        Some(())
    }

    /// Checks a number token: valid grammar, and spelled as the canonical form spells the
    /// number it stands for.
    fn number(&mut self) -> Option<()> {
        let start = self.pos;
        let digits = |s: &mut Self| {
            let from = s.pos;
            while let Some(b'0'..=b'9') = s.peek() {
                s.pos += 1;
            }
            s.pos - from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        let int_digits = digits(self);
        if int_digits == 0 || (int_digits > 1 && self.text[int_start] == b'0') {
            return None;
        }
        let mut is_integer = true;
        let mut fraction = &self.text[0..0];
        if self.peek() == Some(b'.') {
            self.pos += 1;
            is_integer = false;
            let from = self.pos;
            if digits(self) == 0 {
                return None;
            }
            fraction = &self.text[from..self.pos];
        }
        let mut has_exponent = false;
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            is_integer = false;
            has_exponent = true;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return None;
            }
        }
        let token = &self.text[start..self.pos];
        if is_integer && int_digits <= PLAIN_INTEGER_DIGITS && token != b"-0" {
            return Some(());
        }
        if !is_integer
            && !has_exponent
            && is_plain_decimal(&self.text[int_start..int_start + int_digits], fraction)
        {
            return Some(());
        }
        // The rare and the fractional: spelled canonically iff writing the number back
        // gives the same bytes.
        let number = number_value(std::str::from_utf8(token).ok()?, is_integer)?;
        let mut spelled = Vec::with_capacity(32);
        write_number(&number, &mut spelled);
        (spelled == token).then_some(())
    }
}

/// Whether `integer.fraction` (valid grammar, no exponent) is how ECMAScript spells the
/// double it stands for, decided without converting it: with at most
/// [`DOUBLE_DECIMAL_DIGITS`] significant digits, two different decimals never
/// round to the same double, so such a decimal is its double's shortest spelling as long
/// as it has no trailing zero, and ECMAScript writes it in this plain form when it is at
/// least 1e-6 (at most five zeros after `0.`) and below 1e21.
fn is_plain_decimal(integer: &[u8], fraction: &[u8]) -> bool {
    if fraction.last() == Some(&b'0') {
        return false;
    }
    if integer == b"0" {
        let zeros = fraction.iter().take_while(|&&d| d == b'0').count();
        zeros <= 5 && fraction.len() - zeros <= DOUBLE_DECIMAL_DIGITS
    } else {
        integer.len() + fraction.len() <= DOUBLE_DECIMAL_DIGITS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::canonical_json_with;
    use crate::json;

    fn fast(text: &str, ignore: &[&str]) -> Option<String> {
        let tape = canonical_tokens(text.as_bytes(), ignore)?;
        let mut out = Vec::new();
        tape.write(&mut out);
        Some(String::from_utf8(out).unwrap())
    }

    fn slow(text: &str, ignore: &[&str]) -> String {
        canonical_json_with(&json::parse_str(text).unwrap(), ignore)
    }

    #[test]
    fn stringified_text_is_sorted_and_otherwise_copied() {
        let cases = [
            r#"{"b":1,"a":[true,false,null,{"d":"x","c":-1.5e-7}],"_meta":{"t":1}}"#,
            r#"{"é":1,"e":2,"😀":3,"\u{ff}":4,"ａ":5}"#,
            r#"["a\"b\\c\n\r\t\b\f\u0000\u001f\u{7f}","✓",0,-12,123456789012345,0.25,1e+21,5e-7]"#,
            r#"{}"#,
            r#"[]"#,
            r#""just a string""#,
            r#"  { "spaced" : [ 1 , 2 ] , "a" : { } }  "#,
        ];
        for text in cases {
            let text = text
                .replace(r"\u{ff}", "\u{ff}")
                .replace(r"\u{7f}", "\u{7f}");
            let got = fast(&text, &["_meta"]).unwrap_or_else(|| panic!("refused {text}"));
            assert_eq!(got, slow(&text, &["_meta"]), "{text}");
        }
    }

    #[test]
    fn non_canonical_tokens_are_refused_for_the_parser_to_handle() {
        let refused = [
            "-0",
            "1.0",
            "1E2",
            "1e2",
            "0.10",
            "12345678901234567890",
            "01",
            r#""\/""#,
            r#""\u0041""#,
            r#""\u001F""#,
            r#""\u000a""#,
            r#""\ud800""#,
            r#""\ud83d\ude00""#,
            r#"{"a\n":1}"#,
            r#"{"a":1,"a":2}"#,
            "\"raw\u{1}control\"",
            "[1,]",
            "{\"a\":1}x",
            "",
            "nul",
            "[1 2]",
        ];
        for text in refused {
            assert!(fast(text, &[]).is_none(), "accepted {text:?}");
        }
        let mut deep = "[".repeat(MAX_CANONICAL_DEPTH + 2);
        deep.push_str(&"]".repeat(MAX_CANONICAL_DEPTH + 2));
        assert!(fast(&deep, &[]).is_none());
        let mut limit = "[".repeat(MAX_CANONICAL_DEPTH + 1);
        limit.push_str(&"]".repeat(MAX_CANONICAL_DEPTH + 1));
        assert_eq!(fast(&limit, &[]).unwrap(), slow(&limit, &[]));
        assert!(canonical_tokens(b"\"\xff\"", &[] as &[&str]).is_none());
    }

    #[test]
    fn plain_decimals_are_taken_exactly_when_ecmascript_spells_them_so() {
        // Against the writer, on decimals around every boundary of the rule.
        let mut cases: Vec<String> = vec![
            "0.000001",
            "0.0000001",
            "0.0000015",
            "0.1",
            "0.10",
            "-0.5",
            "-0.0",
            "123.456",
            "999999999999999.9",
            "99999999999999.9",
            "12345678901234.5",
            "0.123456789012345",
            "0.1234567890123456",
            "100000000000000000000.5",
            "1.7976931348623157",
            "0.3",
            "2.675",
            "1.005",
            "9007199254740993.1",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        for digits in 1..=17 {
            for point in 0..=digits {
                let d: String = (0..digits)
                    .map(|i| char::from(b'1' + (i % 9) as u8))
                    .collect();
                let (a, b) = d.split_at(point);
                cases.push(format!(
                    "{}.{}",
                    if a.is_empty() { "0" } else { a },
                    if b.is_empty() { "5" } else { b }
                ));
                cases.push(format!("0.{}{}", "0".repeat(point % 7), d));
            }
        }
        for text in cases {
            let written = slow(&text, &[]);
            match fast(&text, &[]) {
                Some(got) => assert_eq!(got, written, "{text}"),
                None => assert_ne!(written, text, "{text} is canonical but was refused"),
            }
        }
    }

    #[test]
    fn a_container_already_in_canonical_order_is_one_copied_piece() {
        let count = |text: &str, ignore: &[&str]| {
            canonical_tokens(text.as_bytes(), ignore)
                .unwrap()
                .tokens
                .len()
        };
        // Canonical as written: the whole text is one piece.
        assert_eq!(count(r#"{"a":[1,{"p":2,"q":"é"}],"b":{"c":null}}"#, &[]), 1);
        // The root moves ("a" before "b"), its two values are copied whole.
        assert_eq!(count(r#"{"b":{"x":[1,{"p":2}],"y":"z"},"a":1}"#, &[]), 3);
        // Not copied: white space inside, an ignored member, a member out of order below,
        // keys in UTF-8 byte order that UTF-16 order swaps (U+1F600 sorts before U+FF41).
        let moved = [
            r#"{"a":{"c":1, "d":2}}"#,
            r#"{"a":[1,2 ]}"#,
            r#"{"a":{"_meta":1,"b":2}}"#,
            r#"[{"b":1,"a":2}]"#,
            r#"[[[{"z":1,"y":2}]]]"#,
            "{\"\u{FF41}\":1,\"\u{1F600}\":2}",
        ];
        for text in moved {
            assert!(count(text, &["_meta"]) > 1, "{text}");
            assert_eq!(
                fast(text, &["_meta"]).unwrap(),
                slow(text, &["_meta"]),
                "{text}"
            );
        }
    }

    #[test]
    fn ignored_members_are_left_out_at_every_depth() {
        let text = r#"{"x":{"_meta":1,"y":[{"_meta":{"deep":true},"z":0}]},"_meta":null}"#;
        assert_eq!(fast(text, &["_meta"]).unwrap(), r#"{"x":{"y":[{"z":0}]}}"#);
        assert_eq!(fast(text, &[]).unwrap(), slow(text, &[]));
    }

    fn stringified_value() -> impl proptest::strategy::Strategy<Value = json::Value> {
        use json::{Map, Number, Value};
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| Value::Number(Number::Int(i))),
            any::<f64>().prop_map(|f| Value::Number(Number::Float(f))),
            "(.|[\\x00-\\x1f\"\\\\]){0,10}".prop_map(|s| Value::from(s.as_str())),
        ];
        leaf.prop_recursive(5, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-zé😀ａ_]{0,5}", inner), 0..6).prop_map(|entries| {
                    let mut m = Map::new();
                    for (k, v) in entries {
                        m.insert(json::JsStr::from(k.as_str()), v);
                    }
                    Value::Object(m)
                }),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Any number token: copied only when it is already spelled canonically, and every
        /// canonical one is taken.
        #[test]
        fn number_tokens_are_copied_only_when_canonical(text in "-?(0|[1-9][0-9]{0,17})(\\.[0-9]{1,12})?([eE][-+]?[0-9]{1,3})?") {
            let written = slow(&text, &[]);
            match fast(&text, &[]) {
                Some(got) => proptest::prop_assert_eq!(got, written),
                None => proptest::prop_assert!(written != text, "{} refused", text),
            }
        }

        /// What `JSON.stringify` (our writer) spells is always taken by the token path.
        #[test]
        fn stringified_text_is_always_taken(v in stringified_value()) {
            let text = json::to_string(&v);
            let got = fast(&text, &["_meta"]);
            proptest::prop_assert_eq!(got, Some(slow(&text, &["_meta"])), "{}", text);
        }
    }
}
