//! Fingerprints: what the loop guard compares instead of whole inputs.
//!
//! A call's fingerprint is the first [`FINGERPRINT_HEX_CHARS`] lowercase hex characters of
//! the SHA-256 of its canonical text `[nodeId, input]` (see [`crate::canonical`]), UTF-8
//! encoded. The text is streamed into the hasher through a small stack buffer, so a
//! fingerprint allocates only its 32-character result.
//!
//! The salted digests of the 0.6 loop kinds (outputs, errors, laps) are HMAC-SHA-256 with a
//! per-process key; [`salted_digest`] computes them.

use crate::canonical::{self, Prepared, Sink, DEFAULT_IGNORE_KEYS};
use crate::json::{JsStr, ParseError, Value};
use sha2::{Digest, Sha256};

/// Hex characters kept of the SHA-256 (16 bytes of it).
pub const FINGERPRINT_HEX_CHARS: usize = 32;

/// The fingerprint of a call with the default ignore keys (`_meta`). `None` input (the call
/// had no arguments) fingerprints as `null`, the same as a `null` input.
pub fn fingerprint(node_id: &str, input: Option<&Value>) -> String {
    fingerprint_with(node_id, input, DEFAULT_IGNORE_KEYS)
}

/// The fingerprint of a call, removing `ignore_keys` (exact match) at every depth.
pub fn fingerprint_with(node_id: &str, input: Option<&Value>, ignore_keys: &[&str]) -> String {
    fingerprint_wtf8(node_id.as_bytes(), input, ignore_keys)
}

/// [`fingerprint_with`] for a node id that may hold lone surrogates.
pub fn fingerprint_js_with(node_id: &JsStr, input: Option<&Value>, ignore_keys: &[&str]) -> String {
    fingerprint_wtf8(node_id.as_bytes(), input, ignore_keys)
}

/// The fingerprint of a call whose input is JSON `text` (UTF-8; `None`: no input), the same
/// as parsing it and calling [`fingerprint_js_with`]; text whose tokens are already
/// canonical (what `JSON.stringify` writes) is hashed without building a value
/// ([`canonical::canonical_json_text`]).
pub fn fingerprint_text_js<K: AsRef<str>>(
    node_id: &JsStr,
    input_text: Option<&[u8]>,
    ignore_keys: &[K],
) -> Result<String, ParseError> {
    let input = input_text
        .map(|t| Prepared::new(t, ignore_keys))
        .transpose()?;
    let mut sink = HashSink::new(Sha256::new());
    canonical::write_canonical_call_prepared(
        node_id.as_bytes(),
        input.as_ref(),
        ignore_keys,
        &mut sink,
    );
    Ok(hex32(&sink.finish()))
}

fn fingerprint_wtf8(node_id: &[u8], input: Option<&Value>, ignore_keys: &[&str]) -> String {
    let mut sink = HashSink::new(Sha256::new());
    canonical::write_canonical_call(node_id, input, ignore_keys, &mut sink);
    hex32(&sink.finish())
}

/// The first 32 hex characters of the SHA-256 of `text`.
pub fn sha256_hex32(text: &[u8]) -> String {
    hex32(&Sha256::digest(text))
}

/// HMAC-SHA-256 of `message` keyed with `key`, first 32 hex characters (RFC 2104).
pub fn salted_digest(key: &[u8; 32], message: &[u8]) -> String {
    let mut mac = SaltedHasher::new(key);
    mac.put(message);
    mac.finish_hex32()
}

/// An HMAC-SHA-256 being fed (keys of at most one block, which a 32-byte salt is).
pub(crate) struct SaltedHasher {
    inner: HashSink,
    outer_key: [u8; 64],
}

impl SaltedHasher {
    pub(crate) fn new(key: &[u8; 32]) -> Self {
        let mut ipad = [0x36u8; 64];
        let mut opad = [0x5cu8; 64];
        for (i, k) in key.iter().enumerate() {
            ipad[i] ^= k;
            opad[i] ^= k;
        }
        let mut inner = Sha256::new();
        inner.update(ipad);
        SaltedHasher {
            inner: HashSink::new(inner),
            outer_key: opad,
        }
    }

    pub(crate) fn finish(self) -> [u8; 32] {
        let inner = self.inner.finish();
        let mut outer = Sha256::new();
        outer.update(self.outer_key);
        outer.update(inner);
        outer.finalize().into()
    }

