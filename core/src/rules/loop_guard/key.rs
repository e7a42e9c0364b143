//! Loop-guard keys: what the guard compares on every watched call, computed without
//! writing text.
//!
//! The guard asks one question of a call's input (and of its output): "is it the same as
//! before?", where *the same* means "has the same canonical JSON" ([`crate::canonical`]).
//! Writing and hashing that text costs microseconds per kilobyte (sorting keys, escaping,
//! spelling numbers), on the application thread, twice per node. A key answers the same
//! question from the value's structure: a 128-bit keyed hash that two values share exactly
//! when their canonical texts are equal (up to hash collisions, about 2^-64 per pair):
//!
//! - object members are hashed one by one and combined by addition, so key order does not
//!   matter (canonical text sorts them); ignored keys are skipped at every depth;
//! - strings are hashed as their WTF-8 bytes (escaping is injective, so equal bytes are
//!   equal text);
//! - numbers follow the canonical spelling: an integer-valued number up to 2^53 (an `Int`,
//!   a `Float` such as `3.0` or `-0.0`, a small `BigInt`) is hashed as that integer; any
//!   other finite double as its bits (its shortest round-trip spelling is unique; from 1e21
//!   up that spelling has an exponent, which an integer's digits never have); anything
//!   else (large integers, integer-valued doubles from 2^53 to 1e21) as its canonical digits;
//!   NaN and infinities as `null`;
//! - containers deeper than [`MAX_CANONICAL_DEPTH`] are the string [`DEPTH_MARKER`].
//!
//! Keys never leave the process: what the guard reports (a v3 fingerprint, a lap digest)
//! is still SHA-256 of canonical text or a salted HMAC.

use crate::canonical::{
    is_ignored, write_number, DEPTH_MARKER, MAX_CANONICAL_DEPTH, UNSERIALIZABLE_MARKER,
};
use crate::json::{Number, Value};

/// A 128-bit loop-guard key.
pub(crate) type Key = [u8; 16];

/// The largest integer every double below it represents exactly (2^53).
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

/// The smallest magnitude ECMAScript spells with an exponent (`1e+21`).
const EXPONENT_SPELLING_FROM: f64 = 1e21;

// Token tags: every token starts with one, so no two different token streams coincide.
const TAG_NULL: u64 = 1;
const TAG_TRUE: u64 = 2;
const TAG_FALSE: u64 = 3;
const TAG_INTEGER: u64 = 4;
const TAG_DOUBLE: u64 = 5;
const TAG_NUMBER_TEXT: u64 = 6;
const TAG_STRING: u64 = 7;
const TAG_ARRAY_END: u64 = 8;
const TAG_ARRAY: u64 = 9;
const TAG_OBJECT: u64 = 10;
const TAG_MEMBER: u64 = 11;
const TAG_LABEL: u64 = 12;

const MUL_A: u64 = 0x9E37_79B9_7F4A_7C15;
const MUL_B: u64 = 0xC2B2_AE3D_27D4_EB4F;

