//! The result shapes that the 0.6 loop kinds and the smart breakpoints read: a tool result
//! that says it failed without throwing (`error-result`), an LLM step cut off while asking
//! for tool calls (`truncated-tool-call`), the default-on `GRAPHMIND_BREAK_ON_*` switches and
//! the normalised error text that error-repeat compares.
//!
//! Pure functions over [`Value`]; none panics and none quotes a value in what it returns.

use crate::event::{SmartInfo, SmartRule};
use crate::json::{JsStr, Number, Value};
use crate::redact::HideSwitches;

/// Which strict error shape a tool result has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorResultShape {
    /// `isError: true` (MCP's tool-error result).
    IsError,
    /// `success: false`.
    Success,
    /// A non-zero number under `exit_code`.
    ExitCodeSnake,
    /// A non-zero number under `exitCode`.
    ExitCode,
    /// A non-zero number under `exitStatus`.
    ExitStatus,
    /// An object whose only key is `error`, with a value other than `null` / `false`.
    Error,
}

impl ErrorResultShape {
    /// The name the reference gives this shape (the key it looked at).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorResultShape::IsError => "isError",
            ErrorResultShape::Success => "success",
            ErrorResultShape::ExitCodeSnake => "exit_code",
            ErrorResultShape::ExitCode => "exitCode",
            ErrorResultShape::ExitStatus => "exitStatus",
            ErrorResultShape::Error => "error",
        }
    }

    /// A value-free sentence for a smart hold's `detail`.
    pub fn detail(self) -> &'static str {
        match self {
            ErrorResultShape::IsError => "the tool returned a result with isError: true",
            ErrorResultShape::Success => "the tool returned a result with success: false",
            ErrorResultShape::ExitCodeSnake => {
                "the tool returned a result with a non-zero exit_code"
            }
            ErrorResultShape::ExitCode => "the tool returned a result with a non-zero exitCode",
            ErrorResultShape::ExitStatus => "the tool returned a result with a non-zero exitStatus",
            ErrorResultShape::Error => "the tool returned an object whose only field is error",
        }
    }

    /// A failure the tool returned (every shape but the `{error}`-only object, which is
    /// also how adapters wrap a thrown or JSON-RPC error they caught).
    pub fn is_returned(self) -> bool {
        self != ErrorResultShape::Error
    }
}

/// The strict error-result rule: top level only, no substring matching. `None` for
/// anything that is not an object with one of the shapes of [`ErrorResultShape`].
pub fn error_result_shape(result: &Value) -> Option<ErrorResultShape> {
    let map = result.as_object()?;
    if map.get("isError") == Some(&Value::Bool(true)) {
        return Some(ErrorResultShape::IsError);
    }
    if map.get("success") == Some(&Value::Bool(false)) {
        return Some(ErrorResultShape::Success);
    }
    for (key, shape) in [
        ("exit_code", ErrorResultShape::ExitCodeSnake),
        ("exitCode", ErrorResultShape::ExitCode),
        ("exitStatus", ErrorResultShape::ExitStatus),
    ] {
        if let Some(Value::Number(n)) = map.get(key) {
            if is_nonzero_number(n) {
                return Some(shape);
            }
        }
    }
    if map.len() != 1 {
        return None;
    }
    match map.get("error") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => None,
        Some(_) => Some(ErrorResultShape::Error),
    }
}

fn is_nonzero_number(n: &Number) -> bool {
    match n {
        Number::Int(i) => *i != 0,
        // NaN does not count; the infinities do.
        Number::Float(f) => !f.is_nan() && *f != 0.0,
        Number::BigInt(digits) => digits.bytes().any(|b| b.is_ascii_digit() && b != b'0'),
    }
}

/// Why a model stopped in a way that cuts tool calls off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TruncationCause {
    /// `finishReason: "length"`: the token limit.
    Length,
    /// `finishReason: "content-filter"`.
    ContentFilter,
}

impl TruncationCause {
    /// The normalised finish reason.
    pub fn as_str(self) -> &'static str {
        match self {
            TruncationCause::Length => "length",
            TruncationCause::ContentFilter => "content-filter",
        }
    }
}

/// What the truncated-tool-call rule found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TruncatedToolCall {
    /// Why the model stopped.
    pub finish_reason: TruncationCause,
    /// Tool calls the step requested (the array's length).
    pub tool_calls: usize,
    /// Of the first [`MAX_INSPECTED_TOOL_CALLS`], those whose arguments did not parse
    /// (`inputText` is a string).
    pub unparsed: usize,
}

