//! Ruby objects <-> `graphmind_core::json::Value`.
//!
//! Plain data maps one to one (nil, true/false, Integer — beyond i64 as a big integer —,
//! Float, String, Symbol, Array, Hash). Strings keep lone surrogates: a string that is not
//! valid UTF-8 but is valid WTF-8 (what a JSON `"\ud800"` becomes) is handed over as is. Any
//! other object follows the reference gem's rule: its `to_h` when it has one, else its
//! `inspect` (at most [`MAX_INSPECT_CHARS`] characters), else its class name. A read that
//! raises never reaches the app: the value becomes its class name.

use graphmind_core::json::{JsStr, Map, Number, Value as J};
use magnus::{
    prelude::*, r_hash::ForEach, value::Qtrue, Error, Float, Integer, RArray, RHash, RString, Ruby, Symbol, Value,
};

/// The reference gem's cap on an object's `inspect` text.
pub const MAX_INSPECT_CHARS: usize = 8000;
/// Nesting deeper than this becomes `null` (a cyclic structure ends here).
pub const MAX_DEPTH: usize = 512;

/// A Ruby string as a core string (WTF-8 kept, other bytes replaced).
pub fn rstring_to_js(s: RString) -> JsStr {
    // SAFETY: the slice is copied before any Ruby code runs.
    let bytes = unsafe { s.as_slice() };
    match std::str::from_utf8(bytes) {
        Ok(text) => JsStr::from(text),
        Err(_) => JsStr::from_wtf8(bytes).unwrap_or_else(|| JsStr::from(String::from_utf8_lossy(bytes).as_ref())),
    }
}

/// A Ruby string (or anything with `to_s`) as a Rust `String`.
pub fn to_rust_string(v: Value) -> String {
    if let Some(s) = RString::from_value(v) {
        return rstring_to_js(s).to_string_lossy().into_owned();
    }
    if let Some(sym) = Symbol::from_value(v) {
        return sym.name().map(|n| n.to_string()).unwrap_or_default();
    }
    v.funcall::<_, _, RString>("to_s", ())
        .map(|s| rstring_to_js(s).to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn key_to_js(k: Value) -> JsStr {
    if let Some(s) = RString::from_value(k) {
        return rstring_to_js(s);
    }
    JsStr::from(to_rust_string(k).as_str())
}

/// Converts a Ruby value to a core value. Never raises.
pub fn to_value(ruby: &Ruby, v: Value) -> J {
    to_value_at(ruby, v, 0)
}

fn to_value_at(ruby: &Ruby, v: Value, depth: usize) -> J {
    if depth > MAX_DEPTH || v.is_nil() {
        return J::Null;
    }
    if Qtrue::from_value(v).is_some() {
        return J::Bool(true);
    }
    if v.is_kind_of(ruby.class_false_class()) {
        return J::Bool(false);
    }
    if let Some(s) = RString::from_value(v) {
        return J::String(rstring_to_js(s));
    }
    if let Some(i) = Integer::from_value(v) {
        return match i.to_i64() {
            Ok(n) => J::Number(Number::Int(n)),
            Err(_) => J::Number(Number::BigInt(to_rust_string(v).into_boxed_str())),
        };
    }
    if let Some(f) = Float::from_value(v) {
        return J::Number(Number::Float(f.to_f64()));
    }
    if let Some(sym) = Symbol::from_value(v) {
        return J::String(JsStr::from(
            sym.name().map(|n| n.to_string()).unwrap_or_default().as_str(),
        ));
    }
    if let Some(h) = RHash::from_value(v) {
        let mut map = Map::with_capacity(h.len());
        // String keys of one Hash are distinct: append without a search. Once another kind
        // of key shows up (:a next to "a"), every later key is checked.
        let mut all_strings = true;
        let _ = h.foreach(|k: Value, val: Value| {
            let is_string = RString::from_value(k).is_some();
            all_strings &= is_string;
            let key = key_to_js(k);
            let val = to_value_at(ruby, val, depth + 1);
            if all_strings {
                map.push_unique(key, val);
            } else {
                map.insert(key, val);
            }
            Ok(ForEach::Continue)
        });
        return J::Object(map);
    }
    if let Some(a) = RArray::from_value(v) {
        let mut out = Vec::with_capacity(a.len());
        for item in a.into_iter() {
            out.push(to_value_at(ruby, item, depth + 1));
        }
        return J::Array(out);
    }
    other_object(ruby, v, depth)
}

fn other_object(ruby: &Ruby, v: Value, depth: usize) -> J {
    if v.respond_to("to_h", false).unwrap_or(false) {
        if let Ok(h) = v.funcall::<_, _, Value>("to_h", ()) {
            if RHash::from_value(h).is_some() {
                return to_value_at(ruby, h, depth);
            }
        }
    }
    let text = match v.funcall::<_, _, RString>("inspect", ()) {
        Ok(s) => rstring_to_js(s).to_string_lossy().into_owned(),
        Err(_) => return J::String(JsStr::from(class_name(v).as_str())),
    };
    if text.chars().count() > MAX_INSPECT_CHARS {
        let cut: String = text.chars().take(MAX_INSPECT_CHARS).collect();
        return J::String(JsStr::from(format!("{cut}…").as_str()));
    }
    J::String(JsStr::from(text.as_str()))
}

/// The class name of a Ruby object.
pub fn class_name(v: Value) -> String {
    // SAFETY: classname reads the class object's name.
    unsafe { v.classname() }.into_owned()
}

/// Converts a core value to a Ruby value (objects as Hashes with String keys).
pub fn from_value(ruby: &Ruby, v: &J) -> Result<Value, Error> {
    Ok(match v {
        J::Null => ruby.qnil().as_value(),
        J::Bool(true) => ruby.qtrue().as_value(),
        J::Bool(false) => ruby.qfalse().as_value(),
        J::Number(Number::Int(n)) => ruby.integer_from_i64(*n).as_value(),
        J::Number(Number::Float(f)) => ruby.float_from_f64(*f).as_value(),
        J::Number(Number::BigInt(digits)) => ruby.module_kernel().funcall("Integer", (digits.as_ref(),))?,
        J::String(s) => js_to_rstring(ruby, s).as_value(),
        J::Array(items) => {
            let a = ruby.ary_new_capa(items.len());
            for item in items {
                a.push(from_value(ruby, item)?)?;
            }
            a.as_value()
        }
        J::Object(map) => {
            let h = ruby.hash_new();
            for (k, val) in map.iter() {
                h.aset(js_to_rstring(ruby, k), from_value(ruby, val)?)?;
            }
            h.as_value()
        }
    })
}

/// A core string as a UTF-8 Ruby string (bytes of a lone surrogate kept as WTF-8).
pub fn js_to_rstring(ruby: &Ruby, s: &JsStr) -> RString {
    match s.as_str() {
        Some(text) => ruby.str_new(text),
        None => ruby.enc_str_new(s.as_bytes(), ruby.utf8_encoding()),
    }
}
