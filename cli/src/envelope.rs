//! Reading one wire envelope (`{gm, seq, ts, runId, type, payload}`) out of a text frame.
//!
//! [`parse_envelope`] is the ONE place the server turns frame bytes into an envelope. It is
//! a stand-in until `graphmind_core::wire::parse_envelope` lands (branch `wire`); switching
//! means replacing its body and nothing else.

use graphmind_core::json::{self, Value};

/// Protocol MAJOR version this server speaks (envelope `gm`).
pub const PROTOCOL_VERSION: i64 = 1;
/// `runId` of messages not bound to a run (handshake, breakpoints, mode).
pub const WILDCARD_RUN_ID: &str = "*";
/// Largest `seq` the schema accepts (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SEQ: u64 = 9_007_199_254_740_991;

/// Event types an app sends.
pub const EVENT_TYPES: [&str; 10] = [
    "run.started",
    "run.finished",
    "graph.hint",
    "node.started",
    "node.token",
    "node.finished",
    "node.error",
    "exec.paused",
    "exec.resumed",
    "exec.refused",
];
/// Control types a viewer sends.
pub const CONTROL_TYPES: [&str; 4] = ["exec.resume", "breakpoint.set", "breakpoint.clear", "mode.set"];
/// Handshake types.
pub const HANDSHAKE_TYPES: [&str; 2] = ["hello", "hello.ack"];

/// Whether `t` is one of the protocol's known message types.
pub fn is_known_type(t: &str) -> bool {
    EVENT_TYPES.contains(&t) || CONTROL_TYPES.contains(&t) || HANDSHAKE_TYPES.contains(&t)
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
    /// Not an envelope; the reason.
    Invalid(&'static str),
}

/// Parses one text frame as an envelope: not JSON or not envelope-shaped -> `Invalid`;
/// `gm` other than 1 -> `VersionMismatch`; otherwise the fields, with `seq` a whole number
/// in `0..=MAX_SEQ`, `ts` a finite number, `runId` and `type` non-empty strings, `payload`
/// present.
pub fn parse_envelope(frame: &[u8]) -> Parsed {
    match json::parse(frame) {
        Ok(v) => envelope_from_value(v),
        Err(_) => Parsed::Invalid("frame is not valid JSON"),
    }
}

/// The checks of [`parse_envelope`] on an already parsed value (a viewer's `control`).
pub fn envelope_from_value(v: Value) -> Parsed {
    let Value::Object(mut map) = v else { return Parsed::Invalid("envelope must be an object") };
    let gm = match map.get("gm") {
        Some(Value::Number(n)) => n.clone(),
        _ => return Parsed::Invalid("gm must be a number"),
    };
    if gm.as_f64() != PROTOCOL_VERSION as f64 {
        return Parsed::VersionMismatch(json::to_string(&Value::Number(gm)));
    }
    let seq = match map.get("seq").and_then(Value::as_f64) {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= MAX_SEQ as f64 => f as u64,
        _ => return Parsed::Invalid("seq must be an integer >= 0"),
    };
    let ts = match map.get("ts").and_then(Value::as_f64) {
        Some(f) if f.is_finite() => f,
        _ => return Parsed::Invalid("ts must be a number"),
    };
    let run_id = match map.get("runId").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => s.to_owned(),
        _ => return Parsed::Invalid("runId must be a non-empty string"),
    };
    let kind = match map.get("type").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => s.to_owned(),
        _ => return Parsed::Invalid("type must be a non-empty string"),
    };
    let Some(payload) = map.remove("payload") else { return Parsed::Invalid("payload is missing") };
    Parsed::Ok(Envelope { seq, ts, run_id, kind, payload })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_v1_envelope() {
        let f = br#"{"gm":1,"seq":3,"ts":1756254187512,"runId":"r1","type":"node.started","payload":{"nodeId":"tool:x"},"extra":true}"#;
        let Parsed::Ok(e) = parse_envelope(f) else { panic!() };
        assert_eq!((e.seq, e.ts, e.run_id.as_str(), e.kind.as_str()), (3, 1756254187512.0, "r1", "node.started"));
        assert_eq!(e.payload.get("nodeId").and_then(Value::as_str), Some("tool:x"));
    }

    #[test]
    fn rejects_other_versions_and_shapes() {
        assert!(matches!(parse_envelope(br#"{"gm":2,"seq":0,"ts":0,"runId":"r","type":"x","payload":{}}"#), Parsed::VersionMismatch(v) if v == "2"));
        for bad in [
            &b"nope"[..],
            br#"[1]"#,
            br#"{"seq":0,"ts":0,"runId":"r","type":"x","payload":{}}"#,
            br#"{"gm":1,"seq":-1,"ts":0,"runId":"r","type":"x","payload":{}}"#,
            br#"{"gm":1,"seq":1.5,"ts":0,"runId":"r","type":"x","payload":{}}"#,
            br#"{"gm":1,"seq":0,"ts":"0","runId":"r","type":"x","payload":{}}"#,
            br#"{"gm":1,"seq":0,"ts":0,"runId":"","type":"x","payload":{}}"#,
            br#"{"gm":1,"seq":0,"ts":0,"runId":"r","type":7,"payload":{}}"#,
            br#"{"gm":1,"seq":0,"ts":0,"runId":"r","type":"x"}"#,
        ] {
            assert!(matches!(parse_envelope(bad), Parsed::Invalid(_)), "{}", String::from_utf8_lossy(bad));
        }
    }
}