/// Tool calls inspected for `inputText`.
pub const MAX_INSPECTED_TOOL_CALLS: usize = 256;

/// The truncated-tool-call rule over a normalised LLM output
/// (`{finishReason, toolCalls: [{id?, name, input, inputText?}]}`), or `None`.
pub fn truncated_tool_call(result: &Value) -> Option<TruncatedToolCall> {
    let map = result.as_object()?;
    let finish_reason = match map.get("finishReason")?.as_str()? {
        "length" => TruncationCause::Length,
        "content-filter" => TruncationCause::ContentFilter,
        _ => return None,
    };
    let calls = map.get("toolCalls")?.as_array()?;
    let unparsed = calls
        .iter()
        .take(MAX_INSPECTED_TOOL_CALLS)
        .filter(|call| matches!(call.get("inputText"), Some(Value::String(_))))
        .count();
    if calls.is_empty() && unparsed == 0 {
        return None;
    }
    Some(TruncatedToolCall {
        finish_reason,
        tool_calls: calls.len(),
        unparsed,
    })
}

/// A value-free sentence for a truncated-tool-call hold's `detail`.
pub fn truncated_detail(found: &TruncatedToolCall) -> String {
    fn plural(n: usize, one: &str, many: &str) -> String {
        format!("{n} {}", if n == 1 { one } else { many })
    }
    let cause = match found.finish_reason {
        TruncationCause::Length => "at the token limit",
        TruncationCause::ContentFilter => "by the content filter",
    };
    let unparsed = if found.unparsed > 0 {
        format!(
            "; {} arguments that did not parse",
            plural(found.unparsed, "call has", "calls have")
        )
    } else {
        String::new()
    };
    format!(
        "the model was stopped {cause} with {} requested{unparsed}",
        plural(found.tool_calls, "tool call", "tool calls")
    )
}

/// A default-on switch (`GRAPHMIND_BREAK_ON_ERROR_RESULT`, `GRAPHMIND_BREAK_ON_TRUNCATED`):
/// off only for `0`, `false`, `off`, `no` (any case, surrounding white space ignored);
/// unset, empty or anything else is on.
pub fn parse_break_on(raw: Option<&str>) -> bool {
    match raw {
        None => true,
        Some(text) => {
            let text = text.trim().to_ascii_lowercase();
            !matches!(text.as_str(), "0" | "false" | "off" | "no")
        }
    }
}

/// The smart breakpoints a session has on (`breakOnErrorResult` / `breakOnTruncated`, each
/// beating its `GRAPHMIND_BREAK_ON_*` variable; both default on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmartSwitches {
    /// The error-result rule (tool nodes).
    pub error_result: bool,
    /// The truncated-tool-call rule (LLM nodes).
    pub truncated: bool,
}

/// The smart hold an `after` gate raises for a node of `kind` whose result (a tool's
/// output, an LLM step's normalised output) is `result`: `error-result` for a tool,
/// `truncated-tool-call` for an LLM step, each only while its switch is on.
pub fn detect_after(kind: &str, result: &Value, on: SmartSwitches) -> Option<SmartInfo> {
    match kind {
        "tool" if on.error_result => error_result_shape(result).map(error_result_info),
        "llm" if on.truncated => truncated_tool_call(result).map(|found| {
            let mut info = SmartInfo::new(SmartRule::TruncatedToolCall);
            info.detail = Some(JsStr::from(truncated_detail(&found).as_str()));
            info
        }),
        _ => None,
    }
}

/// The smart hold an `error` gate raises when it was handed a tool's result: a RETURNED
/// error shape holds as `error-result` instead of as a plain error hold; the `{error}`-only
/// object (how adapters wrap a thrown error) does not.
pub fn detect_at_error(kind: &str, result: &Value, on: SmartSwitches) -> Option<SmartInfo> {
    if kind != "tool" || !on.error_result {
        return None;
    }
    error_result_shape(result)
        .filter(|shape| shape.is_returned())
        .map(error_result_info)
}

fn error_result_info(shape: ErrorResultShape) -> SmartInfo {
    let mut info = SmartInfo::new(SmartRule::ErrorResult);
    info.detail = Some(JsStr::from(shape.detail()));
    info
}

/// A smart hold as it may leave the process: its `detail` explains in terms of the values
/// the rule saw, so it is dropped whenever a switch hides this node's input or output.
pub fn on_wire(mut info: SmartInfo, kind: &str, hide: &HideSwitches) -> SmartInfo {
    let tool = kind == "tool";
    if hide.inputs || hide.outputs || (tool && (hide.tool_args || hide.tool_results)) {
        info.detail = None;
    }
    info
}

