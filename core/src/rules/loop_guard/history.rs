//! The 0.6 loop kinds: a history of completed watched calls per (run, kind), and the two
//! detectors that read it.
//!
//! - **cycle**: the last `3k` completed calls (k = 2..=4) are three laps equal position by
//!   position on (node id, input fingerprint, outcome, outcome digest), a lap holds at
//!   least two distinct calls (k = 1 is the v3 rule's case), and the call starting now
//!   equals the lap's first call. The smallest k wins; after a cycle hold the next one
//!   needs another full lap. Identical results are required, so a poll whose answer
//!   changes never looks like a cycle.
//! - **error-repeat**: the node's own last [`ERROR_REPEAT_COUNT`] completed calls failed
//!   with one identical error; other nodes' calls between them do not matter, a success or
//!   a call that is not comparable ends the count.
//!
//! Outcomes are compared by their keys ([`super::key`], seeded with a per-process salt) and
//! thrown errors by HMAC-SHA-256 with that salt: equal values give equal digests within one
//! process; what a hold reports is salted, so nothing is checkable outside it.

use super::{hex, Fp, LoopInfo, LoopKind};
use crate::canonical::{write_escaped, Sink};
use crate::fingerprint::SaltedHasher;
use crate::json::{JsStr, Value};
use std::collections::VecDeque;

/// Completed watched calls remembered per (run, kind).
pub const LOOP_HISTORY_SIZE: usize = 64;
/// Identical laps before a cycle holds.
pub const CYCLE_LAPS: usize = 3;
/// Fewest calls per lap of a cycle.
pub const CYCLE_MIN_PERIOD: usize = 2;
/// Most calls per lap of a cycle.
pub const CYCLE_MAX_PERIOD: usize = 4;
/// Identical failures of one node before error-repeat holds.
pub const ERROR_REPEAT_COUNT: u32 = 3;
/// An output whose canonical form would exceed this many characters is not digested: that
/// call equals nothing (bounds what a huge tool result costs at `node.finished`).
pub const MAX_OUTPUT_CANONICAL_CHARS: usize = 256 * 1024;

/// How a completed call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Fail,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
        }
    }
}

/// A watched call that started and has not completed.
#[derive(Clone, Debug)]
pub(crate) struct OpenCall {
    /// Index of its kind in the config's kinds.
    pub(crate) kind: usize,
    pub(crate) node_id: JsStr,
    pub(crate) instance_id: Option<JsStr>,
    /// The input fingerprint; `None`: not comparable.
    pub(crate) in_fp: Option<Fp>,
    pub(crate) start_seq: u64,
    /// Salted digest of its latest `node.error`; `None`: none, or unknown.
    pub(crate) err_fp: Option<Fp>,
}

impl OpenCall {
    pub(crate) fn new(
        kind: usize,
        node_id: &str,
        instance_id: Option<&str>,
        in_fp: Option<Fp>,
        start_seq: u64,
    ) -> Self {
        OpenCall {
            kind,
            node_id: node_id.into(),
            instance_id: instance_id.map(JsStr::from),
            in_fp,
            start_seq,
            err_fp: None,
        }
    }
}

/// An outcome's digest as a completed call has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutDigest {
    /// Known; `None`: unknown, equal to nothing.
    Known(Option<Fp>),
    /// A successful output whose key is still to come, under this ticket number (unique
    /// in its guard: [`KindHistory::fill`]).
    Later(u64),
}

/// One completed watched call; a `None` field is unknown and equals nothing.
#[derive(Clone, Debug)]
pub(crate) struct CallEntry {
    pub(crate) node_id: Option<JsStr>,
    pub(crate) in_fp: Option<Fp>,
    pub(crate) outcome: Option<Outcome>,
    pub(crate) out: OutDigest,
    pub(crate) start_seq: u64,
}

impl CallEntry {
    pub(crate) fn unknown(node_id: Option<JsStr>, start_seq: u64) -> Self {
        CallEntry {
            node_id,
            in_fp: None,
            outcome: None,
            out: OutDigest::Known(None),
            start_seq,
        }
    }

    /// The same node, the same input, the same outcome, all known (outputs aside).
    fn same_call(&self, other: &CallEntry) -> bool {
        self.node_id.is_some()
            && self.in_fp.is_some()
            && self.outcome.is_some()
            && self.node_id == other.node_id
            && self.in_fp == other.in_fp
            && self.outcome == other.outcome
    }

    /// The same call with the same known outcome digest.
    fn same(&self, other: &CallEntry) -> bool {
        self.same_call(other)
            && matches!((self.out, other.out), (OutDigest::Known(Some(a)), OutDigest::Known(Some(b))) if a == b)
    }

    /// [`CallEntry::same`] unless a digest still to come differs: what may turn out the same.
    fn maybe_same(&self, other: &CallEntry) -> bool {
        self.same_call(other)
            && match (self.out, other.out) {
                (OutDigest::Known(a), OutDigest::Known(b)) => a.is_some() && a == b,
                (OutDigest::Known(None), _) | (_, OutDigest::Known(None)) => false,
                _ => true,
            }
    }
}

