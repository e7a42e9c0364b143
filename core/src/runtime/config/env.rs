//! [`EnvSnapshot`]: the environment as a plain map, and the small parsers every rule
//! shares (switch spellings, JavaScript's `Number(text)`, comma lists).
//!
//! Resolution never reads the process environment: it is handed a snapshot, so the same
//! inputs always give the same configuration and the conformance vectors can feed any
//! environment they like. [`EnvSnapshot::from_process`] is the one place that reads it.

use std::collections::BTreeMap;

use crate::json::Value;

/// A copy of environment variables, by name. An empty value is kept (it is *set*, and some
/// rules, such as `CI`, care about that); the rules that treat empty as unset say so.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvSnapshot {
    vars: BTreeMap<String, String>,
}

impl EnvSnapshot {
    /// An empty environment: every variable unset.
    pub fn new() -> Self {
        EnvSnapshot {
            vars: BTreeMap::new(),
        }
    }

    /// The current process environment. A name or value that is not valid Unicode is
    /// converted lossily (U+FFFD), which never matches a spelling any rule looks for.
    pub fn from_process() -> Self {
        std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect()
    }

    /// A snapshot from a JSON object of strings (the conformance vectors' `env`). Entries
    /// whose value is not a string are skipped; anything but an object gives an empty
    /// snapshot.
    pub fn from_json(value: &Value) -> Self {
        let mut env = EnvSnapshot::new();
        if let Some(map) = value.as_object() {
            for (key, val) in map.iter() {
                if let Some(text) = val.as_js_str() {
                    env.set(
                        key.to_string_lossy().into_owned(),
                        text.to_string_lossy().into_owned(),
                    );
                }
            }
        }
        env
    }

    /// Set one variable (builder style helpers and tests).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.vars.insert(name.into(), value.into());
        self
    }

    /// Remove one variable.
    pub fn unset(&mut self, name: &str) -> &mut Self {
        self.vars.remove(name);
        self
    }

    /// The value of `name`, empty string included; `None` when unset.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// The value of `name` when it is set to something other than the empty string.
    pub fn get_non_empty(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.is_empty())
    }

    /// Whether `name` is set at all (even to the empty string).
    pub fn is_set(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// Whether no variable is set.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for EnvSnapshot {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        EnvSnapshot {
            vars: iter
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

/// Trimmed and lower-cased, the normal form every switch spelling is compared in.
pub(crate) fn norm(value: &str) -> String {
    value.trim().to_lowercase()
}

/// The spellings that leave a kill switch off: unset, empty, `0`, `false`, `off`, `no`.
const KILL_SWITCH_OFF: [&str; 5] = ["", "0", "false", "off", "no"];

/// A kill switch read from the environment (`GRAPHMIND_DISABLED`,
/// `GRAPHMIND_DISABLE_EDIT_INPUT`): ON for every value except unset, empty, `0`, `false`,
/// `off` and `no` (any case, surrounding whitespace ignored). An unexpected spelling
/// (`yes`, `TRUE `, `on`) errs towards the switch being on.
pub fn kill_switch_on(value: Option<&str>) -> bool {
    match value {
        None => false,
        Some(v) => !KILL_SWITCH_OFF.contains(&norm(v).as_str()),
    }
}

/// Whether a value looks like someone meant "off" (so a switch that stays off for it
/// needs no warning): empty, `0`, `false`, `off`, `no`.
pub(crate) fn looks_off(value: &str) -> bool {
    KILL_SWITCH_OFF.contains(&norm(value).as_str())
}

/// A `GRAPHMIND_HIDE_*` value (also `DO_NOT_TRACK`): on for `1` or `true`, in any case,
/// surrounding whitespace ignored. Anything else is off.
pub fn env_flag_on(value: Option<&str>) -> bool {
    matches!(value.map(norm).as_deref(), Some("1") | Some("true"))
}

/// A hide-switch *option* value that turns the switch on: `true`, the number `1`, or a
/// string the environment would accept (`"1"`, `"true"`, any case, trimmed). Anything else
/// is off. Bindings pass the host value over as JSON and call this.
pub fn option_flag_on(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() == 1.0,
        Value::String(s) => env_flag_on(Some(&s.to_string_lossy())),
        _ => false,
    }
}

