//! A value handed to the session by a binding: already built as a [`Value`], as the JSON
//! text the host's own encoder wrote (`JSON.stringify` in Node, a C caller's buffer), or
//! packed by the binding ([`crate::json::packed`], Python and Ruby).
//!
//! Text and packed values are read where they are first needed. With no debugger attached nothing on the
//! application thread reads a node's input or output (the loop guard is fed by the worker,
//! gates cannot hold, edits cannot happen), so the session hands the text to its worker and
//! the application thread pays only for a copy of the bytes. With a debugger attached the
//! value is parsed at once, as a gate may need it.

use crate::json::packed::PackedWriter;
use crate::json::{self, Value};
use std::cell::RefCell;

/// Packing buffers above this size are not kept between calls (one huge value does not
/// pin its memory for the thread's lifetime).
const KEEP_PACKED_BYTES: usize = 1 << 20;

thread_local! {
    /// The calling thread's buffer for packing values.
    static PACKED: RefCell<PackedWriter> = const { RefCell::new(PackedWriter::new()) };
}

/// A node's input or output as a binding hands it over.
#[derive(Clone, Debug, PartialEq)]
pub enum HostValue {
    /// Already a core value.
    Built(Value),
    /// UTF-8 JSON text, parsed later.
    Text(Vec<u8>),
    /// UTF-8 JSON text in the core's own compact spelling: what `JSON.stringify` writes
    /// (no whitespace, keys as given, JavaScript's number form, the escapes of
    /// [`crate::json::write`]). Read like [`HostValue::Text`]; while nothing needs the value
    /// itself (no hide switch, no loop guard keying it), the worker checks it and sends it
    /// as it is instead of parsing and writing the same bytes again.
    Stringified(Vec<u8>),
    /// A packed value ([`crate::json::packed`]), decoded later.
    Packed(Vec<u8>),
}

/// What [`HostValue::into_value`] made of the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// The value (for text that is not JSON: that text as a string).
    pub value: Value,
    /// The text was not valid JSON, or the packed bytes not a packed value (the binding
    /// broke its contract; worth a warning).
    pub invalid_text: bool,
}

impl HostValue {
    /// The core value: built values as they are, text parsed. Text that is not valid JSON
    /// is kept as a JSON string of its (lossily decoded) characters rather than lost.
    pub fn into_value(self) -> Resolved {
        match self {
            HostValue::Built(value) => Resolved {
                value,
                invalid_text: false,
            },
            HostValue::Text(bytes) | HostValue::Stringified(bytes) => {
                match json::parse_value_text(&bytes) {
                    Ok(value) => Resolved {
                        value,
                        invalid_text: false,
                    },
                    Err(_) => Resolved {
                        value: Value::from(String::from_utf8_lossy(&bytes).as_ref()),
                        invalid_text: true,
                    },
                }
            }
            HostValue::Packed(bytes) => match json::packed::decode(&bytes) {
                Ok(value) => Resolved {
                    value,
                    invalid_text: false,
                },
                Err(e) => Resolved {
                    value: Value::from(format!("[graphmind: unreadable packed value: {e}]")),
                    invalid_text: true,
                },
            },
        }
    }
}

impl HostValue {
    /// A node's input or output as a binding hands it over. While no debugger is attached
    /// (`attached` false) nothing on the application thread reads it, so `pack` writes it
    /// into a buffer the thread reuses and the session gets an exact-size copy
    /// ([`HostValue::Packed`], decoded by the worker). When `pack` gives up (the host value
    /// holds something only the binding's converter handles), or while attached (gates,
    /// edits and the loop guard read the value on this thread), `build` converts it.
    pub fn packed_or_built(
        attached: bool,
        pack: impl FnOnce(&mut PackedWriter) -> bool,
        build: impl FnOnce() -> Value,
    ) -> HostValue {
        if !attached {
            if let Some(packed) = with_thread_writer(pack) {
                return packed;
            }
        }
        HostValue::Built(build())
    }
}

/// Runs `pack` on the thread's buffer (a fresh one if it is in use further up the stack);
/// what it packed, as an exact-size copy, or `None` when it gave up.
fn with_thread_writer(pack: impl FnOnce(&mut PackedWriter) -> bool) -> Option<HostValue> {
    let run = |buf: &mut PackedWriter| {
        buf.clear();
        let packed = pack(buf).then(|| HostValue::Packed(buf.as_bytes().to_vec()));
        if buf.capacity() > KEEP_PACKED_BYTES {
            *buf = PackedWriter::new();
        }
        packed
    };
    PACKED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => run(&mut buf),
        Err(_) => run(&mut PackedWriter::new()),
    })
}

impl From<Value> for HostValue {
    fn from(value: Value) -> Self {
        HostValue::Built(value)
    }
}

/// The warning for text that was not JSON (or packed bytes that were not a packed value).
pub const INVALID_TEXT_WARNING: &str =
    "a value handed over as JSON text was not valid JSON; it was recorded as a string";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_parses_to_the_same_value_as_built() {
        let text = br#"{"a":[1,2.5,"x\u00e9"],"b":null}"#.to_vec();
        let built = json::parse(&text).unwrap();
        assert_eq!(HostValue::Text(text).into_value().value, built);
        assert_eq!(
            HostValue::Built(crate::json!({"k": true})).into_value(),
            Resolved {
                value: crate::json!({"k": true}),
                invalid_text: false
            }
        );
    }

    #[test]
    fn packed_bytes_decode_and_bad_ones_are_flagged() {
        let mut w = json::packed::PackedWriter::new();
        assert!(w.object(1) && w.key(b"k"));
        w.int(7);
        let out = HostValue::Packed(w.as_bytes().to_vec()).into_value();
        assert_eq!(
            out,
            Resolved {
                value: crate::json!({"k": 7i64}),
                invalid_text: false
            }
        );
        let bad = HostValue::Packed(vec![42]).into_value();
        assert!(
            bad.invalid_text
                && bad
                    .value
                    .as_str()
                    .unwrap()
                    .contains("unreadable packed value")
        );
    }

    #[test]
    fn packed_while_detached_built_while_attached_or_when_packing_gives_up() {
        let pack = |w: &mut PackedWriter| {
            w.int(5);
            true
        };
        let built = || Value::from("built");
        let detached = HostValue::packed_or_built(false, pack, built);
        assert!(matches!(detached, HostValue::Packed(_)));
        assert_eq!(detached.into_value().value, crate::json!(5i64));
        assert_eq!(
            HostValue::packed_or_built(true, pack, built),
            HostValue::Built(Value::from("built"))
        );
        assert_eq!(
            HostValue::packed_or_built(false, |_| false, built),
            HostValue::Built(Value::from("built"))
        );
    }

    #[test]
    fn invalid_text_is_kept_as_a_string_and_flagged() {
        let out = HostValue::Text(b"{not json".to_vec()).into_value();
        assert!(out.invalid_text);
        assert_eq!(out.value, Value::from("{not json"));
    }
}
