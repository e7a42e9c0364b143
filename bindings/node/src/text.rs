//! JSON text from JavaScript, read without the copies napi-rs's `String` makes.
//!
//! `String`'s conversion measures the UTF-8 length (one pass over the string), writes it
//! (a second pass) into a fresh allocation and validates it (a third). Values cross as
//! JSON text on every wrapped call, so the binding reads them into a buffer it reuses.
//! V8 hands the string over as UTF-16 (a copy of its characters, where its own UTF-8
//! writer flattens `JSON.stringify`'s rope into a new heap string first and then encodes
//! a character at a time, about a seventh of the JavaScript thread's time for a 1 KB
//! tool call), and [`utf16_to_utf8`] encodes it, runs of ASCII eight units at a time.
//! No validation is needed: the encoder writes well-formed UTF-8 (a lone surrogate, which
//! `JSON.stringify` never leaves unescaped anyway, becomes U+FFFD, as V8's writer does),
//! and the core's parser takes bytes.

use graphmind_core::host_value::HostValue;
use graphmind_core::json::{self, Value};
use napi::bindgen_prelude::*;
use napi::{sys, JsString, JsValue};
use std::cell::RefCell;

/// Buffers above this size are not kept between calls (a rare huge payload does not pin
/// its memory for the session's lifetime).
const KEEP_BYTES: usize = 1 << 20;

/// UTF-8 of U+FFFD, written for a lone surrogate.
const REPLACEMENT: [u8; 3] = [0xEF, 0xBF, 0xBD];

thread_local! {
    /// The JS thread's buffer for a string's UTF-16 units (reused across calls).
    static UNITS: RefCell<Vec<u16>> = const { RefCell::new(Vec::new()) };
}

/// Reads `s`'s UTF-8 bytes into `buf` (cleared first).
pub(crate) fn read_utf8(s: &JsString<'_>, buf: &mut Vec<u8>) -> Result<()> {
    UNITS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut units) => read_via_utf16(s, &mut units, buf),
        Err(_) => read_via_utf16(s, &mut Vec::new(), buf),
    })
}

fn read_via_utf16(s: &JsString<'_>, units: &mut Vec<u16>, buf: &mut Vec<u8>) -> Result<()> {
    let v = s.value();
    let mut len = 0usize;
    // SAFETY: `v` is a live JavaScript value of this call's scope; a null buffer asks only
    // for the length in UTF-16 units.
    let status = unsafe {
        sys::napi_get_value_string_utf16(v.env, v.value, std::ptr::null_mut(), 0, &mut len)
    };
    if status != sys::Status::napi_ok {
        return Err(Error::new(
            Status::StringExpected,
            "graphmind: expected JSON text (a string)",
        ));
    }
    units.clear();
    if units.capacity() > KEEP_BYTES / 2 && len <= KEEP_BYTES / 2 {
        *units = Vec::new();
    }
    units.reserve(len + 1);
    let mut written = 0usize;
    // SAFETY: the buffer has room for `len + 1` units: the string and the NUL napi writes.
    let status = unsafe {
        sys::napi_get_value_string_utf16(v.env, v.value, units.as_mut_ptr(), len + 1, &mut written)
    };
    if status != sys::Status::napi_ok {
        return Err(Error::new(
            Status::StringExpected,
            "graphmind: could not read JSON text",
        ));
    }
    // SAFETY: napi wrote `written` initialised units (without the NUL) at the start.
    unsafe { units.set_len(written.min(len)) };
    buf.clear();
    if buf.capacity() > KEEP_BYTES && units.len() * 3 <= KEEP_BYTES {
        *buf = Vec::new();
    }
    utf16_to_utf8(units, buf);
    Ok(())
}

/// Appends the UTF-8 encoding of `units` to `out`; a lone surrogate becomes U+FFFD.
pub(crate) fn utf16_to_utf8(units: &[u16], out: &mut Vec<u8>) {
    out.reserve(units.len() * 3);
    let mut i = 0;
    while i < units.len() {
        // A run of ASCII (the common case for JSON text): found sixteen units at a time,
        // then narrowed in one pass the compiler vectorizes.
        let rest = &units[i..];
        let mut run = 0;
        for chunk in rest.chunks_exact(16) {
            if chunk.iter().fold(0u16, |acc, u| acc | u) >= 0x80 {
                break;
            }
            run += 16;
        }
        run += rest[run..]
            .iter()
            .position(|&u| u >= 0x80)
            .unwrap_or(rest.len() - run);
        out.extend(rest[..run].iter().map(|&u| u as u8));
        i += run;
        let Some(&u) = units.get(i) else { break };
        i += 1;
        match u {
            0..=0x7F => out.push(u as u8),
            0x80..=0x7FF => {
                out.extend_from_slice(&[0xC0 | (u >> 6) as u8, 0x80 | (u & 0x3F) as u8])
            }
            0xD800..=0xDBFF => match units.get(i) {
                Some(&low @ 0xDC00..=0xDFFF) => {
                    i += 1;
                    let c = 0x10000 + (((u as u32) - 0xD800) << 10) + ((low as u32) - 0xDC00);
                    out.extend_from_slice(&[
                        0xF0 | (c >> 18) as u8,
                        0x80 | ((c >> 12) & 0x3F) as u8,
                        0x80 | ((c >> 6) & 0x3F) as u8,
                        0x80 | (c & 0x3F) as u8,
                    ]);
                }
                _ => out.extend_from_slice(&REPLACEMENT),
            },
            0xDC00..=0xDFFF => out.extend_from_slice(&REPLACEMENT),
            _ => out.extend_from_slice(&[
                0xE0 | (u >> 12) as u8,
                0x80 | ((u >> 6) & 0x3F) as u8,
                0x80 | (u & 0x3F) as u8,
            ]),
        }
    }
}

/// Parses JSON text handed over from JavaScript with the core's parser.
pub(crate) fn parse_js(s: &JsString<'_>, buf: &mut Vec<u8>) -> Result<Value> {
    read_utf8(s, buf)?;
    json::parse_value_text(buf)
        .map_err(|e| Error::from_reason(format!("graphmind: invalid JSON from the binding: {e}")))
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
pub(crate) fn host_text_opt(
    s: Option<&JsString<'_>>,
    buf: &mut Vec<u8>,
) -> Result<Option<HostValue>> {
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

/// The least a recorder does with a value's JSON text, for the benchmark's floor
/// (`bench/bench.js`): read it from JavaScript as a wrapped call does ([`read_utf8`]) and
/// write its bytes into a frame (an envelope's fixed head and tail around them), which is
/// what the session's worker does with a spliced value. Returns the frame's length.
#[napi_derive::napi]
pub fn frame_floor(text: JsString<'_>) -> Result<u32> {
    const HEAD: &[u8] = br#"{"v":1,"seq":1,"ts":1764900000000,"runId":"r","type":"node.started","payload":{"input":"#;
    with_js_text(&text, |bytes| {
        let mut frame = Vec::with_capacity(HEAD.len() + bytes.len() + 2);
        frame.extend_from_slice(HEAD);
        frame.extend_from_slice(bytes);
        frame.extend_from_slice(b"}}");
        std::hint::black_box(frame).len() as u32
    })
}