/// Whether a hide-switch option value plainly means "off" (`false`, `0`, `null`, or an
/// off-looking string), so leaving the switch off needs no warning.
pub(crate) fn option_looks_off(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(false) => true,
        Value::Number(n) => n.as_f64() == 0.0,
        Value::String(s) => looks_off(&s.to_string_lossy()),
        _ => false,
    }
}

/// JavaScript's `Number(text)` for the spellings that matter: optional surrounding
/// whitespace, decimal with optional sign, fraction and exponent (`+4`, `5.`, `.5`, `1e3`),
/// `Infinity` with optional sign, and unsigned `0x` / `0o` / `0b` integers. `None` where
/// JavaScript gives `NaN`. The empty string is `None` here (JavaScript says 0; every rule
/// in this module treats an empty variable as unset instead).
pub fn js_number(text: &str) -> Option<f64> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    let bytes = t.as_bytes();
    if bytes.len() > 2 && bytes[0] == b'0' {
        let radix = match bytes[1] {
            b'x' | b'X' => Some(16),
            b'o' | b'O' => Some(8),
            b'b' | b'B' => Some(2),
            _ => None,
        };
        if let Some(radix) = radix {
            let mut acc = 0f64;
            for &b in &bytes[2..] {
                let digit = (b as char).to_digit(radix)?;
                acc = acc * f64::from(radix) + f64::from(digit);
            }
            return Some(acc);
        }
    }
    let (sign, body) = match bytes[0] {
        b'+' => (1.0, &t[1..]),
        b'-' => (-1.0, &t[1..]),
        _ => (1.0, t),
    };
    if body == "Infinity" {
        return Some(sign * f64::INFINITY);
    }
    if !is_decimal_literal(body) {
        return None;
    }
    body.parse::<f64>().ok().map(|v| sign * v)
}

/// `digits [. digits?] [e [+-] digits]` or `. digits [e ...]`, nothing else.
fn is_decimal_literal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - frac_start;
    }
    if int_digits == 0 && frac_digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let exp_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == b.len()
}

/// A whole number `>= 0` as JavaScript reads it (`3`, `3.0`, `0x10`, `1e2`), or `None`.
/// `-0` counts as 0.
pub(crate) fn js_whole_number(text: &str) -> Option<f64> {
    js_number(text)
        .filter(|v| v.is_finite() && v.fract() == 0.0 && *v >= 0.0)
        .map(|v| v + 0.0)
}

/// A comma-separated list: entries trimmed, empty entries dropped.
pub fn parse_comma_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_number_follows_javascript() {
        assert_eq!(js_number("3"), Some(3.0));
        assert_eq!(js_number(" 3.0 "), Some(3.0));
        assert_eq!(js_number("+4"), Some(4.0));
        assert_eq!(js_number("5."), Some(5.0));
        assert_eq!(js_number(".5"), Some(0.5));
        assert_eq!(js_number("1e3"), Some(1000.0));
        assert_eq!(js_number("0x10"), Some(16.0));
        assert_eq!(js_number("0b101"), Some(5.0));
        assert_eq!(js_number("0o17"), Some(15.0));
        assert_eq!(js_number("-Infinity"), Some(f64::NEG_INFINITY));
        for nan in [
            "", "abc", "1_000", "-0x10", "0x", "inf", "nan", "1e", ".", "e5", "1.2.3", "3 4",
        ] {
            assert_eq!(js_number(nan), None, "{nan:?}");
        }
        assert_eq!(js_whole_number("-0"), Some(0.0));
        assert_eq!(js_whole_number("2.5"), None);
        assert_eq!(js_whole_number("-1"), None);
    }

    #[test]
    fn switch_spellings() {
        assert!(env_flag_on(Some(" TRUE ")));
        assert!(env_flag_on(Some("1")));
        assert!(!env_flag_on(Some("yes")));
        assert!(!env_flag_on(None));
        assert!(kill_switch_on(Some("yes")));
        assert!(kill_switch_on(Some(" 1 ")));
        assert!(!kill_switch_on(Some(" Off ")));
        assert!(!kill_switch_on(Some("")));
        assert!(!kill_switch_on(None));
    }
}
