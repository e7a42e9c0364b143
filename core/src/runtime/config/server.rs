//! The server's side ("read by the CLI"): command-line flags + an [`EnvSnapshot`] ->
//! [`ServerConfig`].
//!
//! A flag always beats its variable. A flag the user typed wrong is an error (the CLI
//! refuses to start, as the reference does); a variable that cannot be used falls back
//! to its default with a warning, because an unusable variable must not stop a server.

use std::path::{Path, PathBuf};

use crate::json::{Map, Value};

use super::env::{env_flag_on, js_number, js_whole_number, norm, parse_comma_list, EnvSnapshot};

/// Runs kept by the startup prune (`GRAPHMIND_KEEP_RUNS`, `--keep`).
pub const DEFAULT_KEEP_RUNS: u64 = 200;
/// Days kept by the startup prune (`GRAPHMIND_KEEP_DAYS`, `--days`).
pub const DEFAULT_KEEP_DAYS: f64 = 30.0;
/// How long a run whose app disconnected mid-flight waits for a reconnect before it is
/// marked abandoned (`GRAPHMIND_ABANDON_GRACE_MS`).
pub const DEFAULT_ABANDON_GRACE_MS: u64 = 15_000;
/// Where telemetry goes unless `GRAPHMIND_TELEMETRY_URL` says otherwise.
pub const DEFAULT_TELEMETRY_URL: &str = "https://graphmind.ai/api/telemetry";
/// Directory under the user's home for the database and the telemetry install id.
pub const GRAPHMIND_DIR_NAME: &str = ".graphmind";
/// The database file name inside [`GRAPHMIND_DIR_NAME`].
pub const DB_FILE_NAME: &str = "graphmind.db";
/// The telemetry install id file inside the GraphMind home.
pub const TELEMETRY_ID_FILE_NAME: &str = "telemetry-id";
/// Node kinds `GRAPHMIND_PAUSE_ON_ERROR` / `--pause-on-error` may name.
pub const NODE_KINDS: [&str; 6] = ["agent", "llm", "tool", "chain", "retriever", "custom"];

/// What the command line said, each `None` when not given (already parsed by the CLI's
/// argument parser; `pause_on_error` is the raw text so that it is judged here).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerFlags {
    /// `--db <path>`.
    pub db: Option<String>,
    /// `--pause-on-error <on|off|kind>`.
    pub pause_on_error: Option<String>,
    /// `--keep <n>`.
    pub keep: Option<u64>,
    /// `--days <n>`.
    pub days: Option<f64>,
    /// A viewer build directory given programmatically (beats `GRAPHMIND_VIEWER_DIST`).
    pub viewer_dist: Option<String>,
    /// An abandon grace given programmatically (beats `GRAPHMIND_ABANDON_GRACE_MS`).
    pub abandon_grace_ms: Option<u64>,
}

/// Which node errors the default error breakpoint holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PauseOnError {
    /// Every node's error (the default).
    On,
    /// No breakpoint at start.
    Off,
    /// Only errors of nodes of this kind (one of [`NODE_KINDS`]).
    Kind(String),
}

impl PauseOnError {
    /// `on`, `off`, or the kind.
    pub fn as_str(&self) -> &str {
        match self {
            PauseOnError::On => "on",
            PauseOnError::Off => "off",
            PauseOnError::Kind(kind) => kind,
        }
    }
}

/// What telemetry does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TelemetryMode {
    /// Send the record.
    Send,
    /// Print the exact record to stderr, prefixed `[graphmind telemetry] `, send nothing.
    Log,
    /// Nothing at all: no request, no install id file.
    Off,
}

impl TelemetryMode {
    /// `send`, `log` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            TelemetryMode::Send => "send",
            TelemetryMode::Log => "log",
            TelemetryMode::Off => "off",
        }
    }
}

/// Browser origins allowed beyond the server's own viewer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedOrigins {
    /// `*` was listed: the origin and host checks are off.
    pub any: bool,
    /// Extra origins, normalized to `scheme://host[:port]`, lower case, default port
    /// dropped (see [`normalize_origin`]).
    pub origins: Vec<String>,
}

/// A command-line flag that cannot be used; the CLI prints it and exits 1.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ServerConfigError {
    /// `--pause-on-error` with a value that is none of on, off or a node kind.
    #[error("--pause-on-error must be one of on, off, agent, llm, tool, chain, retriever, custom (got {0:?})")]
    PauseOnError(String),
    /// `--days` negative or not finite.
    #[error("--days must be a non-negative number (got {0})")]
    Days(f64),
}

