//! The one source of randomness: every id key, digest salt and token is drawn from the
//! operating system (`getrandom`), nowhere else.
//!
//! Ids and salts must never stop the app being debugged (fail open): when the OS refuses,
//! [`bytes_or_fallback`] mixes std's per-process hasher keys (themselves drawn from the OS
//! when it allows), the clock, the process id and a counter. Secrets (the server's auth and
//! claim tokens) use [`bytes`] and fail with [`RandomError`] instead of guessing.

use std::sync::atomic::{AtomicU64, Ordering};

/// The operating system gave no random bytes.
#[derive(Debug, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct RandomError(String);

/// `N` bytes from the operating system's random source.
pub fn bytes<const N: usize>() -> Result<[u8; N], RandomError> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out).map_err(|e| RandomError(e.to_string()))?;
    Ok(out)
}

/// `N` bytes from the operating system, or, when it refuses, a hashed mix that is still
/// distinct per call and per process (for ids and salts, never for secrets).
pub fn bytes_or_fallback<const N: usize>() -> [u8; N] {
    bytes().unwrap_or_else(|_| fallback())
}

/// `2 * N` lowercase hex digits of OS randomness (a secret: the server's tokens).
pub fn hex<const N: usize>() -> Result<String, RandomError> {
    bytes::<N>().map(|b| to_hex(&b))
}

/// Lowercase hex of `bytes`, two digits a byte: how every digest, id and token is spelled.
pub fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
    out
}

fn fallback<const N: usize>() -> [u8; N] {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut out = [0u8; N];
    for chunk in out.chunks_mut(8) {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_bytes_differ_between_calls() {
        let a = bytes::<16>().unwrap();
        let b = bytes::<16>().unwrap();
        assert_ne!(a, b);
        assert_ne!(a, [0u8; 16]);
    }

    #[test]
    fn hex_spells_two_digits_a_byte() {
        assert_eq!(to_hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        let h = hex::<16>().unwrap();
        assert_eq!(h.len(), 32);
        assert!(h
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[test]
    fn the_fallback_is_distinct_per_call_and_fills_odd_lengths() {
        let a = fallback::<13>();
        let b = fallback::<13>();
        assert_ne!(a, b);
        assert_ne!(&a[8..], &[0u8; 5]);
    }
}
