//! Python values <-> the core's JSON [`Value`].
//!
//! JSON-shaped values map one to one (`str` keeps lone surrogates through UTF-16, `int`
//! beyond 64 bits becomes `Number::BigInt`, floats stay floats: NaN and infinities are
//! written `null` by the core's writer). Anything else follows graphmind-ai 0.5.1's
//! fallback (`protocol._fallback`): `model_dump()` / `dict()` / `to_dict()`, a set as a
//! list, bytes decoded as UTF-8 with replacement, else `repr()` cut to 2000 characters.
//! A value whose reading raises (or a cycle) is reported as [`Unreadable`]; the caller
//! decides what the event carries then, and no exception reaches the app.

use graphmind_core::json::packed::{PackedWriter, MAX_PACKED_DEPTH};
use graphmind_core::json::{JsStr, Map, Number, Value};
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PySlice,
    PyString, PyTuple,
};
use pyo3::Borrowed;

/// How deep a host value may nest before it counts as a cycle (the core parser's limit).
pub const MAX_DEPTH: usize = graphmind_core::json::MAX_JSON_DEPTH;

/// How many characters of `repr()` a non-JSON value keeps (the reference's cut).
pub const REPR_CHARS: usize = 2000;

/// The methods tried, in order, on a value JSON cannot write (the reference's order).
const DUMP_METHODS: [&str; 3] = ["model_dump", "dict", "to_dict"];

/// A value could not be read without raising (or held a cycle).
#[derive(Debug)]
pub struct Unreadable;

// `PyUnicode_AsUTF8AndSize` is in the limited API from 3.10 on only, but every CPython 3
// exports it with this signature; pyo3 hides it under `abi3-py39`. On Windows an abi3
// module links `python3.dll`, which lists it only from 3.10, so it is not used there.
#[cfg(not(windows))]
extern "C" {
    fn PyUnicode_AsUTF8AndSize(
        unicode: *mut pyo3::ffi::PyObject,
        size: *mut pyo3::ffi::Py_ssize_t,
    ) -> *const std::os::raw::c_char;
}

/// The UTF-8 text of a `str` without an intermediate `bytes` object: CPython hands out a
/// compact ASCII string's own buffer (and caches the UTF-8 of any other). `None` when the
/// string holds a lone surrogate (the raised `UnicodeEncodeError` is cleared).
#[cfg(not(windows))]
fn utf8_of<'a>(s: &'a Bound<'_, PyString>) -> Option<&'a str> {
    let mut size: pyo3::ffi::Py_ssize_t = 0;
    // SAFETY: `s` is a live `str` and the GIL is held; the returned buffer belongs to the
    // string object and lives as long as it does (borrowed for `'a`).
    let data = unsafe { PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size) };
    if data.is_null() {
        let _ = PyErr::take(s.py());
        return None;
    }
    // SAFETY: CPython guarantees `size` bytes of valid UTF-8 at `data`.
    Some(unsafe {
        std::str::from_utf8_unchecked(std::slice::from_raw_parts(data.cast::<u8>(), size as usize))
    })
}

#[cfg(windows)]
fn utf8_of<'a>(_s: &'a Bound<'_, PyString>) -> Option<&'a str> {
    None
}

/// A Python `str` as a [`JsStr`], lone surrogates kept.
pub fn py_str(s: &Bound<'_, PyString>) -> JsStr {
    if let Some(text) = utf8_of(s) {
        return JsStr::from(text);
    }
    if let Ok(text) = s.to_cow() {
        return JsStr::from(text.as_ref());
    }
    // Holds a lone surrogate: go through UTF-16 with surrogatepass.
    match s.call_method1("encode", ("utf-16-le", "surrogatepass")) {
        Ok(bytes) => match bytes.cast::<PyBytes>() {
            Ok(b) => {
                let raw = b.as_bytes();
                let units: Vec<u16> = raw
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect();
                JsStr::from_utf16(&units)
            }
            Err(_) => JsStr::from(s.to_string_lossy().as_ref()),
        },
        Err(_) => JsStr::from(s.to_string_lossy().as_ref()),
    }
}

