//! The session option table, once for every binding: each option's name as the core
//! (and Node) spell it, as Python and Ruby spell it, its kind, its default and the
//! environment variable that stands in for it.
//!
//! A binding hands [`to_core`] the options its user wrote, in its own spelling (converted
//! to a [`Value`] object), and passes the result to
//! [`resolve_json`](crate::config::resolve_json), which checks every value and words every
//! warning. Nothing in this module warns: a name a host does not know goes through as the
//! host's rule says (Ruby: camelized, so that the core names it in its warning; Python:
//! as given; Node: dropped, since a Node options object also carries `env`, `logger` and
//! the facades' own keys).

use crate::config::{
    DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_MAX_BUFFER_BYTES,
    DEFAULT_RETRY_INTERVAL_MS, DEFAULT_TOKEN_INTERVAL_MS, DEFAULT_URL, DEFAULT_WARN_INTERVAL_MS,
};
use crate::json::{Map, Value};

/// The host language whose spelling an options object uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    /// Python keyword arguments (`app_name`, `connect_timeout` in seconds, ...).
    Python,
    /// Ruby keyword arguments (`app`, `connect_timeout` in seconds, ...).
    Ruby,
    /// The reference's camelCase object (`appName`, `connectTimeoutMs`, ...).
    Node,
}

/// What an option's value is, as the core checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    Text,
    /// `true` or `false`.
    Bool,
    /// A duration: milliseconds in the core and Node, seconds in Python and Ruby.
    Duration,
    /// A whole number (events, bytes).
    Count,
    /// A hide switch: any host value, on for `true`, `1`, `"1"`, `"true"`.
    Switch,
    /// An object (`meta`, `sdk`).
    Object,
    /// `false` or an object of loop-guard fields ([`LOOP_GUARD_FIELDS`]).
    LoopGuard,
    /// A replay spec: a string or an object (docs/replay.md).
    Replay,
    /// Taken by the binding itself, never handed to the core (`env`, `logger`, `clock`).
    Local,
}

