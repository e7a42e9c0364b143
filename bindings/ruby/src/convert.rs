//! Ruby objects <-> `graphmind_core::json::Value`.
//!
//! Plain data maps one to one (nil, true/false, Integer — beyond i64 as a big integer —,
//! Float, String, Symbol, Array, Hash). Strings keep lone surrogates: a string that is not
//! valid UTF-8 but is valid WTF-8 (what a JSON `"\ud800"` becomes) is handed over as is. Any
//! other object follows the reference gem's rule: its `to_h` when it has one, else its
//! `inspect` (at most [`MAX_INSPECT_CHARS`] characters), else its class name. A read that
//! raises never reaches the app: the value becomes its class name.

use graphmind_core::json::{JsStr, Map, Number, Value as J};
use magnus::{prelude::*, rb_sys::AsRawValue, rb_sys::FromRawValue, Error, Integer, RHash, RString, Ruby, Symbol, Value};
use rb_sys::{ruby_coderange_type, ruby_value_type as T, st_retval, VALUE};
use std::os::raw::c_int;

/// The reference gem's cap on an object's `inspect` text.
pub const MAX_INSPECT_CHARS: usize = 8000;
/// Nesting deeper than this becomes `null` (a cyclic structure ends here).
pub const MAX_DEPTH: usize = 512;

/// A Ruby string as a core string (WTF-8 kept, other bytes replaced).
pub fn rstring_to_js(s: RString) -> JsStr {
    // SAFETY: `s` is a live String; the bytes are copied before any Ruby code runs.
    unsafe { raw_string_to_js(s.as_raw()) }
}

