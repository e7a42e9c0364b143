//! The worker's side of the on-disk spool ([`crate::spool`]): what the replay ring spills
//! while no debugger is attached is written here, replayed on the next attach, and what is
//! still undelivered when the session ends is left on disk for `graphmind serve` or
//! `graphmind import --spool` to store.
//!
//! The spool folder is made on the first spill, by the worker of the process that spills:
//! a forked child's fresh worker makes its own. Nothing is written while the session is
//! disabled (no worker runs), and nothing while the ring holds everything.

use crate::buffer::{PendingGap, ReplayBuffer, Spilled};
use crate::config::Config;
use crate::spool::{DroppedRange, Record, Spool};
use crate::warn::Warner;
use std::path::PathBuf;

enum State {
    /// No spool configured.
    Off,
    /// Configured, no folder made yet.
    Closed { dir: PathBuf, max_bytes: u64 },
    /// Writing.
    Open(Spool),
    /// A write failed: spilling stopped, the ring counts losses as it does without a spool.
    Failed,
    /// The session ended with this many records on disk, for `graphmind serve`: the folder
    /// is closed and its owner lock let go.
    Left(u64),
}

/// The spool as one worker owns it.
pub(super) struct Spooler {
    state: State,
    app: String,
    /// [`finish`](Spooler::finish) ran.
    finished: bool,
}

impl Spooler {
    /// A spooler for `config` (off unless `spool_dir` is set).
    pub(super) fn new(config: &Config) -> Spooler {
        let state = match &config.spool_dir {
            Some(dir) => State::Closed {
                dir: dir.clone(),
                max_bytes: config.spool_max_bytes,
            },
            None => State::Off,
        };
        Spooler {
            state,
            app: config.app_name.clone(),
            finished: false,
        }
    }

    /// Whether evictions should be spilled here.
    pub(super) fn active(&self) -> bool {
        matches!(self.state, State::Closed { .. } | State::Open(_))
    }

    /// Records on disk now.
    pub(super) fn len(&self) -> u64 {
        match &self.state {
            State::Open(s) => s.len(),
            State::Left(n) => *n,
            _ => 0,
        }
    }

    fn open(&mut self, warner: &Warner) -> Option<&mut Spool> {
        if let State::Closed { dir, max_bytes } = &self.state {
            match Spool::create(dir, &self.app, *max_bytes) {
                Ok(spool) => self.state = State::Open(spool),
                Err(e) => {
                    warner.warn(
                        "spool-failed",
                        &format!("cannot make the spool ({e}); events that fall out of the replay buffer are lost"),
                    );
                    self.state = State::Failed;
                }
            }
        }
        match &mut self.state {
            State::Open(s) => Some(s),
            _ => None,
        }
    }

    fn fail(&mut self, buffer: &mut ReplayBuffer, warner: &Warner, error: &dyn std::fmt::Display) {
        warner.warn(
            "spool-failed",
            &format!("cannot write the spool ({error}); events that fall out of the replay buffer are lost from now on"),
        );
        if let State::Open(spool) = std::mem::replace(&mut self.state, State::Failed) {
            // What it holds stays on disk for `graphmind import --spool`.
            drop(spool);
        }
        buffer.set_spill(false);
    }