/// Multiplies into 128 bits and folds the halves: the mixing step of the key hasher.
#[inline]
fn fold(x: u64, m: u64) -> u64 {
    let p = (x as u128).wrapping_mul(m as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Two 64-bit lanes over 64-bit words, seeded with the guard's salt.
#[derive(Clone, Copy)]
struct Hasher {
    a: u64,
    b: u64,
}

impl Hasher {
    fn new(seed: (u64, u64)) -> Hasher {
        Hasher {
            a: seed.0,
            b: seed.1,
        }
    }

    /// Lane `a` is a multiply-fold chain (full 128-bit product); lane `b` a cheaper
    /// multiply-rotate chain over the same words, so the two lanes fail independently.
    #[inline]
    fn word(&mut self, w: u64) {
        self.a = fold(self.a ^ w, MUL_A);
        self.b = (self.b ^ w).wrapping_mul(MUL_B).rotate_left(31);
    }

    /// One token: its tag and length in one word (the length above the tag's byte), then
    /// the bytes as 64-bit words. The last word is read without copying the tail into a
    /// buffer (a `memcpy` whose wide re-read stalled on store forwarding, most of a key's
    /// time, as keys and short strings are all tail): past 8 bytes it is the last 8 bytes
    /// (overlapping the word before), below that two overlapping reads. With the tag and
    /// length hashed first, every (tag, byte string) still maps to exactly one word sequence.
    #[inline]
    fn tagged_bytes(&mut self, tag: u64, bytes: &[u8]) {
        let len = bytes.len();
        self.word(((len as u64) << 8) | tag);
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.word(read_u64(chunk, 0));
        }
        let rest = chunks.remainder().len();
        if rest == 0 {
            return;
        }
        let tail = if len >= 8 {
            read_u64(bytes, len - 8)
        } else if len >= 4 {
            u64::from(read_u32(bytes, 0)) | (u64::from(read_u32(bytes, len - 4)) << 32)
        } else {
            u64::from(bytes[0])
                | (u64::from(bytes[len / 2]) << 8)
                | (u64::from(bytes[len - 1]) << 16)
        };
        self.word(tail);
    }

    fn finish(self) -> (u64, u64) {
        let a = fold(self.a ^ self.b.rotate_left(17), MUL_B);
        let b = fold(self.b ^ a, MUL_A);
        (a, b)
    }
}

/// Computes keys with one seed and one ignore list.
pub(crate) struct KeyWalker<'i, K: AsRef<str>> {
    seed: (u64, u64),
    ignore: &'i [K],
    /// Characters of string content left (UTF-16 units of every string and key plus one per string, key and array element, as the reference counts them), or
    /// `None` when unbounded.
    budget: Option<usize>,
    /// An upper bound of what the budget would count, summed as the walk goes.
    upper_bound: usize,
    /// Canonical digits of a number keyed by its text (kept between numbers of one walk).
    digits: Vec<u8>,
    /// A string of the value is [`UNSERIALIZABLE_MARKER`]: a binding degraded a host value
    /// it could not read, so the value equals nothing.
    degraded: bool,
}

/// The budget ran out.
struct OverBudget;

impl<'i, K: AsRef<str>> KeyWalker<'i, K> {
    /// A walker seeded from `salt` (the guard's per-process secret).
    pub(crate) fn new(salt: &[u8; 32], ignore: &'i [K]) -> Self {
        let lane = |i: usize| u64::from_le_bytes(salt[i..i + 8].try_into().unwrap_or([0; 8]));
        KeyWalker {
            seed: (lane(0) ^ lane(16), lane(8) ^ lane(24)),
            ignore,
            budget: None,
            upper_bound: 0,
            digits: Vec::new(),
            degraded: false,
        }
    }

    /// The key of the call `[node_id, input]` (an absent input counts as `null`), or `None`
    /// when the input holds a value a binding degraded ([`UNSERIALIZABLE_MARKER`]): such a
    /// call equals no other, so a loop is never seen in inputs that could not be read.
    pub(crate) fn comparable_call_key(
        mut self,
        node_id: &[u8],
        input: Option<&Value>,
    ) -> Option<Key> {
        self.degraded = false;
        let key = self.call_key_inner(node_id, input);
        (!self.degraded).then_some(key)
    }

    /// The key of the call `[node_id, input]` (an absent input counts as `null`).
    #[cfg(test)]
    pub(crate) fn call_key(mut self, node_id: &[u8], input: Option<&Value>) -> Key {
        self.call_key_inner(node_id, input)
    }

    fn call_key_inner(&mut self, node_id: &[u8], input: Option<&Value>) -> Key {
        let mut h = Hasher::new(self.seed);
        h.word(TAG_ARRAY);
        h.tagged_bytes(TAG_STRING, node_id);
        match input {
            None => h.word(TAG_NULL),
            Some(v) => {
                let _ = self.value(&mut h, v, 0);
            }
        }
        h.word(TAG_ARRAY_END);
        to_key(h.finish())
    }

