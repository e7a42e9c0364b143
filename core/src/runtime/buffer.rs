//! The replay ring buffer: the most recent envelopes, kept so that a debugger that attaches
//! (or re-attaches) late still receives them, with their original `seq`.
//!
//! Bounded twice, whichever binds first: a number of envelopes and a number of bytes (the
//! UTF-8 length of each frame). When either is exceeded the oldest envelopes are dropped.
//!
//! Dropping an envelope that was already delivered is normal (the buffer simply wrapped).
//! Dropping one that never left the process is *loss*: the buffer remembers, per run, how
//! many were lost and their seq range, and the next [`ReplayBuffer::replay`] puts one gap
//! marker per affected run in front of the replayed envelopes — a valid `graph.hint`
//! envelope with `nodes: []` and a loose `gap: {droppedCount, fromSeq, toSeq, reason}`.
//! The first loss of each dark period also yields one warning line for the host's log.
//!
//! An envelope larger than the whole byte budget is refused without evicting anything:
//! it was sent live (not kept for replay) or, if not, it is lost like any other.

use crate::event::{GapInfo, GraphHint, Message, GAP_REASON_BUFFER_OVERFLOW};
use std::collections::VecDeque;

/// Default byte budget of the replay buffer, every SDK: 8 MiB.
pub const DEFAULT_MAX_BUFFER_BYTES: usize = 8 * 1024 * 1024;
/// Default number of envelopes kept by the Node (TypeScript) SDK (`bufferSize`).
pub const DEFAULT_BUFFER_SIZE_NODE: usize = 5_000;
/// Default number of envelopes kept by the Python SDK (`buffer_size`).
pub const DEFAULT_BUFFER_SIZE_PYTHON: usize = 2_000;
/// Default number of envelopes kept by the Ruby SDK (`buffer_size:`).
pub const DEFAULT_BUFFER_SIZE_RUBY: usize = 2_000;
/// How many runs' gaps are tracked between two attaches; losses past it are counted and
/// warned about but carry no marker.
pub const MAX_TRACKED_GAP_RUNS: usize = 64;

/// The names a host SDK gives the two bounds, quoted in warnings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionNames {
    /// The envelope bound (`bufferSize`, `buffer_size`).
    pub buffer_size: &'static str,
    /// The byte bound (`maxBufferBytes`, `max_buffer_bytes`).
    pub max_buffer_bytes: &'static str,
}

impl OptionNames {
    /// The TypeScript client's spelling.
    pub const NODE: OptionNames = OptionNames {
        buffer_size: "bufferSize",
        max_buffer_bytes: "maxBufferBytes",
    };
    /// The Python and Ruby spelling.
    pub const SNAKE: OptionNames = OptionNames {
        buffer_size: "buffer_size",
        max_buffer_bytes: "max_buffer_bytes",
    };
}

/// Loss still waiting for its marker, for one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingGap {
    /// The run that lost events.
    pub run_id: String,
    /// Lost events of that run.
    pub dropped_count: u64,
    /// Smallest lost seq.
    pub from_seq: u64,
    /// Largest lost seq.
    pub to_seq: u64,
}

impl PendingGap {
    /// The marker's `gap` field.
    pub fn info(&self) -> GapInfo {
        GapInfo {
            dropped_count: self.dropped_count,
            from_seq: self.from_seq,
            to_seq: self.to_seq,
            reason: GAP_REASON_BUFFER_OVERFLOW,
        }
    }

    /// The gap marker envelope: a `graph.hint` `{nodes: [], gap}` on this run.
    pub fn marker(&self, seq: u64, ts: u64) -> String {
        GraphHint::gap_marker(self.info()).encode(seq, ts, &self.run_id)
    }
}

/// Events dropped before they reached the replay buffer (the hand-off from an application
/// thread to the worker was full): each one still took its `seq`, and is counted here per
/// run with its seq range until the worker [absorbs](ReplayBuffer::absorb_loss) it into the
/// buffer's gaps, so the next gap marker says exactly what is missing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HandoffLoss {
    /// Per run, in the order the runs first lost one.
    pub gaps: Vec<PendingGap>,
    /// Every event counted here.
    pub total: u64,
    /// Of those, the ones past [`MAX_TRACKED_GAP_RUNS`] runs (counted, not marked).
    pub unattributed: u64,
}

