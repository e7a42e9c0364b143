//! How a wire object is declared once: [`wire_object!`] and [`wire_message!`] turn one list
//! of `field: Type = "wireKey"` lines into the struct, its conversion to a JSON [`Value`]
//! (both borrowing and consuming), and [`FieldSpec`]s that a test checks against the
//! reference's wire schema.
//!
//! The conventions every declaration shares, so no payload spells them again:
//! - fields are written in declaration order; an `Option` field is left out when `None`,
//!   never written as `null`, and is not required on the wire; every other field is;
//! - a key path `["versions", "client"]` writes into a nested object, created when its first
//!   present member is written (so a group whose members are all `None` is left out);
//! - the entry `extra: Map = ..` is where caller-supplied fields travel untouched (the
//!   protocol is loose); fields declared after it are the ones the session adds last, and
//!   they replace an extra of the same name in place instead of repeating the key.

use crate::json::{JsStr, Map, Value};

/// A value with a JSON form of its own (strings, numbers, vocabularies, nested objects).
pub trait ToWire {
    /// The JSON value, copying what it needs.
    fn to_wire(&self) -> Value;

    /// The JSON value, moving what it can.
    fn into_wire(self) -> Value
    where
        Self: Sized,
    {
        self.to_wire()
    }
}

macro_rules! to_wire_via_from {
    ($($t:ty),+) => {
        $(impl ToWire for $t {
            fn to_wire(&self) -> Value {
                Value::from(self.clone())
            }
            fn into_wire(self) -> Value {
                Value::from(self)
            }
        })+
    };
}

to_wire_via_from!(JsStr, Value, Map, bool, u64, i64, f64, &'static str);

impl<T: ToWire> ToWire for Vec<T> {
    fn to_wire(&self) -> Value {
        Value::Array(self.iter().map(ToWire::to_wire).collect())
    }
    fn into_wire(self) -> Value {
        Value::Array(self.into_iter().map(ToWire::into_wire).collect())
    }
}

/// A declared field's type: whether the wire requires it, and its value when present.
pub trait WireField {
    /// The field is always written (everything but `Option`).
    const REQUIRED: bool;

    /// The value to write, `None` to leave the key out.
    fn field_ref(&self) -> Option<Value>;

    /// [`WireField::field_ref`], moving the value.
    fn field_owned(self) -> Option<Value>;
}

impl<T: ToWire> WireField for T {
    const REQUIRED: bool = true;
    fn field_ref(&self) -> Option<Value> {
        Some(self.to_wire())
    }
    fn field_owned(self) -> Option<Value> {
        Some(self.into_wire())
    }
}

impl<T: ToWire> WireField for Option<T> {
    const REQUIRED: bool = false;
    fn field_ref(&self) -> Option<Value> {
        self.as_ref().map(ToWire::to_wire)
    }
    fn field_owned(self) -> Option<Value> {
        self.map(ToWire::into_wire)
    }
}

/// One declared field of a wire object, in wire order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSpec {
    /// Its key path from the object (`["versions", "client"]` for a nested member); empty
    /// for the place where caller-supplied extra fields travel.
    pub path: &'static [&'static str],
    /// Whether it is always written.
    pub required: bool,
}

/// Writes one declared field at `path`. Before the extras the key cannot be in the map yet
/// (declared keys are distinct), so it is appended without a look-up; after them it replaces
/// an extra of the same name in place.
pub fn put_field(map: &mut Map, path: &[&str], value: Option<Value>, after_extra: bool) {
    let Some(value) = value else { return };
    match path {
        [key] if after_extra => {
            map.insert(*key, value);
        }
        [key] => map.push_unique((*key).into(), value),
        [group, rest @ ..] => {
            if let Some(Value::Object(inner)) = map.get_mut(group) {
                put_field(inner, rest, Some(value), true);
            } else {
                let mut inner = Map::with_capacity(2);
                put_field(&mut inner, rest, Some(value), false);
                put_field(map, &[*group], Some(Value::Object(inner)), after_extra);
            }
        }
        [] => {}
    }
}

/// Writes caller-supplied extra fields (a copy), replacing declared keys of the same name.
pub fn put_extra(map: &mut Map, extra: &Map) {
    for (k, v) in extra.iter() {
        map.insert(k.clone(), v.clone());
    }
}