    /// The key of an outcome under `label` (`out`, `res`), or `None` when the value's
    /// string content exceeds `budget` characters, counted as the canonical writer counts
    /// them (UTF-16 units of every string and key plus one per string, key and array
    /// element).
    pub(crate) fn outcome_key(
        mut self,
        label: &[u8],
        value: Option<&Value>,
        budget: usize,
    ) -> Option<Key> {
        let mut h = Hasher::new(self.seed);
        h.tagged_bytes(TAG_LABEL, label);
        let Some(v) = value else {
            h.word(TAG_NULL);
            return Some(to_key(h.finish()));
        };
        // UTF-8 bytes bound UTF-16 units from above: a value whose bound fits the budget
        // fits it, and is keyed in one walk without counting characters. Only a value past
        // the bound (hundreds of kilobytes) is walked again, counting exactly.
        let start = h;
        self.upper_bound = 0;
        let _ = self.value(&mut h, v, 0);
        if self.upper_bound <= budget {
            return Some(to_key(h.finish()));
        }
        let mut h = start;
        self.budget = Some(budget);
        self.value(&mut h, v, 0).ok()?;
        Some(to_key(h.finish()))
    }

    /// Counts one string, key or array element against the budget: `bound` (its UTF-8
    /// bytes + 1, never less than the exact count) always, the exact `chars` only when a
    /// budget is being enforced.
    #[inline]
    fn spend(&mut self, bound: usize, chars: impl FnOnce() -> usize) -> Result<(), OverBudget> {
        self.upper_bound += bound;
        if let Some(left) = self.budget {
            self.budget = Some(left.checked_sub(chars()).ok_or(OverBudget)?);
        }
        Ok(())
    }

    fn value(&mut self, h: &mut Hasher, value: &Value, depth: usize) -> Result<(), OverBudget> {
        match value {
            Value::Null => h.word(TAG_NULL),
            Value::Bool(true) => h.word(TAG_TRUE),
            Value::Bool(false) => h.word(TAG_FALSE),
            Value::Number(n) => number(h, n, &mut self.digits),
            Value::String(s) => {
                self.spend(s.as_bytes().len() + 1, || s.utf16_len() + 1)?;
                self.degraded |= s.as_bytes() == UNSERIALIZABLE_MARKER.as_bytes();
                h.tagged_bytes(TAG_STRING, s.as_bytes());
            }
            Value::Array(items) => {
                if depth > MAX_CANONICAL_DEPTH {
                    depth_marker(h);
                    return Ok(());
                }
                h.word(TAG_ARRAY);
                for item in items {
                    self.spend(1, || 1)?;
                    self.value(h, item, depth + 1)?;
                }
                h.word(TAG_ARRAY_END);
            }
            Value::Object(map) => {
                if depth > MAX_CANONICAL_DEPTH {
                    depth_marker(h);
                    return Ok(());
                }
                // Members are hashed apart and summed: the sum does not depend on order.
                let (mut sum_a, mut sum_b, mut count) = (0u64, 0u64, 0u64);
                for (k, v) in map.iter() {
                    if is_ignored(k.as_bytes(), self.ignore) {
                        continue;
                    }
                    self.spend(k.as_bytes().len() + 1, || k.utf16_len() + 1)?;
                    let mut member = Hasher::new(self.seed);
                    member.tagged_bytes(TAG_MEMBER, k.as_bytes());
                    self.value(&mut member, v, depth + 1)?;
                    let (a, b) = member.finish();
                    sum_a = sum_a.wrapping_add(a);
                    sum_b = sum_b.wrapping_add(b);
                    count += 1;
                }
                h.word(TAG_OBJECT);
                h.word(count);
                h.word(sum_a);
                h.word(sum_b);
            }
        }
        Ok(())
    }
}