/// Adds `count` lost events of `run_id` (seqs `from..=to`) to `gaps`, one entry per run:
/// counts added, seq ranges joined. A run not yet there is added while `gaps` holds fewer
/// than `limit` runs; past that its count is returned (lost, but marked nowhere).
fn merge_gap(
    gaps: &mut Vec<PendingGap>,
    run_id: &str,
    count: u64,
    from: u64,
    to: u64,
    limit: usize,
) -> u64 {
    if let Some(gap) = gaps.iter_mut().find(|g| g.run_id == run_id) {
        gap.dropped_count += count;
        gap.from_seq = gap.from_seq.min(from);
        gap.to_seq = gap.to_seq.max(to);
        0
    } else if gaps.len() < limit {
        gaps.push(PendingGap {
            run_id: run_id.to_owned(),
            dropped_count: count,
            from_seq: from,
            to_seq: to,
        });
        0
    } else {
        count
    }
}

impl HandoffLoss {
    /// Counts the event `seq` of `run_id` as lost.
    pub fn record(&mut self, run_id: &str, seq: u64) {
        self.total += 1;
        self.unattributed += merge_gap(&mut self.gaps, run_id, 1, seq, seq, MAX_TRACKED_GAP_RUNS);
    }

    /// Whether nothing was lost.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

/// What became of one pushed envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushOutcome {
    /// It is kept for replay (false: it alone exceeds the byte budget).
    pub kept: bool,
    /// Older envelopes evicted to make room.
    pub evicted: usize,
    /// Of those (plus the refused envelope itself), how many had never been delivered.
    pub lost: usize,
    /// A line for the host's log, at most once per kind per dark period.
    pub warning: Option<String>,
}

/// A snapshot of the buffer's counters.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BufferStats {
    /// Envelopes held now.
    pub buffered: usize,
    /// Their total UTF-8 size.
    pub bytes: usize,
    /// Envelopes evicted since creation, delivered or not (the buffer wrapping).
    pub dropped: u64,
    /// Envelopes lost since creation: evicted or refused before they were ever delivered.
    pub lost: u64,
    /// Runs with a gap marker waiting for the next replay.
    pub pending_gaps: usize,
    /// Losses past [`MAX_TRACKED_GAP_RUNS`] runs: counted, not marked.
    pub unattributed_lost: u64,
    /// Envelopes refused for being larger than the whole byte budget.
    pub rejected: u64,
    /// The envelope bound.
    pub max_events: usize,
    /// The byte bound.
    pub max_bytes: usize,
}

/// An envelope that left the ring undelivered while spilling is on ([`ReplayBuffer::set_spill`]):
/// for the on-disk spool instead of a gap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spilled {
    /// Its run.
    pub run_id: String,
    /// Its seq.
    pub seq: u64,
    /// The envelope text.
    pub json: String,
}

#[derive(Debug)]
struct Entry {
    json: String,
    run_id: String,
    seq: u64,
    delivered: bool,
}

/// The bounded replay buffer with per-run loss accounting.
#[derive(Debug)]
pub struct ReplayBuffer {
    entries: VecDeque<Entry>,
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
    gaps: Vec<PendingGap>,
    dropped: u64,
    lost: u64,
    unattributed_lost: u64,
    rejected: u64,
    names: OptionNames,
    warned_loss: bool,
    warned_oversize_sent: bool,
    warned_oversize_lost: bool,
    spill: bool,
    spilled: Vec<Spilled>,
}

impl ReplayBuffer {
    /// A buffer keeping at most `max_events` envelopes and `max_bytes` bytes of them. Zero
    /// bounds are raised to 1 (a buffer must be able to hold something).
    pub fn new(max_events: usize, max_bytes: usize) -> Self {
        ReplayBuffer {
            entries: VecDeque::new(),
            bytes: 0,
            max_events: max_events.max(1),
            max_bytes: max_bytes.max(1),
            gaps: Vec::new(),
            dropped: 0,
            lost: 0,
            unattributed_lost: 0,
            rejected: 0,
            names: OptionNames::NODE,
            warned_loss: false,
            warned_oversize_sent: false,
            warned_oversize_lost: false,
            spill: false,
            spilled: Vec::new(),
        }
    }

