//! `graphmind-core`: everything an app instrumented with GraphMind does, once, in Rust.
//!
//! Every SDK (C, Python, Ruby, Node) wraps this crate; none re-implements a rule. Each
//! concern lives in its own module, mostly as pure functions so that the conformance
//! vectors in `tests/vectors/` can check it without a socket.

pub mod buffer;
pub mod canonical;
pub mod codec;
pub mod config;
pub mod declared_schema;
pub mod edit_input;
pub mod edit_schema;
pub mod event;
pub mod failure_once;
pub mod fingerprint;
pub mod fork;
pub mod gate;
pub mod host_value;
pub mod json;
pub mod llm;
pub mod llm_builtin;
pub mod llm_step;
pub mod loop_guard;
pub mod mcp;
pub mod payload_cap;
pub mod random;
pub mod redact;
pub mod replay;
pub mod session;
pub mod shrink;
pub mod smart;
pub mod spool;
pub mod step;
pub mod surface;
pub mod sync;
pub mod tool_edit;
pub mod transport;
pub mod warn;
pub mod wire;

pub use json::{JsStr, Map, Number, Value};
