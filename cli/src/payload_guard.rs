//! The storage budget for one event's payload (`MAX_PAYLOAD_BYTES`).
//!
//! A payload over 512 KB of JSON is stored shrunk by the core's
//! `graphmind_core::shrink::serialize_payload` (the reference's `serializePayload`: the
//! event stays a valid event of its type, its largest fields shrunk, with the truncation
//! marker). The envelope is written again around the shrunk payload, so the live fan-out,
//! a reload and `record` all show the same thing.

use crate::envelope::Envelope;
use graphmind_core::json::{self, Map, Value};
use graphmind_core::shrink;
use std::borrow::Cow;

/// Largest payload stored as is: 512 KB of JSON (reference: `MAX_PAYLOAD_BYTES`).
pub const MAX_PAYLOAD_BYTES: usize = shrink::MAX_PAYLOAD_BYTES;

/// The text to store for a frame: the frame exactly as received, unless its payload is over
/// budget, in which case the envelope is written again around the shrunk payload.
/// Borrowed when it is the frame as received (nothing copied).
pub fn stored_frame<'a>(frame: &'a str, env: &Envelope) -> Cow<'a, str> {
    // A frame within budget cannot hold a payload over it: skip measuring.
    if frame.len() <= MAX_PAYLOAD_BYTES {
        return Cow::Borrowed(frame);
    }
    match shrink_for_storage(&env.payload, &env.kind) {
        None => Cow::Borrowed(frame),
        Some(shrunk) => {
            let mut m = Map::new();
            m.insert("gm", Value::from(1i64));
            m.insert("seq", Value::from(env.seq));
            m.insert("ts", Value::from(env.ts));
            m.insert("runId", Value::from(env.run_id.as_str()));
            m.insert("type", Value::from(env.kind.as_str()));
            m.insert("payload", shrunk);
            Cow::Owned(json::to_string(&Value::Object(m)))
        }
    }
}

/// The payload shrunk to [`MAX_PAYLOAD_BYTES`], or `None` when it already fits.
pub fn shrink_for_storage(payload: &Value, event_type: &str) -> Option<Value> {
    let out = shrink::serialize_payload(payload, MAX_PAYLOAD_BYTES, Some(event_type));
    if !out.truncated {
        return None;
    }
    json::parse_str(&out.json).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_payload_is_stored_shrunk_and_stays_an_event() {
        let big = format!(
            r#"{{"gm":1,"seq":4,"ts":1700000000000,"runId":"r","type":"node.finished","payload":{{"nodeId":"tool:t","instanceId":"i","durationMs":1,"status":"ok","output":"{}"}}}}"#,
            "y".repeat(600 * 1024)
        );
        let crate::envelope::Parsed::Ok(env) = crate::envelope::parse_envelope(big.as_bytes())
        else {
            panic!()
        };
        let stored = stored_frame(&big, &env);
        assert!(stored.len() < MAX_PAYLOAD_BYTES + 1024, "{}", stored.len());
        let v = json::parse_str(&stored).unwrap();
        let p = v.get("payload").unwrap();
        assert_eq!(
            p.get("__graphmindTruncated").and_then(Value::as_bool),
            Some(true)
        );
        assert_eq!(p.get("nodeId").and_then(Value::as_str), Some("tool:t"));
        assert!(matches!(
            crate::envelope::parse_envelope(stored.as_bytes()),
            crate::envelope::Parsed::Ok(_)
        ));
        let small = r#"{"gm":1,"seq":0,"ts":0,"runId":"r","type":"x","payload":{}}"#;
        let crate::envelope::Parsed::Ok(env) = crate::envelope::parse_envelope(small.as_bytes())
        else {
            panic!()
        };
        assert_eq!(stored_frame(small, &env), small);
    }
}
