//! libgraphmind: GraphMind's core (`graphmind-core`) behind a C ABI.
//!
//! Conventions (libdatadog / sentry-native): every symbol and type starts with `gm_`;
//! objects are opaque handles; a fallible call returns a `gm_error *` (NULL on success)
//! that the caller frees with `gm_error_free`; text goes in as pointer + length (UTF-8, or
//! WTF-8 where a string may hold a lone surrogate); every buffer returned has its free
//! function and every free function accepts NULL; every entry point runs inside
//! `catch_unwind`, so a panic never crosses into the host. Values (inputs, outputs,
//! metadata) cross as JSON text. This crate translates only: every rule is in the core.
#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)] // each unsafe fn has a `# Safety` section

use graphmind_core::canonical;
use graphmind_core::config::{self, EnvSnapshot, SdkFlavor};
use graphmind_core::event::{ErrorInfo, NodeKind, TokenChannel};
use graphmind_core::fingerprint;
use graphmind_core::gate::{GateDecision, PausePoint, PendingGate, ResumeAction};
use graphmind_core::host_value::HostValue;
use graphmind_core::json::{self, JsStr, Map, Value};
use graphmind_core::session::{Gate, GateOptions, NodeRef, Run, RunOutcome, Session};
use graphmind_core::shrink;
use graphmind_core::step::{Next, Step, StepCall};
use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

mod fork;
mod jsondoc;
mod pure;

pub use fork::*;
pub use jsondoc::*;
pub use pure::*;

/// The C ABI's contract version. A caller checks `gm_abi_version() == GM_ABI_VERSION` (the
/// header's value) at start-up; it changes whenever a declaration changes incompatibly.
pub const GM_ABI_VERSION: u32 = 1;

/// A wait that never times out (`gm_gate_wait`).
pub const GM_WAIT_FOREVER: u64 = u64::MAX;

/// What went wrong (`gm_error_code`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum gm_code {
    /// Success (never carried by a `gm_error`; listed for callers that store codes).
    GM_OK = 0,
    /// A required pointer was NULL.
    GM_NULL_ARGUMENT = 1,
    /// Text that must be UTF-8 was not.
    GM_INVALID_UTF8 = 2,
    /// JSON text did not parse.
    GM_INVALID_JSON = 3,
    /// An argument had a value outside its domain (an unknown node kind, a wrong type).
    GM_INVALID_ARGUMENT = 4,
    /// The call was made in the wrong state (a step decision for a gate it did not wait on).
    GM_INVALID_STATE = 5,
    /// The library panicked inside the call; the call had no effect you can rely on.
    GM_PANIC = 6,
}

/// An error returned by value: a code and an owned message. Free with `gm_error_free`.
pub struct gm_error {
    code: gm_code,
    message: Vec<u8>, // NUL-terminated
}

/// A borrowed view of text owned by the library (valid as long as its owner). `ptr` is
/// NUL-terminated for convenience; `len` excludes the NUL.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct gm_str {
    /// The bytes (UTF-8 or WTF-8), or NULL when absent.
    pub ptr: *const c_char,
    /// Byte length, without the terminating NUL.
    pub len: usize,
}

/// Text owned by the caller: `ptr` was allocated by the library, is NUL-terminated, and
/// must be released with `gm_string_free` (once). `ptr` NULL means "no value".
#[repr(C)]
#[derive(Debug)]
pub struct gm_string {
    /// The bytes (UTF-8 or WTF-8, NUL-terminated), or NULL when absent.
    pub ptr: *mut c_char,
    /// Byte length, without the terminating NUL.
    pub len: usize,
}

impl gm_string {
    fn empty() -> gm_string {
        gm_string {
            ptr: std::ptr::null_mut(),
            len: 0,
        }
    }

    fn from_bytes(bytes: Vec<u8>) -> gm_string {
        let len = bytes.len();
        let mut bytes = bytes;
        bytes.push(0);
        let boxed = bytes.into_boxed_slice();
        gm_string {
            ptr: Box::into_raw(boxed) as *mut c_char,
            len,
        }
    }

    fn from_string(s: String) -> gm_string {
        gm_string::from_bytes(s.into_bytes())
    }
}

type R<T> = Result<T, Box<gm_error>>;

fn err(code: gm_code, message: impl Into<String>) -> Box<gm_error> {
    let mut bytes = message.into().into_bytes();
    bytes.retain(|b| *b != 0);
    bytes.push(0);
    Box::new(gm_error {
        code,
        message: bytes,
    })
}

/// Runs `f` inside `catch_unwind` and turns its result into the C convention.
fn guard(f: impl FnOnce() -> R<()>) -> *mut gm_error {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(e)) => Box::into_raw(e),
        Err(_) => Box::into_raw(err(
            gm_code::GM_PANIC,
            "graphmind: internal panic (caught at the C boundary)",
        )),
    }
}

/// Runs `f` inside `catch_unwind`, giving `fallback` on a panic.
fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

unsafe fn bytes<'a>(ptr: *const c_char, len: usize) -> Option<&'a [u8]> {
    if ptr.is_null() {
        None
    } else {
        Some(std::slice::from_raw_parts(ptr as *const u8, len))
    }
}

unsafe fn text<'a>(ptr: *const c_char, len: usize, what: &str) -> R<Option<&'a str>> {
    match bytes(ptr, len) {
        None => Ok(None),
        Some(b) => std::str::from_utf8(b)
            .map(Some)
            .map_err(|_| err(gm_code::GM_INVALID_UTF8, format!("{what}: not UTF-8"))),
    }
}

unsafe fn required_text<'a>(ptr: *const c_char, len: usize, what: &str) -> R<&'a str> {
    text(ptr, len, what)?.ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, format!("{what}: NULL")))
}

unsafe fn js_text(ptr: *const c_char, len: usize, what: &str) -> R<Option<JsStr>> {
    match bytes(ptr, len) {
        None => Ok(None),
        Some(b) => JsStr::from_wtf8(b)
            .map(Some)
            .ok_or_else(|| err(gm_code::GM_INVALID_UTF8, format!("{what}: not UTF-8/WTF-8"))),
    }
}

unsafe fn json_value(ptr: *const c_char, len: usize, what: &str) -> R<Option<Value>> {
    match bytes(ptr, len) {
        None => Ok(None),
        Some(b) => json::parse(b)
            .map(Some)
            .map_err(|e| err(gm_code::GM_INVALID_JSON, format!("{what}: {e}"))),
    }
}

/// A node's input or output given as JSON text: bad text is refused now (`GM_INVALID_JSON`,
/// as [`json_value`] refuses it), but it is parsed now only while a debugger is attached
/// (gates, edits and the loop guard read it on this thread). Detached, the checked text is
/// handed to the core as it is and parsed on its worker thread.
unsafe fn json_host_value(
    ptr: *const c_char,
    len: usize,
    what: &str,
    session: &Session,
) -> R<Option<HostValue>> {
    let Some(b) = bytes(ptr, len) else {
        return Ok(None);
    };
    let refused = |e: json::ParseError| err(gm_code::GM_INVALID_JSON, format!("{what}: {e}"));
    if session.is_attached() {
        json::parse(b)
            .map(|v| Some(HostValue::Built(v)))
            .map_err(refused)
    } else {
        json::validate(b)
            .map(|()| Some(HostValue::Text(b.to_vec())))
            .map_err(refused)
    }
}

unsafe fn handle<'a, T>(ptr: *const T, what: &str) -> R<&'a T> {
    ptr.as_ref()
        .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, format!("{what}: NULL")))
}

unsafe fn handle_mut<'a, T>(ptr: *mut T, what: &str) -> R<&'a mut T> {
    ptr.as_mut()
        .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, format!("{what}: NULL")))
}

/// Refuses a NULL out pointer. Every function with one calls this first, before anything
/// else happens, so a refused call has no effect (nothing recorded, nothing leaked).
fn need<T>(out: *mut T, what: &str) -> R<()> {
    if out.is_null() {
        return Err(err(gm_code::GM_NULL_ARGUMENT, format!("{what}: NULL")));
    }
    Ok(())
}

unsafe fn put<T>(out: *mut T, value: T, what: &str) -> R<()> {
    if out.is_null() {
        return Err(err(gm_code::GM_NULL_ARGUMENT, format!("{what}: NULL")));
    }
    out.write(value);
    Ok(())
}

/// Enum arguments cross the boundary as plain integers (`int32_t`): a C caller may pass any
/// value in an enum's storage, and a Rust enum holding an unlisted value is undefined
/// behaviour. Each is read back here; a value outside the enum is `GM_INVALID_ARGUMENT`.
macro_rules! enum_arg {
    ($ty:ident, [$($variant:ident),+ $(,)?]) => {
        impl $ty {
            fn from_c(value: i32, what: &str) -> R<$ty> {
                $(if value == $ty::$variant as i32 {
                    return Ok($ty::$variant);
                })+
                Err(err(
                    gm_code::GM_INVALID_ARGUMENT,
                    format!("{what}: {value} is not a {} value", stringify!($ty)),
                ))
            }
        }
    };
}

