//! Ruby objects <-> `graphmind_core::json::Value`.
//!
//! Plain data maps one to one (nil, true/false, Integer — beyond i64 as a big integer —,
//! Float, String, Symbol, Array, Hash). Strings keep lone surrogates: a string that is not
//! valid UTF-8 but is valid WTF-8 (what a JSON `"\ud800"` becomes) is handed over as is. Any
//! other object follows the reference gem's rule: its `to_h` when it has one, else its
//! `inspect` (at most [`MAX_INSPECT_CHARS`] characters), else its class name. A read that
//! raises never reaches the app: the value becomes its class name.

use graphmind_core::json::packed::{PackedWriter, MAX_PACKED_DEPTH};
use graphmind_core::json::{JsStr, Map, Number, Value as J};
use magnus::{
    prelude::*, rb_sys::AsRawValue, rb_sys::FromRawValue, Error, Integer, RHash, RString, Ruby,
    Symbol, Value,
};
use rb_sys::{ruby_coderange_type, ruby_value_type as T, st_retval, VALUE};
use std::os::raw::c_int;

/// The reference gem's cap on an object's `inspect` text.
pub const MAX_INSPECT_CHARS: usize = 8000;
/// A Hash or Array at the core's depth budget becomes its cut marker (a cyclic structure
/// ends there): the whole frame then stays within the server's nesting limit.
use graphmind_core::shrink::depth::{depth_cut_marker, is_cut_level};

/// A Ruby string as a core string: text in another encoding (UTF-16LE, Shift_JIS, ...)
/// transcoded to UTF-8, WTF-8 kept, other bytes replaced. May run Ruby code (the
/// transcoding).
pub fn rstring_to_js(s: RString) -> JsStr {
    // SAFETY: `s` is a live String; the bytes are copied before any Ruby code runs, and
    // only `transcoded` (after the check) runs Ruby code.
    unsafe {
        if needs_transcoding(s.as_raw()) {
            if let Some(text) = transcoded(s) {
                return JsStr::from(text.as_str());
            }
        }
        raw_string_to_js(s.as_raw())
    }
}

/// [`rstring_to_js`] of a raw `T_STRING`.
///
/// # Safety
/// `raw` must be a live `T_STRING`.
unsafe fn string_value_to_js(raw: VALUE) -> JsStr {
    match RString::from_value(Value::from_raw(raw)) {
        Some(s) => rstring_to_js(s),
        None => raw_string_to_js(raw),
    }
}

/// Whether a String's bytes are text in an encoding other than UTF-8 (or its ASCII
/// subset, or binary), which [`transcoded`] turns into UTF-8.
///
/// # Safety
/// `raw` must be a live `T_STRING`.
unsafe fn needs_transcoding(raw: VALUE) -> bool {
    let index = rb_sys::rb_enc_get_index(raw);
    index != rb_sys::rb_utf8_encindex()
        && index != rb_sys::rb_usascii_encindex()
        && index != rb_sys::rb_ascii8bit_encindex()
        && rb_sys::rb_enc_str_coderange(raw) as u32
            != ruby_coderange_type::RUBY_ENC_CODERANGE_7BIT as u32
}

/// `s.encode("UTF-8", invalid: :replace, undef: :replace)`; `None` when Ruby cannot
/// convert from its encoding (a dummy encoding) or raised.
fn transcoded(s: RString) -> Option<String> {
    let ruby = Ruby::get_with(s);
    let options = magnus::kwargs!(&ruby, "invalid" => ruby.to_symbol("replace"), "undef" => ruby.to_symbol("replace"));
    let utf8: RString = s.funcall("encode", ("UTF-8", options)).ok()?;
    // SAFETY: `utf8` is a live String, read before Ruby runs again.
    unsafe { utf8_text(utf8.as_raw(), string_bytes(utf8.as_raw())).map(str::to_owned) }
}

/// [`rstring_to_js`] on a raw `VALUE` known to be a `T_STRING`.
///
/// # Safety
/// `raw` must be a live `T_STRING`, and no Ruby code may run while the slice is read.
unsafe fn raw_string_to_js(raw: VALUE) -> JsStr {
    let bytes = string_bytes(raw);
    if let Some(text) = utf8_text(raw, bytes) {
        return JsStr::from(text);
    }
    JsStr::from_wtf8(bytes).unwrap_or_else(|| JsStr::from(String::from_utf8_lossy(bytes).as_ref()))
}

/// The bytes of a `T_STRING`.
///
/// # Safety
/// `raw` must be a live `T_STRING`, and no Ruby code may run while the slice is used.
unsafe fn string_bytes<'a>(raw: VALUE) -> &'a [u8] {
    let len = rb_sys::RSTRING_LEN(raw) as usize;
    if len == 0 {
        return &[];
    }
    std::slice::from_raw_parts(rb_sys::RSTRING_PTR(raw) as *const u8, len)
}