    /// Writes `items` in order. A segment dropped to keep the bound is counted as lost and
    /// marked: one gap marker per run it held (a fresh seq from `next_seq`), written after
    /// them. Anything that cannot be written is counted in the ring's gaps.
    pub(super) fn write(
        &mut self,
        items: Vec<Spilled>,
        buffer: &mut ReplayBuffer,
        next_seq: &mut dyn FnMut() -> u64,
        ts: u64,
        warner: &Warner,
    ) {
        let mut queue: std::collections::VecDeque<Spilled> = items.into();
        while let Some(item) = queue.pop_front() {
            let Some(spool) = self.open(warner) else {
                buffer.count_lost(&item.run_id, item.seq);
                continue;
            };
            match spool.append(&item.run_id, item.seq, &item.json) {
                Ok(dropped) if dropped.is_empty() => {}
                Ok(dropped) => {
                    let lost: u64 = dropped.iter().map(|d| d.count).sum();
                    buffer.count_lost_marked(lost);
                    warn_dropped(warner, &dropped, buffer.stats().lost);
                    for d in dropped {
                        let gap = PendingGap {
                            run_id: d.run_id,
                            dropped_count: d.count,
                            from_seq: d.from_seq,
                            to_seq: d.to_seq,
                        };
                        let seq = next_seq();
                        queue.push_back(Spilled {
                            json: gap.marker(seq, ts),
                            run_id: gap.run_id,
                            seq,
                        });
                    }
                }
                Err(e) => {
                    buffer.count_lost(&item.run_id, item.seq);
                    self.fail(buffer, warner, &e);
                }
            }
        }
    }

    /// Hands buffered writes to the operating system (after each batch of the worker).
    pub(super) fn flush(&mut self, buffer: &mut ReplayBuffer, warner: &Warner) {
        if let State::Open(spool) = &mut self.state {
            if let Err(e) = spool.flush() {
                self.fail(buffer, warner, &e);
            }
        }
    }

    /// What an attaching debugger receives between the gap markers and the ring, oldest
    /// first (empty when nothing is spooled or it cannot be read).
    pub(super) fn pending(&mut self, warner: &Warner) -> Vec<Record> {
        match &mut self.state {
            State::Open(spool) if !spool.is_empty() => match spool.records() {
                Ok(records) => records,
                Err(e) => {
                    warner.warn(
                        "spool-read",
                        &format!("cannot read the spool back ({e}); it stays on disk for `graphmind import --spool`"),
                    );
                    Vec::new()
                }
            },
            _ => Vec::new(),
        }
    }

    /// The spooled records were flushed to the debugger: delete them.
    pub(super) fn replayed(&mut self, buffer: &mut ReplayBuffer, warner: &Warner) {
        if let State::Open(spool) = &mut self.state {
            if let Err(e) = spool.clear() {
                self.fail(buffer, warner, &e);
            }
        }
    }

    /// The session ends. Not attached: what the ring never delivered, and a gap marker per
    /// run still owed one, go to the spool for the next `graphmind serve`. Then an empty
    /// spool's folder is removed; a non-empty one stays.
    pub(super) fn finish(
        &mut self,
        attached: bool,
        buffer: &mut ReplayBuffer,
        next_seq: &mut dyn FnMut() -> u64,
        ts: u64,
        warner: &Warner,
    ) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        if !attached && self.active() {
            let gaps = buffer.take_gaps();
            let mut items: Vec<Spilled> = gaps
                .into_iter()
                .map(|gap| {
                    let seq = next_seq();
                    Spilled {
                        json: gap.marker(seq, ts),
                        run_id: gap.run_id,
                        seq,
                    }
                })
                .collect();
            items.extend(buffer.drain_undelivered());
            if !items.is_empty() {
                self.write(items, buffer, next_seq, ts, warner);
            }
        }
        self.flush(buffer, warner);
        if let State::Open(spool) = std::mem::replace(&mut self.state, State::Failed) {
            if spool.is_empty() {
                let _ = spool.remove();
            } else {
                let (n, dir) = (spool.len(), spool.dir().display().to_string());
                warner.warn(
                    "spool-left",
                    &format!("{n} event(s) never reached the debugger and are kept in {dir}; the next `graphmind serve` stores them (or `graphmind import --spool {dir}`)"),
                );
                // Closed here, before `dispose` returns: the lock is let go at once.
                drop(spool);
                self.state = State::Left(n);
            }
        }
    }
}

fn warn_dropped(warner: &Warner, dropped: &[DroppedRange], total_lost: u64) {
    let count: u64 = dropped.iter().map(|d| d.count).sum();
    warner.warn(
        "spool-full",
        &format!(
            "the spool reached its bound (spoolMaxBytes): dropped its oldest {count} event(s), {total_lost} lost so far in this session; gap markers name them"
        ),
    );
}