enum_arg!(gm_tristate, [GM_UNSET, GM_FALSE, GM_TRUE]);
enum_arg!(
    gm_flavor,
    [
        GM_FLAVOR_NATIVE,
        GM_FLAVOR_NODE,
        GM_FLAVOR_PYTHON,
        GM_FLAVOR_RUBY
    ]
);
enum_arg!(
    gm_outcome,
    [GM_OUTCOME_OK, GM_OUTCOME_ERROR, GM_OUTCOME_ABORTED]
);
enum_arg!(
    gm_channel,
    [GM_CHANNEL_TEXT, GM_CHANNEL_REASONING, GM_CHANNEL_TOOL_ARGS]
);
enum_arg!(gm_point, [GM_POINT_BEFORE, GM_POINT_AFTER, GM_POINT_ERROR]);

/// Refuses a recording call on a disposed session, or into a run already finished, with
/// `GM_INVALID_STATE`: the call records nothing. (A disabled session is not misuse: its
/// calls succeed and record nothing, so an app runs the same with GraphMind switched off.)
unsafe fn live(s: &gm_session, run: *const gm_run) -> R<()> {
    if s.session.is_disposed() {
        return Err(err(
            gm_code::GM_INVALID_STATE,
            "session: disposed (gm_session_dispose ran); nothing is recorded",
        ));
    }
    if let Some(r) = run.as_ref() {
        if r.run.signal.is_finished() {
            return Err(err(
                gm_code::GM_INVALID_STATE,
                format!("run {}: already finished", r.run.run_id),
            ));
        }
    }
    Ok(())
}

fn misuse(e: impl std::fmt::Display) -> Box<gm_error> {
    err(gm_code::GM_INVALID_STATE, e.to_string())
}

fn ms(timeout_ms: u64) -> Duration {
    if timeout_ms == GM_WAIT_FOREVER {
        Duration::from_secs(60 * 60 * 24 * 365)
    } else {
        Duration::from_millis(timeout_ms)
    }
}

// ---------------------------------------------------------------------------------------
// Versions, errors, strings
// ---------------------------------------------------------------------------------------

/// The ABI version of the loaded library; compare with the header's `GM_ABI_VERSION`.
/// Any thread.
#[no_mangle]
pub extern "C" fn gm_abi_version() -> u32 {
    GM_ABI_VERSION
}

/// The library's version (`"0.1.0"`), a static NUL-terminated string owned by the library
/// (never free it). Any thread.
#[no_mangle]
pub extern "C" fn gm_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

/// The code of `error`; `GM_OK` when `error` is NULL. Any thread.
///
/// # Safety
/// `error` is NULL or a live `gm_error` returned by this library.
#[no_mangle]
pub unsafe extern "C" fn gm_error_code(error: *const gm_error) -> gm_code {
    guard_value(gm_code::GM_PANIC, || {
        error.as_ref().map_or(gm_code::GM_OK, |e| e.code)
    })
}

/// The message of `error`, borrowed from `error` (valid until `gm_error_free`); an empty
/// view when `error` is NULL. Any thread.
///
/// # Safety
/// `error` is NULL or a live `gm_error` returned by this library.
#[no_mangle]
pub unsafe extern "C" fn gm_error_message(error: *const gm_error) -> gm_str {
    guard_value(
        gm_str {
            ptr: std::ptr::null(),
            len: 0,
        },
        || match error.as_ref() {
            None => gm_str {
                ptr: c"".as_ptr(),
                len: 0,
            },
            Some(e) => gm_str {
                ptr: e.message.as_ptr() as *const c_char,
                len: e.message.len() - 1,
            },
        },
    )
}

/// Frees an error returned by this library. Accepts NULL. Any thread.
///
/// # Safety
/// `error` is NULL or a `gm_error` returned by this library and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gm_error_free(error: *mut gm_error) {
    guard_value((), || {
        if !error.is_null() {
            drop(Box::from_raw(error));
        }
    })
}

/// Frees the text of `string` (allocated by this library) and resets it to
/// `{NULL, 0}`. Accepts NULL and an already-empty string. Any thread.
///
/// # Safety
/// `string` is NULL or points to a `gm_string` filled by this library (or zeroed).
#[no_mangle]
pub unsafe extern "C" fn gm_string_free(string: *mut gm_string) {
    guard_value((), || {
        if let Some(s) = string.as_mut() {
            if !s.ptr.is_null() {
                let slice = std::ptr::slice_from_raw_parts_mut(s.ptr as *mut u8, s.len + 1);
                drop(Box::from_raw(slice));
            }
            s.ptr = std::ptr::null_mut();
            s.len = 0;
        }
    })
}

// ---------------------------------------------------------------------------------------
// Options and environment
// ---------------------------------------------------------------------------------------

/// A tri-state flag: not given (the core decides), or forced on / off.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum gm_tristate {
    /// Not given: environment and defaults decide.
    GM_UNSET = 0,
    /// Given as false.
    GM_FALSE = 1,
    /// Given as true.
    GM_TRUE = 2,
}

/// Which SDK's defaults the core applies (buffer size, production variables, sdk name).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum gm_flavor {
    /// C / C++ (and any other native caller).
    GM_FLAVOR_NATIVE = 0,
    /// The Node SDK's defaults.
    GM_FLAVOR_NODE = 1,
    /// The Python SDK's defaults.
    GM_FLAVOR_PYTHON = 2,
    /// The Ruby SDK's defaults.
    GM_FLAVOR_RUBY = 3,
}

impl gm_flavor {
    fn core(self) -> SdkFlavor {
        match self {
            gm_flavor::GM_FLAVOR_NATIVE => SdkFlavor::Native,
            gm_flavor::GM_FLAVOR_NODE => SdkFlavor::Node,
            gm_flavor::GM_FLAVOR_PYTHON => SdkFlavor::Python,
            gm_flavor::GM_FLAVOR_RUBY => SdkFlavor::Ruby,
        }
    }
}

/// Session options: the reference's camelCase option object (`url`, `appName`, `enabled`,
/// `pauseTimeoutMs`, `loopGuard`, ...), built with typed setters or from JSON text.
pub struct gm_options {
    map: Map,
}

/// A snapshot of environment variables the core reads (the kill switch, `GRAPHMIND_URL`, ...).
pub struct gm_env {
    env: EnvSnapshot,
}

/// A new, empty options object. Free with `gm_options_free`. Never NULL. Any thread; one
/// thread at a time per object.
#[no_mangle]
pub extern "C" fn gm_options_new() -> *mut gm_options {
    guard_value(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(gm_options { map: Map::new() }))
    })
}

/// Options from a JSON object text (`{"url": "...", "loopGuard": {"threshold": 5}}`); on
/// success `*out` receives an object the caller frees with `gm_options_free`. Unknown or
/// ill-typed options are the core's business (it warns), not an error here.
///
/// # Safety
/// `json` points to `len` readable bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_options_from_json(
    json: *const c_char,
    len: usize,
    out: *mut *mut gm_options,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let value = json_value(json, len, "options")?
            .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, "options: NULL"))?;
        let Value::Object(map) = value else {
            return Err(err(
                gm_code::GM_INVALID_ARGUMENT,
                "options: not a JSON object",
            ));
        };
        put(out, Box::into_raw(Box::new(gm_options { map })), "out")
    })
}

/// Sets the option `key` (camelCase, e.g. `"bufferSize"`) to the JSON value `json`
/// (`"null"` means not given). Thread: the one using `options`.
///
/// # Safety
/// `options` is a live `gm_options`; `key`/`json` point to `key_len`/`json_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn gm_options_set_json(
    options: *mut gm_options,
    key: *const c_char,
    key_len: usize,
    json: *const c_char,
    json_len: usize,
) -> *mut gm_error {
    guard(|| {
        let options = handle_mut(options, "options")?;
        let key = required_text(key, key_len, "key")?;
        let value = json_value(json, json_len, "value")?
            .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, "value: NULL"))?;
        options.map.insert(key, value);
        Ok(())
    })
}

unsafe fn set_option(options: *mut gm_options, key: &str, value: Value) -> *mut gm_error {
    guard(|| {
        handle_mut(options, "options")?.map.insert(key, value);
        Ok(())
    })
}

/// Sets `enabled` to a `gm_tristate` value (the kill switch and production checks still
/// apply; see docs/c.md). Any other value: `GM_INVALID_ARGUMENT`, nothing set.
///
/// # Safety
/// `options` is a live `gm_options` used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn gm_options_set_enabled(
    options: *mut gm_options,
    enabled: i32,
) -> *mut gm_error {
    let value = match gm_tristate::from_c(enabled, "enabled") {
        Ok(gm_tristate::GM_UNSET) => Value::Null,
        Ok(gm_tristate::GM_FALSE) => Value::Bool(false),
        Ok(gm_tristate::GM_TRUE) => Value::Bool(true),
        Err(e) => return Box::into_raw(e),
    };
    set_option(options, "enabled", value)
}

/// Sets `url` (the ingest WebSocket URL, e.g. `ws://127.0.0.1:4747/ingest`).
///
/// # Safety
/// `options` is a live `gm_options`; `url` points to `len` UTF-8 bytes.
#[no_mangle]
pub unsafe extern "C" fn gm_options_set_url(
    options: *mut gm_options,
    url: *const c_char,
    len: usize,
) -> *mut gm_error {
    match guard_value(Err(err(gm_code::GM_PANIC, "panic")), || {
        required_text(url, len, "url").map(str::to_string)
    }) {
        Ok(url) => set_option(options, "url", Value::from(url.as_str())),
        Err(e) => Box::into_raw(e),
    }
}

