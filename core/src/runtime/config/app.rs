//! The instrumented app's side: session [`Options`] + an [`EnvSnapshot`] + the host
//! [`SdkFlavor`] -> a [`Config`] with every field concrete.
//!
//! Precedence is the spec's (`environment.md`): the kill switch table for `enabled`, option
//! over `GRAPHMIND_URL` over the default for the endpoint, "either one turns it on" for
//! the hide switches, and option > environment > default per loop-guard field. A value
//! that cannot be used falls back and leaves one warning in [`Config::warnings`].

use crate::json::{self, Map, Value};
use crate::loop_guard::{LoopDetect, LoopGuardConfig, LoopMode};

use super::env::{
    env_flag_on, js_whole_number, kill_switch_on, looks_off, norm, option_flag_on,
    option_looks_off, parse_comma_list, EnvSnapshot,
};

/// Ingest endpoint when neither the `url` option nor `GRAPHMIND_URL` gives one.
pub const DEFAULT_URL: &str = "ws://127.0.0.1:4747/ingest";
/// Socket connect budget (`connectTimeoutMs`).
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 300;
/// `hello` -> `hello.ack` budget (`handshakeTimeoutMs`).
pub const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 1_000;
/// Steady-state reconnect interval while detached (`retryIntervalMs`).
pub const DEFAULT_RETRY_INTERVAL_MS: u64 = 10_000;
/// The first reconnect delays after an established attachment drops, each clamped to the
/// retry interval, before the steady interval takes over.
pub const FAST_RETRY_STEPS: [u64; 3] = [200, 400, 800];
/// Replay ring buffer capacity in events, TypeScript client (and our native default).
pub const DEFAULT_BUFFER_SIZE_NODE: usize = 5_000;
/// Replay ring buffer capacity in events, Python SDK.
pub const DEFAULT_BUFFER_SIZE_PYTHON: usize = 2_000;
/// Replay ring buffer capacity in events, Ruby gem.
pub const DEFAULT_BUFFER_SIZE_RUBY: usize = 2_000;
/// Replay ring buffer capacity in events for a C or Rust host: the TypeScript figure, the
/// one the spec's options table documents.
pub const DEFAULT_BUFFER_SIZE_NATIVE: usize = 5_000;
/// Replay ring buffer ceiling in bytes of serialized frames (`maxBufferBytes`), 8 MiB.
pub const DEFAULT_MAX_BUFFER_BYTES: usize = 8 * 1024 * 1024;
/// How often streamed token deltas are flushed as one `node.token` per node (~30/s).
pub const DEFAULT_TOKEN_INTERVAL_MS: u64 = 34;
/// The rate limiter's window: at most one warning per key per this long.
pub const DEFAULT_WARN_INTERVAL_MS: u64 = 60_000;
/// `ready()` waits this long for the handshake unless told otherwise.
pub const DEFAULT_READY_TIMEOUT_MS: u64 = 2_000;
/// Identical calls in a row that count as a loop.
pub const DEFAULT_LOOP_THRESHOLD: u32 = 3;
/// This core's version: what a session reports in `hello.versions.client`, and the SDK
/// version reported by default where the reference reports its own package's (the
/// bindings' `CORE_VERSION`).
pub const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The production check's variables for Python, in order: the first one set (non-empty)
/// decides.
pub const PRODUCTION_ENV_VARS_PYTHON: [&str; 8] = [
    "GRAPHMIND_ENV",
    "ENVIRONMENT",
    "APP_ENV",
    "PYTHON_ENV",
    "ENV",
    "DJANGO_ENV",
    "FLASK_ENV",
    "NODE_ENV",
];
/// The production check's variables for Ruby (the reference gem's list: Rails and Rack
/// names instead of Python's).
pub const PRODUCTION_ENV_VARS_RUBY: [&str; 7] = [
    "GRAPHMIND_ENV",
    "ENVIRONMENT",
    "APP_ENV",
    "RAILS_ENV",
    "RACK_ENV",
    "ENV",
    "NODE_ENV",
];
/// The production check's variables for a C or Rust host: the spec's documented list.
pub const PRODUCTION_ENV_VARS_NATIVE: [&str; 8] = PRODUCTION_ENV_VARS_PYTHON;

/// The SDKs whose skins handle a replayed call (`Next::Raise`, `Next::Stream`): replay
/// asked for in another is one warning and a live run.
pub const REPLAY_FLAVORS: [SdkFlavor; 3] = [SdkFlavor::Python, SdkFlavor::Node, SdkFlavor::Ruby];

/// Which language hosts the session: it picks the production rule and a few defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SdkFlavor {
    /// The Node binding (TypeScript client semantics: `NODE_ENV=production`).
    Node,
    /// The Python binding.
    Python,
    /// The Ruby binding.
    Ruby,
    /// The C ABI, or Rust used directly.
    Native,
}

impl SdkFlavor {
    /// `node`, `python`, `ruby` or `native` (the vectors' spelling).
    pub fn parse(name: &str) -> Option<SdkFlavor> {
        match name {
            "node" => Some(SdkFlavor::Node),
            "python" => Some(SdkFlavor::Python),
            "ruby" => Some(SdkFlavor::Ruby),
            "native" => Some(SdkFlavor::Native),
            _ => None,
        }
    }