    /// With `on`, an envelope that leaves the ring undelivered (evicted, or refused for its
    /// size) is kept for [`take_spilled`](Self::take_spilled) instead of being counted as lost.
    pub fn set_spill(&mut self, on: bool) {
        self.spill = on;
    }

    /// The envelopes spilled since the last call, oldest first.
    pub fn take_spilled(&mut self) -> Vec<Spilled> {
        std::mem::take(&mut self.spilled)
    }

    /// Whether anything waits in [`take_spilled`](Self::take_spilled).
    pub fn has_spilled(&self) -> bool {
        !self.spilled.is_empty()
    }

    /// Takes every buffered envelope that was never delivered out of the ring, oldest first
    /// (the session ends with no debugger: they go to the spool).
    pub fn drain_undelivered(&mut self) -> Vec<Spilled> {
        let (undelivered, kept): (VecDeque<Entry>, VecDeque<Entry>) =
            std::mem::take(&mut self.entries)
                .into_iter()
                .partition(|e| !e.delivered);
        self.entries = kept;
        self.bytes = self.entries.iter().map(|e| e.json.len()).sum();
        undelivered
            .into_iter()
            .map(|e| Spilled {
                run_id: e.run_id,
                seq: e.seq,
                json: e.json,
            })
            .collect()
    }

    /// Counts one envelope as lost after all (its spill could not be written): it joins
    /// its run's gap.
    pub fn count_lost(&mut self, run_id: &str, seq: u64) {
        self.record_loss(run_id, seq);
    }

    /// Counts `count` envelopes as lost whose gap markers were made elsewhere (a spool
    /// segment dropped for the spool's bound): in [`BufferStats::lost`], no pending gap.
    pub fn count_lost_marked(&mut self, count: u64) {
        self.lost += count;
    }

    /// The same buffer, quoting the host SDK's option names in its warnings.
    pub fn with_option_names(mut self, names: OptionNames) -> Self {
        self.names = names;
        self
    }

    /// Keeps an envelope that has not been delivered (the debugger is detached, or the
    /// send failed).
    pub fn push(&mut self, run_id: &str, seq: u64, envelope_json: String) -> PushOutcome {
        self.push_with(run_id, seq, envelope_json, false)
    }

    /// Keeps an envelope that was already delivered live (its eviction is not loss).
    pub fn push_delivered(&mut self, run_id: &str, seq: u64, envelope_json: String) -> PushOutcome {
        self.push_with(run_id, seq, envelope_json, true)
    }

    /// Keeps an envelope, `delivered` saying whether it already reached the debugger.
    pub fn push_with(
        &mut self,
        run_id: &str,
        seq: u64,
        envelope_json: String,
        delivered: bool,
    ) -> PushOutcome {
        let size = envelope_json.len();
        if size > self.max_bytes {
            self.rejected += 1;
            let warning;
            if delivered {
                warning = (!self.warned_oversize_sent).then(|| {
                    self.warned_oversize_sent = true;
                    format!(
                        "an event of {size} bytes is larger than the whole replay buffer ({} is {}); \
                         it was sent but not kept for replay",
                        self.names.max_buffer_bytes, self.max_bytes
                    )
                });
                return PushOutcome {
                    kept: false,
                    evicted: 0,
                    lost: 0,
                    warning,
                };
            }
            if self.spill {
                self.spilled.push(Spilled {
                    run_id: run_id.to_owned(),
                    seq,
                    json: envelope_json,
                });
                return PushOutcome {
                    kept: false,
                    evicted: 0,
                    lost: 0,
                    warning: None,
                };
            }
            self.record_loss(run_id, seq);
            warning = (!self.warned_oversize_lost).then(|| {
                self.warned_oversize_lost = true;
                // Its own warning stands for the general loss warning of this dark period.
                self.warned_loss = true;
                format!(
                    "dropped an event of {size} bytes: it is larger than the whole replay buffer \
                     ({} is {}) and the debugger is not attached; the recorded run is incomplete. \
                     Raise `{}`",
                    self.names.max_buffer_bytes, self.max_bytes, self.names.max_buffer_bytes
                )
            });
            return PushOutcome {
                kept: false,
                evicted: 0,
                lost: 1,
                warning,
            };
        }

        let mut evicted = 0;
        let mut lost = 0;
        while !self.entries.is_empty()
            && (self.entries.len() + 1 > self.max_events || self.bytes + size > self.max_bytes)
        {
            let Some(old) = self.entries.pop_front() else {
                break;
            };
            self.bytes -= old.json.len();
            self.dropped += 1;
            evicted += 1;
            if !old.delivered {
                if self.spill {
                    self.spilled.push(Spilled {
                        run_id: old.run_id,
                        seq: old.seq,
                        json: old.json,
                    });
                } else {
                    lost += 1;
                    self.record_loss(&old.run_id, old.seq);
                }
            }
        }
        self.bytes += size;
        self.entries.push_back(Entry {
            json: envelope_json,
            run_id: run_id.to_owned(),
            seq,
            delivered,
        });

        let warning = (lost > 0 && !self.warned_loss).then(|| {
            self.warned_loss = true;
            self.loss_warning()
        });
        PushOutcome {
            kept: true,
            evicted,
            lost,
            warning,
        }
    }

