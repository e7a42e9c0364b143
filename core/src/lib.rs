//! `graphmind-core`: everything an app instrumented with GraphMind does, once, in Rust.
//!
//! Every SDK (C, Python, Ruby, Node) wraps this crate; none re-implements a rule. Each
//! concern lives in its own module, mostly as pure functions so that the conformance
//! vectors in `tests/vectors/` can check it without a socket.

pub mod json;

pub use json::{JsStr, Map, Number, Value};
pub mod canonical;
pub mod fingerprint;
pub mod loop_guard;
pub mod smart;
pub mod redact;
pub mod edit_input;
pub mod llm;