    /// The vectors' spelling of this flavor.
    pub fn as_str(self) -> &'static str {
        match self {
            SdkFlavor::Node => "node",
            SdkFlavor::Python => "python",
            SdkFlavor::Ruby => "ruby",
            SdkFlavor::Native => "native",
        }
    }

    /// Default replay buffer capacity for this host.
    pub fn default_buffer_size(self) -> usize {
        match self {
            SdkFlavor::Node => DEFAULT_BUFFER_SIZE_NODE,
            SdkFlavor::Python => DEFAULT_BUFFER_SIZE_PYTHON,
            SdkFlavor::Ruby => DEFAULT_BUFFER_SIZE_RUBY,
            SdkFlavor::Native => DEFAULT_BUFFER_SIZE_NATIVE,
        }
    }

    /// Default `app` name reported in `hello` / `run.started`.
    pub fn default_app_name(self) -> &'static str {
        self.as_str()
    }

    /// Default `sdk` reported in `hello` / `run.started`, as each reference SDK reports it.
    pub fn default_sdk(self) -> SdkInfo {
        let (name, version) = match self {
            SdkFlavor::Node => ("custom", "0.0.0"),
            SdkFlavor::Python => ("python", "0.0.0"),
            SdkFlavor::Ruby => ("ruby", CLIENT_VERSION),
            SdkFlavor::Native => ("native", CLIENT_VERSION),
        };
        SdkInfo {
            name: name.into(),
            version: version.into(),
        }
    }

    /// The variables the production check reads, in order; `None` for Node, which looks
    /// at `NODE_ENV` alone and compares it exactly.
    pub fn production_env_vars(self) -> Option<&'static [&'static str]> {
        match self {
            SdkFlavor::Node => None,
            SdkFlavor::Python => Some(&PRODUCTION_ENV_VARS_PYTHON),
            SdkFlavor::Ruby => Some(&PRODUCTION_ENV_VARS_RUBY),
            SdkFlavor::Native => Some(&PRODUCTION_ENV_VARS_NATIVE),
        }
    }
}

/// The instrumented SDK as reported on the wire (`sdk: {name, version}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdkInfo {
    /// Adapter or SDK name (`openai`, `python`, ...).
    pub name: String,
    /// Its version.
    pub version: String,
}

/// Per-field loop-guard overrides (`loopGuard: {...}`); `None` fields fall to the
/// environment, then the default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoopGuardOverrides {
    /// Identical calls in a row that count as a loop; must be a whole number >= 0.
    pub threshold: Option<f64>,
    /// `pause`, `warn` or `off`, spelled exactly.
    pub mode: Option<String>,
    /// Node ids or tool names never held; replaces `GRAPHMIND_LOOP_ALLOW`.
    pub allow_nodes: Option<Vec<String>>,
    /// Keys removed at every depth before comparing; replaces the default `["_meta"]`.
    pub ignore_keys: Option<Vec<String>>,
    /// Node kinds watched; replaces the default `["tool"]`.
    pub kinds: Option<Vec<String>>,
    /// Opt-in detectors beyond rule v3 (`cycle`, `error-repeat`); replaces
    /// `GRAPHMIND_LOOP_DETECT`.
    pub detect: Option<Vec<String>>,
}

/// The `loopGuard` option: `false`, or per-field overrides.
#[derive(Clone, Debug, PartialEq)]
pub enum LoopGuardOption {
    /// `loopGuard: false`: mode `off` whatever the environment says.
    Off,
    /// `loopGuard: {...}`.
    Fields(LoopGuardOverrides),
}

/// Every session option, each `None` when not given. Durations are milliseconds (a Python
/// or Ruby binding converts its seconds before handing them over); numbers stay `f64` /
/// `i64` so that an out-of-range value reaches [`resolve`] and earns its warning.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// Ingest endpoint (`url`); beats `GRAPHMIND_URL`.
    pub url: Option<String>,
    /// App name reported in `hello` / `run.started` (`appName`).
    pub app_name: Option<String>,
    /// The instrumented SDK (`sdk`).
    pub sdk: Option<SdkInfo>,
    /// Extra metadata merged into every `run.started.meta` (`meta`).
    pub meta: Option<Map>,
    /// Force on or off (`enabled`); `GRAPHMIND_DISABLED` still wins.
    pub enabled: Option<bool>,
    /// `connectTimeoutMs`.
    pub connect_timeout_ms: Option<f64>,
    /// `handshakeTimeoutMs`.
    pub handshake_timeout_ms: Option<f64>,
    /// `retryIntervalMs`.
    pub retry_interval_ms: Option<f64>,
    /// `bufferSize`, in events.
    pub buffer_size: Option<i64>,
    /// `maxBufferBytes`.
    pub max_buffer_bytes: Option<i64>,
    /// `pauseTimeoutMs`: auto-continue a held gate after this long.
    pub pause_timeout_ms: Option<f64>,
    /// `tokenIntervalMs`: token batch flush interval.
    pub token_interval_ms: Option<f64>,
    /// `warnIntervalMs`: warning rate-limit window.
    pub warn_interval_ms: Option<f64>,
    /// `hideInputs` (see [`option_flag_on`] for what a host value means).
    pub hide_inputs: Option<bool>,
    /// `hideOutputs`.
    pub hide_outputs: Option<bool>,
    /// `hideToolArgs`.
    pub hide_tool_args: Option<bool>,
    /// `hideToolResults`.
    pub hide_tool_results: Option<bool>,
    /// `loopGuard`.
    pub loop_guard: Option<LoopGuardOption>,
    /// `breakOnErrorResult`: the error-result smart breakpoint; beats its variable.
    pub break_on_error_result: Option<bool>,
    /// `breakOnTruncated`: the truncated-tool-call smart breakpoint; beats its variable.
    pub break_on_truncated: Option<bool>,
    /// `replay`: `"<run id>[@<nodeId>#<n>]"` or `{run?, file?, from?, output?}`; beats the
    /// `GRAPHMIND_REPLAY*` variables (see [`crate::replay`]).
    pub replay: Option<Value>,
    /// `spoolDir`: the folder of the on-disk spool ([`crate::spool`]); beats
    /// `GRAPHMIND_SPOOL_DIR`. An empty string turns the spool off.
    pub spool_dir: Option<String>,
    /// `spoolMaxBytes`: the spool's byte bound.
    pub spool_max_bytes: Option<i64>,
}