/// Sets `appName`.
///
/// # Safety
/// `options` is a live `gm_options`; `name` points to `len` UTF-8 bytes.
#[no_mangle]
pub unsafe extern "C" fn gm_options_set_app_name(
    options: *mut gm_options,
    name: *const c_char,
    len: usize,
) -> *mut gm_error {
    match guard_value(Err(err(gm_code::GM_PANIC, "panic")), || {
        required_text(name, len, "name").map(str::to_string)
    }) {
        Ok(name) => set_option(options, "appName", Value::from(name.as_str())),
        Err(e) => Box::into_raw(e),
    }
}

/// Sets `pauseTimeoutMs`: how long a gate holds before it continues by itself; a negative
/// value means hold forever (`null`).
///
/// # Safety
/// `options` is a live `gm_options`.
#[no_mangle]
pub unsafe extern "C" fn gm_options_set_pause_timeout_ms(
    options: *mut gm_options,
    timeout_ms: i64,
) -> *mut gm_error {
    let value = if timeout_ms < 0 {
        Value::Null
    } else {
        Value::from(timeout_ms)
    };
    set_option(options, "pauseTimeoutMs", value)
}

/// Sets `bufferSize` (events kept for replay).
///
/// # Safety
/// `options` is a live `gm_options`.
#[no_mangle]
pub unsafe extern "C" fn gm_options_set_buffer_size(
    options: *mut gm_options,
    size: u64,
) -> *mut gm_error {
    set_option(options, "bufferSize", Value::from(size as i64))
}

/// Frees options. Accepts NULL.
///
/// # Safety
/// `options` is NULL or a `gm_options` from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gm_options_free(options: *mut gm_options) {
    guard_value((), || {
        if !options.is_null() {
            drop(Box::from_raw(options));
        }
    })
}

/// A snapshot of the whole process environment, read once now. Free with `gm_env_free`.
/// Any thread (do not call it while another thread runs `setenv`).
#[no_mangle]
pub extern "C" fn gm_env_from_process() -> *mut gm_env {
    guard_value(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(gm_env {
            env: EnvSnapshot::from_process(),
        }))
    })
}

/// An empty environment (nothing set). Free with `gm_env_free`.
#[no_mangle]
pub extern "C" fn gm_env_new() -> *mut gm_env {
    guard_value(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(gm_env {
            env: EnvSnapshot::new(),
        }))
    })
}

/// An environment from a JSON object of strings (`{"GRAPHMIND": "0"}`). Free with
/// `gm_env_free`.
///
/// # Safety
/// `json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_env_from_json(
    json: *const c_char,
    len: usize,
    out: *mut *mut gm_env,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let value = json_value(json, len, "env")?
            .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, "env: NULL"))?;
        if value.as_object().is_none() {
            return Err(err(gm_code::GM_INVALID_ARGUMENT, "env: not a JSON object"));
        }
        put(
            out,
            Box::into_raw(Box::new(gm_env {
                env: EnvSnapshot::from_json(&value),
            })),
            "out",
        )
    })
}

/// Sets one variable in the snapshot (not in the process).
///
/// # Safety
/// `env` is a live `gm_env` used by this thread only; `name`/`value` point to UTF-8 bytes.
#[no_mangle]
pub unsafe extern "C" fn gm_env_set(
    env: *mut gm_env,
    name: *const c_char,
    name_len: usize,
    value: *const c_char,
    value_len: usize,
) -> *mut gm_error {
    guard(|| {
        let env = handle_mut(env, "env")?;
        let name = required_text(name, name_len, "name")?;
        let value = required_text(value, value_len, "value")?;
        env.env.set(name, value);
        Ok(())
    })
}

/// Frees an environment snapshot. Accepts NULL.
///
/// # Safety
/// `env` is NULL or a `gm_env` from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gm_env_free(env: *mut gm_env) {
    guard_value((), || {
        if !env.is_null() {
            drop(Box::from_raw(env));
        }
    })
}

fn resolve(
    options: Option<&gm_options>,
    env: Option<&gm_env>,
    flavor: gm_flavor,
) -> config::Config {
    let opts = Value::Object(options.map(|o| o.map.clone()).unwrap_or_default());
    let process;
    let env = match env {
        Some(e) => &e.env,
        None => {
            process = EnvSnapshot::from_process();
            &process
        }
    };
    config::resolve_json(&opts, env, flavor.core())
}

/// The configuration the core resolves from `options` (NULL: none) and `env` (NULL: the
/// process environment now) as JSON text (`enabled`, `enabledReason`, `url`, ...,
/// `warnings`) into `*out` (free with `gm_string_free`). `flavor` is a `gm_flavor` value
/// (any other is `GM_INVALID_ARGUMENT`). Pure; any thread.
///
/// # Safety
/// `options`/`env` are NULL or live handles; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_config_resolve_json(
    options: *const gm_options,
    env: *const gm_env,
    flavor: i32,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let flavor = gm_flavor::from_c(flavor, "flavor")?;
        let config = resolve(options.as_ref(), env.as_ref(), flavor);
        put(
            out,
            gm_string::from_string(json::to_string(&config.to_json())),
            "out",
        )
    })
}

// ---------------------------------------------------------------------------------------
// Session
// ---------------------------------------------------------------------------------------

/// A warning line (already prefixed `[graphmind] `, not NUL-terminated beyond `len`... it
/// is NUL-terminated too), borrowed for the call only. Called on any library or app thread.
pub type gm_warn_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, line: *const c_char, len: usize)>;

/// A GraphMind session: the link to `graphmind serve`, runs, nodes and gates. Thread-safe:
/// every `gm_session_*` call may come from any thread concurrently.
pub struct gm_session {
    session: Session,
}

struct SendPtr(*mut c_void);
// SAFETY: the caller promises (documented) that user_data may be used from any thread.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// Creates a session from `options` (NULL: none) and `env` (NULL: a snapshot of the process
/// environment taken now). Warnings go to `warn(user_data, line, len)` from any thread, or
/// to stderr when `warn` is NULL. No I/O and no thread start here: the link starts on first
/// use. On success `*out` receives a session the caller disposes (`gm_session_dispose`)
/// and frees (`gm_session_free`). The options and env stay owned by the caller. `flavor` is
/// a `gm_flavor` value (any other is `GM_INVALID_ARGUMENT`); a NULL `out` is
/// `GM_NULL_ARGUMENT` and creates nothing.
///
/// # Safety
/// `options`/`env` are NULL or live handles; `out` is valid; `user_data` must stay valid
/// and usable from any thread until the session is freed.
#[no_mangle]
pub unsafe extern "C" fn gm_session_new(
    options: *const gm_options,
    env: *const gm_env,
    flavor: i32,
    warn: gm_warn_fn,
    user_data: *mut c_void,
    out: *mut *mut gm_session,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let flavor = gm_flavor::from_c(flavor, "flavor")?;
        let config = resolve(options.as_ref(), env.as_ref(), flavor);
        let sink: graphmind_core::warn::WarnSink = match warn {
            None => graphmind_core::warn::stderr_sink(),
            Some(f) => {
                let ud = SendPtr(user_data);
                Arc::new(move |line: &str| {
                    let ud = &ud;
                    let mut owned = Vec::with_capacity(line.len() + 1);
                    owned.extend_from_slice(line.as_bytes());
                    owned.push(0);
                    let _ = catch_unwind(AssertUnwindSafe(|| {
                        f(ud.0, owned.as_ptr() as *const c_char, line.len())
                    }));
                })
            }
        };
        put(
            out,
            Box::into_raw(Box::new(gm_session {
                session: Session::new(config, sink),
            })),
            "out",
        )
    })
}

/// Whether the session records at all (the kill switch's verdict). Any thread.
///
/// # Safety
/// `session` is NULL (false) or a live session.
#[no_mangle]
pub unsafe extern "C" fn gm_session_is_enabled(session: *const gm_session) -> bool {
    guard_value(false, || {
        session.as_ref().is_some_and(|s| s.session.is_enabled())
    })
}

/// Whether a debugger is attached now. Any thread.
///
/// # Safety
/// `session` is NULL (false) or a live session.
#[no_mangle]
pub unsafe extern "C" fn gm_session_is_attached(session: *const gm_session) -> bool {
    guard_value(false, || {
        session.as_ref().is_some_and(|s| s.session.is_attached())
    })
}

/// Blocks up to `timeout_ms` until the link to the server is up and the debugger's state
/// (breakpoints, mode) is applied; returns whether it is. Any thread (not a signal handler).
///
/// # Safety
/// `session` is NULL (false) or a live session.
#[no_mangle]
pub unsafe extern "C" fn gm_session_ready(session: *const gm_session, timeout_ms: u64) -> bool {
    guard_value(false, || {
        session
            .as_ref()
            .is_some_and(|s| s.session.ready(ms(timeout_ms)))
    })
}

/// A diagnostics snapshot (`gm_session_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct gm_stats {
    /// Whether the session records at all.
    pub enabled: bool,
    /// Whether a debugger is attached.
    pub attached: bool,
    /// Events held in the replay buffer.
    pub buffered: u64,
    /// Events evicted from the replay buffer.
    pub dropped: u64,
    /// Events lost before they reached a debugger.
    pub lost: u64,
    /// Runs with a gap marker waiting for an attach.
    pub pending_gaps: u64,
    /// Gates held now.
    pub held_gates: u64,
    /// The next event sequence number.
    pub seq: u64,
}

