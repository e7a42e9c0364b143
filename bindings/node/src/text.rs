//! JSON text from JavaScript, read without the copies napi-rs's `String` makes.
//!
//! `String`'s conversion measures the UTF-8 length (one pass over the string), writes it
//! (a second pass) into a fresh allocation and validates it (a third). Values cross as
//! JSON text on every wrapped call, so the binding reads them into a buffer it reuses:
//! the UTF-16 length (O(1) in V8) bounds the UTF-8 length by 3x, and V8 writes once.
//! No validation is needed: V8 writes well-formed UTF-8 (a lone surrogate, which
//! `JSON.stringify` never leaves unescaped anyway, would become U+FFFD), and the core's
//! parser takes bytes.

use graphmind_core::host_value::HostValue;
use graphmind_core::json::{self, Value};
use napi::bindgen_prelude::*;
use napi::{sys, JsString, JsValue};
use std::cell::RefCell;

/// Buffers above this size are not kept between calls (a rare huge payload does not pin
/// its memory for the session's lifetime).
const KEEP_BYTES: usize = 1 << 20;

/// Reads `s`'s UTF-8 bytes into `buf` (cleared first).
pub(crate) fn read_utf8(s: &JsString<'_>, buf: &mut Vec<u8>) -> Result<()> {
    let v = s.value();
    let mut units = 0usize;
    // SAFETY: `v` is a live JavaScript value of this call's scope; a null buffer asks only
    // for the length in UTF-16 units.
    let status = unsafe { sys::napi_get_value_string_utf16(v.env, v.value, std::ptr::null_mut(), 0, &mut units) };
    if status != sys::Status::napi_ok {
        return Err(Error::new(Status::StringExpected, "graphmind: expected JSON text (a string)"));
    }
    buf.clear();
    let cap = units * 3 + 1;
    if buf.capacity() > KEEP_BYTES && cap <= KEEP_BYTES {
        *buf = Vec::new();
    }
    buf.reserve(cap);
    let mut written = 0usize;
    // SAFETY: the buffer has room for `cap` bytes, enough for any string of `units` UTF-16
    // units (each unit is at most 3 UTF-8 bytes) plus the terminating NUL napi writes.
    let status = unsafe { sys::napi_get_value_string_utf8(v.env, v.value, buf.as_mut_ptr().cast(), cap, &mut written) };
    if status != sys::Status::napi_ok {
        return Err(Error::new(Status::StringExpected, "graphmind: could not read JSON text"));
    }
    // SAFETY: napi wrote `written` initialised bytes (without the NUL) at the start of `buf`.
    unsafe { buf.set_len(written.min(cap - 1)) };
    Ok(())
}

/// Parses JSON text handed over from JavaScript with the core's parser.
pub(crate) fn parse_js(s: &JsString<'_>, buf: &mut Vec<u8>) -> Result<Value> {
    read_utf8(s, buf)?;
    json::parse_value_text(buf).map_err(|e| Error::from_reason(format!("graphmind: invalid JSON from the binding: {e}")))
}

/// [`parse_js`] of an optional text (`null`/`undefined`: absent).
pub(crate) fn parse_js_opt(s: Option<&JsString<'_>>, buf: &mut Vec<u8>) -> Result<Option<Value>> {
    s.map(|s| parse_js(s, buf)).transpose()
}

/// An optional JSON text as the core takes it from a binding: the bytes only, parsed by the
/// session's worker while no debugger is attached (no parse on the JavaScript thread).
/// V8 writes into the reused `buf` (sized for the worst case, 3 bytes per UTF-16 unit);
/// the core gets an exact-size copy, so a call allocates ~1x its text, not 3x, in memory
/// the worker frees. Every caller passes `JSON.stringify`'s text (index.js `toJson`), which
/// is the core's own compact spelling: [`HostValue::Stringified`], so the worker can send
/// it as it is.
pub(crate) fn host_text_opt(s: Option<&JsString<'_>>, buf: &mut Vec<u8>) -> Result<Option<HostValue>> {
    s.map(|s| {
        read_utf8(s, buf)?;
        Ok(HostValue::Stringified(buf.as_slice().to_vec()))
    })
    .transpose()
}

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with `s`'s UTF-8 bytes, read into the JS thread's own buffer (for the pure
/// functions).
pub(crate) fn with_js_text<T>(s: &JsString<'_>, f: impl FnOnce(&[u8]) -> T) -> Result<T> {
    let run = |buf: &mut Vec<u8>| {
        read_utf8(s, buf)?;
        Ok(f(buf))
    };
    SCRATCH.with(|b| match b.try_borrow_mut() {
        Ok(mut buf) => run(&mut buf),
        Err(_) => run(&mut Vec::new()),
    })
}