/// Why a session is on or off: the row of the kill-switch table that decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnabledReason {
    /// `GRAPHMIND_DISABLED` is on: disabled, whatever else is set.
    KillSwitch,
    /// The `enabled` option, as given.
    Option,
    /// A production environment: disabled.
    Production,
    /// A production environment with `GRAPHMIND=1`: enabled.
    ProductionOverride,
    /// Nothing said otherwise: enabled.
    Default,
}

impl EnabledReason {
    /// The vectors' spelling (`killSwitch`, `option`, `production`, `productionOverride`,
    /// `default`).
    pub fn as_str(self) -> &'static str {
        match self {
            EnabledReason::KillSwitch => "killSwitch",
            EnabledReason::Option => "option",
            EnabledReason::Production => "production",
            EnabledReason::ProductionOverride => "productionOverride",
            EnabledReason::Default => "default",
        }
    }
}

/// The four recording switches, resolved: the redaction module's own type, so the config
/// and the redactor cannot drift apart.
pub use crate::redact::HideSwitches;

/// A session's configuration with every field concrete.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Whether the session does anything at all.
    pub enabled: bool,
    /// Which kill-switch rule decided `enabled`.
    pub enabled_reason: EnabledReason,
    /// Ingest endpoint.
    pub url: String,
    /// App name for `hello` / `run.started`.
    pub app_name: String,
    /// SDK info for `hello` / `run.started`.
    pub sdk: SdkInfo,
    /// Extra `run.started.meta`, if any.
    pub meta: Option<Map>,
    /// Connect budget, ms.
    pub connect_timeout_ms: u64,
    /// Handshake budget, ms.
    pub handshake_timeout_ms: u64,
    /// Steady reconnect interval, ms (fast steps: [`FAST_RETRY_STEPS`], each clamped to it).
    pub retry_interval_ms: u64,
    /// Replay buffer capacity, events. Only bounded below (>= 1): a buffer must grow to it
    /// rather than allocate it up front; `max_buffer_bytes` bounds the memory.
    pub buffer_size: usize,
    /// Replay buffer ceiling, bytes.
    pub max_buffer_bytes: usize,
    /// Auto-continue a held gate after this long; `None` holds until resumed.
    pub pause_timeout_ms: Option<u64>,
    /// Token batch flush interval, ms.
    pub token_interval_ms: u64,
    /// Warning rate-limit window, ms.
    pub warn_interval_ms: u64,
    /// The recording switches.
    pub hide: HideSwitches,
    /// The loop hold. It is off when `mode` is [`LoopMode::Off`] or `threshold` is 0 (see
    /// [`loop_guard_active`]); `loopGuard: false` resolves to mode `Off`.
    pub loop_guard: LoopGuardConfig,
    /// The error-result smart breakpoint.
    pub break_on_error_result: bool,
    /// The truncated-tool-call smart breakpoint.
    pub break_on_truncated: bool,
    /// Whether edited input is announced and honoured (`GRAPHMIND_DISABLE_EDIT_INPUT` off).
    pub edit_input: bool,
    /// The run to replay, if any ([`crate::replay`]).
    pub replay: Option<crate::replay::ReplaySpec>,
    /// Where the on-disk spool goes while detached; `None`: no spool ([`crate::spool`]).
    pub spool_dir: Option<std::path::PathBuf>,
    /// The spool's byte bound.
    pub spool_max_bytes: u64,
    /// One line per value that could not be used, naming it and what was used instead, for
    /// the SDK to log once (prefixed `[graphmind] ` by its warner). Always empty for a
    /// disabled session, which stays silent.
    pub warnings: Vec<String>,
}

/// Whether a resolved loop guard can hold or warn at all.
pub fn loop_guard_active(guard: &LoopGuardConfig) -> bool {
    guard.mode != LoopMode::Off && guard.threshold > 0
}

/// The vectors' spelling of a loop mode.
pub fn loop_mode_str(mode: LoopMode) -> &'static str {
    match mode {
        LoopMode::Pause => "pause",
        LoopMode::Warn => "warn",
        LoopMode::Off => "off",
    }
}

/// Whether the environment looks like production for `flavor`. Node: `NODE_ENV` is exactly
/// `production`. The others: the first variable of the flavor's list that is set to a
/// non-empty value decides, and it is production when, trimmed and lower-cased, it is
/// `production` or `prod`.
pub fn looks_like_production(env: &EnvSnapshot, flavor: SdkFlavor) -> bool {
    match flavor.production_env_vars() {
        None => env.get("NODE_ENV") == Some("production"),
        Some(vars) => vars
            .iter()
            .find_map(|name| env.get_non_empty(name))
            .is_some_and(|value| matches!(norm(value).as_str(), "production" | "prod")),
    }
}