    fn record_loss(&mut self, run_id: &str, seq: u64) {
        self.lost += 1;
        self.unattributed_lost +=
            merge_gap(&mut self.gaps, run_id, 1, seq, seq, MAX_TRACKED_GAP_RUNS);
    }

    /// The loss warning as it reads now: the total lost, that the run is incomplete, and
    /// what to raise.
    pub fn loss_warning(&self) -> String {
        let unattributed = if self.unattributed_lost > 0 {
            format!(
                "; {} of them spread past {MAX_TRACKED_GAP_RUNS} runs and are counted but not marked",
                self.unattributed_lost
            )
        } else {
            String::new()
        };
        format!(
            "dropped {} event{} while the debugger was unreachable; the recorded run is incomplete. \
             Raise `{}` (currently {}) or reconnect the debugger sooner{unattributed}",
            self.lost,
            if self.lost == 1 { "" } else { "s" },
            self.names.buffer_size,
            self.max_events,
        )
    }

    /// Everything an attaching debugger should receive, in order: one gap marker per run
    /// that lost events (in the order the runs first lost one; each takes a fresh seq from
    /// `next_seq` and the time `ts`), then every buffered envelope, oldest first, with its
    /// original seq. Afterwards every buffered envelope counts as delivered, the gaps are
    /// cleared and the warnings re-armed. The caller sends the frames in this order; on a
    /// failed send use [`take_gaps`](Self::take_gaps), [`frames`](Self::frames) and
    /// [`mark_delivered`](Self::mark_delivered) instead.
    pub fn replay(&mut self, mut next_seq: impl FnMut() -> u64, ts: u64) -> Vec<String> {
        let gaps = self.take_gaps();
        let mut out = Vec::with_capacity(gaps.len() + self.entries.len());
        for gap in &gaps {
            out.push(gap.marker(next_seq(), ts));
        }
        out.extend(self.entries.iter().map(|e| e.json.clone()));
        self.mark_delivered(self.entries.len());
        out
    }

    /// Takes the pending gaps (oldest run first) and re-arms the warnings: the dark period
    /// ends with the attach that carries them.
    pub fn take_gaps(&mut self) -> Vec<PendingGap> {
        self.warned_loss = false;
        self.warned_oversize_lost = false;
        self.warned_oversize_sent = false;
        std::mem::take(&mut self.gaps)
    }

    /// Puts back gaps whose markers could not be sent, ahead of any recorded since (counts
    /// of a run present in both are added up).
    pub fn restore_gaps(&mut self, gaps: Vec<PendingGap>) {
        let newer = std::mem::replace(&mut self.gaps, gaps);
        for g in newer {
            let (count, from, to) = (g.dropped_count, g.from_seq, g.to_seq);
            merge_gap(&mut self.gaps, &g.run_id, count, from, to, usize::MAX);
        }
    }