/// Fills `*out` with a diagnostics snapshot. Any thread.
///
/// # Safety
/// `session` is a live session; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_session_stats(
    session: *const gm_session,
    out: *mut gm_stats,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let s = handle(session, "session")?.session.stats();
        let stats = gm_stats {
            enabled: s.enabled,
            attached: s.attached,
            buffered: s.buffered,
            dropped: s.dropped,
            lost: s.lost,
            pending_gaps: s.pending_gaps,
            held_gates: s.held_gates,
            seq: s.seq,
        };
        put(out, stats, "out")
    })
}

/// Waits up to `timeout_ms` until every event emitted so far is written to the link;
/// returns whether it was. Any thread.
///
/// # Safety
/// `session` is NULL (false) or a live session.
#[no_mangle]
pub unsafe extern "C" fn gm_session_flush(session: *const gm_session, timeout_ms: u64) -> bool {
    guard_value(false, || {
        session
            .as_ref()
            .is_some_and(|s| s.session.flush(ms(timeout_ms)))
    })
}

/// Releases every held gate (`continue`), finishes the implicit run, flushes and closes the
/// link, waiting at most `deadline_ms`; the worker threads end. Idempotent; never hangs.
/// Handles (runs, nodes, steps, gates) stay valid to free. Any thread.
///
/// # Safety
/// `session` is NULL (no-op) or a live session.
#[no_mangle]
pub unsafe extern "C" fn gm_session_dispose(session: *const gm_session, deadline_ms: u64) {
    guard_value((), || {
        if let Some(s) = session.as_ref() {
            s.session.dispose(ms(deadline_ms));
        }
    })
}

/// Frees the session handle: disposes it first (deadline 2000 ms) if not yet disposed, and
/// unregisters it from `gm_atfork_register`. Accepts NULL. Call once, after every other
/// thread stopped using the handle.
///
/// # Safety
/// `session` is NULL or a session from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gm_session_free(session: *mut gm_session) {
    guard_value((), || {
        if !session.is_null() {
            let s = Box::from_raw(session);
            graphmind_core::fork::unregister(&s.session);
            s.session
                .dispose(Duration::from_millis(config::DEFAULT_READY_TIMEOUT_MS));
            drop(s);
        }
    })
}

/// Fork protocol, before `fork()`: call on the forking thread, then exactly one of
/// `gm_session_after_fork_parent` / `gm_session_after_fork_child` on the same thread.
/// (`gm_atfork_register` does this for you through `pthread_atfork`.)
///
/// # Safety
/// `session` is NULL (no-op) or a live session.
#[no_mangle]
pub unsafe extern "C" fn gm_session_before_fork(session: *const gm_session) {
    guard_value((), || {
        if let Some(s) = session.as_ref() {
            s.session.before_fork();
        }
    })
}

/// Fork protocol, in the parent after `fork()` (same thread as `gm_session_before_fork`).
///
/// # Safety
/// `session` is NULL (no-op) or a live session on which `gm_session_before_fork` was called.
#[no_mangle]
pub unsafe extern "C" fn gm_session_after_fork_parent(session: *const gm_session) {
    guard_value((), || {
        if let Some(s) = session.as_ref() {
            s.session.after_fork_parent();
        }
    })
}

/// Fork protocol, in the child after `fork()`: the child gets a fresh worker and link on
/// its next event.
///
/// # Safety
/// `session` is NULL (no-op) or a live session on which `gm_session_before_fork` was called.
#[no_mangle]
pub unsafe extern "C" fn gm_session_after_fork_child(session: *const gm_session) {
    guard_value((), || {
        if let Some(s) = session.as_ref() {
            s.session.after_fork_child();
        }
    })
}

// ---------------------------------------------------------------------------------------
// Runs
// ---------------------------------------------------------------------------------------

/// A run: its id, name and abort signal. Thread-safe to read from any thread.
pub struct gm_run {
    run: Run,
    id: NulText,
}

/// How a run ended (`gm_session_finish_run`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum gm_outcome {
    /// It returned.
    GM_OUTCOME_OK = 0,
    /// It failed (give the error's name and message).
    GM_OUTCOME_ERROR = 1,
    /// It was aborted.
    GM_OUTCOME_ABORTED = 2,
}

/// Starts a run named `name` with optional metadata `meta_json` (a JSON object, NULL for
/// none); `*out` receives the run, freed by `gm_run_free` after `gm_session_finish_run`.
/// Any thread.
///
/// Refused: `GM_INVALID_STATE` after `gm_session_dispose`; `GM_NULL_ARGUMENT` for a NULL
/// `out` (no run is started).
///
/// # Safety
/// `session` is live; text pointers point to their lengths' bytes (or NULL); `out` valid.
#[no_mangle]
pub unsafe extern "C" fn gm_session_start_run(
    session: *const gm_session,
    name: *const c_char,
    name_len: usize,
    meta_json: *const c_char,
    meta_len: usize,
    out: *mut *mut gm_run,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let s = handle(session, "session")?;
        let name = required_text(name, name_len, "name")?;
        let meta = match json_value(meta_json, meta_len, "meta")? {
            None => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return Err(err(gm_code::GM_INVALID_ARGUMENT, "meta: not a JSON object")),
        };
        live(s, std::ptr::null())?;
        let run = s.session.start_run(name, meta.as_ref());
        put(
            out,
            Box::into_raw(Box::new(gm_run {
                id: NulText::new(&run.run_id),
                run,
            })),
            "out",
        )
    })
}

/// Finishes `run` with `outcome`; for `GM_OUTCOME_ERROR` the error's `name` and `message`
/// (UTF-8, may be NULL). The run stays owned by the caller. Any thread.
///
/// The first finish wins: a second one (or any after `gm_session_dispose`) is
/// `GM_INVALID_STATE` and records nothing. `outcome` is a `gm_outcome` value; any other is
/// `GM_INVALID_ARGUMENT`.
///
/// # Safety
/// `session`/`run` are live; text pointers point to their lengths' bytes (or NULL).
#[no_mangle]
pub unsafe extern "C" fn gm_session_finish_run(
    session: *const gm_session,
    run: *const gm_run,
    outcome: i32,
    error_name: *const c_char,
    error_name_len: usize,
    error_message: *const c_char,
    error_message_len: usize,
) -> *mut gm_error {
    guard(|| {
        let s = handle(session, "session")?;
        let run = handle(run, "run")?;
        let outcome = match gm_outcome::from_c(outcome, "outcome")? {
            gm_outcome::GM_OUTCOME_OK => RunOutcome::Ok,
            gm_outcome::GM_OUTCOME_ABORTED => RunOutcome::Aborted,
            gm_outcome::GM_OUTCOME_ERROR => {
                let name = js_text(error_name, error_name_len, "error_name")?
                    .unwrap_or_else(|| JsStr::from("Error"));
                let message =
                    js_text(error_message, error_message_len, "error_message")?.unwrap_or_default();
                RunOutcome::Error(ErrorInfo::new(name, message))
            }
        };
        live(s, std::ptr::null())?;
        if !s.session.finish_run(&run.run, outcome) {
            return Err(err(
                gm_code::GM_INVALID_STATE,
                format!("run {}: already finished", run.run.run_id),
            ));
        }
        Ok(())
    })
}

/// The run's id (`run_…`), borrowed from `run`. Any thread.
///
/// # Safety
/// `run` is a live run.
#[no_mangle]
pub unsafe extern "C" fn gm_run_id(run: *const gm_run) -> gm_str {
    guard_value(
        gm_str {
            ptr: std::ptr::null(),
            len: 0,
        },
        || match run.as_ref() {
            None => gm_str {
                ptr: std::ptr::null(),
                len: 0,
            },
            Some(r) => r.id.view(),
        },
    )
}

/// Text a handle keeps NUL-terminated, so the `gm_str` views it lends keep the header's
/// promise (`strlen(view.ptr) == view.len` for text without an inner NUL).
pub(crate) struct NulText(Box<[u8]>);

impl NulText {
    pub(crate) fn new(s: &str) -> NulText {
        let mut bytes = Vec::with_capacity(s.len() + 1);
        bytes.extend_from_slice(s.as_bytes());
        bytes.push(0);
        NulText(bytes.into_boxed_slice())
    }

    fn as_str(&self) -> &str {
        // SAFETY: built from a &str plus one NUL byte.
        unsafe { std::str::from_utf8_unchecked(&self.0[..self.0.len() - 1]) }
    }

    /// A view of the text, valid as long as `self`.
    pub(crate) fn view(&self) -> gm_str {
        gm_str {
            ptr: self.0.as_ptr() as *const c_char,
            len: self.0.len() - 1,
        }
    }
}

/// Whether the run was aborted (by the debugger's `abort`, or by `gm_run_abort`). Cheap;
/// poll it in long loops. Any thread.
///
/// # Safety
/// `run` is NULL (false) or a live run.
#[no_mangle]
pub unsafe extern "C" fn gm_run_is_aborted(run: *const gm_run) -> bool {
    guard_value(false, || {
        run.as_ref().is_some_and(|r| r.run.signal.is_aborted())
    })
}

/// The abort reason into `*out` (free with `gm_string_free`); returns false (and leaves
/// `*out` empty) when the run is not aborted. Any thread.
///
/// # Safety
/// `run` is a live run; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_run_abort_reason(run: *const gm_run, out: *mut gm_string) -> bool {
    guard_value(false, || {
        let (Some(r), false) = (run.as_ref(), out.is_null()) else {
            return false;
        };
        match r.run.signal.reason() {
            Some(reason) => {
                out.write(gm_string::from_string(reason));
                true
            }
            None => {
                out.write(gm_string::empty());
                false
            }
        }
    })
}

