//! Options and environment resolution: session options, the environment and the host
//! language in, a configuration with every field concrete out.
//!
//! Everything here is a pure function over an [`EnvSnapshot`]; nothing reads the process
//! environment except [`EnvSnapshot::from_process`], which a binding calls once. The rules
//! are the spec's (`environment.md`); where the reference SDKs or the spec were silent the
//! choice is written on the item and in `docs/configuration.md`.
//!
//! - [`app`]: what an instrumented app reads (kill switch, endpoint, timeouts, buffers,
//!   hide switches, loop guard, smart breakpoints) -> [`Config`].
//! - [`server`]: what `graphmind serve` reads (database, pause-on-error, retention,
//!   origins, telemetry, paths) -> [`ServerConfig`].
//! - [`env`](mod@env): the snapshot and the shared spellings.

pub mod app;
pub mod env;
pub mod server;

pub use app::{
    describe_disabled, looks_like_production, loop_guard_active, loop_mode_str, parse_break_on,
    resolve, resolve_enabled, resolve_json, Config, EnabledReason, HideSwitches, LoopGuardOption,
    LoopGuardOverrides, Options, SdkFlavor, SdkInfo, CLIENT_VERSION, DEFAULT_BUFFER_SIZE_NATIVE,
    DEFAULT_BUFFER_SIZE_NODE, DEFAULT_BUFFER_SIZE_PYTHON, DEFAULT_BUFFER_SIZE_RUBY,
    DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_LOOP_THRESHOLD,
    DEFAULT_MAX_BUFFER_BYTES, DEFAULT_READY_TIMEOUT_MS, DEFAULT_RETRY_INTERVAL_MS,
    DEFAULT_TOKEN_INTERVAL_MS, DEFAULT_URL, DEFAULT_WARN_INTERVAL_MS, FAST_RETRY_STEPS,
    PRODUCTION_ENV_VARS_NATIVE, PRODUCTION_ENV_VARS_PYTHON, PRODUCTION_ENV_VARS_RUBY,
};
pub use env::{
    env_flag_on, js_number, kill_switch_on, option_flag_on, parse_comma_list, EnvSnapshot,
};
pub use server::{
    normalize_origin, parse_allowed_origins, parse_pause_on_error, resolve_server, telemetry_mode,
    user_home, AllowedOrigins, PauseOnError, ServerConfig, ServerConfigError, ServerFlags,
    TelemetryMode, DEFAULT_ABANDON_GRACE_MS, DEFAULT_KEEP_DAYS, DEFAULT_KEEP_RUNS,
    DEFAULT_TELEMETRY_URL, NODE_KINDS,
};