/// The 8 bytes of `bytes` at `at` (the caller keeps `at + 8` in bounds), little-endian.
#[inline]
fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// The 4 bytes of `bytes` at `at` (the caller keeps `at + 4` in bounds), little-endian.
#[inline]
fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn depth_marker(h: &mut Hasher) {
    h.tagged_bytes(TAG_STRING, DEPTH_MARKER.as_bytes());
}

/// Hashes a number so that two numbers agree exactly when their canonical spellings do.
fn number(h: &mut Hasher, n: &Number, scratch: &mut Vec<u8>) {
    match n {
        Number::Int(i) if (*i as f64).abs() < EXACT_INTEGER_LIMIT => integer(h, *i),
        Number::Float(f) if !f.is_finite() => h.word(TAG_NULL),
        Number::Float(f) if f.fract() != 0.0 => {
            h.word(TAG_DOUBLE);
            h.word(f.to_bits());
        }
        Number::Float(f) if f.abs() < EXACT_INTEGER_LIMIT => integer(h, *f as i64),
        // From 1e21 up a double is spelled with an exponent, which no integer's digits
        // have: like a fraction, its bits are its spelling.
        Number::Float(f) if f.abs() >= EXPONENT_SPELLING_FROM => {
            h.word(TAG_DOUBLE);
            h.word(f.to_bits());
        }
        Number::BigInt(digits) => match digits.parse::<i64>() {
            // Only when the digits are that integer's own spelling ("-0", "007" are not).
            Ok(i) if (i as f64).abs() < EXACT_INTEGER_LIMIT && i.to_string() == **digits => {
                integer(h, i)
            }
            _ => number_text(h, n, scratch),
        },
        _ => number_text(h, n, scratch),
    }
}

/// An integer below 2^53 in magnitude, with its tag in one word: shifting it 8 bits left
/// drops only copies of its sign bit, so no two such integers share a word.
#[inline]
fn integer(h: &mut Hasher, i: i64) {
    h.word(((i as u64) << 8) | TAG_INTEGER);
}

/// A number by its canonical digits (rare: integers past 2^53), spelled into `digits`.
fn number_text(h: &mut Hasher, n: &Number, digits: &mut Vec<u8>) {
    digits.clear();
    write_number(n, digits);
    h.tagged_bytes(TAG_NUMBER_TEXT, digits);
}