/// Aborts the run from the app side with `reason` (idempotent; the first reason stays).
///
/// # Safety
/// `run` is a live run; `reason` points to `len` UTF-8 bytes or is NULL.
#[no_mangle]
pub unsafe extern "C" fn gm_run_abort(
    run: *const gm_run,
    reason: *const c_char,
    len: usize,
) -> *mut gm_error {
    guard(|| {
        let r = handle(run, "run")?;
        let reason = text(reason, len, "reason")?.unwrap_or("aborted");
        r.run.signal.abort(reason);
        Ok(())
    })
}

/// Frees a run handle. Accepts NULL.
///
/// # Safety
/// `run` is NULL or a run from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gm_run_free(run: *mut gm_run) {
    guard_value((), || {
        if !run.is_null() {
            drop(Box::from_raw(run));
        }
    })
}

fn run_id(run: *const gm_run) -> Option<&'static str> {
    // SAFETY: callers pass NULL or a live run; the str lives as long as the run handle,
    // which outlives the call using it.
    unsafe {
        run.as_ref()
            .map(|r| &*(r.run.run_id.as_str() as *const str))
    }
}

// ---------------------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------------------

/// One node execution (its node id `kind:name` and a fresh instance id). Immutable: any
/// thread may use it.
pub struct gm_node {
    node: NodeRef,
    node_id: NulText,
    instance_id: NulText,
}

unsafe fn node_kind(kind: *const c_char, len: usize) -> R<NodeKind> {
    let kind = required_text(kind, len, "kind")?;
    NodeKind::parse(kind).ok_or_else(|| {
        err(
            gm_code::GM_INVALID_ARGUMENT,
            format!("kind: unknown node kind {kind:?}"),
        )
    })
}

/// A new execution of node `kind` (`"tool"`, `"llm"`, `"agent"`, `"chain"`, `"retriever"`,
/// `"custom"`, ...) named `name`; its id is `node_id` when given, else `kind:name`.
/// `*out` receives the node, freed by `gm_node_free`.
///
/// # Safety
/// Text pointers point to their lengths' bytes (`node_id` may be NULL); `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn gm_node_new(
    kind: *const c_char,
    kind_len: usize,
    name: *const c_char,
    name_len: usize,
    node_id: *const c_char,
    node_id_len: usize,
    out: *mut *mut gm_node,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let kind = node_kind(kind, kind_len)?;
        let name = required_text(name, name_len, "name")?;
        let node = match text(node_id, node_id_len, "node_id")? {
            Some(id) => NodeRef::with_id(kind, name, id),
            None => NodeRef::new(kind, name),
        };
        put(
            out,
            Box::into_raw(Box::new(gm_node {
                node_id: NulText::new(&node.node_id),
                instance_id: NulText::new(&node.instance_id),
                node,
            })),
            "out",
        )
    })
}

/// The node id (`tool:search`), borrowed from `node`.
///
/// # Safety
/// `node` is a live node.
#[no_mangle]
pub unsafe extern "C" fn gm_node_id(node: *const gm_node) -> gm_str {
    guard_value(
        gm_str {
            ptr: std::ptr::null(),
            len: 0,
        },
        || match node.as_ref() {
            None => gm_str {
                ptr: std::ptr::null(),
                len: 0,
            },
            Some(n) => n.node_id.view(),
        },
    )
}

/// The execution's instance id (`inst_…`), borrowed from `node`.
///
/// # Safety
/// `node` is a live node.
#[no_mangle]
pub unsafe extern "C" fn gm_node_instance_id(node: *const gm_node) -> gm_str {
    guard_value(
        gm_str {
            ptr: std::ptr::null(),
            len: 0,
        },
        || match node.as_ref() {
            None => gm_str {
                ptr: std::ptr::null(),
                len: 0,
            },
            Some(n) => n.instance_id.view(),
        },
    )
}

/// Frees a node. Accepts NULL.
///
/// # Safety
/// `node` is NULL or a node from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gm_node_free(node: *mut gm_node) {
    guard_value((), || {
        if !node.is_null() {
            drop(Box::from_raw(node));
        }
    })
}

/// `node.started` for `node` in `run` (NULL: the implicit run), with the parent node's
/// *instance* id `parent_id` (or NULL) and the input as JSON text (or NULL). Any thread.
///
/// Refused: `GM_INVALID_STATE` after `gm_session_dispose` or into a finished run (nothing
/// recorded); see docs/c.md, "What an invalid call returns".
///
/// # Safety
/// Handles are live (`run` may be NULL); text pointers point to their lengths' bytes or are NULL.
#[no_mangle]
pub unsafe extern "C" fn gm_session_node_started(
    session: *const gm_session,
    run: *const gm_run,
    node: *const gm_node,
    parent_id: *const c_char,
    parent_id_len: usize,
    input_json: *const c_char,
    input_len: usize,
) -> *mut gm_error {
    guard(|| {
        let s = handle(session, "session")?;
        let n = handle(node, "node")?;
        let parent = text(parent_id, parent_id_len, "parent_id")?;
        let input = json_host_value(input_json, input_len, "input", &s.session)?;
        live(s, run)?;
        s.session
            .node_started_host(run_id(run), &n.node, parent, input);
        Ok(())
    })
}

/// The channel of one streamed delta.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum gm_channel {
    /// Model text.
    GM_CHANNEL_TEXT = 0,
    /// Model reasoning.
    GM_CHANNEL_REASONING = 1,
    /// Tool-call arguments as they stream.
    GM_CHANNEL_TOOL_ARGS = 2,
}

/// `node.token`: one streamed delta `text` (UTF-8/WTF-8) of `node` on `channel` (a
/// `gm_channel` value; any other is `GM_INVALID_ARGUMENT`). Any thread.
///
/// Refused: `GM_INVALID_STATE` after `gm_session_dispose` or into a finished run (nothing
/// recorded); see docs/c.md, "What an invalid call returns".
///
/// # Safety
/// Handles are live (`run` may be NULL); `text_ptr` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn gm_session_node_token(
    session: *const gm_session,
    run: *const gm_run,
    node: *const gm_node,
    channel: i32,
    text_ptr: *const c_char,
    len: usize,
) -> *mut gm_error {
    guard(|| {
        let s = handle(session, "session")?;
        let n = handle(node, "node")?;
        let t = text(text_ptr, len, "text")?.unwrap_or("");
        let channel = match gm_channel::from_c(channel, "channel")? {
            gm_channel::GM_CHANNEL_TEXT => TokenChannel::Text,
            gm_channel::GM_CHANNEL_REASONING => TokenChannel::Reasoning,
            gm_channel::GM_CHANNEL_TOOL_ARGS => TokenChannel::ToolArgs,
        };
        live(s, run)?;
        s.session.node_token(run_id(run), &n.node, channel, t);
        Ok(())
    })
}

/// `node.finished` (status ok) for `node` with the output as JSON text (or NULL), the
/// duration in ms, and whether the output was injected. Any thread.
///
/// Refused: `GM_INVALID_STATE` after `gm_session_dispose` or into a finished run (nothing
/// recorded); see docs/c.md, "What an invalid call returns".
///
/// # Safety
/// Handles are live (`run` may be NULL); `output_json` points to `len` bytes or is NULL.
#[no_mangle]
pub unsafe extern "C" fn gm_session_node_finished(
    session: *const gm_session,
    run: *const gm_run,
    node: *const gm_node,
    output_json: *const c_char,
    output_len: usize,
    duration_ms: f64,
    injected: bool,
) -> *mut gm_error {
    guard(|| {
        let s = handle(session, "session")?;
        let n = handle(node, "node")?;
        let output = json_host_value(output_json, output_len, "output", &s.session)?;
        live(s, run)?;
        s.session
            .node_finished_host(run_id(run), &n.node, output, duration_ms, injected);
        Ok(())
    })
}

/// `node.error` for `node`: the error's class `name`, `message` and optional `stack`
/// (UTF-8/WTF-8; NULL allowed). Any thread.
///
/// Refused: `GM_INVALID_STATE` after `gm_session_dispose` or into a finished run (nothing
/// recorded); see docs/c.md, "What an invalid call returns".
///
/// # Safety
/// Handles are live (`run` may be NULL); text pointers point to their lengths' bytes or are NULL.
#[no_mangle]
pub unsafe extern "C" fn gm_session_node_error(
    session: *const gm_session,
    run: *const gm_run,
    node: *const gm_node,
    name: *const c_char,
    name_len: usize,
    message: *const c_char,
    message_len: usize,
    stack: *const c_char,
    stack_len: usize,
) -> *mut gm_error {
    guard(|| {
        let s = handle(session, "session")?;
        let n = handle(node, "node")?;
        let info = error_info(name, name_len, message, message_len, stack, stack_len)?;
        live(s, run)?;
        s.session.node_error(run_id(run), &n.node, info);
        Ok(())
    })
}

unsafe fn error_info(
    name: *const c_char,
    name_len: usize,
    message: *const c_char,
    message_len: usize,
    stack: *const c_char,
    stack_len: usize,
) -> R<ErrorInfo> {
    let name = js_text(name, name_len, "name")?.unwrap_or_else(|| JsStr::from("Error"));
    let message = js_text(message, message_len, "message")?.unwrap_or_default();
    let mut info = ErrorInfo::new(name, message);
    info.stack = js_text(stack, stack_len, "stack")?;
    Ok(info)
}

