//! The rules layer: the spec's rules for an instrumented app, as functions and small state
//! machines that hold no thread, lock or socket: redaction ([`redact`]), payload shrinking
//! and caps ([`shrink`], [`payload_cap`]), fingerprints ([`fingerprint`]), the loop guard
//! ([`loop_guard`], [`smart`], [`failure_once`]), edited inputs and schemas
//! ([`edit_input`], [`edit_schema`], [`declared_schema`], [`tool_edit`]), what a model
//! call records ([`llm`], [`llm_builtin`], [`codec`]) and MCP's result shapes ([`mcp`]).
//! It uses the value and protocol layers, never the runtime.

pub mod codec;
pub mod declared_schema;
pub mod edit_input;
pub mod edit_schema;
pub mod failure_once;
pub mod fingerprint;
pub mod llm;
pub mod llm_builtin;
pub mod loop_guard;
pub mod mcp;
pub mod payload_cap;
pub mod redact;
pub mod shrink;
pub mod smart;
pub mod tool_edit;