/// What a kind's latest watched start tripped, for its before-gate.
#[derive(Clone, Debug)]
pub(crate) struct Verdict {
    pub(crate) node_id: String,
    pub(crate) info: LoopInfo,
    pub(crate) tripped: bool,
}

/// The history of one (run, kind).
#[derive(Clone, Debug, Default)]
pub(crate) struct KindHistory {
    /// The last [`LOOP_HISTORY_SIZE`] completed calls, oldest first.
    ring: VecDeque<CallEntry>,
    /// Entries ever pushed.
    completed: u64,
    /// No cycle is reported while `completed` is below this: one hold per lap.
    cycle_quiet_until: u64,
    pub(crate) verdict: Option<Verdict>,
}

impl KindHistory {
    /// The newest completed call.
    #[cfg(test)]
    pub(crate) fn newest(&self) -> Option<&CallEntry> {
        self.ring.back()
    }

    pub(crate) fn push(&mut self, entry: CallEntry) {
        self.ring.push_back(entry);
        if self.ring.len() > LOOP_HISTORY_SIZE {
            self.ring.pop_front();
        }
        self.completed += 1;
    }

    /// Gives the call waiting under `ticket` the key of its output, if it is still
    /// remembered (`None`: the output stays unknown).
    pub(crate) fn fill(&mut self, ticket: u64, key: Option<Fp>) {
        let waiting = self
            .ring
            .iter_mut()
            .rev()
            .find(|e| e.out == OutDigest::Later(ticket));
        if let Some(entry) = waiting {
            entry.out = OutDigest::Known(key);
        }
    }

    /// Forgets every output key still to come (they never will): those calls equal nothing.
    pub(crate) fn drop_later(&mut self) {
        for entry in self.ring.iter_mut() {
            if matches!(entry.out, OutDigest::Later(_)) {
                entry.out = OutDigest::Known(None);
            }
        }
    }

    fn laps_equal(&self, a: usize, b: usize, k: usize) -> bool {
        self.laps_match(a, b, k, CallEntry::same)
    }

    fn laps_match(
        &self,
        a: usize,
        b: usize,
        k: usize,
        eq: fn(&CallEntry, &CallEntry) -> bool,
    ) -> bool {
        (0..k).all(|i| match (self.ring.get(a + i), self.ring.get(b + i)) {
            (Some(x), Some(y)) => eq(x, y),
            _ => false,
        })
    }

    /// Where the last [`CYCLE_LAPS`] laps of `k` calls start, when they match under `eq`, a
    /// lap holds two distinct calls, and this call (`node_id`, `in_fp`) starts the next lap.
    fn cycle_base(
        &self,
        k: usize,
        node_id: &str,
        in_fp: &Fp,
        eq: fn(&CallEntry, &CallEntry) -> bool,
    ) -> Option<usize> {
        let base = self.ring.len().checked_sub(CYCLE_LAPS * k)?;
        let head = &self.ring[base];
        if !head.node_id.as_ref().is_some_and(|id| id == node_id)
            || head.in_fp.as_ref() != Some(in_fp)
        {
            return None;
        }
        // One call repeated is the v3 rule's case (and checked first: it is the common one).
        let distinct = (1..k).any(|i| {
            let e = &self.ring[base + i];
            e.in_fp != head.in_fp || e.node_id != head.node_id
        });
        let laps = || (1..CYCLE_LAPS).all(|lap| self.laps_match(base, base + lap * k, k, eq));
        (distinct && laps()).then_some(base)
    }

    /// Whether the cycle check of this start would compare an output whose key is still to
    /// come: the caller waits for those keys first.
    pub(crate) fn awaits_output(&self, node_id: &str, in_fp: &Fp) -> bool {
        self.completed >= self.cycle_quiet_until
            && (CYCLE_MIN_PERIOD..=CYCLE_MAX_PERIOD).any(|k| {
                self.cycle_base(k, node_id, in_fp, CallEntry::maybe_same)
                    .is_some_and(|base| {
                        self.ring
                            .range(base..)
                            .any(|e| matches!(e.out, OutDigest::Later(_)))
                    })
            })
    }

    /// Whether the next watched start of this (run, kind) could trip a verdict, for any
    /// node and input: conservative (`true` does not mean it will), exact enough to be
    /// `false` for calls that do not repeat and do not fail alike.
    pub(crate) fn may_detect(&self) -> bool {
        let len = self.ring.len();
        if self.completed >= self.cycle_quiet_until {
            for k in CYCLE_MIN_PERIOD..=CYCLE_MAX_PERIOD {
                let span = CYCLE_LAPS * k;
                if len < span {
                    break;
                }
                let base = len - span;
                let maybe = |lap| self.laps_match(base, base + lap * k, k, CallEntry::maybe_same);
                if (1..CYCLE_LAPS).all(maybe) {
                    return true;
                }
            }
        }
        self.ring.iter().any(|e| match (&e.node_id, e.outcome) {
            (Some(id), Some(Outcome::Fail)) => self
                .detect_error_repeat(id.as_bytes(), 0, &[0; 32])
                .is_some(),
            _ => false,
        })
    }