/// Emits one raw app event of `type` (`"graph.hint"`, `"node.started"`, ...) with the
/// payload as JSON text, into `run` (NULL: the implicit run). A type an app does not send
/// is refused (`GM_INVALID_ARGUMENT`). Any thread.
///
/// The payload must match the type's wire schema (what the server would otherwise drop,
/// leaving a hole in the sequence): else `GM_INVALID_ARGUMENT`, nothing sent.
///
/// # Safety
/// Handles are live (`run` may be NULL); text pointers point to their lengths' bytes.
#[no_mangle]
pub unsafe extern "C" fn gm_session_emit(
    session: *const gm_session,
    run: *const gm_run,
    event_type: *const c_char,
    type_len: usize,
    payload_json: *const c_char,
    payload_len: usize,
) -> *mut gm_error {
    guard(|| {
        let s = handle(session, "session")?;
        let t = required_text(event_type, type_len, "type")?;
        let payload = json_value(payload_json, payload_len, "payload")?
            .unwrap_or_else(|| Value::Object(Map::new()));
        graphmind_core::session::check_emit(t, &payload)
            .map_err(|e| err(gm_code::GM_INVALID_ARGUMENT, e.to_string()))?;
        live(s, run)?;
        s.session.emit(run_id(run), t, payload);
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------
// Gates and decisions
// ---------------------------------------------------------------------------------------

/// Where in a node's life a gate sits.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum gm_point {
    /// Before the node runs.
    GM_POINT_BEFORE = 0,
    /// After it returned.
    GM_POINT_AFTER = 1,
    /// After it failed.
    GM_POINT_ERROR = 2,
}

/// How the debugger released a gate.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum gm_action {
    /// Go on.
    GM_ACTION_CONTINUE = 0,
    /// Run the step again.
    GM_ACTION_RETRY = 1,
    /// Use the injected output instead.
    GM_ACTION_INJECT = 2,
    /// Abort the run (its signal is already aborted).
    GM_ACTION_ABORT = 3,
}

/// A gate: either nothing holds (`gm_gate_is_held` false: wait returns `continue` at once)
/// or a debugger holds the step until it decides. One thread waits on a gate at a time.
pub struct gm_gate {
    session: Session,
    pending: Option<PendingGate>,
    pause_id: Option<NulText>,
    decided: bool,
}

impl gm_gate {
    fn new(session: &Session, gate: Gate) -> gm_gate {
        match gate {
            Gate::Continue => gm_gate {
                session: session.clone(),
                pending: None,
                pause_id: None,
                decided: true,
            },
            Gate::Held(p) => {
                let id = NulText::new(p.pause_id());
                gm_gate {
                    session: session.clone(),
                    pending: Some(p),
                    pause_id: Some(id),
                    decided: false,
                }
            }
        }
    }
}

/// A gate's decision: an action, and an injected output / an edited input (JSON).
pub struct gm_decision {
    decision: GateDecision,
}

/// The gate at `point` of `node` in `run` (NULL: implicit run). `editable` offers the pause
/// as input-editable, merging edits into `live_input_json` (JSON or NULL). `*out` receives
/// a gate, freed by `gm_gate_free` (or consumed by `gm_gate_on_decision`). `point` is a
/// `gm_point` value (any other is `GM_INVALID_ARGUMENT`). Any thread.
///
/// Refused: `GM_INVALID_STATE` after `gm_session_dispose` or into a finished run (nothing
/// recorded); see docs/c.md, "What an invalid call returns".
///
/// # Safety
/// Handles are live (`run` may be NULL); `live_input_json` points to `len` bytes or is NULL.
#[no_mangle]
pub unsafe extern "C" fn gm_session_gate(
    session: *const gm_session,
    run: *const gm_run,
    point: i32,
    node: *const gm_node,
    editable: bool,
    live_input_json: *const c_char,
    live_input_len: usize,
    out: *mut *mut gm_gate,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let s = handle(session, "session")?;
        let n = handle(node, "node")?;
        let live_input = json_value(live_input_json, live_input_len, "live_input")?;
        let point = match gm_point::from_c(point, "point")? {
            gm_point::GM_POINT_BEFORE => PausePoint::Before,
            gm_point::GM_POINT_AFTER => PausePoint::After,
            gm_point::GM_POINT_ERROR => PausePoint::Error,
        };
        live(s, run)?;
        let gate = s.session.gate(
            run_id(run),
            point,
            &n.node.gate_node(),
            GateOptions {
                editable,
                live_input,
                // the raw C gate carries no result: no smart rule is consulted
                result: None,
                input_schema: None,
            },
        );
        put(
            out,
            Box::into_raw(Box::new(gm_gate::new(&s.session, gate))),
            "out",
        )
    })
}

/// Whether a debugger holds this gate (false: the fast path, nothing to wait for).
///
/// # Safety
/// `gate` is NULL (false) or a live gate.
#[no_mangle]
pub unsafe extern "C" fn gm_gate_is_held(gate: *const gm_gate) -> bool {
    guard_value(false, || gate.as_ref().is_some_and(|g| g.pending.is_some()))
}

/// The pause id the debugger resumes (borrowed from `gate`); `{NULL, 0}` when not held.
///
/// # Safety
/// `gate` is a live gate.
#[no_mangle]
pub unsafe extern "C" fn gm_gate_pause_id(gate: *const gm_gate) -> gm_str {
    guard_value(
        gm_str {
            ptr: std::ptr::null(),
            len: 0,
        },
        || match gate.as_ref().and_then(|g| g.pause_id.as_ref()) {
            None => gm_str {
                ptr: std::ptr::null(),
                len: 0,
            },
            Some(id) => id.view(),
        },
    )
}

/// Blocks up to `timeout_ms` (`GM_WAIT_FOREVER`: no limit) for the decision, woken by the
/// releasing thread (no polling). On a decision `*out` receives it (free with
/// `gm_decision_free`); on timeout `*out` is NULL and the gate is still held: wait again,
/// or free the gate to release it with `continue`. A gate not held decides `continue` at
/// once. One waiter per gate; any thread.
///
/// # Safety
/// `gate` is a live gate; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_gate_wait(
    gate: *mut gm_gate,
    timeout_ms: u64,
    out: *mut *mut gm_decision,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let g = handle_mut(gate, "gate")?;
        if out.is_null() {
            return Err(err(gm_code::GM_NULL_ARGUMENT, "out: NULL"));
        }
        out.write(std::ptr::null_mut());
        let decision = match &g.pending {
            None => Some(GateDecision::proceed()),
            Some(p) => p.wait_timeout(ms(timeout_ms)),
        };
        if let Some(decision) = decision {
            g.decided = true;
            out.write(Box::into_raw(Box::new(gm_decision { decision })));
        }
        Ok(())
    })
}

/// Called once with the decision, which the callee owns (free it with `gm_decision_free`).
pub type gm_decision_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, decision: *mut gm_decision)>;

/// The callback form: consumes `gate` (do not use or free it afterwards) and calls
/// `callback(user_data, decision)` once: on the thread that releases the gate (the
/// library's reader thread, or a `gm_session_dispose` caller), or at once on this thread
/// when nothing holds or it was already released. The callback must not block for long.
///
/// # Safety
/// `gate` is a live gate; `user_data` must be usable from any thread until the callback.
#[no_mangle]
pub unsafe extern "C" fn gm_gate_on_decision(
    gate: *mut gm_gate,
    callback: gm_decision_fn,
    user_data: *mut c_void,
) -> *mut gm_error {
    guard(|| {
        if gate.is_null() {
            return Err(err(gm_code::GM_NULL_ARGUMENT, "gate: NULL"));
        }
        let Some(cb) = callback else {
            return Err(err(gm_code::GM_NULL_ARGUMENT, "callback: NULL"));
        };
        let mut g = Box::from_raw(gate);
        g.decided = true;
        let ud = SendPtr(user_data);
        let deliver = move |decision: GateDecision| {
            let ud = ud;
            let d = Box::into_raw(Box::new(gm_decision { decision }));
            let _ = catch_unwind(AssertUnwindSafe(|| cb(ud.0, d)));
        };
        match g.pending.take() {
            None => deliver(GateDecision::proceed()),
            Some(p) => p.on_decision(deliver),
        }
        Ok(())
    })
}

/// Frees a gate. A gate still held whose decision nobody took is released with `continue`
/// (a waiter that went away). Accepts NULL.
///
/// # Safety
/// `gate` is NULL or a gate from this library, not yet freed or consumed.
#[no_mangle]
pub unsafe extern "C" fn gm_gate_free(gate: *mut gm_gate) {
    guard_value((), || {
        if !gate.is_null() {
            let g = Box::from_raw(gate);
            if !g.decided {
                if let Some(id) = &g.pause_id {
                    g.session.discard_gate(id.as_str());
                }
            }
        }
    })
}

/// The decision's action.
///
/// # Safety
/// `decision` is a live decision.
#[no_mangle]
pub unsafe extern "C" fn gm_decision_action(decision: *const gm_decision) -> gm_action {
    guard_value(gm_action::GM_ACTION_CONTINUE, || {
        match decision.as_ref().map(|d| d.decision.action) {
            Some(ResumeAction::Retry) => gm_action::GM_ACTION_RETRY,
            Some(ResumeAction::Inject) => gm_action::GM_ACTION_INJECT,
            Some(ResumeAction::Abort) => gm_action::GM_ACTION_ABORT,
            _ => gm_action::GM_ACTION_CONTINUE,
        }
    })
}

