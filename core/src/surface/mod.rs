//! What every binding exports, listed once: the surfaces (C ABI, Python, Ruby, Node) only
//! map these names into their language's spelling and turn values into its objects.
//!
//! - [`next_code`]: the integer encoding of a step's [`Next`](crate::step::Next), as named
//!   constants (`RUN`, `RETURN_RESULT`, ...) a binding hands its host language.
//! - [`options`]: the session option table: each option's name in every language's
//!   spelling, its kind (seconds in Python and Ruby are milliseconds in the core), its
//!   default and its environment variable; the values are checked by
//!   [`Options::from_json`](crate::config::Options::from_json).
//! - [`pure`]: the pure functions each binding re-exports (canonical JSON, fingerprints,
//!   the LLM-capture, edit-input and smart-breakpoint helpers, the loop guard on its own),
//!   each taking and returning [`Value`](crate::json::Value)s and strings.

pub mod next_code;
pub mod options;
pub mod pure;
