//! `graphmind-core`: everything an app instrumented with GraphMind does, once, in Rust.
//!
//! Every SDK (C, Python, Ruby, Node) wraps this crate; none re-implements a rule. Each
//! concern lives in its own module, mostly as pure functions so that the conformance
//! vectors in `tests/vectors/` can check it without a socket.
//!
//! The modules are grouped in five layers, one folder each, and a layer uses only the
//! layers below it (one direction, checked by `tests/layers.rs`):
//!
//! ```text
//! surface    what every binding exports, listed once
//!    |
//! runtime    the session, its worker and link, gates, steps, replay, spool, config
//!    |
//! rules      the spec's rules as functions: redaction, shrink, loop guard, LLM capture...
//!    |
//! protocol   the wire: message types and payloads, envelopes, ids
//!    |
//! value      JSON values as the hosts hold them, canonical text, the depth budget
//! ```
//!
//! The layer folders are private: every module keeps its one public path at the crate
//! root (`graphmind_core::session::Session`, `graphmind_core::json::Value`), re-exported
//! below, so that the bindings and the CLI name modules, not layers.

mod protocol;
mod rules;
mod runtime;
pub mod surface;
mod value;

pub use protocol::{event, random, wire};
pub use rules::{
    codec, declared_schema, edit_input, edit_schema, failure_once, fingerprint, llm, llm_builtin,
    loop_guard, mcp, payload_cap, redact, shrink, smart, tool_edit,
};
pub use runtime::{
    buffer, config, fork, gate, llm_step, replay, session, spool, step, sync, transport, warn,
};
pub use value::{canonical, host_value, json};

pub use json::{JsStr, Map, Number, Value};