    /// A cycle whose next lap starts with this call, if any (see the module comment).
    pub(crate) fn detect_cycle(
        &mut self,
        node_id: &str,
        in_fp: &Fp,
        seq: u64,
        salt: &[u8; 32],
    ) -> Option<LoopInfo> {
        if self.completed < self.cycle_quiet_until {
            return None;
        }
        let len = self.ring.len();
        for k in CYCLE_MIN_PERIOD..=CYCLE_MAX_PERIOD {
            let Some(base) = self.cycle_base(k, node_id, in_fp, CallEntry::same) else {
                continue;
            };
            // The newest lap is the reference; count identical laps back from it.
            let newest = len - k;
            let mut first = base;
            let mut laps = CYCLE_LAPS as u32;
            while first >= k && self.laps_equal(first - k, newest, k) {
                first -= k;
                laps += 1;
            }
            self.cycle_quiet_until = self.completed + k as u64;
            let fingerprint = self.lap_digest(newest, k, salt);
            return Some(LoopInfo {
                kind: LoopKind::Cycle {
                    period: k as u32,
                    laps,
                },
                repeats: laps,
                first_seq: self.ring[first].start_seq,
                last_seq: seq,
                fingerprint,
            });
        }
        None
    }

    /// Salted digest of the lap `[[nodeId, inFp, outcome, outFp], ...]` from `start`.
    fn lap_digest(&self, start: usize, k: usize, salt: &[u8; 32]) -> String {
        let mut mac = SaltedHasher::new(salt);
        mac.put(b"lap\0[");
        for i in 0..k {
            let e = &self.ring[start + i];
            mac.put(if i == 0 { b"[" } else { b",[" });
            write_escaped(
                e.node_id.as_ref().map_or(&b""[..], JsStr::as_bytes),
                &mut mac,
            );
            let out = match e.out {
                OutDigest::Known(fp) => fp,
                OutDigest::Later(_) => None,
            };
            for fp in [
                e.in_fp.map(|f| hex(&f)),
                e.outcome.map(|o| o.as_str().to_owned()),
                out.map(|f| hex(&f)),
            ] {
                mac.put(b",");
                write_escaped(fp.as_deref().unwrap_or("").as_bytes(), &mut mac);
            }
            mac.put(b"]");
        }
        mac.put(b"]");
        hex(&fp_of(&mac.finish()))
    }

    /// The node's newest completed calls failed with one identical error at least
    /// [`ERROR_REPEAT_COUNT`] times.
    pub(crate) fn detect_error_repeat(
        &self,
        node_id: &[u8],
        seq: u64,
        salt: &[u8; 32],
    ) -> Option<LoopInfo> {
        let mut count = 0u32;
        let mut err_fp: Option<Fp> = None;
        let mut first_seq = seq;
        for e in self.ring.iter().rev() {
            let Some(id) = e.node_id.as_ref() else {
                break;
            }; // could have been this node
            if id.as_bytes() != node_id {
                continue;
            }
            let (Some(Outcome::Fail), OutDigest::Known(Some(out)), Some(_)) =
                (e.outcome, e.out, e.in_fp)
            else {
                break;
            };
            match err_fp {
                None => err_fp = Some(out),
                Some(fp) if fp != out => break,
                Some(_) => {}
            }
            count += 1;
            first_seq = e.start_seq;
        }
        let err_fp = err_fp?;
        if count < ERROR_REPEAT_COUNT {
            return None;
        }
        Some(LoopInfo {
            kind: LoopKind::ErrorRepeat,
            repeats: count,
            first_seq,
            last_seq: seq,
            fingerprint: salted_hex(&err_fp, salt),
        })
    }
}

/// The first 16 bytes of a digest.
pub(crate) fn fp_of(digest: &[u8; 32]) -> Fp {
    let mut fp = [0u8; 16];
    fp.copy_from_slice(&digest[..16]);
    fp
}

/// The key of an output (`out`) or an error-shaped result (`res`) ([`super::key`]: equal
/// exactly when the canonical texts are); `None` when the canonical form would exceed
/// [`MAX_OUTPUT_CANONICAL_CHARS`].
pub(crate) fn outcome_digest(
    prefix: &[u8],
    value: Option<&Value>,
    ignore: &[String],
    salt: &[u8; 32],
) -> Option<Fp> {
    super::key::KeyWalker::new(salt, ignore).outcome_key(prefix, value, MAX_OUTPUT_CANONICAL_CHARS)
}

/// A key as a report may show it: salted, so nothing about the value can be checked.
fn salted_hex(fp: &Fp, salt: &[u8; 32]) -> String {
    let mut mac = SaltedHasher::new(salt);
    mac.put(b"key\0");
    mac.put(fp);
    hex(&fp_of(&mac.finish()))
}