fn to_key((a, b): (u64, u64)) -> Key {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&a.to_le_bytes());
    key[8..].copy_from_slice(&b.to_le_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::canonical_json_with;
    use crate::json::parse_str;

    const SALT: [u8; 32] = [7; 32];

    fn key(text: &str) -> Key {
        let v = parse_str(text).unwrap();
        KeyWalker::new(&SALT, &["_meta"]).call_key(b"tool:t", Some(&v))
    }

    fn same(a: &Value, b: &Value) -> bool {
        KeyWalker::new(&SALT, &["_meta"]).call_key(b"n", Some(a))
            == KeyWalker::new(&SALT, &["_meta"]).call_key(b"n", Some(b))
    }

    #[test]
    fn every_byte_of_every_length_counts() {
        // The word reader covers short strings with overlapping reads: a change of any one
        // byte, at any length up to three words, must change the key, and so must a length
        // change that keeps the bytes read (trailing zeros).
        let mut seen = std::collections::HashSet::new();
        for len in 0..=24usize {
            let base: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let key_of = |bytes: &[u8]| {
                let v = Value::from(std::str::from_utf8(bytes).unwrap());
                KeyWalker::new(&SALT, &["_meta"]).call_key(b"n", Some(&v))
            };
            assert!(seen.insert(key_of(&base)), "length {len} collides");
            for at in 0..len {
                let mut changed = base.clone();
                changed[at] = b'Z';
                assert_ne!(key_of(&changed), key_of(&base), "byte {at} of {len}");
            }
            let mut padded = base.clone();
            padded.push(0);
            assert_ne!(
                key_of(&padded),
                key_of(&base),
                "a NUL appended to {len} bytes"
            );
        }
    }

    #[test]
    fn key_order_and_ignored_keys_do_not_matter() {
        assert_eq!(
            key(r#"{"a":1,"b":[1,2,{"x":"y","z":null}]}"#),
            key(r#"{"b":[1,2,{"z":null,"x":"y"}],"a":1}"#)
        );
        assert_eq!(
            key(r#"{"a":1,"_meta":{"progressToken":1}}"#),
            key(r#"{"a":1,"_meta":{"progressToken":2}}"#)
        );
        assert_ne!(key(r#"{"a":1}"#), key(r#"{"a":2}"#));
        assert_ne!(key(r#"[1,2]"#), key(r#"[2,1]"#));
        assert_ne!(key(r#"[[1],2]"#), key(r#"[[1,2]]"#));
        assert_ne!(key(r#"{"a":{"b":1}}"#), key(r#"{"a":{},"b":1}"#));
        assert_ne!(key(r#""1""#), key("1"));
    }

    #[test]
    fn numbers_agree_exactly_when_their_canonical_spellings_do() {
        let numbers = [
            Number::Int(3),
            Number::Float(3.0),
            Number::Float(-0.0),
            Number::Int(0),
            Number::Float(0.1),
            Number::Float(0.30000000000000004),
            Number::Int(1 << 60),
            Number::Float((1u64 << 60) as f64),
            Number::Int(1_152_921_504_606_847_000),
            Number::BigInt("100000000000000000000".into()),
            Number::Float(1e20),
            Number::Float(1e21),
            Number::Float(-1e21),
            Number::Float(1.5e300),
            Number::Float(999_999_999_999_999_900_000.0),
            Number::BigInt("999999999999999900000".into()),
            Number::BigInt("1000000000000000000000".into()),
            Number::BigInt("5".into()),
            Number::Int(5),
            Number::BigInt("-0".into()),
            Number::Float(f64::NAN),
            Number::Float(f64::INFINITY),
            Number::Int(9_007_199_254_740_993),
            Number::Float(9_007_199_254_740_992.0),
            Number::Int(9_007_199_254_740_992),
        ];
        for a in &numbers {
            for b in &numbers {
                let (va, vb) = (Value::Number(a.clone()), Value::Number(b.clone()));
                let text_equal = canonical_json_with(&va, &[]) == canonical_json_with(&vb, &[]);
                assert_eq!(same(&va, &vb), text_equal, "{a:?} vs {b:?}");
            }
        }
        assert!(same(&Value::Number(Number::Float(f64::NAN)), &Value::Null));
    }

    /// A tiny deterministic generator of values from a small alphabet, so that equal and
    /// near-equal pairs are common.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }

        fn value(&mut self, depth: u32) -> Value {
            match self.next(if depth > 2 { 6 } else { 8 }) {
                0 => Value::Null,
                1 => Value::Bool(self.next(2) == 0),
                2 => Value::Number(Number::Int(self.next(3) as i64)),
                3 => Value::Number(Number::Float([0.0, 1.0, 0.5, -0.0][self.next(4) as usize])),
                4 | 5 => Value::String(
                    ["a", "b", "_meta", "é", "\u{1F600}"][self.next(5) as usize].into(),
                ),
                6 => Value::Array((0..self.next(3)).map(|_| self.value(depth + 1)).collect()),
                _ => {
                    let mut map = crate::json::Map::new();
                    for _ in 0..self.next(4) {
                        let k = ["a", "b", "_meta", "B", "é"][self.next(5) as usize];
                        let v = self.value(depth + 1);
                        map.insert(k, v);
                    }
                    Value::Object(map)
                }
            }
        }
    }

    /// The same members in another order, recursively.
    fn shuffled(v: &Value, g: &mut Gen) -> Value {
        match v {
            Value::Array(items) => Value::Array(items.iter().map(|i| shuffled(i, g)).collect()),
            Value::Object(map) => {
                let mut entries: Vec<_> = map
                    .iter()
                    .map(|(k, v)| (k.clone(), shuffled(v, g)))
                    .collect();
                for i in (1..entries.len()).rev() {
                    entries.swap(i, g.next(i as u64 + 1) as usize);
                }
                Value::Object(entries.into_iter().collect())
            }
            other => other.clone(),
        }
    }

    #[test]
    fn keys_agree_with_canonical_text_on_random_values() {
        let mut g = Gen(42);
        let (mut equal, mut different) = (0, 0);
        for _ in 0..20_000 {
            let a = g.value(0);
            let b = if g.next(2) == 0 {
                shuffled(&a, &mut g)
            } else {
                g.value(0)
            };
            let text_equal =
                canonical_json_with(&a, &["_meta"]) == canonical_json_with(&b, &["_meta"]);
            assert_eq!(same(&a, &b), text_equal, "{a:?} vs {b:?}");
            if text_equal {
                equal += 1
            } else {
                different += 1
            }
        }
        assert!(
            equal > 5_000 && different > 5_000,
            "{equal} equal, {different} different pairs"
        );
    }

    #[test]
    fn an_input_holding_a_degraded_value_equals_nothing() {
        let walker = || KeyWalker::new(&SALT, &["_meta"]);
        let degraded = crate::json!({"id": "[unserializable]", "n": 1i64});
        assert_eq!(
            walker().comparable_call_key(b"tool:t", Some(&degraded)),
            None
        );
        let nested = crate::json!({"a": [{"b": "[unserializable]"}]});
        assert_eq!(walker().comparable_call_key(b"tool:t", Some(&nested)), None);
        let plain = crate::json!({"id": "1"});
        assert_eq!(
            walker().comparable_call_key(b"tool:t", Some(&plain)),
            Some(walker().call_key(b"tool:t", Some(&plain)))
        );
    }

    #[test]
    fn the_depth_marker_equals_its_string() {
        let mut deep = Value::Array(vec![]);
        for _ in 0..(MAX_CANONICAL_DEPTH + 3) {
            deep = Value::Array(vec![deep]);
        }
        let mut marked = Value::String(DEPTH_MARKER.into());
        for _ in 0..=MAX_CANONICAL_DEPTH {
            marked = Value::Array(vec![marked]);
        }
        assert_eq!(
            canonical_json_with(&deep, &[]),
            canonical_json_with(&marked, &[])
        );
        assert!(same(&deep, &marked));
    }

    #[test]
    fn the_outcome_budget_counts_like_the_canonical_writer() {
        let v = parse_str(r#"{"ab":["xy",1,"é"]}"#).unwrap();
        // "ab" 2+1, three elements 3, "xy" 2+1, "é" 1+1 = 11.
        let walker = || KeyWalker::new(&SALT, &["_meta"]);
        assert!(walker().outcome_key(b"out", Some(&v), 11).is_some());
        assert!(walker().outcome_key(b"out", Some(&v), 10).is_none());
        assert_ne!(
            walker().outcome_key(b"out", Some(&v), 11),
            walker().outcome_key(b"res", Some(&v), 11)
        );
        // Within its byte bound (one walk) and only within its exact count (two walks),
        // the same value has the same key.
        assert_eq!(
            walker().outcome_key(b"out", Some(&v), 11),
            walker().outcome_key(b"out", Some(&v), 1_000)
        );
        let v = parse_str(r#"{"ab":"xyz","c":[1,2]}"#).unwrap();
        // keys 3 + 2, string 4, elements 2 = 11
        assert!(walker().outcome_key(b"out", Some(&v), 11).is_some());
        assert!(walker().outcome_key(b"out", Some(&v), 10).is_none());
        // Astral characters: 4 bytes, 2 UTF-16 units each ("😀😀" 4+1, key "k" 1+1 = 7).
        let v = parse_str(r#"{"k":"😀😀"}"#).unwrap();
        assert!(walker().outcome_key(b"out", Some(&v), 7).is_some());
        assert!(walker().outcome_key(b"out", Some(&v), 6).is_none());
    }
}