    /// Takes over loss that happened before an event reached the buffer (the hand-off to
    /// the worker, see [`HandoffLoss`]): counted as lost, and marked with the run's other
    /// gaps (one marker per run, the seq range covering both).
    pub fn absorb_loss(&mut self, loss: HandoffLoss) {
        self.lost += loss.total;
        self.unattributed_lost += loss.unattributed;
        for g in loss.gaps {
            self.unattributed_lost += merge_gap(
                &mut self.gaps,
                &g.run_id,
                g.dropped_count,
                g.from_seq,
                g.to_seq,
                MAX_TRACKED_GAP_RUNS,
            );
        }
    }

    /// The pending gaps, without taking them.
    pub fn pending_gaps(&self) -> &[PendingGap] {
        &self.gaps
    }

    /// The buffered frames, oldest first.
    pub fn frames(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.entries.iter().map(|e| e.json.as_str())
    }

    /// Marks the oldest `count` buffered envelopes as delivered.
    pub fn mark_delivered(&mut self, count: usize) {
        for e in self.entries.iter_mut().take(count) {
            e.delivered = true;
        }
    }

    /// Marks the newest `count` buffered envelopes as not delivered after all: they were
    /// handed to a link that failed before it flushed them, so evicting one is loss.
    pub fn mark_undelivered_newest(&mut self, count: usize) {
        for e in self.entries.iter_mut().rev().take(count) {
            e.delivered = false;
        }
    }