/// [`rstring_to_js`] on a raw `VALUE` known to be a `T_STRING`.
///
/// A string whose code range Ruby already knows to be 7-bit (any encoding), or valid in
/// UTF-8 or US-ASCII, is valid UTF-8 without a second scan; anything else is checked here.
///
/// # Safety
/// `raw` must be a live `T_STRING`, and no Ruby code may run while the slice is read.
unsafe fn raw_string_to_js(raw: VALUE) -> JsStr {
    let len = rb_sys::RSTRING_LEN(raw) as usize;
    if len == 0 {
        return JsStr::new();
    }
    let bytes = std::slice::from_raw_parts(rb_sys::RSTRING_PTR(raw) as *const u8, len);
    let range = rb_sys::rb_enc_str_coderange(raw) as u32;
    let known_utf8 = range == ruby_coderange_type::RUBY_ENC_CODERANGE_7BIT as u32
        || (range == ruby_coderange_type::RUBY_ENC_CODERANGE_VALID as u32 && {
            let index = rb_sys::rb_enc_get_index(raw);
            index == rb_sys::rb_utf8_encindex() || index == rb_sys::rb_usascii_encindex()
        });
    if known_utf8 {
        // SAFETY: Ruby's code range says these bytes are ASCII or valid UTF-8 (Ruby's
        // UTF-8 rejects surrogates and overlong forms, as Rust's does).
        return JsStr::from(std::str::from_utf8_unchecked(bytes));
    }
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

/// Converts a Ruby value to a core value. Never raises.
pub fn to_value(_ruby: &Ruby, v: Value) -> J {
    let mut walk = Walk {
        arrays: Vec::new(),
        snapped: 0,
        keep: rb_sys::Qnil as VALUE,
    };
    let out = walk.value(v.as_raw(), 0);
    // The copies stay referenced from this stack frame until here.
    std::hint::black_box(walk.keep);
    out
}

/// One walk over a Ruby value: a single type dispatch per value (no class lookups),
/// Hashes iterated in place and Arrays read by index, so that plain data costs only the
/// core value's own allocations.
///
/// Arrays read as they were when the walk began, even if Ruby code run on the way (an
/// object's `to_h`, `inspect` or `to_s`) changes them: right before any Ruby code runs,
/// every Array still being read is copied (once) and read on from the copy.
struct Walk {
    /// The Arrays being read, outermost first (each the original or its copy).
    arrays: Vec<VALUE>,
    /// How many of `arrays` (from the outermost) are already copies or frozen.
    snapped: usize,
    /// `nil`, or a hidden Array holding the copies (the `Walk` lives on the stack of
    /// [`to_value`], where the GC sees this reference).
    keep: VALUE,
}

impl Walk {
    /// Called right before Ruby code may run.
    fn before_ruby_code(&mut self) {
        // SAFETY: every entry is a live Array (the original is referenced by its parent,
        // the copy by `keep`).
        unsafe {
            while self.snapped < self.arrays.len() {
                let src = self.arrays[self.snapped];
                if rb_sys::rb_obj_frozen_p(src) == rb_sys::Qfalse as VALUE {
                    if self.keep == rb_sys::Qnil as VALUE {
                        self.keep = rb_sys::rb_ary_new();
                        rb_sys::rb_obj_hide(self.keep);
                    }
                    let copy = rb_sys::rb_ary_dup(src);
                    rb_sys::rb_obj_hide(copy);
                    rb_sys::rb_ary_push(self.keep, copy);
                    self.arrays[self.snapped] = copy;
                }
                self.snapped += 1;
            }
        }
    }

    fn key(&mut self, k: VALUE) -> JsStr {
        // SAFETY: `k` is a live key of the Hash being iterated.
        unsafe {
            if rb_sys::RB_TYPE(k) == T::RUBY_T_STRING {
                return raw_string_to_js(k);
            }
            let k = Value::from_raw(k);
            if let Some(sym) = Symbol::from_value(k) {
                return JsStr::from(sym.name().as_deref().unwrap_or_default());
            }
            self.before_ruby_code();
            JsStr::from(to_rust_string(k).as_str())
        }
    }

    fn value(&mut self, raw: VALUE, depth: usize) -> J {
        if depth > MAX_DEPTH {
            return J::Null;
        }
        // SAFETY: `raw` is a live Ruby value reachable from the walk's root (Hash members
        // from their Hash, Array members from the Array or its kept copy).
        unsafe {
            match rb_sys::RB_TYPE(raw) {
                T::RUBY_T_NIL => J::Null,
                T::RUBY_T_TRUE => J::Bool(true),
                T::RUBY_T_FALSE => J::Bool(false),
                T::RUBY_T_STRING => J::String(raw_string_to_js(raw)),
                T::RUBY_T_FIXNUM => J::Number(Number::Int(rb_sys::FIX2LONG(raw) as i64)),
                T::RUBY_T_FLOAT => J::Number(Number::Float(rb_sys::rb_float_value(raw))),
                T::RUBY_T_BIGNUM => {
                    let v = Value::from_raw(raw);
                    match Integer::from_value(v).map(|i| i.to_i64()) {
                        Some(Ok(n)) => J::Number(Number::Int(n)),
                        _ => {
                            self.before_ruby_code();
                            J::Number(Number::BigInt(to_rust_string(v).into_boxed_str()))
                        }
                    }
                }
                T::RUBY_T_SYMBOL => {
                    let v = Value::from_raw(raw);
                    let name = Symbol::from_value(v).map(|sym| sym.name().map(|n| n.to_string()).unwrap_or_default());
                    J::String(JsStr::from(name.unwrap_or_default().as_str()))
                }
                T::RUBY_T_HASH => self.hash(raw, depth),
                T::RUBY_T_ARRAY => {
                    let slot = self.arrays.len();
                    self.arrays.push(raw);
                    let mut out = Vec::with_capacity(rb_sys::RARRAY_LEN(raw).max(0) as usize);
                    let mut i = 0;
                    loop {
                        let src = self.arrays[slot];
                        if i >= rb_sys::RARRAY_LEN(src) as isize {
                            break;
                        }
                        let item = rb_sys::RARRAY_AREF(src, i);
                        out.push(self.value(item, depth + 1));
                        i += 1;
                    }
                    self.arrays.pop();
                    self.snapped = self.snapped.min(slot);
                    J::Array(out)
                }
                _ => {
                    self.before_ruby_code();
                    self.other_object(Value::from_raw(raw), depth)
                }
            }
        }
    }

    fn hash(&mut self, hash: VALUE, depth: usize) -> J {
        // SAFETY: `hash` is a live T_HASH.
        let len = unsafe { rb_sys::RHASH_SIZE(hash) };
        let mut state = HashState {
            walk: self,
            map: Map::with_capacity(len),
            all_strings: true,
            depth,
        };
        let args: (VALUE, *mut HashState) = (hash, &mut state);
        let mut failed: c_int = 0;
        // rb_hash_foreach raises if the Hash is restructured under it (by an element's
        // `to_h`/`inspect`): caught here, what was read so far is kept.
        // SAFETY: `args` and `state` outlive the protected call.
        unsafe {
            rb_sys::rb_protect(Some(hash_walk), &args as *const _ as VALUE, &mut failed);
            if failed != 0 {
                rb_sys::rb_set_errinfo(rb_sys::Qnil as VALUE);
            }
        }
        J::Object(state.map)
    }

    fn other_object(&mut self, v: Value, depth: usize) -> J {
        if v.respond_to("to_h", false).unwrap_or(false) {
            if let Ok(h) = v.funcall::<_, _, Value>("to_h", ()) {
                if RHash::from_value(h).is_some() {
                    // `h` stays on this frame's stack while it is read.
                    let out = self.value(h.as_raw(), depth);
                    std::hint::black_box(h);
                    return out;
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
}

struct HashState<'w> {
    walk: &'w mut Walk,
    map: Map,
    all_strings: bool,
    depth: usize,
}

unsafe extern "C" fn hash_pair(key: VALUE, val: VALUE, arg: VALUE) -> c_int {
    // SAFETY: `arg` is the `HashState` owned by `Walk::hash`, alive for the iteration.
    // Nothing here raises (Ruby code only runs through magnus' protected calls), and a
    // panic aborts (the walk is plain data).
    let state = &mut *(arg as *mut HashState);
    // String keys of one Hash are distinct: append without a search. Once another kind
    // of key shows up (:a next to "a"), every later key is checked.
    state.all_strings &= rb_sys::RB_TYPE(key) == T::RUBY_T_STRING;
    let key = state.walk.key(key);
    let val = state.walk.value(val, state.depth + 1);
    if state.all_strings {
        state.map.push_unique(key, val);
    } else {
        state.map.insert(key, val);
    }
    st_retval::ST_CONTINUE as c_int
}

unsafe extern "C" fn hash_walk(args: VALUE) -> VALUE {
    // SAFETY: `args` carries (hash, &mut HashState) from `Walk::hash`.
    let (hash, state) = *(args as *const (VALUE, *mut HashState));
    rb_sys::rb_hash_foreach(hash, Some(hash_pair), state as VALUE);
    rb_sys::Qnil as VALUE
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