/// The kill switch, top to bottom, first match wins: `GRAPHMIND_DISABLED` on -> off; the
/// `enabled` option -> as given; production -> off unless `GRAPHMIND` is exactly `1`;
/// otherwise on.
pub fn resolve_enabled(
    explicit: Option<bool>,
    env: &EnvSnapshot,
    flavor: SdkFlavor,
) -> (bool, EnabledReason) {
    if kill_switch_on(env.get("GRAPHMIND_DISABLED")) {
        return (false, EnabledReason::KillSwitch);
    }
    if let Some(enabled) = explicit {
        return (enabled, EnabledReason::Option);
    }
    if looks_like_production(env, flavor) {
        return if env.get("GRAPHMIND") == Some("1") {
            (true, EnabledReason::ProductionOverride)
        } else {
            (false, EnabledReason::Production)
        };
    }
    (true, EnabledReason::Default)
}

/// What switched a session off, naming the variable that did (`GRAPHMIND_DISABLED=1 is
/// set`, `NODE_ENV=production is set (GRAPHMIND=1 records there anyway)`, ...); `None` when
/// `reason` does not disable. For a caller that tells its user why nothing is recorded.
pub fn describe_disabled(
    reason: EnabledReason,
    env: &EnvSnapshot,
    flavor: SdkFlavor,
) -> Option<String> {
    match reason {
        EnabledReason::KillSwitch => Some(format!(
            "GRAPHMIND_DISABLED={} is set",
            env.get("GRAPHMIND_DISABLED").unwrap_or_default()
        )),
        EnabledReason::Option => Some("the enabled option is false".to_owned()),
        EnabledReason::Production => {
            let var = match flavor.production_env_vars() {
                None => "NODE_ENV",
                Some(vars) => vars
                    .iter()
                    .copied()
                    .find(|name| env.get_non_empty(name).is_some())
                    .unwrap_or("NODE_ENV"),
            };
            Some(format!(
                "{var}={} is set (GRAPHMIND=1 records there anyway)",
                env.get(var).unwrap_or_default()
            ))
        }
        EnabledReason::ProductionOverride | EnabledReason::Default => None,
    }
}

/// A default-on switch from the environment (`GRAPHMIND_BREAK_ON_*`): off only for `0`,
/// `false`, `off`, `no` (any case, trimmed); unset, empty or anything else keeps it on.
pub fn parse_break_on(value: Option<&str>) -> bool {
    match value.map(norm) {
        None => true,
        Some(v) => !matches!(v.as_str(), "0" | "false" | "off" | "no"),
    }
}

/// Resolve options and environment into a [`Config`]. Pure: reads nothing but its inputs.
pub fn resolve(options: &Options, env: &EnvSnapshot, flavor: SdkFlavor) -> Config {
    let mut warnings = Vec::new();
    let w = &mut warnings;
    let (enabled, enabled_reason) = resolve_enabled(options.enabled, env, flavor);

    let url = resolve_url(options.url.as_deref(), env, w);
    let connect_timeout_ms = duration(
        "connectTimeoutMs",
        options.connect_timeout_ms,
        DEFAULT_CONNECT_TIMEOUT_MS,
        false,
        w,
    );
    let handshake_timeout_ms = duration(
        "handshakeTimeoutMs",
        options.handshake_timeout_ms,
        DEFAULT_HANDSHAKE_TIMEOUT_MS,
        false,
        w,
    );
    let retry_interval_ms = duration(
        "retryIntervalMs",
        options.retry_interval_ms,
        DEFAULT_RETRY_INTERVAL_MS,
        false,
        w,
    );
    let buffer_size = count(
        "bufferSize",
        options.buffer_size,
        flavor.default_buffer_size(),
        w,
    );
    let max_buffer_bytes = count(
        "maxBufferBytes",
        options.max_buffer_bytes,
        DEFAULT_MAX_BUFFER_BYTES,
        w,
    );
    let pause_timeout_ms = match options.pause_timeout_ms {
        None => None,
        Some(v) if v.is_finite() && v >= 0.0 => Some(ms(v)),
        Some(v) => {
            w.push(format!(
                "pauseTimeoutMs = {} is not a number of milliseconds >= 0; held gates wait until resumed",
                num(v)
            ));
            None
        }
    };
    let token_interval_ms = duration(
        "tokenIntervalMs",
        options.token_interval_ms,
        DEFAULT_TOKEN_INTERVAL_MS,
        false,
        w,
    );
    let warn_interval_ms = duration(
        "warnIntervalMs",
        options.warn_interval_ms,
        DEFAULT_WARN_INTERVAL_MS,
        true,
        w,
    );

    let hide = HideSwitches {
        inputs: hide_switch(options.hide_inputs, env, "GRAPHMIND_HIDE_INPUTS", w),
        outputs: hide_switch(options.hide_outputs, env, "GRAPHMIND_HIDE_OUTPUTS", w),
        tool_args: hide_switch(options.hide_tool_args, env, "GRAPHMIND_HIDE_TOOL_ARGS", w),
        tool_results: hide_switch(
            options.hide_tool_results,
            env,
            "GRAPHMIND_HIDE_TOOL_RESULTS",
            w,
        ),
    };
    let loop_guard = resolve_loop_guard(options.loop_guard.as_ref(), env, w);

    let break_on_error_result = options
        .break_on_error_result
        .unwrap_or_else(|| parse_break_on(env.get("GRAPHMIND_BREAK_ON_ERROR_RESULT")));
    let break_on_truncated = options
        .break_on_truncated
        .unwrap_or_else(|| parse_break_on(env.get("GRAPHMIND_BREAK_ON_TRUNCATED")));
    let edit_input = !kill_switch_on(env.get("GRAPHMIND_DISABLE_EDIT_INPUT"));
    let mut replay = crate::replay::spec::resolve(options.replay.as_ref(), env, w);
    if replay.is_some() && !REPLAY_FLAVORS.contains(&flavor) {
        w.push(format!(
            "replay is not supported by the {} SDK yet; running live",
            flavor.as_str()
        ));
        replay = None;
    }

    let spool_dir = match options.spool_dir.as_deref() {
        Some(dir) => Some(dir).filter(|d| !d.trim().is_empty()),
        None => env.get_non_empty("GRAPHMIND_SPOOL_DIR"),
    }
    .map(std::path::PathBuf::from);
    let spool_max_bytes = count(
        "spoolMaxBytes",
        options.spool_max_bytes,
        crate::spool::DEFAULT_SPOOL_MAX_BYTES as usize,
        w,
    ) as u64;

    if !enabled {
        warnings.clear();
    }
    Config {
        enabled,
        enabled_reason,
        url,
        app_name: options
            .app_name
            .clone()
            .unwrap_or_else(|| flavor.default_app_name().to_owned()),
        sdk: options.sdk.clone().unwrap_or_else(|| flavor.default_sdk()),
        meta: options.meta.clone(),
        connect_timeout_ms,
        handshake_timeout_ms,
        retry_interval_ms,
        buffer_size,
        max_buffer_bytes,
        pause_timeout_ms,
        token_interval_ms,
        warn_interval_ms,
        hide,
        loop_guard,
        break_on_error_result,
        break_on_truncated,
        edit_input,
        replay,
        spool_dir,
        spool_max_bytes,
        warnings,
    }
}

