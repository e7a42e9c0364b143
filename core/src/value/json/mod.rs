//! JSON as the instrumented app's languages hold it: values with lone surrogates, ordered
//! keys and numbers of every host type, a strict parser that never panics, and a writer that
//! spells everything as JavaScript's `JSON.stringify` does.

pub mod packed;
mod parse;
mod string;
mod value;
mod write;

pub use parse::{
    nesting_depth, nests_less_than, parse, parse_str, parse_value_text, parse_with_opaque,
    validate, ParseError, ParseErrorKind, MAX_JSON_DEPTH, MAX_OPAQUE_PATHS,
};
pub(crate) use parse::{number_value, skip_plain_string_bytes, ObjectEntries};
pub use string::{cmp_utf16_bytes, CodePoints, JsStr, JsStrBuilder};
pub use value::{Map, Number, Value};
pub(crate) use write::{is_plain, needs_attention, ESCAPE_CLASS, ESCAPE_SHORT, ESCAPE_UNICODE};
pub use write::{to_string, write_f64, write_number, write_string, write_value};
