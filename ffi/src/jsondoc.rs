//! A small read-only JSON document API, so C programs (the conformance runner, an SDK's
//! tests) read JSON that may hold lone surrogates with the core's own parser.

use crate::{bytes, err, gm_code, gm_error, gm_string, guard, guard_value, need, put, R};
use graphmind_core::json::{self, Value};
use std::ffi::c_char;

/// A parsed JSON document (immutable; any thread may read it).
pub struct gm_json_doc {
    root: Value,
}

/// A JSON value's type (`gm_json_doc_type`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum gm_json_type {
    /// The pointer names nothing.
    GM_JSON_MISSING = 0,
    /// `null`.
    GM_JSON_NULL = 1,
    /// `true` / `false`.
    GM_JSON_BOOL = 2,
    /// A number.
    GM_JSON_NUMBER = 3,
    /// A string.
    GM_JSON_STRING = 4,
    /// An array.
    GM_JSON_ARRAY = 5,
    /// An object.
    GM_JSON_OBJECT = 6,
}

/// Parses `len` bytes of JSON text (strict; lone surrogates kept) into `*out`, freed by
/// `gm_json_doc_free`.
///
/// # Safety
/// `text` points to `len` bytes; `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn gm_json_parse(
    text: *const c_char,
    len: usize,
    out: *mut *mut gm_json_doc,
) -> *mut gm_error {
    guard(|| {
        need(out, "out")?;
        let b = bytes(text, len).ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, "text: NULL"))?;
        let root = json::parse(b).map_err(|e| err(gm_code::GM_INVALID_JSON, e.to_string()))?;
        put(out, Box::into_raw(Box::new(gm_json_doc { root })), "out")
    })
}

/// Resolves an RFC 6901 JSON pointer (`""` is the root, `/a/0/b`).
fn lookup<'a>(root: &'a Value, pointer: &[u8]) -> R<Option<&'a Value>> {
    let pointer = std::str::from_utf8(pointer)
        .map_err(|_| err(gm_code::GM_INVALID_UTF8, "pointer: not UTF-8"))?;
    if pointer.is_empty() {
        return Ok(Some(root));
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(err(
            gm_code::GM_INVALID_ARGUMENT,
            "pointer: must be empty or start with '/'",
        ));
    };
    let mut at = root;
    for token in rest.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        let next = match at {
            Value::Object(map) => map.get(token.as_str()),
            Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        match next {
            Some(v) => at = v,
            None => return Ok(None),
        }
    }
    Ok(Some(at))
}

unsafe fn find<'a>(
    doc: *const gm_json_doc,
    pointer: *const c_char,
    len: usize,
) -> R<Option<&'a Value>> {
    let doc = doc
        .as_ref()
        .ok_or_else(|| err(gm_code::GM_NULL_ARGUMENT, "doc: NULL"))?;
    lookup(&doc.root, bytes(pointer, len).unwrap_or(b""))
}

/// The type of the value at `pointer` (NUL-free RFC 6901 text, `len` bytes; NULL: root).
///
/// # Safety
/// `doc` is a live document; `pointer` points to `len` bytes or is NULL.
#[no_mangle]
pub unsafe extern "C" fn gm_json_doc_type(
    doc: *const gm_json_doc,
    pointer: *const c_char,
    len: usize,
) -> gm_json_type {
    guard_value(gm_json_type::GM_JSON_MISSING, || {
        match find(doc, pointer, len) {
            Ok(Some(Value::Null)) => gm_json_type::GM_JSON_NULL,
            Ok(Some(Value::Bool(_))) => gm_json_type::GM_JSON_BOOL,
            Ok(Some(Value::Number(_))) => gm_json_type::GM_JSON_NUMBER,
            Ok(Some(Value::String(_))) => gm_json_type::GM_JSON_STRING,
            Ok(Some(Value::Array(_))) => gm_json_type::GM_JSON_ARRAY,
            Ok(Some(Value::Object(_))) => gm_json_type::GM_JSON_OBJECT,
            _ => gm_json_type::GM_JSON_MISSING,
        }
    })
}

/// The number of items (array) or members (object) at `pointer`; -1 for anything else.
///
/// # Safety
/// `doc` is a live document; `pointer` points to `len` bytes or is NULL.
#[no_mangle]
pub unsafe extern "C" fn gm_json_doc_len(
    doc: *const gm_json_doc,
    pointer: *const c_char,
    len: usize,
) -> i64 {
    guard_value(-1, || match find(doc, pointer, len) {
        Ok(Some(Value::Array(items))) => items.len() as i64,
        Ok(Some(Value::Object(map))) => map.len() as i64,
        _ => -1,
    })
}

/// The JSON text (JSON.stringify's spelling) of the value at `pointer` into `*out` (free with
/// `gm_string_free`); false (and `*out` empty) when the pointer names nothing.
///
/// # Safety
/// `doc` is a live document; `pointer` points to `len` bytes or is NULL; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn gm_json_doc_get(
    doc: *const gm_json_doc,
    pointer: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> bool {
    guard_value(false, || {
        if out.is_null() {
            return false;
        }
        match find(doc, pointer, len) {
            Ok(Some(v)) => {
                out.write(gm_string::from_string(json::to_string(v)));
                true
            }
            _ => {
                out.write(gm_string::empty());
                false
            }
        }
    })
}

/// The string at `pointer` as raw WTF-8 bytes (UTF-8 unless it holds a lone surrogate) into
/// `*out` (free with `gm_string_free`); false when it is not a string.
///
/// # Safety
/// `doc` is a live document; `pointer` points to `len` bytes or is NULL; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn gm_json_doc_get_str(
    doc: *const gm_json_doc,
    pointer: *const c_char,
    len: usize,
    out: *mut gm_string,
) -> bool {
    guard_value(false, || {
        if out.is_null() {
            return false;
        }
        match find(doc, pointer, len) {
            Ok(Some(Value::String(s))) => {
                out.write(gm_string::from_bytes(s.as_bytes().to_vec()));
                true
            }
            _ => {
                out.write(gm_string::empty());
                false
            }
        }
    })
}

/// The key of member `index` (in document order) of the object at `pointer`, as WTF-8 into
/// `*out` (free with `gm_string_free`); false when there is none.
///
/// # Safety
/// `doc` is a live document; `pointer` points to `len` bytes or is NULL; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn gm_json_doc_key(
    doc: *const gm_json_doc,
    pointer: *const c_char,
    len: usize,
    index: usize,
    out: *mut gm_string,
) -> bool {
    guard_value(false, || {
        if out.is_null() {
            return false;
        }
        match find(doc, pointer, len) {
            Ok(Some(Value::Object(map))) if index < map.len() => {
                let key = map
                    .iter()
                    .nth(index)
                    .map(|(k, _)| k.as_bytes().to_vec())
                    .unwrap_or_default();
                out.write(gm_string::from_bytes(key));
                true
            }
            _ => {
                out.write(gm_string::empty());
                false
            }
        }
    })
}

/// Frees a document. Accepts NULL.
///
/// # Safety
/// `doc` is NULL or a document from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gm_json_doc_free(doc: *mut gm_json_doc) {
    guard_value((), || {
        if !doc.is_null() {
            drop(Box::from_raw(doc));
        }
    })
}