/// [`Options::from_json`] then [`resolve`], with the option-reading warnings first.
pub fn resolve_json(options: &Value, env: &EnvSnapshot, flavor: SdkFlavor) -> Config {
    let (opts, mut warnings) = Options::from_json(options);
    let mut config = resolve(&opts, env, flavor);
    if config.enabled {
        warnings.append(&mut config.warnings);
        config.warnings = warnings;
    }
    config
}

fn resolve_url(option: Option<&str>, env: &EnvSnapshot, w: &mut Vec<String>) -> String {
    let (name, url) = match option {
        Some(url) if !url.is_empty() => ("url", url.to_owned()),
        other => {
            if other.is_some() {
                w.push("url is empty; using GRAPHMIND_URL or the default".to_owned());
            }
            match env.get_non_empty("GRAPHMIND_URL") {
                Some(url) => ("GRAPHMIND_URL", url.to_owned()),
                None => return DEFAULT_URL.to_owned(),
            }
        }
    };
    let lower = url.trim_start().to_ascii_lowercase();
    if !(lower.starts_with("ws://") || lower.starts_with("wss://")) {
        w.push(format!(
            "{name} = {url:?} is not a ws:// or wss:// address; the connection will fail"
        ));
    }
    url
}

/// A millisecond count as stored: fractions round up, so a positive budget stays positive.
fn ms(v: f64) -> u64 {
    v.ceil() as u64
}

/// A number as JavaScript would print it, for warnings.
fn num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let mut out = String::new();
    json::write_f64(v, &mut out);
    out
}

fn duration(
    name: &str,
    value: Option<f64>,
    default: u64,
    allow_zero: bool,
    w: &mut Vec<String>,
) -> u64 {
    match value {
        None => default,
        Some(v) if v.is_finite() && (v > 0.0 || (allow_zero && v == 0.0)) => ms(v),
        Some(v) => {
            let floor = if allow_zero { ">= 0" } else { "> 0" };
            w.push(format!(
                "{name} = {} is not a number of milliseconds {floor}; using {default}",
                num(v)
            ));
            default
        }
    }
}

fn count(name: &str, value: Option<i64>, default: usize, w: &mut Vec<String>) -> usize {
    match value {
        None => default,
        Some(v) if v >= 1 => usize::try_from(v).unwrap_or(usize::MAX),
        Some(v) => {
            w.push(format!(
                "{name} = {v} is not a whole number >= 1; using {default}"
            ));
            default
        }
    }
}

fn hide_switch(option: Option<bool>, env: &EnvSnapshot, name: &str, w: &mut Vec<String>) -> bool {
    if option == Some(true) {
        return true;
    }
    let raw = env.get(name);
    if env_flag_on(raw) {
        return true;
    }
    if let Some(value) = raw {
        if !looks_off(value) {
            w.push(format!(
                "{name}={value:?} is not 1 or true; the switch stays off"
            ));
        }
    }
    false
}