/// A [`JsStr`] as a Python `str` (lone surrogates kept).
pub fn js_str_to_py<'py>(py: Python<'py>, s: &JsStr) -> Bound<'py, PyAny> {
    if let Some(text) = s.as_str() {
        return PyString::new(py, text).into_any();
    }
    let mut bytes = Vec::with_capacity(s.utf16_len() * 2);
    for unit in s.utf16_units() {
        bytes.extend_from_slice(&unit.to_le_bytes());
    }
    let raw = PyBytes::new(py, &bytes);
    raw.call_method1("decode", ("utf-16-le", "surrogatepass"))
        .unwrap_or_else(|_| PyString::new(py, &s.to_string_lossy()).into_any())
}

/// Converts a host value; [`Unreadable`] when reading it raised or it nests too deep.
///
/// A value made only of exact built-in JSON types (the common case: a tool's arguments and
/// result) is read by [`fast`], borrowed and without running any Python code; anything
/// else (a subclass, a non-`str` key, a big int, a lone surrogate, an object, a tuple
/// nesting past the limit) makes it give up, and the whole value is read again by the
/// general path, which alone decides what such values become.
pub fn to_value(obj: &Bound<'_, PyAny>) -> Result<Value, Unreadable> {
    // SAFETY: the GIL is held and the caller keeps `obj` alive for the whole call.
    if let Ok(v) = unsafe { fast(obj.as_ptr(), 0) } {
        return Ok(v);
    }
    convert(obj, 0)
}

/// [`fast`] met something only the general path reads.
struct GiveUp;

/// The type pointers [`fast`] dispatches on.
struct ExactTypes {
    str_: *mut ffi::PyTypeObject,
    dict: *mut ffi::PyTypeObject,
    list: *mut ffi::PyTypeObject,
    tuple: *mut ffi::PyTypeObject,
    int: *mut ffi::PyTypeObject,
    float: *mut ffi::PyTypeObject,
    bool_: *mut ffi::PyTypeObject,
    none: *mut ffi::PyObject,
    true_: *mut ffi::PyObject,
}

impl ExactTypes {
    #[inline]
    fn get() -> ExactTypes {
        // SAFETY: addresses of the interpreter's static type objects and singletons.
        unsafe {
            ExactTypes {
                str_: &raw mut ffi::PyUnicode_Type,
                dict: &raw mut ffi::PyDict_Type,
                list: &raw mut ffi::PyList_Type,
                tuple: &raw mut ffi::PyTuple_Type,
                int: &raw mut ffi::PyLong_Type,
                float: &raw mut ffi::PyFloat_Type,
                bool_: &raw mut ffi::PyBool_Type,
                none: ffi::Py_None(),
                true_: ffi::Py_True(),
            }
        }
    }
}

/// The UTF-8 of an exact `str`, borrowed from the string object (CPython keeps it); `None`
/// for a lone surrogate (the error is cleared) or where the call is not linked (Windows).
///
/// # Safety
/// GIL held, `s` a live exact `str`.
#[inline]
unsafe fn utf8_raw<'a>(s: *mut ffi::PyObject) -> Option<&'a [u8]> {
    #[cfg(not(windows))]
    {
        let mut size: ffi::Py_ssize_t = 0;
        let data = PyUnicode_AsUTF8AndSize(s, &mut size);
        if data.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        Some(std::slice::from_raw_parts(data.cast::<u8>(), size as usize))
    }
    #[cfg(windows)]
    {
        let _ = s;
        None
    }
}

/// An exact `str` key or value as a [`JsStr`] (valid UTF-8, copied once).
///
/// # Safety
/// As [`utf8_raw`].
#[inline]
unsafe fn fast_str(s: *mut ffi::PyObject) -> Result<JsStr, GiveUp> {
    match utf8_raw(s) {
        // SAFETY: CPython hands out valid UTF-8 (a lone surrogate fails instead).
        Some(bytes) => Ok(JsStr::from(std::str::from_utf8_unchecked(bytes))),
        None => Err(GiveUp),
    }
}

/// Reads a value made only of exact `dict` (with exact `str` keys), `list`, `tuple`, `str`,
/// `int` (64-bit), `float`, `bool` and `None`, through borrowed references. Every call
/// here is a C read of a built-in object that runs no Python code, so no container can
/// change (or be freed) while it is read. Anything else gives up: the caller reads the
/// whole value again with the general path, so the answer is the general path's.
///
/// # Safety
/// GIL held, `obj` a live object kept alive by the caller.
unsafe fn fast(obj: *mut ffi::PyObject, depth: usize) -> Result<Value, GiveUp> {
    let t = ExactTypes::get();
    fast_with(&t, obj, depth)
}