    pub(crate) fn finish_hex32(self) -> String {
        hex32(&self.finish())
    }
}

impl Sink for SaltedHasher {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.inner.put(bytes);
    }
}

fn hex32(digest: &[u8]) -> String {
    to_hex(&digest[..FINGERPRINT_HEX_CHARS / 2])
}

/// Lowercase hex of `bytes` (defined with the ids it spells, in [`crate::random`]).
pub use crate::random::to_hex;

const SINK_BUFFER: usize = 1024;
/// Room kept free at the end of the buffer so that short pieces can be copied with
/// fixed-size (overlapping) moves.
const SLACK: usize = 16;

/// Feeds SHA-256 in whole buffers rather than in the many small pieces the writer emits.
pub(crate) struct HashSink {
    hasher: Sha256,
    buf: [u8; SINK_BUFFER],
    len: usize,
}

impl HashSink {
    pub(crate) fn new(hasher: Sha256) -> Self {
        HashSink {
            hasher,
            buf: [0; SINK_BUFFER],
            len: 0,
        }
    }

    pub(crate) fn finish(mut self) -> [u8; 32] {
        self.hasher.update(&self.buf[..self.len]);
        self.hasher.finalize().into()
    }
}

impl HashSink {
    #[cold]
    #[inline(never)]
    fn put_slow(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() <= SINK_BUFFER {
            self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
            return;
        }
        self.hasher.update(&self.buf[..self.len]);
        self.len = 0;
        if bytes.len() >= SINK_BUFFER {
            self.hasher.update(bytes);
        } else {
            self.buf[..bytes.len()].copy_from_slice(bytes);
            self.len = bytes.len();
        }
    }
}

impl Sink for HashSink {
    #[inline(always)]
    fn put_quoted(&mut self, body: &[u8], after: &[u8]) {
        if body.len() > SLACK || after.len() > 1 || self.len + SLACK + 3 > SINK_BUFFER {
            self.put(b"\"");
            self.put(body);
            self.put(b"\"");
            self.put(after);
            return;
        }
        self.buf[self.len] = b'"';
        self.len += 1;
        self.put(body);
        self.buf[self.len] = b'"';
        self.len += 1;
        if let Some(&b) = after.first() {
            self.buf[self.len] = b;
            self.len += 1;
        }
    }

    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len();
        let at = self.len;
        if n > SLACK || at + SLACK > SINK_BUFFER {
            return self.put_slow(bytes);
        }
        // 0..=16 bytes with fixed-size moves (the pieces overlap; bytes past the new end
        // are scratch).
        let dst = &mut self.buf[at..at + SLACK];
        if n >= 8 {
            dst[..8].copy_from_slice(&bytes[..8]);
            dst[n - 8..n].copy_from_slice(&bytes[n - 8..]);
        } else if n >= 4 {
            dst[..4].copy_from_slice(&bytes[..4]);
            dst[n - 4..n].copy_from_slice(&bytes[n - 4..]);
        } else if n > 0 {
            dst[0] = bytes[0];
            dst[n / 2] = bytes[n / 2];
            dst[n - 1] = bytes[n - 1];
        }
        self.len = at + n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::canonical_call;
    use crate::json::parse_str;

    #[test]
    fn streams_the_same_bytes_as_the_text() {
        let v = parse_str(&format!(r#"{{"s":"{}","n":[1,2.5]}}"#, "x".repeat(2000))).unwrap();
        let text = canonical_call("tool:x", Some(&v), DEFAULT_IGNORE_KEYS);
        assert_eq!(
            fingerprint("tool:x", Some(&v)),
            sha256_hex32(text.as_bytes())
        );
    }

    #[test]
    fn absent_input_is_null() {
        assert_eq!(
            fingerprint("tool:getTime", None),
            "a80443848de3def47cecf418454f6c6a"
        );
        assert_eq!(
            fingerprint("tool:getTime", Some(&Value::Null)),
            "a80443848de3def47cecf418454f6c6a"
        );
    }

    #[test]
    fn hmac_matches_rfc_4231_case_1() {
        // HMAC pads a short key with zeros, so the 20-byte key of RFC 4231 test case 1,
        // zero-padded to 32 bytes, gives the same MAC.
        let mut key = [0u8; 32];
        key[..20].copy_from_slice(&[0x0b; 20]);
        assert_eq!(
            salted_digest(&key, b"Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b"
        );
    }
}