unsafe fn optional_json_out(value: Option<&Value>, out: *mut gm_string) -> bool {
    if out.is_null() {
        return false;
    }
    match value {
        Some(v) => {
            out.write(gm_string::from_string(json::to_string(v)));
            true
        }
        None => {
            out.write(gm_string::empty());
            false
        }
    }
}

/// The injected output (`inject`) as JSON text into `*out` (free with `gm_string_free`);
/// returns false and leaves `*out` empty when there is none.
///
/// # Safety
/// `decision` is a live decision; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_decision_output(
    decision: *const gm_decision,
    out: *mut gm_string,
) -> bool {
    guard_value(false, || {
        optional_json_out(
            decision.as_ref().and_then(|d| d.decision.output.as_ref()),
            out,
        )
    })
}

/// The accepted edited input as JSON text into `*out` (free with `gm_string_free`);
/// returns false and leaves `*out` empty when there is none.
///
/// # Safety
/// `decision` is a live decision; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_decision_input(
    decision: *const gm_decision,
    out: *mut gm_string,
) -> bool {
    guard_value(false, || {
        optional_json_out(
            decision.as_ref().and_then(|d| d.decision.input.as_ref()),
            out,
        )
    })
}

/// Frees a decision. Accepts NULL.
///
/// # Safety
/// `decision` is NULL or a decision from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gm_decision_free(decision: *mut gm_decision) {
    guard_value((), || {
        if !decision.is_null() {
            drop(Box::from_raw(decision));
        }
    })
}

// ---------------------------------------------------------------------------------------
// Step: the state machine of one gated call
// ---------------------------------------------------------------------------------------

/// One gated call (a tool, a span) in flight: `node.started` was emitted; drive it with
/// `gm_step_before` / `gm_step_on_before`, then `gm_step_after` / `gm_step_on_after` or
/// `gm_step_error` / `gm_step_on_error`. Used by one thread at a time. Freeing an unfinished
/// step records the call as aborted.
pub struct gm_step {
    step: Step,
    session: Session,
    instance_id: NulText,
}

/// What the wrapper does next (`gm_next.kind`): the core's codes
/// (`graphmind_core::surface::next_code`), checked at compile time.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum gm_next_kind {
    /// Call the function; with `value` (JSON) as its input when not NULL (an accepted edit).
    GM_NEXT_RUN = 0,
    /// Return the function's own result (it has been recorded).
    GM_NEXT_RETURN_RESULT = 1,
    /// Return `value` (JSON) instead of calling / of the result / of the error.
    GM_NEXT_RETURN_INJECTED = 2,
    /// Fail with the function's original error.
    GM_NEXT_RERAISE = 3,
    /// The run was aborted: stop and fail with an abort error.
    GM_NEXT_ABORT = 4,
}

// The C values are the core's encoding ([`next_code`]) for the five moves the C ABI has.
const _: () = {
    use graphmind_core::surface::next_code;
    assert!(gm_next_kind::GM_NEXT_RUN as u8 == next_code::RUN);
    assert!(gm_next_kind::GM_NEXT_RETURN_RESULT as u8 == next_code::RETURN_RESULT);
    assert!(gm_next_kind::GM_NEXT_RETURN_INJECTED as u8 == next_code::RETURN_INJECTED);
    assert!(gm_next_kind::GM_NEXT_RERAISE as u8 == next_code::RERAISE);
    assert!(gm_next_kind::GM_NEXT_ABORT as u8 == next_code::ABORT);
};

/// A step's next move: `kind`, and `value` (JSON text owned by the caller, free with
/// `gm_string_free(&next.value)`; NULL when the kind carries none).
#[repr(C)]
#[derive(Debug)]
pub struct gm_next {
    /// What to do.
    pub kind: gm_next_kind,
    /// The edited input (`GM_NEXT_RUN`) or injected value (`GM_NEXT_RETURN_INJECTED`), or NULL.
    pub value: gm_string,
}

fn next_out(next: Next) -> gm_next {
    match next {
        Next::Run { input } => gm_next {
            kind: gm_next_kind::GM_NEXT_RUN,
            value: input.map_or_else(gm_string::empty, |v| {
                gm_string::from_string(json::to_string(&v))
            }),
        },
        Next::ReturnResult => gm_next {
            kind: gm_next_kind::GM_NEXT_RETURN_RESULT,
            value: gm_string::empty(),
        },
        Next::ReturnInjected(v) => gm_next {
            kind: gm_next_kind::GM_NEXT_RETURN_INJECTED,
            value: gm_string::from_string(json::to_string(&v)),
        },
        Next::Reraise => gm_next {
            kind: gm_next_kind::GM_NEXT_RERAISE,
            value: gm_string::empty(),
        },
        Next::Abort => gm_next {
            kind: gm_next_kind::GM_NEXT_ABORT,
            value: gm_string::empty(),
        },
        // Replay's answers, not produced for the C ABI yet (config::REPLAY_FLAVORS).
        Next::Raise(_) => gm_next {
            kind: gm_next_kind::GM_NEXT_RERAISE,
            value: gm_string::empty(),
        },
        Next::Stream(chunks) => gm_next {
            kind: gm_next_kind::GM_NEXT_RETURN_INJECTED,
            value: gm_string::from_string(json::to_string(&Value::Array(chunks))),
        },
    }
}

/// Starts a gated call of node `kind`/`name` in `run` (NULL: implicit run) under the parent
/// instance `parent_id` (or NULL), with `input_json` (or NULL); `editable` offers its pauses
/// as input-editable (tool arguments). Emits `node.started`. `*out` receives the step,
/// freed by `gm_step_free`.
///
/// Refused: `GM_INVALID_STATE` after `gm_session_dispose` or into a finished run (nothing
/// recorded); see docs/c.md, "What an invalid call returns".
///
/// # Safety
/// Handles are live (`run` may be NULL); text pointers point to their lengths' bytes or are NULL.
#[no_mangle]
pub unsafe extern "C" fn gm_step_start(
    session: *const gm_session,
    run: *const gm_run,
    kind: *const c_char,
    kind_len: usize,
    name: *const c_char,
    name_len: usize,
    parent_id: *const c_char,
    parent_id_len: usize,
    input_json: *const c_char,
    input_len: usize,
    editable: bool,
    out: *mut *mut gm_step,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let s = handle(session, "session")?;
        let kind = node_kind(kind, kind_len)?;
        let name = required_text(name, name_len, "name")?;
        let parent = text(parent_id, parent_id_len, "parent_id")?;
        let input = json_host_value(input_json, input_len, "input", &s.session)?;
        live(s, run)?;
        let step = Step::start_host(
            &s.session,
            run_id(run),
            NodeRef::new(kind, name),
            parent,
            input,
            editable,
        );
        out.write(Box::into_raw(Box::new(gm_step {
            instance_id: NulText::new(&step.node().instance_id),
            step,
            session: s.session.clone(),
        })));
        Ok(())
    })
}

/// The step's instance id (`inst_…`, the parent id of nested calls), borrowed from `step`.
///
/// # Safety
/// `step` is a live step.
#[no_mangle]
pub unsafe extern "C" fn gm_step_instance_id(step: *const gm_step) -> gm_str {
    guard_value(
        gm_str {
            ptr: std::ptr::null(),
            len: 0,
        },
        || match step.as_ref() {
            None => gm_str {
                ptr: std::ptr::null(),
                len: 0,
            },
            Some(s) => s.instance_id.view(),
        },
    )
}

fn step_session(step: &gm_step) -> Session {
    // The step's gates belong to its session; the gate handle keeps a clone for discard.
    step.session.clone()
}

/// The gate before the function runs (`*out`, freed by `gm_step`-independent `gm_gate_free`).
///
/// Out of order (see docs/c.md: before, its decision, after or error, its decision; a
/// retry goes back to the function or the before gate): `GM_INVALID_STATE`, nothing recorded.
///
/// # Safety
/// `step` is a live step; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_step_before(
    step: *const gm_step,
    out: *mut *mut gm_gate,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let st = handle(step, "step")?;
        st.step.check(StepCall::Before).map_err(misuse)?;
        let gate = st.step.before();
        put(
            out,
            Box::into_raw(Box::new(gm_gate::new(&step_session(st), gate))),
            "out",
        )
    })
}

/// What the `before` decision means: `*out` says run (maybe with an edited input), return an
/// injected value, or abort.
///
/// Out of order (see docs/c.md: before, its decision, after or error, its decision; a
/// retry goes back to the function or the before gate): `GM_INVALID_STATE`, nothing recorded.
///
/// # Safety
/// `step`/`decision` are live; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_step_on_before(
    step: *mut gm_step,
    decision: *const gm_decision,
    out: *mut gm_next,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let st = handle_mut(step, "step")?;
        let d = handle(decision, "decision")?.decision.clone();
        st.step.check(StepCall::OnBefore).map_err(misuse)?;
        put(out, next_out(st.step.on_before(d)), "out")
    })
}

/// The gate after the function returned.
///
/// Out of order (see docs/c.md: before, its decision, after or error, its decision; a
/// retry goes back to the function or the before gate): `GM_INVALID_STATE`, nothing recorded.
///
/// # Safety
/// `step` is a live step; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_step_after(
    step: *const gm_step,
    out: *mut *mut gm_gate,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let st = handle(step, "step")?;
        st.step.check(StepCall::After).map_err(misuse)?;
        let gate = st.step.after();
        put(
            out,
            Box::into_raw(Box::new(gm_gate::new(&step_session(st), gate))),
            "out",
        )
    })
}