unsafe fn fast_with(
    t: &ExactTypes,
    obj: *mut ffi::PyObject,
    depth: usize,
) -> Result<Value, GiveUp> {
    if depth > MAX_DEPTH {
        return Err(GiveUp);
    }
    match fast_scalar(t, obj) {
        Some(value) => value,
        None => fast_container(t, obj, depth),
    }
}

/// An item of a container at `depth` (scalars read in place, without a call).
#[inline(always)]
unsafe fn fast_item(
    t: &ExactTypes,
    obj: *mut ffi::PyObject,
    depth: usize,
) -> Result<Value, GiveUp> {
    match fast_scalar(t, obj) {
        Some(value) => value,
        None => fast_container(t, obj, depth),
    }
}

/// An exact `str`, `int`, `float`, `None` or `bool`; `None` for anything else.
#[inline(always)]
unsafe fn fast_scalar(t: &ExactTypes, obj: *mut ffi::PyObject) -> Option<Result<Value, GiveUp>> {
    let ty = ffi::Py_TYPE(obj);
    if ty == t.str_ {
        return Some(fast_str(obj).map(Value::String));
    }
    if ty == t.int {
        return Some(exact_i64(obj).map(|v| Value::Number(Number::Int(v))));
    }
    if ty == t.float {
        return Some(Ok(Value::Number(Number::Float(ffi::PyFloat_AsDouble(obj)))));
    }
    if obj == t.none {
        return Some(Ok(Value::Null));
    }
    if ty == t.bool_ {
        return Some(Ok(Value::Bool(obj == t.true_)));
    }
    None
}

/// An exact `int` that fits 64 bits; gives up on a bigger one.
///
/// # Safety
/// GIL held, `obj` a live exact `int`.
#[inline(always)]
unsafe fn exact_i64(obj: *mut ffi::PyObject) -> Result<i64, GiveUp> {
    let mut overflow: std::os::raw::c_int = 0;
    let v = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
    if overflow != 0 || (v == -1 && !ffi::PyErr_Occurred().is_null()) {
        ffi::PyErr_Clear();
        return Err(GiveUp);
    }
    Ok(v as i64)
}

/// How an exact `list` or `tuple` is read: its length and its borrowed-item getter; gives
/// up on anything else.
///
/// # Safety
/// GIL held, `obj` a live object.
#[allow(clippy::type_complexity)]
#[inline(always)]
unsafe fn exact_sequence(
    t: &ExactTypes,
    obj: *mut ffi::PyObject,
) -> Result<
    (
        ffi::Py_ssize_t,
        unsafe extern "C" fn(*mut ffi::PyObject, ffi::Py_ssize_t) -> *mut ffi::PyObject,
    ),
    GiveUp,
> {
    let ty = ffi::Py_TYPE(obj);
    if ty == t.list {
        Ok((ffi::PyList_Size(obj), ffi::PyList_GetItem))
    } else if ty == t.tuple {
        Ok((ffi::PyTuple_Size(obj), ffi::PyTuple_GetItem))
    } else {
        Err(GiveUp)
    }
}

/// An exact `dict` (exact `str` keys), `list` or `tuple` at `depth` (within the limit);
/// gives up on anything else. Its items are at `depth + 1`: past the limit, any item
/// gives up, as [`fast_with`] would for it.
#[inline(never)]
unsafe fn fast_container(
    t: &ExactTypes,
    obj: *mut ffi::PyObject,
    depth: usize,
) -> Result<Value, GiveUp> {
    let ty = ffi::Py_TYPE(obj);
    let inner = depth + 1;
    if ty == t.dict {
        let len = ffi::PyDict_Size(obj);
        if len > 0 && inner > MAX_DEPTH {
            return Err(GiveUp);
        }
        let mut map = Map::with_capacity(len.max(0) as usize);
        let mut pos: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut item: *mut ffi::PyObject = std::ptr::null_mut();
        while ffi::PyDict_Next(obj, &mut pos, &mut key, &mut item) != 0 {
            if ffi::Py_TYPE(key) != t.str_ {
                return Err(GiveUp);
            }
            let name = fast_str(key)?;
            map.push_unique(name, fast_item(t, item, inner)?);
        }
        return Ok(Value::Object(map));
    }
    let (len, get) = exact_sequence(t, obj)?;
    if len > 0 && inner > MAX_DEPTH {
        return Err(GiveUp);
    }
    let mut out = Vec::with_capacity(len.max(0) as usize);
    for i in 0..len {
        let item = get(obj, i);
        if item.is_null() {
            ffi::PyErr_Clear();
            return Err(GiveUp);
        }
        out.push(fast_item(t, item, inner)?);
    }
    Ok(Value::Array(out))
}