fn resolve_loop_guard(
    option: Option<&LoopGuardOption>,
    env: &EnvSnapshot,
    w: &mut Vec<String>,
) -> LoopGuardConfig {
    let defaults = LoopGuardConfig::default();
    let none = LoopGuardOverrides::default();
    let (fields, forced_off) = match option {
        None => (&none, false),
        Some(LoopGuardOption::Off) => (&none, true),
        Some(LoopGuardOption::Fields(f)) => (f, false),
    };

    let threshold = match fields.threshold {
        Some(t) if t.is_finite() && t.fract() == 0.0 && t >= 0.0 => saturate_u32(t),
        other => {
            if let Some(t) = other {
                w.push(format!(
                    "loopGuard.threshold = {} is not a whole number >= 0; using GRAPHMIND_LOOP_THRESHOLD or the default",
                    num(t)
                ));
            }
            env_loop_threshold(env, w)
        }
    };

    let mode = if forced_off {
        LoopMode::Off
    } else {
        match fields.mode.as_deref() {
            Some("pause") => LoopMode::Pause,
            Some("warn") => LoopMode::Warn,
            Some("off") => LoopMode::Off,
            other => {
                if let Some(m) = other {
                    w.push(format!(
                        "loopGuard.mode = {m:?} is not \"pause\", \"warn\" or \"off\"; using GRAPHMIND_ON_LOOP or the default"
                    ));
                }
                env_loop_mode(env, w)
            }
        }
    };

    let allow_nodes = match &fields.allow_nodes {
        Some(list) => dedupe(list.clone()),
        None => dedupe(
            env.get("GRAPHMIND_LOOP_ALLOW")
                .map(parse_comma_list)
                .unwrap_or_default(),
        ),
    };
    let ignore_keys = fields
        .ignore_keys
        .clone()
        .map(dedupe)
        .unwrap_or(defaults.ignore_keys);
    let kinds = fields.kinds.clone().map(dedupe).unwrap_or(defaults.kinds);
    let detect = match &fields.detect {
        Some(names) => {
            let (detect, unknown) = LoopDetect::from_names(names);
            for name in unknown {
                w.push(format!(
                    "loopGuard.detect names {name:?}, which is not one of {}; ignored",
                    crate::loop_guard::LOOP_DETECTORS.join(", ")
                ));
            }
            detect
        }
        None => env_loop_detect(env, w),
    };
    LoopGuardConfig {
        threshold,
        mode,
        allow_nodes,
        ignore_keys,
        kinds,
        detect,
    }
}

/// `GRAPHMIND_LOOP_DETECT`: comma-separated detector names (`cycle`, `error-repeat`; `repeat`
/// is always on), any case, trimmed; unset or blank -> none; an unknown name is ignored
/// with a warning.
fn env_loop_detect(env: &EnvSnapshot, w: &mut Vec<String>) -> LoopDetect {
    let Some(raw) = env.get("GRAPHMIND_LOOP_DETECT") else {
        return LoopDetect::default();
    };
    let (detect, unknown) = LoopDetect::from_names(&parse_comma_list(raw));
    for name in unknown {
        w.push(format!(
            "GRAPHMIND_LOOP_DETECT names {name:?}, which is not one of {}; ignored",
            crate::loop_guard::LOOP_DETECTORS.join(", ")
        ));
    }
    detect
}

fn saturate_u32(v: f64) -> u32 {
    if v >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        v as u32
    }
}

/// `GRAPHMIND_LOOP_THRESHOLD`: a whole number >= 0 as JavaScript's `Number()` reads it
/// (`3`, `3.0`, `0x3`); unset or blank -> 3; anything else -> 3 with a warning. Values past
/// `u32::MAX` saturate (a threshold that high never trips).
fn env_loop_threshold(env: &EnvSnapshot, w: &mut Vec<String>) -> u32 {
    let Some(raw) = env.get("GRAPHMIND_LOOP_THRESHOLD") else {
        return DEFAULT_LOOP_THRESHOLD;
    };
    if raw.trim().is_empty() {
        return DEFAULT_LOOP_THRESHOLD;
    }
    match js_whole_number(raw) {
        Some(v) => saturate_u32(v),
        None => {
            w.push(format!(
                "GRAPHMIND_LOOP_THRESHOLD={raw:?} is not a whole number >= 0; using {DEFAULT_LOOP_THRESHOLD}"
            ));
            DEFAULT_LOOP_THRESHOLD
        }
    }
}

/// `GRAPHMIND_ON_LOOP`: `pause` | `warn` | `off` (any case, trimmed); `0`, `false`, `none`
/// mean off; unset or blank -> pause; anything else -> pause with a warning.
fn env_loop_mode(env: &EnvSnapshot, w: &mut Vec<String>) -> LoopMode {
    let Some(raw) = env.get("GRAPHMIND_ON_LOOP") else {
        return LoopMode::Pause;
    };
    match norm(raw).as_str() {
        "" | "pause" => LoopMode::Pause,
        "warn" => LoopMode::Warn,
        "off" | "0" | "false" | "none" => LoopMode::Off,
        _ => {
            w.push(format!(
                "GRAPHMIND_ON_LOOP={raw:?} is not pause, warn or off; using pause"
            ));
            LoopMode::Pause
        }
    }
}