/// Error names and messages are compared on at most this many UTF-16 units.
pub const MAX_ERROR_TEXT_CHARS: usize = 512;
/// Only the first this-many UTF-16 units of an error text are scanned.
pub const MAX_ERROR_SCAN_CHARS: usize = 1024 * 1024;

/// The key an error-repeat compares: runs of white space (JavaScript's `\s`) collapsed to
/// one space, trimmed, cut to [`MAX_ERROR_TEXT_CHARS`] UTF-16 units (a cut may split a
/// surrogate pair, as in JavaScript).
pub fn error_text_key(text: &JsStr) -> JsStr {
    let mut units: Vec<u16> = Vec::with_capacity(text.utf16_len().min(MAX_ERROR_TEXT_CHARS * 2));
    let mut pending_space = false;
    for unit in text.utf16_units().take(MAX_ERROR_SCAN_CHARS) {
        if is_js_space(unit) {
            pending_space = true;
            continue;
        }
        if pending_space && !units.is_empty() {
            units.push(b' ' as u16);
        }
        pending_space = false;
        units.push(unit);
        if units.len() >= MAX_ERROR_TEXT_CHARS {
            break;
        }
    }
    units.truncate(MAX_ERROR_TEXT_CHARS);
    JsStr::from_utf16(&units)
}

/// JavaScript's `\s`: white space and line terminators.
fn is_js_space(unit: u16) -> bool {
    matches!(
        unit,
        0x09..=0x0D | 0x20 | 0xA0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000 | 0xFEFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_str;

    #[test]
    fn shapes() {
        let v = parse_str(r#"{"exitCode":-1,"stdout":""}"#).unwrap();
        assert_eq!(error_result_shape(&v), Some(ErrorResultShape::ExitCode));
        assert_eq!(error_result_shape(&Value::from(f64::NAN)), None);
        let nan = parse_str(r#"{"exitCode":0}"#).unwrap();
        assert_eq!(error_result_shape(&nan), None);
    }

    #[test]
    fn error_text() {
        assert_eq!(
            error_text_key(&JsStr::from(" a  b\n\tc ")).as_str(),
            Some("a b c")
        );
        assert_eq!(error_text_key(&JsStr::from("   ")).as_str(), Some(""));
    }

    const ON: SmartSwitches = SmartSwitches {
        error_result: true,
        truncated: true,
    };

    #[test]
    fn each_rule_holds_its_own_kind_only_while_on() {
        let cut = parse_str(r#"{"finishReason":"length","toolCalls":[{"name":"a","input":{}}]}"#)
            .unwrap();
        let failed = parse_str(r#"{"isError":true}"#).unwrap();
        let hit = detect_after("llm", &cut, ON).unwrap();
        assert_eq!(hit.rule, SmartRule::TruncatedToolCall);
        assert_eq!(
            hit.detail.unwrap().as_str(),
            Some("the model was stopped at the token limit with 1 tool call requested")
        );
        assert_eq!(detect_after("tool", &cut, ON), None);
        assert_eq!(detect_after("llm", &failed, ON), None);
        assert_eq!(
            detect_after("tool", &failed, ON).map(|i| i.rule),
            Some(SmartRule::ErrorResult)
        );
        let off = SmartSwitches {
            error_result: false,
            truncated: false,
        };
        assert_eq!(detect_after("llm", &cut, off), None);
        assert_eq!(detect_after("tool", &failed, off), None);
    }

    #[test]
    fn at_an_error_gate_only_a_returned_shape_holds() {
        let returned = parse_str(r#"{"isError":true}"#).unwrap();
        let wrapped = parse_str(r#"{"error":"boom"}"#).unwrap();
        assert!(detect_at_error("tool", &returned, ON).is_some());
        assert_eq!(detect_at_error("tool", &wrapped, ON), None);
        assert_eq!(detect_at_error("llm", &returned, ON), None);
    }

    #[test]
    fn a_hide_switch_drops_the_detail() {
        let info = detect_after("tool", &parse_str(r#"{"success":false}"#).unwrap(), ON).unwrap();
        let mut hide = HideSwitches::default();
        assert!(on_wire(info.clone(), "tool", &hide).detail.is_some());
        hide.tool_results = true;
        assert_eq!(on_wire(info.clone(), "tool", &hide).detail, None);
        assert!(on_wire(info.clone(), "llm", &hide).detail.is_some());
        hide.outputs = true;
        assert_eq!(on_wire(info, "llm", &hide).detail, None);
    }
}
