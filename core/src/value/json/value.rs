//! [`Value`]: a JSON value as an instrumented app hands it over.
//!
//! Objects keep insertion order (the wire and the shrink output preserve it; only the
//! canonical form sorts). Strings are [`JsStr`] so that lone surrogates survive. Numbers keep
//! what the host language had: a JavaScript number is an `f64`, a Python or Ruby integer is
//! an integer of any size.

use super::string::JsStr;

/// A JSON number as the host language held it.
#[derive(Clone, Debug, PartialEq)]
pub enum Number {
    /// An integer that fits in 64 bits.
    Int(i64),
    /// A double (JavaScript's only number type); may be NaN or infinite.
    Float(f64),
    /// An integer beyond 64 bits (Python `int`, Ruby `Integer`), as decimal digits with an
    /// optional leading `-`.
    BigInt(Box<str>),
}

impl Number {
    /// The value as a double, as JavaScript would see it.
    pub fn as_f64(&self) -> f64 {
        match self {
            Number::Int(i) => *i as f64,
            Number::Float(f) => *f,
            Number::BigInt(digits) => digits.parse::<f64>().unwrap_or(f64::NAN),
        }
    }
}

/// An ordered JSON object: keys in insertion order, each key at most once.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Map {
    entries: Vec<(JsStr, Value)>,
}

impl Map {
    /// An empty object.
    #[inline]
    pub fn new() -> Self {
        Map {
            entries: Vec::new(),
        }
    }

    /// An empty object with room for `n` entries.
    #[inline]
    pub fn with_capacity(n: usize) -> Self {
        Map {
            entries: Vec::with_capacity(n),
        }
    }

    /// A map over `entries` as they are, in their order; the caller guarantees that no key
    /// repeats (a parser or a binding that resolved repeats already).
    #[inline]
    pub fn from_unique_entries(entries: Vec<(JsStr, Value)>) -> Self {
        Map { entries }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the object has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value under `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// The value under a key that may hold lone surrogates.
    pub fn get_js(&self, key: &JsStr) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`. An existing key keeps its position (as JavaScript assignment
    /// does); a new key goes last. Returns the previous value.
    pub fn insert(&mut self, key: impl Into<JsStr>, value: Value) -> Option<Value> {
        let key = key.into();
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            return Some(std::mem::replace(&mut slot.1, value));
        }
        self.entries.push((key, value));
        None
    }

    /// Appends an entry without checking for an existing key; the caller guarantees that
    /// the key is new (used by parsers and builders that already know).
    #[inline]
    pub fn push_unique(&mut self, key: JsStr, value: Value) {
        self.entries.push((key, value));
    }

    /// Removes `key`, keeping the order of the rest.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let idx = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(idx).1)
    }

    /// Keeps only the entries for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&JsStr, &mut Value) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
    }

    /// Entries in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&JsStr, &Value)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Entries in order, values mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&JsStr, &mut Value)> {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &JsStr> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// Values in order.
    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.entries.iter().map(|(_, v)| v)
    }
}

impl IntoIterator for Map {
    type Item = (JsStr, Value);
    type IntoIter = std::vec::IntoIter<(JsStr, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl FromIterator<(JsStr, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (JsStr, Value)>>(iter: I) -> Self {
        let mut map = Map::new();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

/// A JSON value.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number.
    Number(Number),
    /// A string.
    String(JsStr),
    /// An array.
    Array(Vec<Value>),
    /// An object with ordered keys.
    Object(Map),
}

impl Value {
    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The object, mutably, if this is one.
    pub fn as_object_mut(&mut self) -> Option<&mut Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The string as `&str`, if this is a string without lone surrogates.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => s.as_str(),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_js_str(&self) -> Option<&JsStr> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number as a double, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(n.as_f64()),
            _ => None,
        }
    }

    /// The number as an `i64`, if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(Number::Int(i)) => Some(*i),
            Value::Number(Number::Float(f)) if f.fract() == 0.0 && f.abs() < 9.2e18 => {
                Some(*f as i64)
            }
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The member `key` of an object (`None` for other values).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object().and_then(|m| m.get(key))
    }

    /// The JSON type name as JavaScript's `typeof` would tell it apart (`array` and `null`
    /// are their own names).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(JsStr::from(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(JsStr::from(s))
    }
}

impl From<JsStr> for Value {
    fn from(s: JsStr) -> Self {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Number(Number::Int(i))
    }
}

impl From<u64> for Value {
    fn from(i: u64) -> Self {
        match i64::try_from(i) {
            Ok(i) => Value::Number(Number::Int(i)),
            Err(_) => Value::Number(Number::BigInt(i.to_string().into())),
        }
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Number(Number::Float(f))
    }
}

impl From<Vec<Value>> for Value {
    fn from(a: Vec<Value>) -> Self {
        Value::Array(a)
    }
}

impl From<Map> for Value {
    fn from(m: Map) -> Self {
        Value::Object(m)
    }
}

/// Builds a [`Value`] from JSON-like syntax, for tests and fixtures:
/// `json!({"a": [1, "x", null]})`. Keys must be string literals.
#[macro_export]
macro_rules! json {
    (null) => { $crate::json::Value::Null };
    ([ $($elem:tt),* $(,)? ]) => { $crate::json::Value::Array(vec![ $( $crate::json!($elem) ),* ]) };
    ({ $($key:literal : $val:tt),* $(,)? }) => {{
        #[allow(unused_mut)]
        let mut map = $crate::json::Map::new();
        $( map.insert($key, $crate::json!($val)); )*
        $crate::json::Value::Object(map)
    }};
    ($other:expr) => { $crate::json::Value::from($other) };
}
