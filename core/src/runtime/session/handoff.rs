//! The producer handle: what an application thread does to hand an event to the worker.
//! It owns the sequence (`Shared::seq`), the bounded outbox with its backpressure and
//! shedding rules ([`BACKPRESSURE_DEADLINE`], [`END_RESERVE`], [`SHED_UNTIL`]), the count of
//! events dropped at the hand-off, starting the worker, and offering control messages on
//! their own channel, each with the [`Barrier`] of the events handed over before it.

use super::*;

impl Session {
    /// The locked shared state of a session that records (enabled, not disposed), with its
    /// worker started; `None` when nothing may be recorded.
    pub(super) fn recording(&self, event_type: MessageType) -> Option<MutexGuard<'_, Shared>> {
        if !self.inner.config.enabled {
            return None;
        }
        let mut shared = self.lock_with_room(is_end_event(event_type));
        if shared.disposed {
            return None;
        }
        self.ensure_worker(&mut shared);
        Some(shared)
    }

    /// The session lock, once the hand-off has room for one more event. While a debugger is
    /// attached a full hand-off is waited on, the lock let go, for up to
    /// [`BACKPRESSURE_DEADLINE`]; when that passes, regular events are shed without waiting
    /// (and counted) until the worker has drained it to [`SHED_UNTIL`]. An `end` (see
    /// [`is_end_event`]) may use the [`END_RESERVE`] and waits, attached or not, only when
    /// even that is full, never while shedding stops regular events.
    pub(super) fn lock_with_room(&self, end: bool) -> MutexGuard<'_, Shared> {
        let mut shared = self.inner.shared.lock();
        if shared.shedding && shared.outbox.events.len() <= SHED_UNTIL {
            shared.shedding = false;
        }
        let full = |shared: &Shared| {
            if end {
                shared.outbox.events.len() >= OUTBOX_CAPACITY
            } else {
                shared.engine_attached
                    && shared.outbox.events.len() >= OUTBOX_CAPACITY - END_RESERVE
            }
        };
        if !full(&shared) || (shared.shedding && !end) || !shared.worker_started {
            return shared;
        }
        let deadline = Instant::now() + BACKPRESSURE_DEADLINE;
        loop {
            Self::wake_worker(&shared);
            drop(shared);
            std::thread::sleep(ROOM_POLL);
            shared = self.inner.shared.lock();
            if !full(&shared) || shared.disposed {
                return shared;
            }
            if Instant::now() >= deadline {
                if !end {
                    shared.shedding = true;
                }
                return shared;
            }
        }
    }

    /// Announces every gate in `gates` as released with `continue` (under the lock); the
    /// caller wakes them with [`release_continue`] once the lock is dropped.
    pub(super) fn announce_continues(&self, shared: &mut Shared, gates: &[HeldGate]) {
        for gate in gates {
            self.announce_release(shared, gate, ResumeAction::Continue, None, None);
        }
    }

    pub(super) fn ensure_worker(&self, shared: &mut Shared) {
        if shared.worker_started || shared.disposed {
            return;
        }
        let inbox = if shared.outbox_reopen {
            let (outbox, inbox) = open_outbox();
            shared.outbox = outbox;
            shared.outbox_reopen = false;
            inbox
        } else {
            let Some(inbox) = self.inner.inbox.lock().take() else {
                return;
            };
            inbox
        };
        shared.worker_started = true;
        let inner = self.inner.clone();
        let spawned = std::thread::Builder::new()
            .name("graphmind-worker".into())
            .spawn(move || Worker::new(inner, inbox).run());
        match spawned {
            Ok(handle) => {
                shared.worker = Some(handle.thread().clone());
                shared.worker_join = Some(handle);
            }
            Err(e) => {
                shared.worker_started = false;
                self.inner.warner.warn(
                    "worker-spawn",
                    &format!("could not start the worker thread ({e}); staying detached"),
                );
            }
        }
    }

    /// Hands a control message to the worker and wakes it; false when its channel is full.
    pub(super) fn send_control(shared: &Shared, message: Control) -> bool {
        matches!(Self::offer_control(shared, message), Handoff::Sent)
    }

    /// Offers a control message to the worker and wakes it. A full control channel is waited
    /// on with [`Handoff::by`], once the caller has let go of the lock.
    pub(super) fn offer_control(shared: &Shared, message: Control) -> Handoff {
        let handoff = match shared.outbox.control.try_send(message) {
            Ok(()) => Handoff::Sent,
            Err(TrySendError::Full(message)) => {
                Handoff::Full(shared.outbox.control.clone(), message)
            }
            Err(TrySendError::Disconnected(_)) => Handoff::Closed,
        };
        Self::wake_worker(shared);
        handoff
    }

    /// A [`Barrier`] after every event handed over so far, and where its reply comes.
    pub(super) fn barrier(shared: &Shared) -> (Barrier, Receiver<()>) {
        let (reply, done) = crossbeam_channel::bounded(1);
        let handed = shared.outbox.handed;
        (Barrier { handed, reply }, done)
    }

    /// Wakes a lingering worker (cheap when it is not parked).
    pub(super) fn wake_worker(shared: &Shared) {
        if let Some(worker) = &shared.worker {
            worker.unpark();
        }
    }

    /// Assigns the next seq and hands the event to the worker. Never blocks: a full outbox
    /// drops the event and counts it as lost.
    pub(super) fn enqueue(
        &self,
        shared: &mut Shared,
        run_id: &str,
        event_type: MessageType,
        payload: Value,
        node_kind: Option<NodeKind>,
        held: Option<(String, f64)>,
    ) -> Option<u64> {
        let event = OutEvent {
            seq: shared.seq,
            run_id: run_id.to_string(),
            event_type,
            payload: Payload::Built(payload),
            node_kind,
            held,
            loop_deferred: false,
            loop_output: None,
            deferred_member: None,
        };
        self.send_event(shared, event)
    }

    /// Hands `event` (built with `shared.seq`) to the worker and advances the seq: the one place
    /// every event goes through.
    pub(super) fn send_event(&self, shared: &mut Shared, event: OutEvent) -> Option<u64> {
        match self.send_or_return(shared, event) {
            Handed::Sent(seq) => Some(seq),
            Handed::Dropped(_) => None,
        }
    }

    /// [`Session::send_event`], handing a dropped event back (`None` once the worker is
    /// gone) so the caller can still account for it.
    pub(super) fn send_or_return(&self, shared: &mut Shared, event: OutEvent) -> Handed {
        let (seq, event_type) = (event.seq, event.event_type);
        // Detached, the replay buffer keeps only the newest `bufferSize` events: a worker
        // more than that far behind would only queue events (and their memory) that the
        // buffer then pushes out again. Drop here instead, counted like a full queue, so an
        // app that outpaces its worker with no debugger attached keeps a bounded footprint.
        // Attached, regular events leave the last END_RESERVE slots to the ends of runs
        // and nodes, and are shed while a wait for room timed out.
        let end = is_end_event(event_type);
        let len = shared.outbox.events.len();
        let refused = if end {
            false
        } else if shared.engine_attached {
            shared.shedding || len >= OUTBOX_CAPACITY - END_RESERVE
        } else if self.inner.config.spool_dir.is_some() {
            // With a spool, what the ring pushes out is kept on disk: the worker must see
            // every event, so only a worker that fell far behind drops (as attached).
            len >= OUTBOX_CAPACITY - END_RESERVE
        } else {
            len >= self.inner.config.buffer_size.max(MIN_DETACHED_QUEUE)
        };
        let sent = if refused {
            Err(TrySendError::Full(Outgoing::Event(event)))
        } else {
            shared.outbox.hand(Outgoing::Event(event))
        };
        match sent {
            Ok(()) => {
                shared.seq += 1;
                if is_gate_event(event_type) || shared.outbox.events.len() >= WAKE_BACKLOG {
                    Self::wake_worker(shared);
                }
                Handed::Sent(seq)
            }
            Err(TrySendError::Full(returned)) => {
                // Lost, but not silently: it keeps its seq, and the worker takes the count
                // over into the run's gap marker (and the warning's total).
                shared.seq += 1;
                match returned {
                    Outgoing::Event(event) => {
                        shared.handoff_loss.record(&event.run_id, seq);
                        self.inner.handoff_lost.store(true, Ordering::Release);
                        Handed::Dropped(Some(Box::new(event)))
                    }
                    Outgoing::LoopOnly(_) => Handed::Dropped(None),
                }
            }
            Err(TrySendError::Disconnected(_)) => Handed::Dropped(None),
        }
    }
}