    /// Forgets every buffered envelope (not the counters, not the pending gaps).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// The counters.
    pub fn stats(&self) -> BufferStats {
        BufferStats {
            buffered: self.entries.len(),
            bytes: self.bytes,
            dropped: self.dropped,
            lost: self.lost,
            pending_gaps: self.gaps.len(),
            unattributed_lost: self.unattributed_lost,
            rejected: self.rejected,
            max_events: self.max_events,
            max_bytes: self.max_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{NodeToken, TokenChannel, TokenDelta};
    use crate::wire::{parse_envelope, ParseOutcome};

    fn frame(run: &str, seq: u64, text: &str) -> String {
        NodeToken::new("llm:step", vec![TokenDelta::new(TokenChannel::Text, text)])
            .encode(seq, 1, run)
    }

    fn seqs(frames: &[String]) -> Vec<u64> {
        frames
            .iter()
            .map(|f| match parse_envelope(f.as_bytes()) {
                ParseOutcome::Ok(e) => e.seq,
                other => panic!("not ok: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn hand_off_loss_joins_the_runs_gap_once() {
        let mut b = ReplayBuffer::new(2, DEFAULT_MAX_BUFFER_BYTES);
        for seq in 0..3 {
            b.push("r", seq, frame("r", seq, "x"));
        }
        let mut loss = HandoffLoss::default();
        for seq in [3, 4, 7] {
            loss.record("r", seq);
        }
        loss.record("other", 5);
        b.absorb_loss(loss);
        let s = b.stats();
        assert_eq!((s.lost, s.pending_gaps), (5, 2));
        let gaps = b.take_gaps();
        assert_eq!(
            (gaps[0].dropped_count, gaps[0].from_seq, gaps[0].to_seq),
            (4, 0, 7)
        );
        assert_eq!(
            (
                gaps[1].run_id.as_str(),
                gaps[1].dropped_count,
                gaps[1].from_seq
            ),
            ("other", 1, 5)
        );
    }

    #[test]
    fn evicts_by_count_oldest_first() {
        let mut b = ReplayBuffer::new(3, DEFAULT_MAX_BUFFER_BYTES);
        for seq in 0..5 {
            b.push("r", seq, frame("r", seq, "x"));
        }
        let s = b.stats();
        assert_eq!(
            (s.buffered, s.dropped, s.lost, s.pending_gaps),
            (3, 2, 2, 1)
        );
        assert_eq!(
            b.pending_gaps()[0],
            PendingGap {
                run_id: "r".into(),
                dropped_count: 2,
                from_seq: 0,
                to_seq: 1
            }
        );
        let mut next = 5;
        let out = b.replay(
            || {
                next += 1;
                next - 1
            },
            9,
        );
        assert_eq!(seqs(&out), vec![5, 2, 3, 4]);
        let marker = crate::json::parse(out[0].as_bytes()).unwrap();
        assert_eq!(
            crate::json::to_string(marker.get("payload").unwrap()),
            r#"{"nodes":[],"gap":{"droppedCount":2,"fromSeq":0,"toSeq":1,"reason":"buffer-overflow"}}"#
        );
        assert_eq!(marker.get("runId").and_then(|v| v.as_str()), Some("r"));
        // Replayed envelopes are delivered now: wrapping past them is not loss.
        b.push("r", 6, frame("r", 6, "x"));
        assert_eq!(b.stats().lost, 2);
        assert_eq!(b.stats().pending_gaps, 0);
    }

    #[test]
    fn evicts_by_bytes() {
        let f0 = frame("r", 0, "aaaa");
        let size = f0.len();
        let mut b = ReplayBuffer::new(100, size * 2 + size / 2);
        b.push("r", 0, f0);
        b.push("r", 1, frame("r", 1, "bbbb"));
        assert_eq!(b.stats().buffered, 2);
        let out = b.push("r", 2, frame("r", 2, "cccc"));
        assert_eq!((out.kept, out.evicted, out.lost), (true, 1, 1));
        assert_eq!(b.stats().buffered, 2);
        assert_eq!(b.stats().bytes, size * 2);
        assert_eq!(b.pending_gaps()[0].from_seq, 0);
    }

    #[test]
    fn delivered_evictions_are_not_loss() {
        let mut b = ReplayBuffer::new(2, DEFAULT_MAX_BUFFER_BYTES);
        for seq in 0..10 {
            let out = b.push_delivered("r", seq, frame("r", seq, "x"));
            assert!(out.warning.is_none());
        }
        let s = b.stats();
        assert_eq!((s.dropped, s.lost, s.pending_gaps), (8, 0, 0));
        assert_eq!(b.replay(|| 99, 0).len(), 2);
    }

    #[test]
    fn one_marker_per_run_in_order_of_first_loss() {
        let mut b = ReplayBuffer::new(4, DEFAULT_MAX_BUFFER_BYTES);
        let runs = ["a", "b", "a", "c", "b", "a", "a", "a", "a", "a"];
        for (seq, run) in runs.iter().enumerate() {
            b.push(run, seq as u64, frame(run, seq as u64, "x"));
        }
        let gaps = b.pending_gaps().to_vec();
        assert_eq!(
            gaps,
            vec![
                PendingGap {
                    run_id: "a".into(),
                    dropped_count: 3,
                    from_seq: 0,
                    to_seq: 5
                },
                PendingGap {
                    run_id: "b".into(),
                    dropped_count: 2,
                    from_seq: 1,
                    to_seq: 4
                },
                PendingGap {
                    run_id: "c".into(),
                    dropped_count: 1,
                    from_seq: 3,
                    to_seq: 3
                },
            ]
        );
        let mut next = 100;
        let out = b.replay(
            || {
                next += 1;
                next
            },
            0,
        );
        assert_eq!(out.len(), 3 + 4);
        assert_eq!(seqs(&out), vec![101, 102, 103, 6, 7, 8, 9]);
    }

    #[test]
    fn warns_once_per_dark_period() {
        let mut b = ReplayBuffer::new(5, DEFAULT_MAX_BUFFER_BYTES);
        let mut warnings = Vec::new();
        for seq in 0..500 {
            if let Some(w) = b.push("r", seq, frame("r", seq, "x")).warning {
                warnings.push(w);
            }
        }
        assert_eq!(warnings.len(), 1);
        assert_eq!(
            warnings[0],
            "dropped 1 event while the debugger was unreachable; the recorded run is incomplete. \
             Raise `bufferSize` (currently 5) or reconnect the debugger sooner"
        );
        assert_eq!(b.stats().lost, 495);
        assert!(b.loss_warning().starts_with("dropped 495 events while"));
        b.replay(|| 0, 0);
        let again = (500..520)
            .filter_map(|s| b.push("r", s, frame("r", s, "x")).warning)
            .count();
        assert_eq!(again, 1);
    }

    #[test]
    fn an_event_bigger_than_the_budget_evicts_nothing() {
        let small = frame("r", 0, "a");
        let mut b = ReplayBuffer::new(10, small.len() * 3).with_option_names(OptionNames::SNAKE);
        b.push_delivered("r", 0, small.clone());
        b.push_delivered("r", 1, frame("r", 1, "b"));
        let huge = frame("r", 2, &"x".repeat(small.len() * 4));
        let out = b.push("r", 2, huge.clone());
        assert!(!out.kept);
        assert_eq!((out.evicted, out.lost), (0, 1));
        assert!(out.warning.unwrap().contains("Raise `max_buffer_bytes`"));
        let s = b.stats();
        assert_eq!((s.buffered, s.rejected, s.lost, s.dropped), (2, 1, 1, 0));
        assert_eq!(
            b.pending_gaps()[0],
            PendingGap {
                run_id: "r".into(),
                dropped_count: 1,
                from_seq: 2,
                to_seq: 2
            }
        );
        // Sent live while attached: refused, but not lost.
        let out = b.push_delivered("r", 3, huge);
        assert!(!out.kept && out.lost == 0);
        assert!(out
            .warning
            .unwrap()
            .contains("it was sent but not kept for replay"));
        assert_eq!(b.stats().lost, 1);
        // Exactly the budget fits alone, shedding the rest.
        let exact_budget = b.stats().max_bytes;
        let mut b2 = ReplayBuffer::new(10, exact_budget);
        b2.push("r", 0, small.clone());
        let out = b2.push("r", 1, "y".repeat(exact_budget));
        assert!(out.kept);
        assert_eq!(b2.stats().buffered, 1);
    }

    #[test]
    fn gaps_past_the_run_cap_are_counted_not_marked() {
        let mut b = ReplayBuffer::new(1, DEFAULT_MAX_BUFFER_BYTES);
        for seq in 0..(MAX_TRACKED_GAP_RUNS as u64 + 11) {
            let run = format!("run_{seq}");
            b.push(&run, seq, frame(&run, seq, "x"));
        }
        let s = b.stats();
        assert_eq!(s.pending_gaps, MAX_TRACKED_GAP_RUNS);
        assert_eq!(s.unattributed_lost, 10);
        assert!(b
            .loss_warning()
            .ends_with("; 10 of them spread past 64 runs and are counted but not marked"));
    }

    #[test]
    fn spilling_keeps_undelivered_evictions_instead_of_losing_them() {
        let small = frame("r", 0, "a");
        let mut b = ReplayBuffer::new(2, small.len() * 4);
        b.set_spill(true);
        b.push_delivered("r", 0, frame("r", 0, "a"));
        for seq in 1..5 {
            b.push("r", seq, frame("r", seq, "a"));
        }
        // Too big for the ring: spilled too, in order.
        b.push("r", 5, frame("r", 5, &"x".repeat(small.len() * 5)));
        let spilled: Vec<u64> = b.take_spilled().iter().map(|s| s.seq).collect();
        assert_eq!(spilled, vec![1, 2, 5]);
        let s = b.stats();
        assert_eq!((s.lost, s.pending_gaps, s.buffered), (0, 0, 2));
        let rest: Vec<u64> = b.drain_undelivered().iter().map(|s| s.seq).collect();
        assert_eq!(rest, vec![3, 4]);
        assert_eq!((b.stats().buffered, b.stats().bytes), (0, 0));
        b.count_lost_marked(3);
        b.count_lost("r", 9);
        assert_eq!((b.stats().lost, b.stats().pending_gaps), (4, 1));
    }

    #[test]
    fn restore_gaps_puts_them_back_first() {
        let mut b = ReplayBuffer::new(1, DEFAULT_MAX_BUFFER_BYTES);
        b.push("a", 0, frame("a", 0, "x"));
        b.push("a", 1, frame("a", 1, "x"));
        let taken = b.take_gaps();
        b.push("b", 2, frame("b", 2, "x"));
        b.push("a", 3, frame("a", 3, "x"));
        b.restore_gaps(taken);
        let ids: Vec<_> = b
            .pending_gaps()
            .iter()
            .map(|g| (g.run_id.as_str(), g.dropped_count))
            .collect();
        assert_eq!(ids, vec![("a", 2), ("b", 1)]);
    }
}