/// An option's default when neither the option nor its variable gives one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultValue {
    /// None: the feature is off or the value absent.
    Unset,
    /// This text.
    Text(&'static str),
    /// This number (milliseconds for a duration, bytes or events for a count).
    Number(u64),
    /// This switch.
    Bool(bool),
    /// Depends on the host (`appName`, `sdk`, `bufferSize`: see
    /// [`SdkFlavor`](crate::config::SdkFlavor)) or on other rules (`enabled`).
    PerHost,
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct OptionSpec {
    /// The core's and Node's name (camelCase); empty for a [`Kind::Local`] option.
    pub core: &'static str,
    /// Python's keyword.
    pub python: &'static str,
    /// Ruby's keyword.
    pub ruby: &'static str,
    /// What the value is.
    pub kind: Kind,
    /// The default.
    pub default: DefaultValue,
    /// The environment variable read when the option is not given.
    pub env: Option<&'static str>,
}

const fn row(
    core: &'static str,
    snake: &'static str,
    kind: Kind,
    default: DefaultValue,
    env: Option<&'static str>,
) -> OptionSpec {
    OptionSpec {
        core,
        python: snake,
        ruby: snake,
        kind,
        default,
        env,
    }
}

/// Every session option, in the order the docs list them.
pub const OPTIONS: [OptionSpec; 26] = [
    row(
        "url",
        "url",
        Kind::Text,
        DefaultValue::Text(DEFAULT_URL),
        Some("GRAPHMIND_URL"),
    ),
    OptionSpec {
        core: "appName",
        python: "app_name",
        ruby: "app",
        kind: Kind::Text,
        default: DefaultValue::PerHost,
        env: None,
    },
    row("sdk", "sdk", Kind::Object, DefaultValue::PerHost, None),
    row("meta", "meta", Kind::Object, DefaultValue::Unset, None),
    row(
        "enabled",
        "enabled",
        Kind::Bool,
        DefaultValue::PerHost,
        Some("GRAPHMIND_DISABLED"),
    ),
    row(
        "connectTimeoutMs",
        "connect_timeout",
        Kind::Duration,
        DefaultValue::Number(DEFAULT_CONNECT_TIMEOUT_MS),
        None,
    ),
    row(
        "handshakeTimeoutMs",
        "handshake_timeout",
        Kind::Duration,
        DefaultValue::Number(DEFAULT_HANDSHAKE_TIMEOUT_MS),
        None,
    ),
    row(
        "retryIntervalMs",
        "retry_interval",
        Kind::Duration,
        DefaultValue::Number(DEFAULT_RETRY_INTERVAL_MS),
        None,
    ),
    row(
        "bufferSize",
        "buffer_size",
        Kind::Count,
        DefaultValue::PerHost,
        None,
    ),
    row(
        "maxBufferBytes",
        "max_buffer_bytes",
        Kind::Count,
        DefaultValue::Number(DEFAULT_MAX_BUFFER_BYTES as u64),
        None,
    ),
    row(
        "pauseTimeoutMs",
        "pause_timeout",
        Kind::Duration,
        DefaultValue::Unset,
        None,
    ),
    row(
        "tokenIntervalMs",
        "token_interval",
        Kind::Duration,
        DefaultValue::Number(DEFAULT_TOKEN_INTERVAL_MS),
        None,
    ),
    row(
        "warnIntervalMs",
        "warn_interval",
        Kind::Duration,
        DefaultValue::Number(DEFAULT_WARN_INTERVAL_MS),
        None,
    ),
    row(
        "hideInputs",
        "hide_inputs",
        Kind::Switch,
        DefaultValue::Bool(false),
        Some("GRAPHMIND_HIDE_INPUTS"),
    ),
    row(
        "hideOutputs",
        "hide_outputs",
        Kind::Switch,
        DefaultValue::Bool(false),
        Some("GRAPHMIND_HIDE_OUTPUTS"),
    ),
    row(
        "hideToolArgs",
        "hide_tool_args",
        Kind::Switch,
        DefaultValue::Bool(false),
        Some("GRAPHMIND_HIDE_TOOL_ARGS"),
    ),
    row(
        "hideToolResults",
        "hide_tool_results",
        Kind::Switch,
        DefaultValue::Bool(false),
        Some("GRAPHMIND_HIDE_TOOL_RESULTS"),
    ),
    row(
        "loopGuard",
        "loop_guard",
        Kind::LoopGuard,
        DefaultValue::PerHost,
        Some("GRAPHMIND_ON_LOOP"),
    ),
    row(
        "breakOnErrorResult",
        "break_on_error_result",
        Kind::Bool,
        DefaultValue::Bool(true),
        Some("GRAPHMIND_BREAK_ON_ERROR_RESULT"),
    ),
    row(
        "breakOnTruncated",
        "break_on_truncated",
        Kind::Bool,
        DefaultValue::Bool(true),
        Some("GRAPHMIND_BREAK_ON_TRUNCATED"),
    ),
    row(
        "replay",
        "replay",
        Kind::Replay,
        DefaultValue::Unset,
        Some("GRAPHMIND_REPLAY"),
    ),
    row(
        "spoolDir",
        "spool_dir",
        Kind::Text,
        DefaultValue::Unset,
        Some("GRAPHMIND_SPOOL_DIR"),
    ),
    row(
        "spoolMaxBytes",
        "spool_max_bytes",
        Kind::Count,
        DefaultValue::Number(crate::spool::DEFAULT_SPOOL_MAX_BYTES),
        None,
    ),
    row("", "env", Kind::Local, DefaultValue::Unset, None),
    row("", "logger", Kind::Local, DefaultValue::Unset, None),
    row("", "clock", Kind::Local, DefaultValue::Unset, None),
];

/// Names the core also accepts for an option (the reference's provider facades spell the
/// token interval `tokenFlushIntervalMs`): `(alias, core name)`.
pub const ALIASES: [(&str, &str); 1] = [("tokenFlushIntervalMs", "tokenIntervalMs")];

/// The loop-guard fields: `(core name, Python and Ruby name)`.
pub const LOOP_GUARD_FIELDS: [(&str, &str); 6] = [
    ("threshold", "threshold"),
    ("mode", "mode"),
    ("allowNodes", "allow_nodes"),
    ("ignoreKeys", "ignore_keys"),
    ("kinds", "kinds"),
    ("detect", "detect"),
];

/// Milliseconds in a second: Python and Ruby durations are seconds.
const MS_PER_SECOND: f64 = 1000.0;

impl OptionSpec {
    /// This option's name in `host`'s spelling.
    pub fn name(&self, host: Host) -> &'static str {
        match host {
            Host::Python => self.python,
            Host::Ruby => self.ruby,
            Host::Node => self.core,
        }
    }
}

