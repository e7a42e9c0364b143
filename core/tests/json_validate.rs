//! `json::validate` answers exactly as `json::parse` does, error included, on every
//! JSONTestSuite file, on every prefix of each, on random byte mutations of them, on
//! random documents, and at the nesting limit. (Callers such as the C ABI validate text
//! at the call and hand it on unparsed; the later parse must never find it bad.)
//! `json::parse_with_opaque` too, and where the text is JSON its value is `parse`'s with
//! `null` at the opaque paths (the spool import checks envelopes that way).

use graphmind_core::json::{self, Value, MAX_JSON_DEPTH};
use proptest::prelude::*;
#[path = "support/json_suite.rs"]
mod json_suite;
use json_suite::suite;

/// Key paths for `parse_with_opaque`: into the benchmark sample, into the nesting test's
/// `{"a":{"a":...}}`, and an envelope's input.
const OPAQUE: &[&[&str]] = &[
    &["params", "arguments"],
    &["params", "_meta", "trace"],
    &["a", "a"],
    &["payload", "input"],
];

/// `value` with `null` at each of the [`OPAQUE`] paths it has.
fn with_nulls(mut value: Value) -> Value {
    for path in OPAQUE {
        let mut at = Some(&mut value);
        for key in *path {
            at = at
                .and_then(|v| v.as_object_mut())
                .and_then(|m| m.get_mut(key));
        }
        if let Some(v) = at {
            *v = Value::Null;
        }
    }
    value
}

/// The same verdict, and the same error (kind and offset) when there is one.
fn agree(input: &[u8]) -> Result<(), String> {
    let full = json::parse(input);
    let parsed = full.clone().map(drop);
    let validated = json::validate(input);
    let opaque = match std::str::from_utf8(input) {
        Ok(text) => json::parse_with_opaque(text, OPAQUE),
        Err(_) => full.clone(), // text only: its UTF-8 is checked where it is read
    };
    let same_value = match (&full, &opaque) {
        (Ok(a), Ok(b)) => with_nulls(a.clone()) == *b,
        _ => true,
    };
    if parsed == validated && parsed == opaque.clone().map(drop) && same_value {
        Ok(())
    } else {
        Err(format!(
            "parse {full:?}, validate {validated:?}, with opaque paths {opaque:?} on {:?}",
            String::from_utf8_lossy(input)
        ))
    }
}

#[test]
fn every_jsontestsuite_file_and_every_prefix_gets_the_same_verdict() {
    let (mut accepted, mut refused) = (0, 0);
    for (name, bytes) in suite() {
        match json::validate(&bytes) {
            Ok(()) => accepted += 1,
            Err(_) => refused += 1,
        }
        if name.starts_with("y_") {
            assert!(json::validate(&bytes).is_ok(), "{name} is JSON");
        }
        if name.starts_with("n_") {
            assert!(json::validate(&bytes).is_err(), "{name} is not JSON");
        }
        for end in 0..=bytes.len().min(4096) {
            agree(&bytes[..end]).unwrap_or_else(|e| panic!("{name}[..{end}]: {e}"));
        }
    }
    assert!(
        accepted >= 95 && refused >= 188,
        "{accepted} accepted, {refused} refused"
    );
}

#[test]
fn nesting_at_and_past_the_limit_gets_the_same_verdict() {
    for depth in [
        MAX_JSON_DEPTH - 1,
        MAX_JSON_DEPTH,
        MAX_JSON_DEPTH + 1,
        100_000,
    ] {
        for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
            let text = format!("{}1{}", open.repeat(depth), close.repeat(depth));
            agree(text.as_bytes()).unwrap();
            assert_eq!(
                json::validate(text.as_bytes()).is_ok(),
                depth <= MAX_JSON_DEPTH,
                "depth {depth}"
            );
        }
    }
}

/// The suite's files and the benchmark sample, read once.
fn samples() -> &'static [Vec<u8>] {
    static SAMPLES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    SAMPLES.get_or_init(|| {
        let sample = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../bench/sample-1k.json"
        ))
        .unwrap();
        let mut all: Vec<Vec<u8>> = suite().into_iter().map(|(_, b)| b).collect();
        all.push(sample);
        all
    })
}

/// JSON-ish text: the characters that matter to the grammar, and some that do not.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop::sample::select(vec![
        "{", "}", "[", "]", ":", ",", "\"", "\\", "\\u", "\\ud800", "d83d", "0", "-", "1", "9",
        ".", "e", "E", "+", "true", "false", "null", " ", "\n", "\t", "a", "é", "😀", "\u{1}",
        "\"k\":", "\"s\"", "1e999", "-0.0", "00", "nul",
    ]);
    prop::collection::vec(token, 0..40).prop_map(|t| t.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn random_jsonish_text_gets_the_same_verdict(text in jsonish()) {
        prop_assert!(agree(&text).is_ok(), "{}", agree(&text).unwrap_err());
    }

    #[test]
    fn byte_mutations_of_real_documents_get_the_same_verdict(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let all = samples();
        let mut doc = all[which.index(all.len())].clone();
        for (at, byte, op) in edits {
            if doc.is_empty() {
                doc.push(byte);
                continue;
            }
            let i = at.index(doc.len());
            match op {
                0 => doc[i] = byte,
                1 => doc.insert(i, byte),
                _ => { doc.remove(i); }
            }
        }
        prop_assert!(agree(&doc).is_ok(), "{}", agree(&doc).unwrap_err());
    }
}