/// [`put_extra`], moving the fields.
pub fn put_extra_owned(map: &mut Map, extra: Map) {
    for (k, v) in extra {
        map.insert(k, v);
    }
}

/// Declares a wire object (a piece of a payload): the struct, `FIELDS`, [`ToWire`] and an
/// inherent `to_value`. See the module doc for the field syntax.
macro_rules! wire_object {
    ($(#[$meta:meta])* pub struct $name:ident { $($body:tt)* }) => {
        wire_object!(@declare $(#[$meta])* $name { $($body)* });

        impl $name {
            /// The JSON object, keys in wire order.
            pub fn to_value(&self) -> Value {
                $crate::event::declare::ToWire::to_wire(self)
            }
        }
    };

    (@declare $(#[$meta:meta])* $name:ident {
        $($(#[$fmeta:meta])* pub $field:ident : $fty:ty = $path:tt),+ $(,)?
    }) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$fmeta])* pub $field: $fty,)+
        }

        impl $name {
            /// The declared fields in wire order (an empty path marks the extras).
            pub const FIELDS: &'static [$crate::event::declare::FieldSpec] =
                &[$(wire_object!(@spec $fty, $path)),+];
        }

        impl $crate::event::declare::ToWire for $name {
            #[allow(unused_assignments, unused_mut)]
            fn to_wire(&self) -> Value {
                let mut m = Map::with_capacity(
                    Self::FIELDS.len() $(+ wire_object!(@len self.$field, $path))+,
                );
                let mut after_extra = false;
                $(wire_object!(@put m, after_extra, &self.$field, field_ref, put_extra, $path);)+
                Value::Object(m)
            }

            #[allow(unused_assignments, unused_mut)]
            fn into_wire(self) -> Value {
                let mut m = Map::with_capacity(
                    Self::FIELDS.len() $(+ wire_object!(@len self.$field, $path))+,
                );
                let mut after_extra = false;
                $(wire_object!(@put m, after_extra, self.$field, field_owned, put_extra_owned, $path);)+
                Value::Object(m)
            }
        }
    };

    (@spec $fty:ty, ..) => {
        $crate::event::declare::FieldSpec { path: &[], required: false }
    };
    (@spec $fty:ty, $key:literal) => {
        $crate::event::declare::FieldSpec {
            path: &[$key],
            required: <$fty as $crate::event::declare::WireField>::REQUIRED,
        }
    };
    (@spec $fty:ty, [$($key:literal),+]) => {
        $crate::event::declare::FieldSpec {
            path: &[$($key),+],
            required: <$fty as $crate::event::declare::WireField>::REQUIRED,
        }
    };

    (@len $value:expr, ..) => { $value.len() };
    (@len $value:expr, $path:tt) => { 0 };

    (@put $m:ident, $after:ident, $value:expr, $get:ident, $extra:ident, ..) => {
        $crate::event::declare::$extra(&mut $m, $value);
        $after = true;
    };
    (@put $m:ident, $after:ident, $value:expr, $get:ident, $extra:ident, $key:literal) => {
        $crate::event::declare::put_field(
            &mut $m,
            &[$key],
            $crate::event::declare::WireField::$get($value),
            $after,
        );
    };
    (@put $m:ident, $after:ident, $value:expr, $get:ident, $extra:ident, [$($key:literal),+]) => {
        $crate::event::declare::put_field(
            &mut $m,
            &[$($key),+],
            $crate::event::declare::WireField::$get($value),
            $after,
        );
    };
}

/// Declares a message payload: as [`wire_object!`], plus its [`crate::event::Message`]
/// implementation under the [`crate::event::MessageType`] of the same name.
macro_rules! wire_message {
    ($(#[$meta:meta])* pub struct $name:ident { $($body:tt)* }) => {
        wire_object!(@declare $(#[$meta])* $name { $($body)* });

        impl Message for $name {
            const TYPE: MessageType = MessageType::$name;
            const FIELDS: &'static [$crate::event::declare::FieldSpec] = $name::FIELDS;
            fn to_value(&self) -> Value {
                $crate::event::declare::ToWire::to_wire(self)
            }
            fn into_value(self) -> Value {
                $crate::event::declare::ToWire::into_wire(self)
            }
        }
    };
}
