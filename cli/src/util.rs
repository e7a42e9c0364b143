//! Small helpers shared by the server's modules: clocks, ids and JSON spelling.

use graphmind_core::json::{write_f64, write_string, JsStr};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Wall clock in epoch milliseconds, as an integer-valued `f64` (the envelope `ts`).
pub fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as f64).unwrap_or(0.0)
}

/// A fresh 32-hex-digit identifier (claim tokens, request ids). Unpredictable enough for a
/// local tool: it hashes the clock, the process id, a counter and a stack address.
pub fn new_token() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let local = 0u8;
    let mut h = Sha256::new();
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(n.to_le_bytes());
    h.update((&local as *const u8 as usize).to_le_bytes());
    let digest = h.finalize();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// `s` as a JSON string literal, spelled as `JSON.stringify` would.
pub fn js(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_string(&JsStr::from(s), &mut out);
    out
}

/// `f` as a JSON number, spelled as `JSON.stringify` would (`1756254187512`, not `...512.0`).
pub fn num(f: f64) -> String {
    let mut out = String::new();
    write_f64(f, &mut out);
    out
}