/// The server's configuration with every field concrete.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// SQLite database file. Relative when the user gave a relative path: the CLI makes
    /// it absolute against its working directory.
    pub db_path: PathBuf,
    /// The default error breakpoint's scope.
    pub pause_on_error: PauseOnError,
    /// Abandon grace, ms.
    pub abandon_grace_ms: u64,
    /// Extra allowed browser origins.
    pub allowed_origins: AllowedOrigins,
    /// Whether the startup prune runs (`GRAPHMIND_RETENTION=off` turns it off).
    pub retention: bool,
    /// Runs the prune keeps.
    pub keep_runs: u64,
    /// Days the prune keeps (fractions allowed, as `--days` allows them).
    pub keep_days: f64,
    /// Telemetry mode.
    pub telemetry: TelemetryMode,
    /// Telemetry endpoint.
    pub telemetry_url: String,
    /// GraphMind home: where the telemetry install id lives.
    pub home: PathBuf,
    /// `<home>/telemetry-id`.
    pub telemetry_id_path: PathBuf,
    /// A viewer build to serve instead of the bundled one.
    pub viewer_dist: Option<PathBuf>,
    /// Where `demo --live` finds the demo agent.
    pub demo_agent_dir: Option<PathBuf>,
    /// One line per variable that could not be used, naming it and the value used.
    pub warnings: Vec<String>,
}

/// `on` | `all` | `yes` | `true` | `1` | empty -> on; `off` | `none` | `no` | `false` |
/// `0` -> off; a node kind -> that kind (all compared trimmed, lower case). Anything else
/// is an error.
pub fn parse_pause_on_error(raw: &str) -> Result<PauseOnError, ServerConfigError> {
    let value = norm(raw);
    match value.as_str() {
        "" | "on" | "all" | "yes" | "true" | "1" => Ok(PauseOnError::On),
        "off" | "none" | "no" | "false" | "0" => Ok(PauseOnError::Off),
        kind if NODE_KINDS.contains(&kind) => Ok(PauseOnError::Kind(kind.to_owned())),
        _ => Err(ServerConfigError::PauseOnError(raw.to_owned())),
    }
}

/// Telemetry precedence, first match wins: `DO_NOT_TRACK` `1`/`true` (any case, trimmed)
/// -> off; `GRAPHMIND_TELEMETRY` `0`/`false` -> off; `log` -> log; `CI` set (even empty) ->
/// off; otherwise send.
pub fn telemetry_mode(env: &EnvSnapshot) -> TelemetryMode {
    if env_flag_on(env.get("DO_NOT_TRACK")) {
        return TelemetryMode::Off;
    }
    match env.get("GRAPHMIND_TELEMETRY").map(norm).as_deref() {
        Some("0") | Some("false") => return TelemetryMode::Off,
        Some("log") => return TelemetryMode::Log,
        _ => {}
    }
    if env.is_set("CI") {
        return TelemetryMode::Off;
    }
    TelemetryMode::Send
}