/// Packs a value made only of the types [`fast`] reads (exact `dict` with `str` keys,
/// `list`, `tuple`, `str`, 64-bit `int`, finite `float`, `bool`, `None`) into `out`
/// ([`graphmind_core::json::packed`]), reading it as [`fast`] does (borrowed, no Python
/// code run); the core decodes it into exactly what [`to_value`] would have built. `false`
/// when anything else is met (`out` then holds a partial value): the caller converts the
/// value instead.
pub fn write_packed(obj: &Bound<'_, PyAny>, out: &mut PackedWriter) -> bool {
    let t = ExactTypes::get();
    // SAFETY: the GIL is held and the caller keeps `obj` alive for the whole call.
    unsafe { pack_with(&t, obj.as_ptr(), 0, out).is_ok() }
}

/// [`write_packed`] of the dict `{names[i]: values[i], ...}` (distinct names) without
/// making it, as [`fields_value`] reads it when every field is readable.
pub fn write_fields_packed(fields: &[(&JsStr, Bound<'_, PyAny>)], out: &mut PackedWriter) -> bool {
    let t = ExactTypes::get();
    if !out.object(fields.len()) {
        return false;
    }
    for (name, v) in fields {
        // A name is a Python identifier's UTF-8 (never a lone surrogate).
        if name.as_str().is_none() || !out.key(name.as_bytes()) {
            return false;
        }
        // SAFETY: the GIL is held and `fields` owns a reference to `v`.
        if unsafe { pack_with(&t, v.as_ptr(), 1, out) }.is_err() {
            return false;
        }
    }
    true
}

/// # Safety
/// GIL held, `obj` a live object kept alive by the caller.
unsafe fn pack_with(
    t: &ExactTypes,
    obj: *mut ffi::PyObject,
    depth: usize,
    out: &mut PackedWriter,
) -> Result<(), GiveUp> {
    let ty = ffi::Py_TYPE(obj);
    if ty == t.str_ {
        return ok_or_give_up(out.string(utf8_raw(obj).ok_or(GiveUp)?));
    }
    if ty == t.int {
        out.int(exact_i64(obj)?);
        return Ok(());
    }
    if ty == t.float {
        return ok_or_give_up(out.float(ffi::PyFloat_AsDouble(obj)));
    }
    if obj == t.none {
        out.null();
        return Ok(());
    }
    if ty == t.bool_ {
        out.bool(obj == t.true_);
        return Ok(());
    }
    if depth >= MAX_PACKED_DEPTH {
        return Err(GiveUp);
    }
    if ty == t.dict {
        let len = ffi::PyDict_Size(obj);
        if len < 0 || !out.object(len as usize) {
            ffi::PyErr_Clear();
            return Err(GiveUp);
        }
        let mut pos: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut item: *mut ffi::PyObject = std::ptr::null_mut();
        let mut members = 0;
        while ffi::PyDict_Next(obj, &mut pos, &mut key, &mut item) != 0 {
            if ffi::Py_TYPE(key) != t.str_ || !out.key(utf8_raw(key).ok_or(GiveUp)?) {
                return Err(GiveUp);
            }
            pack_with(t, item, depth + 1, out)?;
            members += 1;
        }
        // No Python code runs while the dict is walked, so its size cannot change; the
        // count written ahead must match all the same.
        return if members == len { Ok(()) } else { Err(GiveUp) };
    }
    let (len, get) = exact_sequence(t, obj)?;
    if !out.array(len.max(0) as usize) {
        return Err(GiveUp);
    }
    for i in 0..len {
        let item = get(obj, i);
        if item.is_null() {
            ffi::PyErr_Clear();
            return Err(GiveUp);
        }
        pack_with(t, item, depth + 1, out)?;
    }
    Ok(())
}

/// `Ok` when the writer took the value, else give up (the value is converted instead).
#[inline]
fn ok_or_give_up(written: bool) -> Result<(), GiveUp> {
    if written {
        Ok(())
    } else {
        Err(GiveUp)
    }
}

/// Converts a host value that must be readable: a read that raises becomes the reference's
/// degraded marker, never an exception.
///
/// As in the reference, a mapping keeps every field that can be written and only the
/// unwritable ones degrade (a list or tuple to `[]`, anything else to the marker).
pub fn to_value_or_marker(obj: &Bound<'_, PyAny>) -> Value {
    if let Ok(v) = to_value(obj) {
        return v;
    }
    let Ok(d) = obj.cast::<PyDict>() else {
        return unserializable_marker();
    };
    // A snapshot of the items: reading a field may run Python code that changes the dict
    // (pyo3's iterator panics then, which would raise into the app).
    let items = d.items();
    let mut map = Map::with_capacity(items.len());
    for pair in items.iter() {
        let Ok((k, v)) = pair.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>() else {
            continue;
        };
        let Ok(key) = key_of(&k) else { continue };
        map.insert(key, field_value(&v));
    }
    Value::Object(map)
}

/// What [`to_value_or_marker`] records for the dict `{names[i]: values[i], ...}` (distinct
/// `str` names), without making the dict: every field is read in order until one cannot
/// be; then, as for the dict, every field is read again and only the failing ones degrade
/// (reading twice matters when reading has side effects, e.g. a `model_dump()` that
/// changes a container the first read was walking).
pub fn fields_value(fields: &[(&JsStr, Bound<'_, PyAny>)]) -> Value {
    let mut map = Map::with_capacity(fields.len());
    let mut readable = true;
    for (name, v) in fields {
        // SAFETY: the GIL is held and `fields` owns a reference to `v`.
        let value = match unsafe { fast(v.as_ptr(), 1) } {
            Ok(value) => value,
            Err(GiveUp) => match convert(v, 1) {
                Ok(value) => value,
                Err(Unreadable) => {
                    readable = false;
                    break;
                }
            },
        };
        map.push_unique((*name).clone(), value);
    }
    if readable {
        return Value::Object(map);
    }
    let mut map = Map::with_capacity(fields.len());
    for (name, v) in fields {
        map.push_unique((*name).clone(), field_value(v));
    }
    Value::Object(map)
}

/// A mapping's field as [`to_value_or_marker`] records it once the mapping as a whole could
/// not be read (one level down): its value, or `[]` for a list or tuple that cannot be
/// read, or the marker.
fn field_value(v: &Bound<'_, PyAny>) -> Value {
    // SAFETY: the GIL is held and the caller keeps `v` alive for the whole call.
    if let Ok(value) = unsafe { fast(v.as_ptr(), 1) } {
        return value;
    }
    match convert(v, 1) {
        Ok(value) => value,
        Err(_) if v.cast::<PyList>().is_ok() || v.cast::<PyTuple>().is_ok() => {
            Value::Array(Vec::new())
        }
        Err(_) => unserializable_marker(),
    }
}

/// What stands for a value that could not be written (graphmind-ai's degraded field).
pub fn unserializable_marker() -> Value {
    let mut m = Map::new();
    m.insert("__graphmindTruncated", Value::Bool(true));
    m.insert("bytes", Value::from(0i64));
    m.insert("preview", Value::from("[unserializable value]"));
    Value::Object(m)
}

fn int_value(i: &Bound<'_, PyInt>) -> Result<Value, Unreadable> {
    if let Ok(v) = i.extract::<i64>() {
        return Ok(Value::Number(Number::Int(v)));
    }
    let digits = i.str().map_err(|_| Unreadable)?;
    let digits = digits.to_cow().map_err(|_| Unreadable)?;
    Ok(Value::Number(Number::BigInt(digits.as_ref().into())))
}

fn key_of(key: &Bound<'_, PyAny>) -> Result<JsStr, Unreadable> {
    if let Ok(s) = key.cast::<PyString>() {
        return Ok(py_str(s));
    }
    if key.is_none() {
        return Ok(JsStr::from("null"));
    }
    if let Ok(b) = key.cast::<PyBool>() {
        return Ok(JsStr::from(if b.is_true() { "true" } else { "false" }));
    }
    if let Ok(i) = key.cast::<PyInt>() {
        let text = i.str().map_err(|_| Unreadable)?;
        return Ok(py_str(&text));
    }
    if let Ok(f) = key.cast::<PyFloat>() {
        // json.dumps spells a float key with float.__repr__ (NaN, Infinity as Python names).
        let v = f.value();
        let text = if v.is_nan() {
            "NaN".to_string()
        } else if v.is_infinite() {
            if v > 0.0 {
                "Infinity".to_string()
            } else {
                "-Infinity".to_string()
            }
        } else {
            f.repr().map_err(|_| Unreadable)?.to_string()
        };
        return Ok(JsStr::from(text));
    }
    // json.dumps cannot write any other key: the container is unwritable.
    Err(Unreadable)
}

fn convert(obj: &Bound<'_, PyAny>, depth: usize) -> Result<Value, Unreadable> {
    if depth > MAX_DEPTH {
        return Err(Unreadable);
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // Exact built-in types first: one pointer comparison each (the checks below call
    // `PyType_GetFlags` under the limited API); subclasses take the general path.
    if let Ok(s) = obj.cast_exact::<PyString>() {
        return Ok(Value::String(py_str(s)));
    }
    if let Ok(d) = obj.cast_exact::<PyDict>() {
        return dict_value(d, depth);
    }
    if let Ok(l) = obj.cast_exact::<PyList>() {
        return list_value(l, depth);
    }
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        return int_value(i);
    }
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        return Ok(Value::Number(Number::Float(f.value())));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(py_str(s)));
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        return int_value(i);
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Number(Number::Float(f.value())));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return dict_value(d, depth);
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return list_value(l, depth);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        let mut out = Vec::with_capacity(t.len());
        for item in t.iter() {
            out.push(convert(&item, depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    fallback(obj, depth)
}

/// An exact `str`, `int`, `float`, `bool` or `None`: read without running any Python code,
/// so a reference borrowed from its container stays valid. `None` for anything else.
fn scalar(obj: &Bound<'_, PyAny>) -> Option<Result<Value, Unreadable>> {
    if let Ok(s) = obj.cast_exact::<PyString>() {
        return Some(Ok(Value::String(py_str(s))));
    }
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        return Some(int_value(i));
    }
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        return Some(Ok(Value::Number(Number::Float(f.value()))));
    }
    if obj.is_none() {
        return Some(Ok(Value::Null));
    }
    if let Ok(b) = obj.cast_exact::<PyBool>() {
        return Some(Ok(Value::Bool(b.is_true())));
    }
    None
}

/// [`scalar`] for an item of a container at `depth` (past the depth limit, `convert`
/// reports it unreadable as before).
fn scalar_within(obj: &Bound<'_, PyAny>, depth: usize) -> Option<Result<Value, Unreadable>> {
    if depth >= MAX_DEPTH {
        return None;
    }
    scalar(obj)
}

/// A dict's entries through `PyDict_Next`. Exact `str` keys and scalar values are read
/// borrowed (no reference count traffic); anything that may run Python code (a nested
/// container, a fallback method) is converted from an owned reference, and a dict whose
/// size changes meanwhile is unreadable (CPython's own iteration raises there).
fn dict_value(d: &Bound<'_, PyDict>, depth: usize) -> Result<Value, Unreadable> {
    let py = d.py();
    let len = d.len();
    let mut map = Map::with_capacity(len);
    let mut pos: ffi::Py_ssize_t = 0;
    let mut key: *mut ffi::PyObject = std::ptr::null_mut();
    let mut item: *mut ffi::PyObject = std::ptr::null_mut();
    // SAFETY: the GIL is held and the caller keeps `d` alive; `PyDict_Next` hands out
    // borrowed references that stay valid while the dict is unchanged, which holds until
    // Python code runs: they are used borrowed only before that, and owned otherwise.
    while unsafe { ffi::PyDict_Next(d.as_ptr(), &mut pos, &mut key, &mut item) } != 0 {
        let k = unsafe { Borrowed::from_ptr(py, key) };
        let v = unsafe { Borrowed::from_ptr(py, item) };
        // A dict's `str` keys are unique already; a key spelled from another type may
        // collide with one (1 and "1"), so only those take the checked insert.
        if let Ok(s) = k.cast_exact::<PyString>() {
            let name = py_str(&s);
            let value = match scalar_within(&v, depth) {
                Some(value) => value?,
                None => {
                    let owned = v.to_owned();
                    let value = convert(&owned, depth + 1)?;
                    if d.len() != len {
                        return Err(Unreadable);
                    }
                    value
                }
            };
            map.push_unique(name, value);
        } else {
            let k = k.to_owned();
            let v = v.to_owned();
            let value = convert(&v, depth + 1)?;
            if d.len() != len {
                return Err(Unreadable);
            }
            match k.cast::<PyString>() {
                Ok(s) => map.push_unique(py_str(s), value),
                Err(_) => {
                    map.insert(key_of(&k)?, value);
                }
            }
        }
    }
    Ok(Value::Object(map))
}

/// A list's items by index (`PyList_GetItem` is borrowed): scalars are read borrowed, the
/// rest owned; the length is read again at each step, as Python's own iteration does.
fn list_value(l: &Bound<'_, PyList>, depth: usize) -> Result<Value, Unreadable> {
    let py = l.py();
    let mut out = Vec::with_capacity(l.len());
    let mut i = 0;
    while i < l.len() {
        // SAFETY: GIL held, `i` within the current length; the borrowed item is used
        // borrowed only by `scalar` (no Python code runs), and owned otherwise.
        let item = unsafe { ffi::PyList_GetItem(l.as_ptr(), i as ffi::Py_ssize_t) };
        if item.is_null() {
            let _ = PyErr::take(py);
            break;
        }
        let v = unsafe { Borrowed::from_ptr(py, item) };
        match scalar_within(&v, depth) {
            Some(value) => out.push(value?),
            None => {
                let owned = v.to_owned();
                out.push(convert(&owned, depth + 1)?);
            }
        }
        i += 1;
    }
    Ok(Value::Array(out))
}

fn fallback(obj: &Bound<'_, PyAny>, depth: usize) -> Result<Value, Unreadable> {
    for name in DUMP_METHODS {
        let method = match obj.getattr(name) {
            Ok(m) => m,
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(obj.py()) => continue,
            Err(_) => return Err(Unreadable),
        };
        if method.is_callable() {
            if let Ok(result) = method.call0() {
                return convert(&result, depth + 1);
            }
        }
    }
    if obj.cast::<PySet>().is_ok() || obj.cast::<PyFrozenSet>().is_ok() {
        let mut out = Vec::new();
        let iter = obj.try_iter().map_err(|_| Unreadable)?;
        for item in iter {
            let item = item.map_err(|_| Unreadable)?;
            out.push(convert(&item, depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    if obj.cast::<PyBytes>().is_ok() || obj.cast::<PyByteArray>().is_ok() {
        let text = obj
            .call_method1("decode", ("utf-8", "replace"))
            .map_err(|_| Unreadable)?;
        return match text.cast::<PyString>() {
            Ok(s) => Ok(Value::String(py_str(s))),
            Err(_) => Err(Unreadable),
        };
    }
    match obj.repr() {
        Ok(text) => {
            let cut = if text.len().map(|n| n > REPR_CHARS).unwrap_or(false) {
                match text
                    .call_method1(
                        "__getitem__",
                        (PySlice::new(obj.py(), 0, REPR_CHARS as isize, 1),),
                    )
                    .map(|c| c.cast_into::<PyString>())
                {
                    Ok(Ok(s)) => s,
                    _ => text,
                }
            } else {
                text
            };
            Ok(Value::String(py_str(&cut)))
        }
        Err(_) => {
            let name = obj
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "object".into());
            Ok(Value::String(JsStr::from(format!(
                "<unserializable {name}>"
            ))))
        }
    }
}

/// A core value as a Python object (`dict` keeps key order).
pub fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(Number::Int(i)) => i.into_pyobject(py)?.into_any(),
        Value::Number(Number::Float(f)) => PyFloat::new(py, *f).into_any(),
        Value::Number(Number::BigInt(digits)) => {
            let int_type = py.get_type::<PyInt>();
            int_type.call1((digits.as_ref(),))?
        }
        Value::String(s) => js_str_to_py(py, s),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map.iter() {
                dict.set_item(js_str_to_py(py, k), to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// Parses JSON text with the core's parser (lone surrogates kept) into a Python value.
pub fn parse_to_py<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let value =
        graphmind_core::json::parse_str(text).map_err(|e| PyValueError::new_err(e.to_string()))?;
    to_py(py, &value)
}
