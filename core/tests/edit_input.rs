//! Runs every section of the reference edit-input fixture through
//! `graphmind_core::edit_input`. A missing field in a case means the value is absent.

use graphmind_core::edit_input::{
    self, merge_edited_input, normalize_validation, pollution_path, proposed_value_refusal,
    prototype_key_refusal, sanitize_short_text, EditRefusal, InputValidation, RefusalCode,
    MAX_REFUSAL_MESSAGE,
};
use graphmind_core::json::{self, Value};
use graphmind_core::redact::REDACTED;

#[path = "support/verdict.rs"]
mod verdict;
use verdict::finish;

fn fixture() -> Value {
    let path = format!(
        "{}/../tests/vectors/reference/edit-input-fixture.json",
        env!("CARGO_MANIFEST_DIR")
    );
    json::parse(&std::fs::read(&path).expect("read fixture")).expect("parse fixture")
}

fn section(f: &Value, name: &str) -> Vec<Value> {
    f.get(name)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("section {name}"))
        .clone()
}

fn name(case: &Value) -> &str {
    case.get("name").and_then(Value::as_str).unwrap_or("?")
}

#[test]
fn constants_match_the_fixture() {
    let f = fixture();
    assert_eq!(f.get("placeholder").and_then(Value::as_str), Some(REDACTED));
    assert_eq!(
        f.get("maxRefusalMessage").and_then(Value::as_i64),
        Some(MAX_REFUSAL_MESSAGE as i64)
    );
}

#[test]
fn proposed_value() {
    let cases = section(&fixture(), "proposedValue");
    let mut failures = Vec::new();
    for case in &cases {
        let value = case.get("value").cloned().unwrap_or(Value::Null);
        let want = case.get("refusal").and_then(Value::as_str);
        let got = proposed_value_refusal(&value).map(RefusalCode::as_str);
        if got != want {
            failures.push(format!("{}: got {got:?}, want {want:?}", name(case)));
        }
        // The message form agrees with the code.
        let checked = edit_input::check_proposed_value(&value)
            .err()
            .map(|e: EditRefusal| e.code.as_str());
        if checked != want {
            failures.push(format!(
                "{}: check_proposed_value gave {checked:?}",
                name(case)
            ));
        }
    }
    finish("proposedValue", cases.len(), failures);
}

#[test]
fn prototype_keys() {
    let cases = section(&fixture(), "prototypeKeys");
    let mut failures = Vec::new();
    for case in &cases {
        let value = case.get("value").cloned().unwrap_or(Value::Null);
        let want = case
            .get("refused")
            .and_then(Value::as_bool)
            .expect("refused");
        let got = prototype_key_refusal(&value);
        if got.is_some() != want || pollution_path(&value).is_some() != want {
            failures.push(format!("{}: got {got:?}, want refused={want}", name(case)));
        }
        if let Some(r) = got {
            if r.code != RefusalCode::Shape
                || !r.message.starts_with("the edited input may not contain")
            {
                failures.push(format!("{}: refusal {r:?}", name(case)));
            }
        }
    }
    finish("prototypeKeys", cases.len(), failures);
}

#[test]
fn normalize_validation_section() {
    let cases = section(&fixture(), "normalizeValidation");
    let mut failures = Vec::new();
    for case in &cases {
        let got = json::to_string(&normalize_validation(case.get("result")).to_value());
        let want = json::to_string(case.get("expected").expect("expected"));
        if got != want {
            failures.push(format!("{}:\n  got  {got}\n  want {want}", name(case)));
        }
    }
    finish("normalizeValidation", cases.len(), failures);
}

#[test]
fn sanitize_short_text_section() {
    let cases = section(&fixture(), "sanitizeShortText");
    let mut failures = Vec::new();
    for case in &cases {
        let got = sanitize_short_text(case.get("input"))
            .map(Value::String)
            .unwrap_or(Value::Null);
        let want = case.get("expected").cloned().unwrap_or(Value::Null);
        if json::to_string(&got) != json::to_string(&want) {
            failures.push(format!(
                "{}:\n  got  {}\n  want {}",
                name(case),
                json::to_string(&got),
                json::to_string(&want)
            ));
        }
    }
    finish("sanitizeShortText", cases.len(), failures);
}

#[test]
fn merge_tool_input() {
    let cases = section(&fixture(), "mergeToolInput");
    let mut failures = Vec::new();
    for case in &cases {
        let hidden = case
            .get("inputHidden")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let got = match merge_edited_input(case.get("live"), case.get("proposed"), hidden) {
            Ok(v) => InputValidation::Accepted(v),
            Err(r) => r.into(),
        };
        let got = json::to_string(&got.to_value());
        let want = json::to_string(case.get("expected").expect("expected"));
        if got != want {
            failures.push(format!("{}:\n  got  {got}\n  want {want}", name(case)));
        }
    }
    finish("mergeToolInput", cases.len(), failures);
}

#[test]
fn sanitize_never_splits_a_pair_and_keeps_lone_surrogates() {
    // 198 'a' then a pair: the cut at 199 would split it, so it goes whole.
    let mut units: Vec<u16> = vec![b'a' as u16; 198];
    units.extend([0xd83d, 0xde00, 0xd83d, 0xde00]);
    let s = Value::String(graphmind_core::JsStr::from_utf16(&units));
    let out = sanitize_short_text(Some(&s)).expect("text");
    assert_eq!(out.utf16_len(), 199);
    // A lone surrogate is text, not whitespace.
    let lone = Value::String(graphmind_core::JsStr::from_utf16(&[0x20, 0xdc00, 0x20]));
    assert_eq!(
        sanitize_short_text(Some(&lone)).map(|s| s.utf16_units().collect::<Vec<_>>()),
        Some(vec![0xdc00])
    );
}

#[test]
fn merge_refusals_carry_the_code_and_message() {
    let err = merge_edited_input(None, Some(&json::parse_str("[1]").unwrap()), false).unwrap_err();
    assert_eq!(err.code, RefusalCode::Shape);
    assert_eq!(
        err.to_string(),
        "the edited arguments must be a JSON object (shape)"
    );
}
