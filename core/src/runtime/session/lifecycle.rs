//! The session's end of life and its diagnostics: `stats`, `flush`, `dispose` and the
//! exit deadline every SDK's exit path waits for.

use super::*;

impl Session {
    /// A diagnostics snapshot.
    /// The counters describe every event emitted before the call: it waits (at most
    /// [`STATS_SYNC_WAIT`]) for the worker to reach them.
    pub fn stats(&self) -> SessionStats {
        let synced = {
            let shared = self.inner.shared.lock();
            if shared.worker_started && !shared.disposed {
                let (barrier, done) = Self::barrier(&shared);
                Some((Self::offer_control(&shared, Control::Sync(barrier)), done))
            } else {
                None
            }
        };
        let deadline = Instant::now() + STATS_SYNC_WAIT;
        if let Some((handoff, done)) = synced {
            if handoff.by(deadline) {
                let _ = done.recv_deadline(deadline);
            }
        }
        let shared = self.inner.shared.lock();
        SessionStats {
            enabled: self.inner.config.enabled,
            attached: self.is_attached(),
            buffered: self.inner.buffered.load(Ordering::Relaxed),
            dropped: self.inner.dropped.load(Ordering::Relaxed),
            lost: self.inner.lost.load(Ordering::Relaxed) + shared.handoff_loss.total,
            pending_gaps: self.inner.pending_gaps.load(Ordering::Relaxed),
            spooled: self.inner.spooled.load(Ordering::Relaxed),
            held_gates: shared.engine.held_count() as u64,
            seq: shared.seq,
        }
    }

    /// How long `dispose()` and the SDKs' exit hooks wait by default: the connect and
    /// handshake timeouts (a connection in flight, or never tried, is waited for) plus
    /// [`EXIT_DELIVERY_MARGIN`] to send what the ring holds.
    pub fn exit_deadline(&self) -> Duration {
        let config = &self.inner.config;
        millis(
            config
                .connect_timeout_ms
                .saturating_add(config.handshake_timeout_ms),
        ) + EXIT_DELIVERY_MARGIN
    }

    /// Waits up to `timeout` until every event emitted so far has been handed to the socket
    /// (or buffered, when no debugger could be reached: a connection never tried is tried
    /// first). Returns whether it finished in time.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut shared = self.inner.shared.lock();
        if !shared.worker_started {
            return true;
        }
        self.flush_tokens_locked(&mut shared);
        let (barrier, done) = Self::barrier(&shared);
        let handoff = Self::offer_control(&shared, Control::Flush(barrier));
        drop(shared);
        handoff.by(deadline) && done.recv_deadline(deadline).is_ok()
    }

    /// Releases every held gate (`continue`), finishes the implicit run, flushes and closes
    /// the link, and waits for the worker's thread to end, all within `deadline`. Idempotent
    /// (a second call only waits for the worker again); never hangs the app: a worker not
    /// done by then (a connection being tried) finishes on its own.
    pub fn dispose(&self, deadline: Duration) {
        let deadline = Instant::now() + deadline;
        let gates;
        let mut shutdown = None;
        {
            let mut shared = self.inner.shared.lock();
            if shared.disposed {
                drop(shared);
                self.join_worker(deadline);
                return;
            }
            self.flush_tokens_locked(&mut shared);
            gates = shared.engine.take_all();
            shared.engine.disarm();
            self.announce_continues(&mut shared, &gates);
            if let Some(run) = shared.implicit_run.clone() {
                if self.inner.config.enabled {
                    let finished = RunFinished::new(RunStatus::Ok).to_value();
                    self.enqueue(
                        &mut shared,
                        &run.run_id,
                        MessageType::RunFinished,
                        finished,
                        None,
                        None,
                    );
                }
            }
            shared.disposed = true;
            shared.engine_attached = false;
            if shared.worker_started {
                // The shutdown channel's one slot is this message's: it cannot be full.
                let (barrier, done) = Self::barrier(&shared);
                if shared.outbox.shutdown.try_send(barrier).is_ok() {
                    shutdown = Some(done);
                }
                Self::wake_worker(&shared);
            }
            self.inner.attach_signal.notify_all();
        }
        release_continue(gates);
        if let Some(done) = shutdown {
            if done.recv_deadline(deadline).is_ok() {
                self.join_worker(deadline);
            }
        }
        self.inner.attached.store(false, Ordering::Release);
    }

    /// Joins the worker's thread once it has ended, looking until `deadline`; past it the
    /// handle is kept for a later dispose or the last handle's drop. Never from the worker
    /// itself (a warning sink that drops the app's last handle).
    fn join_worker(&self, deadline: Instant) {
        let Some(handle) = self.inner.shared.lock().worker_join.take() else {
            return;
        };
        if handle.thread().id() == std::thread::current().id() {
            self.inner.shared.lock().worker_join = Some(handle);
            return;
        }
        while !handle.is_finished() {
            if Instant::now() >= deadline {
                self.inner.shared.lock().worker_join = Some(handle);
                return;
            }
            std::thread::sleep(JOIN_POLL);
        }
        let _ = handle.join();
    }
}
