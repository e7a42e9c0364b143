//! Reading one wire envelope (`{gm, seq, ts, runId, type, payload}`) out of a text frame.
//!
//! [`parse_envelope`] is the ONE place the server turns frame bytes into an envelope; it
//! delegates to the core's `graphmind_core::wire::parse_envelope` (the reference's rules:
//! not an envelope -> invalid, `gm` != 1 -> version mismatch, unknown type -> tolerated and
//! opaque, known type with a bad payload -> invalid) and keeps only what the server uses.

use graphmind_core::event::{self, Direction};
use graphmind_core::json::Value;
use graphmind_core::wire::{self, ParseOutcome};

pub use graphmind_core::event::{MessageType, WILDCARD_RUN_ID};

/// Protocol MAJOR version this server speaks (envelope `gm`): the core's.
pub const PROTOCOL_VERSION: i64 = event::PROTOCOL_VERSION as i64;
/// Largest `seq` the schema accepts (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SEQ: u64 = 9_007_199_254_740_991;

/// Whether `t` is one of the protocol's known message types (the core's declarations).
pub fn is_known_type(t: &str) -> bool {
    MessageType::parse(t).is_some()
}

/// Whether `t` is a type only a viewer sends (`exec.resume`, breakpoints, mode).
pub fn is_control_type(t: &str) -> bool {
    MessageType::parse(t).is_some_and(|m| m.direction() == Direction::Control)
}

/// Whether `t` is a handshake type (`hello`, `hello.ack`).
pub fn is_handshake_type(t: &str) -> bool {
    MessageType::parse(t).is_some_and(|m| m.direction() == Direction::Handshake)
}

/// One envelope, its payload parsed.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// Sender's sequence number.
    pub seq: u64,
    /// Sender's epoch milliseconds.
    pub ts: f64,
    /// The run, or `*`.
    pub run_id: String,
    /// The message type (known or not).
    pub kind: String,
    /// `kind` when it is one the protocol declares.
    pub message: Option<MessageType>,
    /// The payload, opaque for unknown types.
    pub payload: Value,
}

/// What a frame turned out to be.
#[derive(Debug)]
pub enum Parsed {
    /// A well-formed v1 envelope.
    Ok(Envelope),
    /// Envelope-shaped, but another protocol version (`gm` as sent).
    VersionMismatch(String),
    /// Not an envelope, or a known type with a bad payload; the reason.
    Invalid(String),
}

/// Parses one text frame as an envelope (see the module doc for the outcomes).
pub fn parse_envelope(frame: &[u8]) -> Parsed {
    from_outcome(wire::parse_envelope(frame))
}

/// [`parse_envelope`]'s verdict without building the payload's `input` and `output` (the
/// core's `wire::check_envelope`): they are checked as JSON and are `null` in the returned
/// payload. For a reader that stores the frame's text as it arrived (the spool import).
pub fn check_envelope(frame: &str) -> Parsed {
    from_outcome(wire::check_envelope(frame))
}

/// The same checks on an already parsed value (a viewer's `control` envelope).
pub fn envelope_from_value(v: Value) -> Parsed {
    from_outcome(wire::parse_envelope_value(v))
}

fn from_outcome(outcome: ParseOutcome) -> Parsed {
    match outcome {
        ParseOutcome::Ok(e) | ParseOutcome::UnknownType(e) => {
            let mut object = e.object;
            let payload = object.remove("payload").unwrap_or_default();
            Parsed::Ok(Envelope {
                seq: e.seq,
                ts: e.ts as f64,
                run_id: e.run_id,
                message: e.message_type,
                kind: e.type_name,
                payload,
            })
        }
        ParseOutcome::VersionMismatch { received, .. } => {
            Parsed::VersionMismatch(received.to_string())
        }
        ParseOutcome::Invalid(i) => Parsed::Invalid(i.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_v1_envelope() {
        let f = br#"{"gm":1,"seq":3,"ts":1756254187512,"runId":"r1","type":"node.started","payload":{"nodeId":"tool:x","kind":"tool","name":"x","instanceId":"c1"},"extra":true}"#;
        let Parsed::Ok(e) = parse_envelope(f) else {
            panic!()
        };
        assert_eq!(
            (e.seq, e.ts, e.run_id.as_str(), e.kind.as_str()),
            (3, 1756254187512.0, "r1", "node.started")
        );
        assert_eq!(e.message, Some(MessageType::NodeStarted));
        assert_eq!(
            e.payload.get("nodeId").and_then(Value::as_str),
            Some("tool:x")
        );
        let Parsed::Ok(u) = parse_envelope(
            br#"{"gm":1,"seq":0,"ts":0,"runId":"r","type":"custom.x","payload":[1]}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            graphmind_core::json::to_string(&u.payload),
            "[1]",
            "unknown types are opaque"
        );
        assert_eq!(u.message, None);
    }

    #[test]
    fn rejects_other_versions_and_shapes() {
        assert!(
            matches!(parse_envelope(br#"{"gm":2,"seq":0,"ts":0,"runId":"r","type":"x","payload":{}}"#), Parsed::VersionMismatch(v) if v == "2")
        );
        for bad in [
            &b"nope"[..],
            br#"[1]"#,
            br#"{"seq":0,"ts":0,"runId":"r","type":"x","payload":{}}"#,
            br#"{"gm":1,"seq":-1,"ts":0,"runId":"r","type":"x","payload":{}}"#,
            br#"{"gm":1,"seq":1.5,"ts":0,"runId":"r","type":"x","payload":{}}"#,
            br#"{"gm":1,"seq":0,"ts":"0","runId":"r","type":"x","payload":{}}"#,
            br#"{"gm":1,"seq":0,"ts":0,"runId":"r","type":"node.started","payload":{"nodeId":"x"}}"#,
            br#"{"gm":1,"seq":0,"ts":0,"runId":"r","type":7,"payload":{}}"#,
        ] {
            assert!(matches!(parse_envelope(bad), Parsed::Invalid(_)), "{}", String::from_utf8_lossy(bad));
        }
    }
}
