//! Server settings from flags and the environment: ports, paths, pause-on-error, grace.

use graphmind_core::json::{Map, Value};
use std::path::PathBuf;

/// The port `graphmind serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 4747;

/// How long a run whose app disconnected keeps `running` before it is marked `abandoned`
/// (reference: `DEFAULT_ABANDON_GRACE_MS`, `packages/cli/src/hub.ts`).
pub const DEFAULT_ABANDON_GRACE_MS: u64 = 15_000;

/// Node kinds a `--pause-on-error` value may name.
pub const NODE_KINDS: [&str; 6] = ["agent", "llm", "tool", "chain", "retriever", "custom"];

const ON_VALUES: [&str; 5] = ["on", "all", "yes", "true", "1"];
const OFF_VALUES: [&str; 5] = ["off", "none", "no", "false", "0"];

/// The breakpoints a fresh server arms, from a `--pause-on-error` /
/// `GRAPHMIND_PAUSE_ON_ERROR` value: empty or `on` gives `[{point:"error"}]`, `off` gives
/// none, a node kind gives `[{point:"error", kind}]`. Anything else is an error message.
pub fn parse_pause_on_error(raw: Option<&str>) -> Result<Vec<Value>, String> {
    let value = raw.unwrap_or("").trim().to_ascii_lowercase();
    let matcher = |kind: Option<&str>| {
        let mut m = Map::new();
        m.insert("point", Value::from("error"));
        if let Some(kind) = kind {
            m.insert("kind", Value::from(kind));
        }
        Value::Object(m)
    };
    if value.is_empty() || ON_VALUES.contains(&value.as_str()) {
        return Ok(vec![matcher(None)]);
    }
    if OFF_VALUES.contains(&value.as_str()) {
        return Ok(Vec::new());
    }
    if let Some(kind) = NODE_KINDS.iter().find(|k| **k == value) {
        return Ok(vec![matcher(Some(kind))]);
    }
    Err(format!(
        "pause-on-error must be one of on, off, {} (got \"{}\")",
        NODE_KINDS.join(", "),
        raw.unwrap_or("")
    ))
}

/// The database path: `--db`, else `GRAPHMIND_DB`, else `~/.graphmind/graphmind.db`.
pub fn resolve_db_path(flag: Option<&str>, env_db: Option<&str>, home: Option<&str>) -> PathBuf {
    if let Some(p) = flag.filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = env_db.filter(|p| !p.trim().is_empty()) {
        return PathBuf::from(p);
    }
    let home = home.filter(|h| !h.is_empty()).unwrap_or(".");
    PathBuf::from(home).join(".graphmind").join("graphmind.db")
}

/// `GRAPHMIND_ABANDON_GRACE_MS`: a whole number of milliseconds >= 0; anything else (or
/// unset, or blank) is the default.
pub fn abandon_grace_ms(raw: Option<&str>) -> u64 {
    match raw.map(str::trim) {
        Some(s) if !s.is_empty() => match s.parse::<f64>() {
            Ok(f) if f.is_finite() && f >= 0.0 => f as u64,
            _ => DEFAULT_ABANDON_GRACE_MS,
        },
        _ => DEFAULT_ABANDON_GRACE_MS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphmind_core::json::to_string;

    fn spell(v: &[Value]) -> Vec<String> {
        v.iter().map(to_string).collect()
    }

    #[test]
    fn pause_on_error_values() {
        assert_eq!(spell(&parse_pause_on_error(None).unwrap()), ["{\"point\":\"error\"}"]);
        assert_eq!(spell(&parse_pause_on_error(Some(" ON ")).unwrap()), ["{\"point\":\"error\"}"]);
        assert!(parse_pause_on_error(Some("off")).unwrap().is_empty());
        assert_eq!(
            spell(&parse_pause_on_error(Some("tool")).unwrap()),
            ["{\"point\":\"error\",\"kind\":\"tool\"}"]
        );
        let err = parse_pause_on_error(Some("tools")).unwrap_err();
        assert!(err.contains("(got \"tools\")"), "{err}");
    }

    #[test]
    fn db_path_precedence() {
        assert_eq!(resolve_db_path(Some("a.db"), Some("b.db"), Some("/h")), PathBuf::from("a.db"));
        assert_eq!(resolve_db_path(None, Some("b.db"), Some("/h")), PathBuf::from("b.db"));
        assert_eq!(resolve_db_path(None, None, Some("/h")), PathBuf::from("/h/.graphmind/graphmind.db"));
    }

    #[test]
    fn grace() {
        assert_eq!(abandon_grace_ms(None), 15_000);
        assert_eq!(abandon_grace_ms(Some("")), 15_000);
        assert_eq!(abandon_grace_ms(Some("0")), 0);
        assert_eq!(abandon_grace_ms(Some("250")), 250);
        assert_eq!(abandon_grace_ms(Some("-1")), 15_000);
        assert_eq!(abandon_grace_ms(Some("x")), 15_000);
    }
}
