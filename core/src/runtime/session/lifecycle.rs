//! The session's end of life and its diagnostics: `stats`, `flush`, `dispose` and the
//! exit deadline every SDK's exit path waits for.

use super::*;

impl Session {
    /// A diagnostics snapshot.
    /// The counters describe every event emitted before the call: it waits (at most
    /// [`STATS_SYNC_WAIT`]) for the worker to reach them.
    pub fn stats(&self) -> SessionStats {
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        let handoff = {
            let shared = self.inner.shared.lock();
            if shared.worker_started && !shared.disposed {
                Self::offer_control(&shared, Outgoing::Sync(reply_tx))
            } else {
                Handoff::Closed
            }
        };
        let deadline = Instant::now() + STATS_SYNC_WAIT;
        if handoff.by(deadline) {
            let _ = reply_rx.recv_deadline(deadline);
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
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        let mut shared = self.inner.shared.lock();
        if !shared.worker_started {
            return true;
        }
        self.flush_tokens_locked(&mut shared);
        let handoff = Self::offer_control(&shared, Outgoing::Flush(reply_tx));
        drop(shared);
        handoff.by(deadline) && reply_rx.recv_deadline(deadline).is_ok()
    }

    /// Releases every held gate (`continue`), finishes the implicit run, flushes and closes
    /// the link, waiting at most `deadline`. Idempotent; never hangs the app.
    pub fn dispose(&self, deadline: Duration) {
        let deadline = Instant::now() + deadline;
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        let gates;
        let mut shutdown = Handoff::Closed;
        {
            let mut shared = self.inner.shared.lock();
            if shared.disposed {
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
                shutdown = Self::offer_control(&shared, Outgoing::Shutdown(reply_tx));
            }
            self.inner.attach_signal.notify_all();
        }
        release_continue(gates);
        // A full outbox is waited on only now, with the gates released.
        if shutdown.by(deadline) {
            let _ = reply_rx.recv_deadline(deadline);
        }
        self.inner.attached.store(false, Ordering::Release);
    }
}
