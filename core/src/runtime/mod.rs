//! The runtime layer: what runs inside the app. The session an SDK talks to
//! ([`session`]) with its link ([`transport`]), replay ring ([`buffer`]) and on-disk spool
//! ([`spool`]); gates and the steps that pass them ([`gate`], [`step`], [`llm_step`]);
//! replaying a recorded run ([`replay`]); the options resolved against the environment
//! ([`config`]); locks that survive `fork()` ([`sync`], [`fork`]) and rate-limited
//! warnings ([`warn`]). It applies the rules layer's functions; nothing below uses it.

pub mod buffer;
pub mod config;
pub mod fork;
pub mod gate;
pub mod llm_step;
pub mod replay;
pub mod session;
pub mod spool;
pub mod step;
pub mod sync;
pub mod transport;
pub mod warn;
