//! The storage budget for one event's payload (`MAX_PAYLOAD_BYTES`).
//!
//! [`shrink_for_storage`] is the single call site of the shrinker. Until
//! `graphmind_core::shrink::serialize_payload` exists (branch `shrink`), an oversized
//! payload is stored as received; switching is a change to that function's body only.

use crate::envelope::Envelope;
use graphmind_core::json::{self, Map, Value};

/// Largest payload stored as is: 512 KB of JSON (reference: `MAX_PAYLOAD_BYTES`).
pub const MAX_PAYLOAD_BYTES: usize = 512 * 1024;

/// The text to store for a frame: the frame exactly as received, unless its payload is over
/// budget and the shrinker produced a smaller one, in which case the envelope is written
/// again around the shrunk payload.
pub fn stored_frame(frame: &str, env: &Envelope) -> String {
    // A frame within budget cannot hold a payload over it: skip measuring.
    if frame.len() <= MAX_PAYLOAD_BYTES {
        return frame.to_owned();
    }
    if json::to_string(&env.payload).len() <= MAX_PAYLOAD_BYTES {
        return frame.to_owned();
    }
    match shrink_for_storage(&env.payload) {
        None => frame.to_owned(),
        Some(shrunk) => {
            let mut m = Map::new();
            m.insert("gm", Value::from(1i64));
            m.insert("seq", Value::from(env.seq));
            m.insert("ts", Value::from(env.ts));
            m.insert("runId", Value::from(env.run_id.as_str()));
            m.insert("type", Value::from(env.kind.as_str()));
            m.insert("payload", shrunk);
            json::to_string(&Value::Object(m))
        }
    }
}

/// Shrinks an over-budget payload. TODO(shrink): return
/// `Some(graphmind_core::shrink::serialize_payload(payload, MAX_PAYLOAD_BYTES).payload)` once
/// the `shrink` branch is merged; until then nothing is shrunk and the payload is stored as is.
pub fn shrink_for_storage(_payload: &Value) -> Option<Value> {
    None
}
