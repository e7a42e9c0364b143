//! Server settings. Every rule for flags and variables lives in ONE place, the core's
//! `graphmind_core::config::resolve_server`; this module only reads the process
//! environment into an [`EnvSnapshot`], hands both to it, and turns the result into what
//! the server needs (the breakpoints a `--pause-on-error` scope arms).

use graphmind_core::config::{
    self as core_config, EnvSnapshot, PauseOnError, ServerConfig, ServerConfigError, ServerFlags,
};
use graphmind_core::json::{Map, Value};

pub use graphmind_core::config::{
    DEFAULT_ABANDON_GRACE_MS, DEFAULT_KEEP_DAYS, DEFAULT_KEEP_RUNS, NODE_KINDS,
};

/// The port `graphmind serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 4747;

/// The configuration from `flags` and the process environment (the core's rules).
pub fn resolve(flags: &ServerFlags) -> Result<ServerConfig, ServerConfigError> {
    resolve_with(flags, &EnvSnapshot::from_process())
}

/// The configuration from `flags` and an explicit environment (tests).
pub fn resolve_with(
    flags: &ServerFlags,
    env: &EnvSnapshot,
) -> Result<ServerConfig, ServerConfigError> {
    core_config::resolve_server(flags, env)
}

/// Validates a `--pause-on-error` value (the argument parser refuses a bad one).
pub fn check_pause_on_error(raw: &str) -> Result<(), String> {
    core_config::parse_pause_on_error(raw)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The breakpoints a fresh server arms for a pause-on-error scope: `on` arms
/// `{point:"error"}`, `off` nothing, a node kind `{point:"error", kind}`.
pub fn breakpoints_for(scope: &PauseOnError) -> Vec<Value> {
    let matcher = |kind: Option<&str>| {
        let mut m = Map::new();
        m.insert("point", Value::from("error"));
        if let Some(kind) = kind {
            m.insert("kind", Value::from(kind));
        }
        Value::Object(m)
    };
    match scope {
        PauseOnError::On => vec![matcher(None)],
        PauseOnError::Off => Vec::new(),
        PauseOnError::Kind(k) => vec![matcher(Some(k))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphmind_core::json::to_string;
    use std::path::PathBuf;

    fn spell(v: &[Value]) -> Vec<String> {
        v.iter().map(to_string).collect()
    }

    fn env(pairs: &[(&str, &str)]) -> EnvSnapshot {
        let mut e = EnvSnapshot::new();
        for (k, v) in pairs {
            e.set(*k, *v);
        }
        e
    }

    #[test]
    fn pause_on_error_scopes() {
        let flags = |v: &str| ServerFlags {
            pause_on_error: Some(v.into()),
            ..Default::default()
        };
        let bp = |f: &ServerFlags, e: &EnvSnapshot| {
            spell(&breakpoints_for(
                &resolve_with(f, e).unwrap().pause_on_error,
            ))
        };
        assert_eq!(
            bp(&ServerFlags::default(), &env(&[])),
            ["{\"point\":\"error\"}"]
        );
        assert_eq!(bp(&flags(" ON "), &env(&[])), ["{\"point\":\"error\"}"]);
        assert!(bp(&flags("off"), &env(&[])).is_empty());
        assert_eq!(
            bp(&flags("tool"), &env(&[])),
            ["{\"point\":\"error\",\"kind\":\"tool\"}"]
        );
        // The flag beats the variable; a bad variable is a warning and the default.
        assert!(bp(&flags("off"), &env(&[("GRAPHMIND_PAUSE_ON_ERROR", "llm")])).is_empty());
        let c = resolve_with(
            &ServerFlags::default(),
            &env(&[("GRAPHMIND_PAUSE_ON_ERROR", "nope")]),
        )
        .unwrap();
        assert_eq!(c.pause_on_error, PauseOnError::On);
        assert!(
            c.warnings
                .iter()
                .any(|w| w.starts_with("GRAPHMIND_PAUSE_ON_ERROR=")),
            "{:?}",
            c.warnings
        );
        let err = check_pause_on_error("tools").unwrap_err();
        assert!(
            err.starts_with("--pause-on-error must be one of") && err.contains("(got \"tools\")"),
            "{err}"
        );
    }

    #[test]
    fn db_path_and_grace() {
        let c = |f: ServerFlags, e: &[(&str, &str)]| resolve_with(&f, &env(e)).unwrap();
        let db = |p: &str| ServerFlags {
            db: Some(p.into()),
            ..Default::default()
        };
        assert_eq!(
            c(db("a.db"), &[("GRAPHMIND_DB", "b.db"), ("HOME", "/h")]).db_path,
            PathBuf::from("a.db")
        );
        assert_eq!(
            c(
                ServerFlags::default(),
                &[("GRAPHMIND_DB", "b.db"), ("HOME", "/h")]
            )
            .db_path,
            PathBuf::from("b.db")
        );
        assert_eq!(
            c(ServerFlags::default(), &[("HOME", "/h")]).db_path,
            PathBuf::from("/h/.graphmind/graphmind.db")
        );
        assert_eq!(c(ServerFlags::default(), &[]).abandon_grace_ms, 15_000);
        assert_eq!(
            c(
                ServerFlags::default(),
                &[("GRAPHMIND_ABANDON_GRACE_MS", "")]
            )
            .abandon_grace_ms,
            15_000
        );
        assert_eq!(
            c(
                ServerFlags::default(),
                &[("GRAPHMIND_ABANDON_GRACE_MS", "250")]
            )
            .abandon_grace_ms,
            250
        );
        assert_eq!(
            c(
                ServerFlags::default(),
                &[("GRAPHMIND_ABANDON_GRACE_MS", "-1")]
            )
            .abandon_grace_ms,
            15_000
        );
        assert_eq!(
            c(
                ServerFlags::default(),
                &[("GRAPHMIND_ABANDON_GRACE_MS", "x")]
            )
            .abandon_grace_ms,
            15_000
        );
    }
}
