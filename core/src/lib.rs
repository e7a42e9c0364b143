//! `graphmind-core`: everything an app instrumented with GraphMind does, once, in Rust.
//!
//! Every SDK (C, Python, Ruby, Node) wraps this crate; none re-implements a rule. Each
//! concern lives in its own module, mostly as pure functions so that the conformance
//! vectors in `tests/vectors/` can check it without a socket.

pub mod json;
pub mod shrink;

pub use json::{JsStr, Map, Number, Value};