/// The row `name` (in `host`'s spelling) names.
pub fn find(host: Host, name: &str) -> Option<&'static OptionSpec> {
    OPTIONS
        .iter()
        .find(|o| o.name(host) == name && !(host == Host::Node && o.kind == Kind::Local))
}

/// Every name `host` accepts, in table order (Node: with the aliases; never the local
/// ones).
pub fn names(host: Host) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = OPTIONS
        .iter()
        .filter(|o| o.kind != Kind::Local)
        .map(|o| o.name(host))
        .collect();
    if host == Host::Node {
        out.extend(ALIASES.iter().map(|(alias, _)| *alias));
    }
    out
}

/// `options` (an object in `host`'s spelling) as the core's camelCase object: names
/// mapped, durations in seconds made milliseconds (a number only: any other value goes on
/// for the core to refuse), loop-guard fields mapped, `null`s and local options left out.
/// A name not in the table: Ruby camelizes it, Python keeps it, Node drops it (see the
/// module's header). Not an object: returned as it is, for the core to refuse.
pub fn to_core(host: Host, options: &Value) -> Value {
    let Some(map) = options.as_object() else {
        return options.clone();
    };
    let mut out = Map::with_capacity(map.len());
    for (key, value) in map.iter() {
        if value.is_null() {
            continue;
        }
        let key = key.to_string_lossy();
        let key = key.as_ref();
        let Some(spec) = find(host, key) else {
            match host {
                Host::Ruby => out.insert(camelize(key).as_str(), value.clone()),
                Host::Python => out.insert(key, value.clone()),
                Host::Node if ALIASES.iter().any(|(alias, _)| *alias == key) => {
                    out.insert(key, value.clone())
                }
                Host::Node => None,
            };
            continue;
        };
        let value = match spec.kind {
            Kind::Local => continue,
            Kind::Duration if host != Host::Node => match value {
                Value::Number(n) => Value::from(n.as_f64() * MS_PER_SECOND),
                other => other.clone(),
            },
            Kind::LoopGuard if host != Host::Node => loop_guard_fields(host, value),
            _ => value.clone(),
        };
        out.insert(spec.core, value);
    }
    Value::Object(out)
}

fn loop_guard_fields(host: Host, value: &Value) -> Value {
    let Some(map) = value.as_object() else {
        return value.clone();
    };
    let mut out = Map::with_capacity(map.len());
    for (key, item) in map.iter() {
        let key = key.to_string_lossy();
        let known = LOOP_GUARD_FIELDS
            .iter()
            .find(|(_, snake)| *snake == key.as_ref());
        match (known, host) {
            (Some((core, _)), _) => out.insert(*core, item.clone()),
            (None, Host::Ruby) => out.insert(camelize(&key).as_str(), item.clone()),
            (None, _) => out.insert(key.as_ref(), item.clone()),
        };
    }
    Value::Object(out)
}