/// What the `after` decision means, given the function's `output_json` (or NULL): return the
/// result, return an injected value, run again (retry), or abort.
///
/// Out of order (see docs/c.md: before, its decision, after or error, its decision; a
/// retry goes back to the function or the before gate): `GM_INVALID_STATE`, nothing recorded.
///
/// # Safety
/// `step`/`decision` are live; `output_json` points to `len` bytes or is NULL; `out` valid.
#[no_mangle]
pub unsafe extern "C" fn gm_step_on_after(
    step: *mut gm_step,
    decision: *const gm_decision,
    output_json: *const c_char,
    output_len: usize,
    out: *mut gm_next,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let st = handle_mut(step, "step")?;
        let d = handle(decision, "decision")?.decision.clone();
        let output = json_host_value(output_json, output_len, "output", &st.session)?;
        st.step.check(StepCall::OnAfter).map_err(misuse)?;
        put(out, next_out(st.step.on_after_host(d, output)), "out")
    })
}

/// The function failed: records `node.error` (`name`, `message`, optional `stack`) and gives
/// the `error` gate in `*out`. Not for aborts or interrupts (`gm_step_on_ungated_error`).
///
/// Out of order (see docs/c.md: before, its decision, after or error, its decision; a
/// retry goes back to the function or the before gate): `GM_INVALID_STATE`, nothing recorded.
///
/// # Safety
/// `step` is live; text pointers point to their lengths' bytes or are NULL; `out` valid.
#[no_mangle]
pub unsafe extern "C" fn gm_step_error(
    step: *mut gm_step,
    name: *const c_char,
    name_len: usize,
    message: *const c_char,
    message_len: usize,
    stack: *const c_char,
    stack_len: usize,
    out: *mut *mut gm_gate,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let st = handle_mut(step, "step")?;
        let info = error_info(name, name_len, message, message_len, stack, stack_len)?;
        st.step.check(StepCall::Error).map_err(misuse)?;
        let gate = st.step.error(info);
        out.write(Box::into_raw(Box::new(gm_gate::new(
            &step_session(st),
            gate,
        ))));
        Ok(())
    })
}

/// What the `error` decision means: re-raise, return an injected value, run again, or abort.
///
/// Out of order (see docs/c.md: before, its decision, after or error, its decision; a
/// retry goes back to the function or the before gate): `GM_INVALID_STATE`, nothing recorded.
///
/// # Safety
/// `step`/`decision` are live; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_step_on_error(
    step: *mut gm_step,
    decision: *const gm_decision,
    out: *mut gm_next,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let st = handle_mut(step, "step")?;
        let d = handle(decision, "decision")?.decision.clone();
        st.step.check(StepCall::OnError).map_err(misuse)?;
        put(out, next_out(st.step.on_error(d)), "out")
    })
}

/// The function failed in a way never held (an abort, an interrupt): the call ends
/// `aborted` (when `aborted`) or `error`; `*out` is `GM_NEXT_RERAISE`.
///
/// Out of order (see docs/c.md: before, its decision, after or error, its decision; a
/// retry goes back to the function or the before gate): `GM_INVALID_STATE`, nothing recorded.
///
/// # Safety
/// `step` is live; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_step_on_ungated_error(
    step: *mut gm_step,
    aborted: bool,
    out: *mut gm_next,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let st = handle_mut(step, "step")?;
        st.step.check(StepCall::UngatedError).map_err(misuse)?;
        put(out, next_out(st.step.on_ungated_error(aborted)), "out")
    })
}

/// Frees a step; an unfinished one is recorded as aborted. Accepts NULL.
///
/// # Safety
/// `step` is NULL or a step from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gm_step_free(step: *mut gm_step) {
    guard_value((), || {
        if !step.is_null() {
            drop(Box::from_raw(step));
        }
    })
}

// ---------------------------------------------------------------------------------------
// Pure functions: canonical JSON, fingerprint, shrink
// ---------------------------------------------------------------------------------------

unsafe fn ignore_list(json_ptr: *const c_char, len: usize) -> R<Option<Vec<String>>> {
    match json_value(json_ptr, len, "ignore_keys")? {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_js_str()
                    .map(|s| s.to_string_lossy().into_owned())
                    .ok_or_else(|| {
                        err(
                            gm_code::GM_INVALID_ARGUMENT,
                            "ignore_keys: not an array of strings",
                        )
                    })
            })
            .collect::<R<Vec<_>>>()
            .map(Some),
        Some(_) => Err(err(
            gm_code::GM_INVALID_ARGUMENT,
            "ignore_keys: not a JSON array",
        )),
    }
}

/// The canonical JSON (sorted keys by UTF-16 units, ECMAScript numbers, `_meta` removed) of
/// the JSON text `json` into `*out` (free with `gm_string_free`). Pure; any thread.
///
/// # Safety
/// `json` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_canonical_json(
    json: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let text = bytes(json, len).ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, "json: NULL"))?;
        let canonical = canonical::canonical_json_text(text, canonical::DEFAULT_IGNORE_KEYS)
            .map_err(|e| err(gm_code::GM_INVALID_JSON, format!("json: {e}")))?;
        put(out, gm_string::from_string(canonical), "out")
    })
}

/// The canonical text a fingerprint hashes: `[nodeId, input]` for `node_id` (UTF-8/WTF-8)
/// and `input_json` (NULL: absent, written `null`), removing `ignore_keys_json` (a JSON array
/// of strings; NULL: the default `["_meta"]`). Pure; any thread.
///
/// # Safety
/// Text pointers point to their lengths' bytes or are NULL; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_canonical_call(
    node_id: *const c_char,
    node_id_len: usize,
    input_json: *const c_char,
    input_len: usize,
    ignore_keys_json: *const c_char,
    ignore_len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let id = js_text(node_id, node_id_len, "node_id")?
            .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, "node_id: NULL"))?;
        let input = json_value(input_json, input_len, "input")?;
        let ignore = ignore_list(ignore_keys_json, ignore_len)?;
        let keys: Vec<&str> = match &ignore {
            Some(list) => list.iter().map(String::as_str).collect(),
            None => canonical::DEFAULT_IGNORE_KEYS.to_vec(),
        };
        put(
            out,
            gm_string::from_string(canonical::canonical_call_js(&id, input.as_ref(), &keys)),
            "out",
        )
    })
}

/// The loop guard's fingerprint (32 lowercase hex digits) of a call of `node_id` with
/// `input_json` (NULL: absent), removing `ignore_keys_json` (NULL: `["_meta"]`). Pure; any thread.
///
/// # Safety
/// Text pointers point to their lengths' bytes or are NULL; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_fingerprint(
    node_id: *const c_char,
    node_id_len: usize,
    input_json: *const c_char,
    input_len: usize,
    ignore_keys_json: *const c_char,
    ignore_len: usize,
    out: *mut gm_string,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let id = js_text(node_id, node_id_len, "node_id")?
            .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, "node_id: NULL"))?;
        let ignore = ignore_list(ignore_keys_json, ignore_len)?;
        let keys: Vec<&str> = match &ignore {
            Some(list) => list.iter().map(String::as_str).collect(),
            None => canonical::DEFAULT_IGNORE_KEYS.to_vec(),
        };
        // From the text: tokens already canonical are hashed as they stand (no parse).
        let digest = fingerprint::fingerprint_text_js(&id, bytes(input_json, input_len), &keys)
            .map_err(|e| err(gm_code::GM_INVALID_JSON, format!("input: {e}")))?;
        put(out, gm_string::from_string(digest), "out")
    })
}

/// The byte budget of one payload when none is given (`MAX_PAYLOAD_BYTES`).
#[no_mangle]
pub extern "C" fn gm_max_payload_bytes() -> usize {
    shrink::MAX_PAYLOAD_BYTES
}

/// A shrunk payload: the JSON text to send (caller-owned, free with
/// `gm_string_free(&s.json)`), whether it was shrunk, and the original's UTF-8 size.
#[repr(C)]
#[derive(Debug)]
pub struct gm_serialized {
    /// The JSON text (JSON.stringify's spelling).
    pub json: gm_string,
    /// Whether the payload had to be shrunk.
    pub truncated: bool,
    /// UTF-8 bytes of the original payload's JSON.
    pub original_bytes: usize,
}

/// Serializes the payload `json` within `max_bytes` (0: `MAX_PAYLOAD_BYTES`) as the event
/// type `event_type` (NULL: none) would be, shrinking it by the reference's tiers. Pure;
/// any thread.
///
/// # Safety
/// Text pointers point to their lengths' bytes or are NULL; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_serialize_payload(
    json: *const c_char,
    len: usize,
    max_bytes: usize,
    event_type: *const c_char,
    type_len: usize,
    out: *mut gm_serialized,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let v = json_value(json, len, "json")?
            .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, "json: NULL"))?;
        let t = text(event_type, type_len, "event_type")?;
        let max = if max_bytes == 0 {
            shrink::MAX_PAYLOAD_BYTES
        } else {
            max_bytes
        };
        let s = shrink::serialize_payload(&v, max, t);
        put(
            out,
            gm_serialized {
                json: gm_string::from_string(s.json),
                truncated: s.truncated,
                original_bytes: s.original_bytes,
            },
            "out",
        )
    })
}