impl Outbox {
    /// Hands `message` to the worker's event channel without waiting, counting it for the
    /// [`Barrier`]s made after it. Called under the session lock, like every hand-off.
    // The channel's own error, giving the message back as `try_send` does: boxing it would
    // allocate on the path that sheds events because the worker is behind.
    #[allow(clippy::result_large_err)]
    pub(super) fn hand(&mut self, message: Outgoing) -> Result<(), TrySendError<Outgoing>> {
        self.events.try_send(message)?;
        self.handed += 1;
        Ok(())
    }
}

/// A control message offered to the worker ([`Session::offer_control`]).
pub(super) enum Handoff {
    /// In the control channel.
    Sent,
    /// The control channel was full: the message, and the channel to wait on.
    Full(Sender<Control>, Control),
    /// No worker receives (or none was started).
    Closed,
}

impl Handoff {
    /// Whether the message is in the control channel, waiting for room until `deadline`
    /// when it was full. Call without the session lock.
    pub(super) fn by(self, deadline: Instant) -> bool {
        match self {
            Handoff::Sent => true,
            Handoff::Full(control, message) => control.send_deadline(message, deadline).is_ok(),
            Handoff::Closed => false,
        }
    }
}

/// The events a run's record cannot do without: how a run or a started node ended, and the
/// gate's own events. They may use the hand-off's [`END_RESERVE`].
pub(super) fn is_end_event(t: MessageType) -> bool {
    is_gate_event(t)
        || matches!(
            t,
            MessageType::RunFinished | MessageType::NodeFinished | MessageType::NodeError
        )
}

/// `exec.*` events are the gate engine's own; an app never emits them by hand.
pub(super) fn is_gate_event(t: MessageType) -> bool {
    matches!(
        t,
        MessageType::ExecPaused | MessageType::ExecResumed | MessageType::ExecRefused
    )
}