fn dedupe(list: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for item in list {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

// -- JSON in and out ---------------------------------------------------------------------

impl Options {
    /// Options from a JSON object with the reference's camelCase names (`url`, `appName`,
    /// `sdk`, `meta`, `enabled`, `connectTimeoutMs`, `handshakeTimeoutMs`, `retryIntervalMs`,
    /// `bufferSize`, `maxBufferBytes`, `pauseTimeoutMs`, `tokenIntervalMs` (or
    /// `tokenFlushIntervalMs`), `warnIntervalMs`, `hideInputs`, `hideOutputs`, `hideToolArgs`, `hideToolResults`,
    /// `loopGuard`, `breakOnErrorResult`, `breakOnTruncated`, `spoolDir`, `spoolMaxBytes`).
    /// `null` means not given. A
    /// value of the wrong type is dropped with a warning; an unknown name is ignored with a
    /// warning (a misspelt `hideInput` must not pass unnoticed). Hide switches take any
    /// host value and are on for what [`option_flag_on`] accepts.
    pub fn from_json(value: &Value) -> (Options, Vec<String>) {
        let mut o = Options::default();
        let mut w = Vec::new();
        let Some(map) = value.as_object() else {
            if !value.is_null() {
                w.push(format!(
                    "options must be an object, not {}; ignored",
                    value.type_name()
                ));
            }
            return (o, w);
        };
        for (key, val) in map.iter() {
            let key = key.to_string_lossy();
            if val.is_null() {
                continue;
            }
            let key = key.as_ref();
            match key {
                "url" => o.url = string_opt(key, val, &mut w),
                "appName" => o.app_name = string_opt(key, val, &mut w),
                "sdk" => o.sdk = sdk_opt(val, &mut w),
                "meta" => match val {
                    Value::Object(m) => o.meta = Some(m.clone()),
                    other => w.push(type_warning(key, other, "an object")),
                },
                "enabled" => o.enabled = bool_opt(key, val, &mut w),
                "connectTimeoutMs" => o.connect_timeout_ms = number_opt(key, val, &mut w),
                "handshakeTimeoutMs" => o.handshake_timeout_ms = number_opt(key, val, &mut w),
                "retryIntervalMs" => o.retry_interval_ms = number_opt(key, val, &mut w),
                "pauseTimeoutMs" => o.pause_timeout_ms = number_opt(key, val, &mut w),
                // `tokenFlushIntervalMs`: the name the reference's provider facades use.
                "tokenIntervalMs" | "tokenFlushIntervalMs" => {
                    o.token_interval_ms = number_opt(key, val, &mut w)
                }
                "warnIntervalMs" => o.warn_interval_ms = number_opt(key, val, &mut w),
                "bufferSize" => o.buffer_size = whole_opt(key, val, &mut w),
                "maxBufferBytes" => o.max_buffer_bytes = whole_opt(key, val, &mut w),
                "hideInputs" => o.hide_inputs = Some(hide_opt(key, val, &mut w)),
                "hideOutputs" => o.hide_outputs = Some(hide_opt(key, val, &mut w)),
                "hideToolArgs" => o.hide_tool_args = Some(hide_opt(key, val, &mut w)),
                "hideToolResults" => o.hide_tool_results = Some(hide_opt(key, val, &mut w)),
                "loopGuard" => o.loop_guard = loop_guard_opt(val, &mut w),
                "breakOnErrorResult" => o.break_on_error_result = bool_opt(key, val, &mut w),
                "breakOnTruncated" => o.break_on_truncated = bool_opt(key, val, &mut w),
                "replay" => o.replay = Some(val.clone()),
                "spoolDir" => o.spool_dir = string_opt(key, val, &mut w),
                "spoolMaxBytes" => o.spool_max_bytes = whole_opt(key, val, &mut w),
                _ => w.push(format!("{key} is not a GraphMind option; ignored")),
            }
        }
        (o, w)
    }
}

fn type_warning(key: &str, val: &Value, wanted: &str) -> String {
    format!("{key} = {} is not {wanted}; ignored", json::to_string(val))
}

fn string_opt(key: &str, val: &Value, w: &mut Vec<String>) -> Option<String> {
    match val {
        Value::String(s) => Some(s.to_string_lossy().into_owned()),
        other => {
            w.push(type_warning(key, other, "a string"));
            None
        }
    }
}

fn bool_opt(key: &str, val: &Value, w: &mut Vec<String>) -> Option<bool> {
    match val {
        Value::Bool(b) => Some(*b),
        other => {
            w.push(type_warning(key, other, "true or false"));
            None
        }
    }
}

fn number_opt(key: &str, val: &Value, w: &mut Vec<String>) -> Option<f64> {
    match val {
        Value::Number(n) => Some(n.as_f64()),
        other => {
            w.push(type_warning(key, other, "a number"));
            None
        }
    }
}

fn whole_opt(key: &str, val: &Value, w: &mut Vec<String>) -> Option<i64> {
    match val {
        Value::Number(n) => {
            let v = n.as_f64();
            if v.is_finite() && v.fract() == 0.0 {
                Some(if v >= i64::MAX as f64 {
                    i64::MAX
                } else if v <= i64::MIN as f64 {
                    i64::MIN
                } else {
                    v as i64
                })
            } else {
                w.push(type_warning(key, val, "a whole number"));
                None
            }
        }
        other => {
            w.push(type_warning(key, other, "a whole number"));
            None
        }
    }
}

fn hide_opt(key: &str, val: &Value, w: &mut Vec<String>) -> bool {
    let on = option_flag_on(val);
    if !on && !option_looks_off(val) {
        w.push(format!(
            "{key} = {} is not true, 1, \"1\" or \"true\"; the option leaves the switch off",
            json::to_string(val)
        ));
    }
    on
}

fn sdk_opt(val: &Value, w: &mut Vec<String>) -> Option<SdkInfo> {
    let name = val.get("name").and_then(Value::as_js_str);
    let version = val.get("version").and_then(Value::as_js_str);
    match (name, version) {
        (Some(n), Some(v)) => Some(SdkInfo {
            name: n.to_string_lossy().into_owned(),
            version: v.to_string_lossy().into_owned(),
        }),
        _ => {
            w.push(type_warning(
                "sdk",
                val,
                "an object with string name and version",
            ));
            None
        }
    }
}

fn string_list(key: &str, val: &Value, w: &mut Vec<String>) -> Option<Vec<String>> {
    match val {
        Value::Array(items) => {
            let list: Vec<String> = items
                .iter()
                .filter_map(|i| i.as_js_str().map(|s| s.to_string_lossy().into_owned()))
                .collect();
            if list.len() != items.len() {
                w.push(format!(
                    "{key} has entries that are not strings; they are ignored"
                ));
            }
            Some(list)
        }
        other => {
            w.push(type_warning(key, other, "an array of strings"));
            None
        }
    }
}

fn loop_guard_opt(val: &Value, w: &mut Vec<String>) -> Option<LoopGuardOption> {
    match val {
        Value::Bool(false) => Some(LoopGuardOption::Off),
        // `true` asks for nothing in particular: every field from env / default.
        Value::Bool(true) => Some(LoopGuardOption::Fields(LoopGuardOverrides::default())),
        Value::Object(map) => {
            let mut f = LoopGuardOverrides::default();
            for (key, item) in map.iter() {
                let key = key.to_string_lossy();
                if item.is_null() {
                    continue;
                }
                let name = format!("loopGuard.{key}");
                match key.as_ref() {
                    "threshold" => f.threshold = number_opt(&name, item, w),
                    "mode" => f.mode = string_opt(&name, item, w),
                    "allowNodes" | "allow_nodes" => f.allow_nodes = string_list(&name, item, w),
                    "ignoreKeys" | "ignore_keys" => f.ignore_keys = string_list(&name, item, w),
                    "kinds" => f.kinds = string_list(&name, item, w),
                    "detect" => f.detect = string_list(&name, item, w),
                    _ => w.push(format!("{name} is not a loopGuard field; ignored")),
                }
            }
            Some(LoopGuardOption::Fields(f))
        }
        other => {
            w.push(type_warning("loopGuard", other, "false or an object"));
            None
        }
    }
}

fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().map(|s| Value::from(s.as_str())).collect())
}