/// Ruby's `snake_case` -> `camelCase` for a name not in the table, as the gem has always
/// spelled it: the first part as written, each later part capitalized (its first letter
/// upper case, the rest lower case).
pub fn camelize(name: &str) -> String {
    if !name.contains('_') {
        return name.to_string();
    }
    let mut parts = name.split('_');
    let mut out = parts.next().unwrap_or_default().to_string();
    for part in parts {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(&chars.as_str().to_lowercase());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{resolve_json, EnvSnapshot, Options, SdkFlavor};
    use crate::json;

    fn parse(text: &str) -> Value {
        json::parse_str(text).unwrap()
    }

    #[test]
    fn every_core_name_is_an_option_the_core_reads() {
        for name in names(Host::Node) {
            let mut m = Map::new();
            m.insert(name, Value::Null);
            // A null is "not given"; a string is accepted or refused by type, never as an
            // unknown name.
            m.insert(name, Value::from("x"));
            let (_, warnings) = Options::from_json(&Value::Object(m));
            assert!(
                warnings
                    .iter()
                    .all(|w| !w.contains("not a GraphMind option")),
                "{name}: {warnings:?}"
            );
        }
    }

    #[test]
    fn defaults_are_what_the_core_resolves_with_nothing_set() {
        let config = resolve_json(&Value::Null, &EnvSnapshot::default(), SdkFlavor::Native);
        let resolved = config.to_json();
        for spec in OPTIONS.iter().filter(|o| o.kind != Kind::Local) {
            let got = resolved.get(spec.core);
            match spec.default {
                DefaultValue::Number(n) => assert_eq!(got, Some(&Value::from(n)), "{}", spec.core),
                DefaultValue::Bool(b) => assert_eq!(got, Some(&Value::Bool(b)), "{}", spec.core),
                DefaultValue::Text(t) => assert_eq!(got, Some(&Value::from(t)), "{}", spec.core),
                DefaultValue::Unset => assert!(
                    got.is_none() || got == Some(&Value::Null),
                    "{}: {got:?}",
                    spec.core
                ),
                DefaultValue::PerHost => {}
            }
        }
    }

    #[test]
    fn python_and_ruby_spellings_map_to_the_core_with_seconds_made_ms() {
        let py = to_core(
            Host::Python,
            &parse(
                r#"{"app_name":"a","connect_timeout":0.5,"pause_timeout":true,"env":{},
                    "loop_guard":{"allow_nodes":["x"],"other_key":1},"meta":null,"zz_top":1}"#,
            ),
        );
        assert_eq!(
            json::to_string(&py),
            r#"{"appName":"a","connectTimeoutMs":500,"pauseTimeoutMs":true,"loopGuard":{"allowNodes":["x"],"other_key":1},"zz_top":1}"#
        );
        let rb = to_core(
            Host::Ruby,
            &parse(
                r#"{"app":"a","warn_interval":2,"logger":1,"hide_input":true,"loop_guard":{"foo_BAR":1}}"#,
            ),
        );
        assert_eq!(
            json::to_string(&rb),
            r#"{"appName":"a","warnIntervalMs":2000,"hideInput":true,"loopGuard":{"fooBar":1}}"#
        );
        let node = to_core(
            Host::Node,
            &parse(r#"{"appName":"a","env":{},"logger":null,"tokenFlushIntervalMs":5,"x":1}"#),
        );
        assert_eq!(
            json::to_string(&node),
            r#"{"appName":"a","tokenFlushIntervalMs":5}"#
        );
    }

    #[test]
    fn camelize_is_the_gems() {
        assert_eq!(camelize("plain"), "plain");
        assert_eq!(camelize("foo_bar_baz"), "fooBarBaz");
        assert_eq!(camelize("foo_BAR"), "fooBar");
        assert_eq!(camelize("_a"), "A");
    }
}