/// `scheme://host[:port]`, lower case, the scheme's default port dropped (80 for http/ws,
/// 443 for https/wss), path, query, fragment and user info dropped. `None` for anything
/// without a scheme and a host (including the literal `null` a sandboxed page sends).
pub fn normalize_origin(value: &str) -> Option<String> {
    let t = value.trim();
    let (scheme, rest) = t.split_once("://")?;
    let mut chars = scheme.chars();
    if !chars.next()?.is_ascii_alphabetic()
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let (host, port) = if let Some(after) = authority.strip_prefix('[') {
        let close = after.find(']')?;
        let host = &authority[..close + 2];
        let tail = &after[close + 1..];
        let port = match tail.strip_prefix(':') {
            Some(p) => p,
            None if tail.is_empty() => "",
            None => return None,
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, p),
            None => (authority, ""),
        }
    };
    if host.is_empty() || host.contains([' ', '[', ']']) && !host.starts_with('[') {
        return None;
    }
    if !port.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let port_num: Option<u32> = if port.is_empty() {
        None
    } else {
        Some(port.parse().ok().filter(|p| *p <= 65_535)?)
    };
    let default_port = match scheme.as_str() {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    };
    let host = host.to_lowercase();
    Some(match port_num {
        Some(p) if Some(p) != default_port => format!("{scheme}://{host}:{p}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// `GRAPHMIND_ALLOWED_ORIGINS`: comma-separated, entries trimmed, empties dropped; a `*`
/// entry allows everything; each other entry normalized, and one that is not an origin
/// dropped with a warning.
pub fn parse_allowed_origins(raw: Option<&str>, warnings: &mut Vec<String>) -> AllowedOrigins {
    let entries = raw.map(parse_comma_list).unwrap_or_default();
    if entries.iter().any(|e| e == "*") {
        return AllowedOrigins {
            any: true,
            origins: Vec::new(),
        };
    }
    let mut origins: Vec<String> = Vec::new();
    for entry in entries {
        match normalize_origin(&entry) {
            Some(o) => {
                if !origins.contains(&o) {
                    origins.push(o);
                }
            }
            None => warnings.push(format!(
                "GRAPHMIND_ALLOWED_ORIGINS entry {entry:?} is not an origin (scheme://host[:port]); ignored"
            )),
        }
    }
    AllowedOrigins {
        any: false,
        origins,
    }
}

/// The user's home directory from the snapshot: `HOME`, else `USERPROFILE` (Windows).
pub fn user_home(env: &EnvSnapshot) -> Option<&str> {
    env.get_non_empty("HOME")
        .or_else(|| env.get_non_empty("USERPROFILE"))
}

/// Resolve flags and environment into a [`ServerConfig`]. Pure: reads nothing but its
/// inputs. Errors only for flags; variables fall back with a warning.
pub fn resolve_server(
    flags: &ServerFlags,
    env: &EnvSnapshot,
) -> Result<ServerConfig, ServerConfigError> {
    let mut w = Vec::new();

    let pause_on_error = match &flags.pause_on_error {
        Some(raw) => parse_pause_on_error(raw)?,
        None => match env.get("GRAPHMIND_PAUSE_ON_ERROR") {
            None => PauseOnError::On,
            Some(raw) => parse_pause_on_error(raw).unwrap_or_else(|_| {
                w.push(format!(
                    "GRAPHMIND_PAUSE_ON_ERROR={raw:?} is not on, off or a node kind (agent, llm, tool, chain, retriever, custom); using on"
                ));
                PauseOnError::On
            }),
        },
    };
    if let Some(days) = flags.days {
        if !days.is_finite() || days < 0.0 {
            return Err(ServerConfigError::Days(days));
        }
    }

    let home_dir = match user_home(env) {
        Some(h) => PathBuf::from(h),
        None => {
            w.push("HOME is not set; using the current directory in place of ~".to_owned());
            PathBuf::from(".")
        }
    };
    let default_dir = home_dir.join(GRAPHMIND_DIR_NAME);

    let db_path = flags
        .db
        .as_deref()
        .filter(|p| !p.is_empty())
        .or_else(|| env.get_non_empty("GRAPHMIND_DB"))
        .map(PathBuf::from)
        .unwrap_or_else(|| default_dir.join(DB_FILE_NAME));

    let abandon_grace_ms = match flags.abandon_grace_ms {
        Some(ms) => ms,
        None => match env.get("GRAPHMIND_ABANDON_GRACE_MS") {
            Some(raw) if !raw.trim().is_empty() => match js_number(raw) {
                Some(v) if v.is_finite() && v >= 0.0 => v.floor() as u64,
                _ => {
                    w.push(format!(
                        "GRAPHMIND_ABANDON_GRACE_MS={raw:?} is not a number of milliseconds >= 0; using {DEFAULT_ABANDON_GRACE_MS}"
                    ));
                    DEFAULT_ABANDON_GRACE_MS
                }
            },
            _ => DEFAULT_ABANDON_GRACE_MS,
        },
    };

    let allowed_origins = parse_allowed_origins(env.get("GRAPHMIND_ALLOWED_ORIGINS"), &mut w);
    let retention = env.get("GRAPHMIND_RETENTION").map(norm).as_deref() != Some("off");

    let keep_runs = match flags.keep {
        Some(n) => n,
        None => match env.get("GRAPHMIND_KEEP_RUNS") {
            Some(raw) if !raw.trim().is_empty() => match js_whole_number(raw) {
                Some(v) if v < u64::MAX as f64 => v as u64,
                _ => {
                    w.push(format!(
                        "GRAPHMIND_KEEP_RUNS={raw:?} is not a whole number >= 0; using {DEFAULT_KEEP_RUNS}"
                    ));
                    DEFAULT_KEEP_RUNS
                }
            },
            _ => DEFAULT_KEEP_RUNS,
        },
    };
    let keep_days = match flags.days {
        Some(d) => d,
        None => match env.get("GRAPHMIND_KEEP_DAYS") {
            Some(raw) if !raw.trim().is_empty() => match js_number(raw) {
                Some(v) if v.is_finite() && v >= 0.0 => v + 0.0,
                _ => {
                    w.push(format!(
                        "GRAPHMIND_KEEP_DAYS={raw:?} is not a number of days >= 0; using {DEFAULT_KEEP_DAYS}"
                    ));
                    DEFAULT_KEEP_DAYS
                }
            },
            _ => DEFAULT_KEEP_DAYS,
        },
    };

    let mut telemetry = telemetry_mode(env);
    let telemetry_url = env
        .get_non_empty("GRAPHMIND_TELEMETRY_URL")
        .unwrap_or(DEFAULT_TELEMETRY_URL)
        .to_owned();
    if telemetry == TelemetryMode::Send {
        let lower = telemetry_url.trim().to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            w.push(format!("GRAPHMIND_TELEMETRY_URL={telemetry_url:?} is not an http(s) address; telemetry is off"));
            telemetry = TelemetryMode::Off;
        }
    }

    let home = env
        .get_non_empty("GRAPHMIND_HOME")
        .map(PathBuf::from)
        .unwrap_or(default_dir);
    let telemetry_id_path = home.join(TELEMETRY_ID_FILE_NAME);
    let viewer_dist = flags
        .viewer_dist
        .as_deref()
        .filter(|p| !p.is_empty())
        .or_else(|| env.get_non_empty("GRAPHMIND_VIEWER_DIST"))
        .map(PathBuf::from);
    let demo_agent_dir = env
        .get_non_empty("GRAPHMIND_DEMO_AGENT_DIR")
        .map(PathBuf::from);

    Ok(ServerConfig {
        db_path,
        pause_on_error,
        abandon_grace_ms,
        allowed_origins,
        retention,
        keep_runs,
        keep_days,
        telemetry,
        telemetry_url,
        home,
        telemetry_id_path,
        viewer_dist,
        demo_agent_dir,
        warnings: w,
    })
}

fn path_value(p: &Path) -> Value {
    Value::from(p.to_string_lossy().as_ref())
}

impl ServerFlags {
    /// Flags from a JSON object (`db`, `pauseOnError`, `keep`, `days`, `viewerDist`,
    /// `abandonGraceMs`), as the conformance vectors write them. Wrong types are skipped.
    pub fn from_json(value: &Value) -> ServerFlags {
        let s = |k: &str| {
            value
                .get(k)
                .and_then(Value::as_js_str)
                .map(|v| v.to_string_lossy().into_owned())
        };
        let n = |k: &str| value.get(k).and_then(Value::as_f64);
        ServerFlags {
            db: s("db"),
            pause_on_error: s("pauseOnError"),
            keep: n("keep")
                .filter(|v| v.is_finite() && v.fract() == 0.0 && *v >= 0.0)
                .map(|v| v as u64),
            days: n("days"),
            viewer_dist: s("viewerDist"),
            abandon_grace_ms: n("abandonGraceMs")
                .filter(|v| v.is_finite() && *v >= 0.0)
                .map(|v| v as u64),
        }
    }
}

impl ServerConfig {
    /// The configuration as JSON, with the field names the conformance vectors compare.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("dbPath", path_value(&self.db_path));
        m.insert("pauseOnError", self.pause_on_error.as_str().into());
        m.insert("abandonGraceMs", self.abandon_grace_ms.into());
        let origins = if self.allowed_origins.any {
            Value::from("*")
        } else {
            Value::Array(
                self.allowed_origins
                    .origins
                    .iter()
                    .map(|o| Value::from(o.as_str()))
                    .collect(),
            )
        };
        m.insert("allowedOrigins", origins);
        m.insert("retention", Value::Bool(self.retention));
        m.insert("keepRuns", self.keep_runs.into());
        m.insert("keepDays", self.keep_days.into());
        m.insert("telemetry", self.telemetry.as_str().into());
        m.insert("telemetryUrl", self.telemetry_url.as_str().into());
        m.insert("home", path_value(&self.home));
        m.insert("telemetryIdPath", path_value(&self.telemetry_id_path));
        m.insert(
            "viewerDist",
            self.viewer_dist.as_deref().map_or(Value::Null, path_value),
        );
        m.insert(
            "demoAgentDir",
            self.demo_agent_dir
                .as_deref()
                .map_or(Value::Null, path_value),
        );
        m.insert(
            "warnings",
            Value::Array(
                self.warnings
                    .iter()
                    .map(|s| Value::from(s.as_str()))
                    .collect(),
            ),
        );
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_normalize() {
        assert_eq!(
            normalize_origin("http://LocalHost:80/"),
            Some("http://localhost".into())
        );
        assert_eq!(
            normalize_origin(" https://a.example:443 "),
            Some("https://a.example".into())
        );
        assert_eq!(
            normalize_origin("http://localhost:5199"),
            Some("http://localhost:5199".into())
        );
        assert_eq!(
            normalize_origin("http://[::1]:4747/x"),
            Some("http://[::1]:4747".into())
        );
        assert_eq!(
            normalize_origin("http://u:p@h.example:8080"),
            Some("http://h.example:8080".into())
        );
        assert_eq!(normalize_origin("null"), None);
        assert_eq!(normalize_origin("file:///x"), None);
        assert_eq!(normalize_origin("http://h:99999"), None);
        assert_eq!(normalize_origin("localhost:5199"), None);
    }
}