impl Config {
    /// The configuration as JSON, with the field names the conformance vectors compare
    /// (see `tests/vectors/README.md`).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("enabled", Value::Bool(self.enabled));
        m.insert("enabledReason", self.enabled_reason.as_str().into());
        m.insert("url", self.url.as_str().into());
        m.insert("appName", self.app_name.as_str().into());
        let mut sdk = Map::new();
        sdk.insert("name", self.sdk.name.as_str().into());
        sdk.insert("version", self.sdk.version.as_str().into());
        m.insert("sdk", Value::Object(sdk));
        m.insert("meta", self.meta.clone().map_or(Value::Null, Value::Object));
        m.insert("connectTimeoutMs", self.connect_timeout_ms.into());
        m.insert("handshakeTimeoutMs", self.handshake_timeout_ms.into());
        m.insert("retryIntervalMs", self.retry_interval_ms.into());
        m.insert("bufferSize", (self.buffer_size as u64).into());
        m.insert("maxBufferBytes", (self.max_buffer_bytes as u64).into());
        m.insert(
            "pauseTimeoutMs",
            self.pause_timeout_ms.map_or(Value::Null, Value::from),
        );
        m.insert("tokenIntervalMs", self.token_interval_ms.into());
        m.insert("warnIntervalMs", self.warn_interval_ms.into());
        m.insert("hideInputs", Value::Bool(self.hide.inputs));
        m.insert("hideOutputs", Value::Bool(self.hide.outputs));
        m.insert("hideToolArgs", Value::Bool(self.hide.tool_args));
        m.insert("hideToolResults", Value::Bool(self.hide.tool_results));
        let g = &self.loop_guard;
        let mut lg = Map::new();
        lg.insert("threshold", u64::from(g.threshold).into());
        lg.insert("mode", loop_mode_str(g.mode).into());
        lg.insert("allowNodes", strings(&g.allow_nodes));
        lg.insert("ignoreKeys", strings(&g.ignore_keys));
        lg.insert("kinds", strings(&g.kinds));
        lg.insert(
            "detect",
            Value::Array(g.detect.names().into_iter().map(Value::from).collect()),
        );
        lg.insert("active", Value::Bool(loop_guard_active(g)));
        m.insert("loopGuard", Value::Object(lg));
        m.insert(
            "breakOnErrorResult",
            Value::Bool(self.break_on_error_result),
        );
        m.insert("breakOnTruncated", Value::Bool(self.break_on_truncated));
        m.insert("editInput", Value::Bool(self.edit_input));
        m.insert(
            "spoolDir",
            self.spool_dir
                .as_ref()
                .map_or(Value::Null, |d| Value::from(d.to_string_lossy().as_ref())),
        );
        m.insert("spoolMaxBytes", self.spool_max_bytes.into());
        m.insert("warnings", strings(&self.warnings));
        Value::Object(m)
    }
}