/// A string's bytes as UTF-8 text, when they are (`None`: WTF-8 or other bytes).
///
/// # Safety
/// `raw` must be the live `T_STRING` whose bytes `bytes` are.
unsafe fn utf8_text(raw: VALUE, bytes: &[u8]) -> Option<&str> {
    known_utf8_text(raw, bytes).or_else(|| std::str::from_utf8(bytes).ok())
}

/// A string's bytes as UTF-8 text when Ruby already knows them to be: its code range is
/// 7-bit (any encoding), or valid in UTF-8 or US-ASCII. No scan.
///
/// # Safety
/// `raw` must be the live `T_STRING` whose bytes `bytes` are.
unsafe fn known_utf8_text(raw: VALUE, bytes: &[u8]) -> Option<&str> {
    if bytes.is_empty() {
        return Some("");
    }
    let range = rb_sys::rb_enc_str_coderange(raw) as u32;
    let known_utf8 = range == ruby_coderange_type::RUBY_ENC_CODERANGE_7BIT as u32
        || (range == ruby_coderange_type::RUBY_ENC_CODERANGE_VALID as u32 && {
            let index = rb_sys::rb_enc_get_index(raw);
            index == rb_sys::rb_utf8_encindex() || index == rb_sys::rb_usascii_encindex()
        });
    // SAFETY: Ruby's code range says these bytes are ASCII or valid UTF-8 (Ruby's UTF-8
    // rejects surrogates and overlong forms, as Rust's does).
    known_utf8.then(|| std::str::from_utf8_unchecked(bytes))
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
                if needs_transcoding(k) {
                    self.before_ruby_code();
                    return string_value_to_js(k);
                }
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
        // SAFETY: `raw` is a live Ruby value reachable from the walk's root (Hash members
        // from their Hash, Array members from the Array or its kept copy).
        unsafe {
            match rb_sys::RB_TYPE(raw) {
                // A container here is at level depth + 1.
                T::RUBY_T_HASH | T::RUBY_T_ARRAY if is_cut_level(depth + 1) => depth_cut_marker(),
                T::RUBY_T_NIL => J::Null,
                T::RUBY_T_TRUE => J::Bool(true),
                T::RUBY_T_FALSE => J::Bool(false),
                T::RUBY_T_STRING if needs_transcoding(raw) => {
                    self.before_ruby_code();
                    J::String(string_value_to_js(raw))
                }
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
                    let name = Symbol::from_value(v)
                        .map(|sym| sym.name().map(|n| n.to_string()).unwrap_or_default());
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
        // rb_hash_foreach raises if the Hash is restructured under it (by an element's
        // `to_h`/`inspect`): caught, what was read so far is kept.
        // SAFETY: `hash` is a live T_HASH; `hash_pair` takes a `HashState`.
        unsafe { foreach_protected(hash, &mut state, hash_pair) };
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
    // A key transcoded to UTF-8 may meet a key with the same text in another encoding.
    state.all_strings &= rb_sys::RB_TYPE(key) == T::RUBY_T_STRING && !needs_transcoding(key);
    let key = state.walk.key(key);
    let val = state.walk.value(val, state.depth + 1);
    if state.all_strings {
        state.map.push_unique(key, val);
    } else {
        state.map.insert(key, val);
    }
    st_retval::ST_CONTINUE as c_int
}

/// A `rb_hash_foreach` callback: key, value, and the walk's state as a `VALUE`.
type PairFn = unsafe extern "C" fn(VALUE, VALUE, VALUE) -> c_int;

/// Iterates `hash` with `pair`, which receives `state`, under `rb_protect` (a raise must
/// never unwind through Rust frames). `false` when it raised (the error is cleared).
///
/// # Safety
/// `hash` is a live T_HASH and `pair` expects exactly an `S`.
unsafe fn foreach_protected<S>(hash: VALUE, state: &mut S, pair: PairFn) -> bool {
    let args: (VALUE, *mut S, PairFn) = (hash, state, pair);
    let mut failed: c_int = 0;
    rb_sys::rb_protect(
        Some(foreach_trampoline::<S>),
        &args as *const _ as VALUE,
        &mut failed,
    );
    if failed != 0 {
        rb_sys::rb_set_errinfo(rb_sys::Qnil as VALUE);
    }
    failed == 0
}

unsafe extern "C" fn foreach_trampoline<S>(args: VALUE) -> VALUE {
    // SAFETY: `args` carries (hash, &mut S, pair) from `foreach_protected`, alive for the call.
    let (hash, state, pair) = *(args as *const (VALUE, *mut S, PairFn));
    rb_sys::rb_hash_foreach(hash, Some(pair), state as VALUE);
    rb_sys::Qnil as VALUE
}

/// The packing walk met something it leaves to [`to_value`].
struct GiveUp;

/// Packs a value made only of plain data ([`graphmind_core::json::packed`]): `nil`,
/// `true`/`false`, an Integer that fits 64 bits, a finite Float, a String that is UTF-8
/// text, a Symbol, an Array, a Hash with String or Symbol keys. No Ruby code runs while it
/// reads. `false` when anything else is met (`out` then holds a partial value): the caller
/// converts the value with [`to_value`] instead, which alone decides what such values
/// become; where this walk packs, the core decodes exactly what [`to_value`] builds.
pub fn write_packed(v: Value, out: &mut PackedWriter) -> bool {
    // SAFETY: `v` is a live Ruby value held by the caller; the walk runs no Ruby code.
    unsafe { pack_raw(v.as_raw(), 0, out).is_ok() }
}

/// # Safety
/// `raw` is a live Ruby value reachable from the walk's root; no Ruby code runs.
unsafe fn pack_raw(raw: VALUE, depth: usize, out: &mut PackedWriter) -> Result<(), GiveUp> {
    let taken = |written: bool| if written { Ok(()) } else { Err(GiveUp) };
    match rb_sys::RB_TYPE(raw) {
        T::RUBY_T_NIL => out.null(),
        T::RUBY_T_TRUE => out.bool(true),
        T::RUBY_T_FALSE => out.bool(false),
        T::RUBY_T_FIXNUM => out.int(rb_sys::FIX2LONG(raw) as i64),
        T::RUBY_T_FLOAT => return taken(out.float(rb_sys::rb_float_value(raw))),
        T::RUBY_T_STRING | T::RUBY_T_SYMBOL => {
            return taken(out.string(name_text(raw)?.as_bytes()))
        }
        T::RUBY_T_ARRAY if depth < MAX_PACKED_DEPTH => {
            let len = rb_sys::RARRAY_LEN(raw).max(0);
            taken(out.array(len as usize))?;
            for i in 0..len {
                pack_raw(rb_sys::RARRAY_AREF(raw, i as _), depth + 1, out)?;
            }
        }
        T::RUBY_T_HASH if depth < MAX_PACKED_DEPTH => {
            taken(out.object(rb_sys::RHASH_SIZE(raw) as usize))?;
            let mut state = PackState {
                out,
                depth,
                members: 0,
                gave_up: false,
            };
            // No Ruby code runs, so nothing can restructure the Hash: a raise is not
            // expected, and gives up all the same.
            if !foreach_protected(raw, &mut state, pack_hash_pair) {
                return Err(GiveUp);
            }
            if state.gave_up || state.members != rb_sys::RHASH_SIZE(raw) as usize {
                return Err(GiveUp);
            }
        }
        _ => return Err(GiveUp),
    }
    Ok(())
}

/// The text of a String, or of a Symbol's name, when Ruby knows it to be UTF-8
/// ([`known_utf8_text`]; anything else is left to [`to_value`]). Only such keys are taken,
/// so two keys of one Hash never have the same bytes (two Strings with equal bytes in
/// different encodings can be different keys, which [`to_value`] keeps apart).
///
/// # Safety
/// `raw` is a live `T_STRING` or `T_SYMBOL`; no Ruby code runs while the text is used.
unsafe fn name_text<'a>(raw: VALUE) -> Result<&'a str, GiveUp> {
    let s = if rb_sys::RB_TYPE(raw) == T::RUBY_T_SYMBOL {
        rb_sys::rb_sym2str(raw)
    } else {
        raw
    };
    known_utf8_text(s, string_bytes(s)).ok_or(GiveUp)
}

struct PackState<'o> {
    out: &'o mut PackedWriter,
    depth: usize,
    members: usize,
    gave_up: bool,
}

unsafe extern "C" fn pack_hash_pair(key: VALUE, val: VALUE, arg: VALUE) -> c_int {
    // SAFETY: `arg` is the `PackState` owned by `pack_raw`, alive for the iteration; the
    // key and value are live members of the Hash being iterated.
    let state = &mut *(arg as *mut PackState);
    let packed = match rb_sys::RB_TYPE(key) {
        T::RUBY_T_STRING | T::RUBY_T_SYMBOL => {
            name_text(key).is_ok_and(|k| state.out.key(k.as_bytes()))
                && pack_raw(val, state.depth + 1, state.out).is_ok()
        }
        _ => false,
    };
    if !packed {
        state.gave_up = true;
        return st_retval::ST_STOP as c_int;
    }
    state.members += 1;
    st_retval::ST_CONTINUE as c_int
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
        J::Number(Number::BigInt(digits)) => ruby
            .module_kernel()
            .funcall("Integer", (digits.as_ref(),))?,
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
