//! Compact unique ids for runs and node instances: `prefix_` and 12 hex digits.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 64 unpredictable-enough bits (per-process random keys mixed with a counter and the
/// clock). Ids, not secrets: tokens are minted by the server from the OS's randomness.
pub fn random_u64() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// A new id `prefix_xxxxxxxxxxxx` (12 lowercase hex digits).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{:012x}", random_u64() & 0xFFFF_FFFF_FFFF)
}

/// Milliseconds since the Unix epoch, as the envelope's `ts`.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_have_the_reference_shape_and_do_not_repeat() {
        let ids: std::collections::HashSet<String> = (0..10_000).map(|_| super::new_id("run")).collect();
        assert_eq!(ids.len(), 10_000);
        let id = ids.iter().next().unwrap();
        assert!(id.starts_with("run_") && id.len() == 16, "{id}");
    }
}
