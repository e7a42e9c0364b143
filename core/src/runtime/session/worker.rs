//! The worker thread: the only owner of the redactor, the shrinker's warnings, the replay
//! ring, the on-disk spool, the held-time ledger and the link's writing half. It drains the
//! outbox in batches, processes each event (redact, stamp held time, shrink, serialize,
//! buffer, send) and answers control messages (flush, sync, shutdown), which come on their
//! own channels and are taken first, each after the events handed over before it (its
//! [`Barrier`]). Its link side is in [`super::attach`].

use super::*;

/// Held time per node execution, so `node.finished` / `node.error` carry `heldMs` (held
/// time is not run time: "ran" is `durationMs - heldMs`).
#[derive(Default)]
pub(super) struct HeldLedger {
    /// Open executions per (run, node id), most recent last, with the held ms so far.
    open: HashMap<(String, String), Vec<(String, f64)>>,
}

impl HeldLedger {
    pub(super) fn started(&mut self, run_id: &str, node_id: &str, instance_id: &str) {
        self.open
            .entry((run_id.to_string(), node_id.to_string()))
            .or_default()
            .push((instance_id.to_string(), 0.0));
    }

    pub(super) fn credit(&mut self, run_id: &str, node_id: &str, held_ms: f64) {
        if let Some(stack) = self
            .open
            .get_mut(&(run_id.to_string(), node_id.to_string()))
        {
            if let Some(last) = stack.last_mut() {
                last.1 += held_ms;
            }
        }
    }

    pub(super) fn ended(
        &mut self,
        run_id: &str,
        node_id: &str,
        instance_id: Option<&str>,
    ) -> Option<f64> {
        let key = (run_id.to_string(), node_id.to_string());
        let stack = self.open.get_mut(&key)?;
        let index = match instance_id {
            Some(id) => stack.iter().rposition(|(i, _)| i == id)?,
            None => stack.len().checked_sub(1)?,
        };
        let (_, held) = stack.remove(index);
        if stack.is_empty() {
            self.open.remove(&key);
        }
        (held > 0.0).then_some(normalize_duration(held))
    }

    /// The held ms of an execution still open (a `node.error` that its `node.finished` may
    /// follow), leaving it open.
    pub(super) fn so_far(
        &self,
        run_id: &str,
        node_id: &str,
        instance_id: Option<&str>,
    ) -> Option<f64> {
        let stack = self.open.get(&(run_id.to_string(), node_id.to_string()))?;
        let held = match instance_id {
            Some(id) => stack.iter().rev().find(|(i, _)| i == id)?.1,
            None => stack.last()?.1,
        };
        (held > 0.0).then_some(normalize_duration(held))
    }

    /// Drops what is left of a finished run (executions that ended with a `node.error` and
    /// no `node.finished`, as adapters without an `error` gate emit them).
    pub(super) fn forget_run(&mut self, run_id: &str) {
        self.open.retain(|(run, _), _| run != run_id);
    }
}

/// One message the worker took, from any of its channels.
pub(super) enum Message {
    Event(Outgoing),
    Control(Control),
    Shutdown(Barrier),
}

/// The worker thread: owns the socket's writing half, the replay buffer, the redactor and
/// the shrinker.
pub(super) struct Worker {
    pub(super) session: Session,
    pub(super) rx: Receiver<Outgoing>,
    /// Flushes, syncs, connect-now and link-gone ([`Control`]).
    pub(super) control: Receiver<Control>,
    /// The one shutdown `dispose` sends.
    pub(super) shutdown: Receiver<Barrier>,
    /// Messages taken from `rx` so far, compared with a [`Barrier`]'s count.
    pub(super) taken: u64,
    pub(super) redactor: redact::Redactor,
    pub(super) shrink_warnings: shrink::ShrinkWarnings,
    pub(super) buffer: buffer::ReplayBuffer,
    pub(super) ledger: HeldLedger,
    pub(super) link: Option<Box<dyn LinkWriter>>,
    pub(super) next_attempt: Option<Instant>,
    pub(super) fast_retry: usize,
    /// A connection was tried at least once.
    pub(super) tried: bool,
    /// Envelopes queued on the link since its last successful flush: if the link fails
    /// before the next one, they count as never delivered.
    pub(super) unflushed: usize,
    /// The on-disk spool, when `spoolDir` is set.
    pub(super) spooler: spooler::Spooler,
}

impl Worker {
    pub(super) fn new(inner: Arc<Inner>, inbox: Inbox) -> Worker {
        let config = &inner.config;
        let redactor = redact::Redactor::new(config.hide);
        let mut buffer = buffer::ReplayBuffer::new(config.buffer_size, config.max_buffer_bytes);
        let spooler = spooler::Spooler::new(config);
        buffer.set_spill(spooler.active());
        Worker {
            session: Session::internal(inner),
            rx: inbox.events,
            control: inbox.control,
            shutdown: inbox.shutdown,
            taken: 0,
            redactor,
            shrink_warnings: shrink::ShrinkWarnings::new(),
            buffer,
            ledger: HeldLedger::default(),
            link: None,
            next_attempt: Some(Instant::now()),
            fast_retry: FAST_RETRY_DELAYS.len(),
            tried: false,
            unflushed: 0,
            spooler,
        }
    }

    pub(super) fn inner(&self) -> &Inner {
        &self.session.inner
    }

    pub(super) fn run(mut self) {
        loop {
            let now = Instant::now();
            let mut wake = self.next_attempt.filter(|_| self.link.is_none());
            if let Some(due) = self.session.token_deadline() {
                wake = Some(wake.map_or(due, |w| w.min(due)));
            }
            if self.link.is_some() {
                if let Some(deadline) = self.session.next_pause_deadline() {
                    wake = Some(wake.map_or(deadline, |w| w.min(deadline)));
                }
            }
            let first = self.next_message(wake.map(|at| at.saturating_duration_since(now)));
            let busy = first.is_ok();
            let mut stop = match first {
                Ok(message) => self.handle(message),
                Err(RecvTimeoutError::Timeout) => false,
                Err(RecvTimeoutError::Disconnected) => true,
            };
            // Batch whatever else is already queued, then flush the socket once.
            for _ in 0..MAX_BATCH {
                if stop {
                    break;
                }
                match self.next_message(Some(Duration::ZERO)) {
                    Ok(message) => stop = self.handle(message),
                    Err(_) => break,
                }
            }
            self.take_handoff_loss();
            self.flush_link();
            self.spooler
                .flush(&mut self.buffer, &self.session.inner.warner);
            if stop {
                self.finish_spool();
            }
            self.publish_stats();
            if stop {
                return;
            }
            self.session.flush_due_tokens();
            if self.link.is_some() {
                self.session.release_expired();
            } else if self.next_attempt.is_some_and(|at| at <= Instant::now()) {
                self.attempt();
                self.publish_stats();
            }
            if busy {
                // More is probably on its way: collect it for a moment instead of being
                // woken once per event (unparked at once for gates and flushes).
                std::thread::park_timeout(WORKER_LINGER);
            }
        }
    }

    /// The next message, the shutdown first, then control, then events, waiting at most
    /// `timeout` (`None`: until one comes). `Disconnected` once no sender is left (the
    /// session's state is gone).
    fn next_message(&mut self, timeout: Option<Duration>) -> Result<Message, RecvTimeoutError> {
        if let Ok(barrier) = self.shutdown.try_recv() {
            return Ok(Message::Shutdown(barrier));
        }
        if let Ok(control) = self.control.try_recv() {
            return Ok(Message::Control(control));
        }
        match self.rx.try_recv() {
            Ok(event) => {
                self.taken += 1;
                return Ok(Message::Event(event));
            }
            Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => {}
        }
        if timeout == Some(Duration::ZERO) {
            return Err(RecvTimeoutError::Timeout);
        }
        let mut select = Select::new();
        let shutdown = select.recv(&self.shutdown);
        let control = select.recv(&self.control);
        let events = select.recv(&self.rx);
        let operation = match timeout {
            Some(timeout) => select
                .select_timeout(timeout)
                .map_err(|_| RecvTimeoutError::Timeout)?,
            None => select.select(),
        };
        let disconnected = |_| RecvTimeoutError::Disconnected;
        match operation.index() {
            i if i == shutdown => operation
                .recv(&self.shutdown)
                .map(Message::Shutdown)
                .map_err(disconnected),
            i if i == control => operation
                .recv(&self.control)
                .map(Message::Control)
                .map_err(disconnected),
            i => {
                debug_assert_eq!(i, events);
                let event = operation.recv(&self.rx).map_err(disconnected)?;
                self.taken += 1;
                Ok(Message::Event(event))
            }
        }
    }

    /// Handles events until every one handed over before `barrier` is, flushing the link
    /// after each [`MAX_BATCH`] of them as the main loop does (so a failed write still leaves
    /// at most one batch counted as undelivered). They are all in the channel already: they
    /// were handed over, under the session lock, before the barrier was taken.
    fn drain_to(&mut self, barrier: &Barrier) {
        self.flush_link();
        while self.taken < barrier.handed {
            for _ in 0..MAX_BATCH {
                if self.taken >= barrier.handed {
                    break;
                }
                match self.rx.try_recv() {
                    Ok(event) => {
                        self.taken += 1;
                        self.handle_event(event);
                    }
                    // Only a forked child's fresh channel could be behind its count.
                    Err(_) => return,
                }
            }
            self.take_handoff_loss();
            self.flush_link();
            self.spooler
                .flush(&mut self.buffer, &self.session.inner.warner);
        }
    }

    /// Handles one message; returns true when the worker must stop.
    fn handle(&mut self, message: Message) -> bool {
        match message {
            Message::Event(event) => self.handle_event(event),
            Message::Control(control) => self.handle_control(control),
            Message::Shutdown(barrier) => {
                self.shut_down(barrier);
                return true;
            }
        }
        false
    }

    fn handle_event(&mut self, message: Outgoing) {
        match message {
            Outgoing::Event(event) => self.process(event),
            Outgoing::LoopOnly(mut event) => {
                let inner = self.inner();
                note_dropped(&mut inner.loop_guard.lock(), &mut event);
                inner.loop_backlog.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    fn handle_control(&mut self, control: Control) {
        match control {
            Control::Kick => {
                if self.link.is_none() {
                    self.next_attempt = Some(Instant::now());
                }
            }
            Control::Detached(generation) => {
                if self.session.inner.shared.lock().link_generation == generation {
                    if let Some(link) = self.link.take() {
                        link.abort();
                    }
                    self.buffer.mark_undelivered_newest(self.unflushed);
                    self.unflushed = 0;
                    self.schedule_retry(true);
                }
            }
            Control::Flush(barrier) => {
                self.drain_to(&barrier);
                self.connect_to_deliver();
                self.take_handoff_loss();
                self.flush_link();
                self.publish_stats();
                let _ = barrier.reply.send(());
            }
            Control::Sync(barrier) => {
                self.drain_to(&barrier);
                self.take_handoff_loss();
                self.publish_stats();
                let _ = barrier.reply.send(());
            }
        }
    }

    /// The last delivery: everything handed over before the shutdown (nothing can come
    /// after it: the session is disposed), a connection tried if none was, the spool
    /// settled, the link closed. Flushes and syncs still waiting are answered.
    fn shut_down(&mut self, barrier: Barrier) {
        self.connect_to_deliver();
        self.drain_to(&barrier);
        while let Ok(control) = self.control.try_recv() {
            if let Control::Flush(waiting) | Control::Sync(waiting) = control {
                let _ = waiting.reply.send(());
            }
        }
        self.take_handoff_loss();
        self.flush_link();
        self.finish_spool();
        if let Some(link) = self.link.take() {
            link.close("session disposed");
        }
        self.publish_stats();
        let _ = barrier.reply.send(());
    }

    /// Redacts, stamps held time, shrinks, serializes, buffers and (when attached) sends one
    /// event.
    pub(super) fn process(&mut self, mut event: OutEvent) {
        let verbatim = self.take_verbatim(&mut event);
        self.session
            .resolve_member(&mut event.payload, event.deferred_member.take());
        // A node event queued typed is built here, off the application thread.
        event.payload.built();
        if event.loop_deferred {
            // Before redaction: the guard compares values as the integration handed them over.
            let inner = self.inner();
            // Keyed in full here, so no ticket comes back.
            let (warning, _) = note_loop(
                &mut inner.loop_guard.lock(),
                &event.run_id,
                event.event_type,
                &event.payload,
                event.seq,
                false,
                None,
            );
            inner.loop_backlog.fetch_sub(1, Ordering::AcqRel);
            if let Some(w) = warning {
                inner.warner.warn(&w.key, &w.message);
            }
        }
        if event.event_type == MessageType::RunFinished {
            // After every deferred update of the run (see `Session::finish_run`).
            self.inner().loop_guard.lock().forget(&event.run_id);
        }
        if let Some(ticket) = event.loop_output.take() {
            // Keyed outside the guard's lock, before redaction, like the rest of the call.
            let inner = self.inner();
            let key = inner.loop_keyer.key_output(event.payload.member("output"));
            inner
                .loop_guard
                .lock()
                .fill_output(&event.run_id, ticket, Some(key));
            inner.loop_outputs_pending.fetch_sub(1, Ordering::AcqRel);
        }
        let type_name = event.event_type.as_str();
        let context = redact::EventContext {
            run_id: &event.run_id,
            node_kind: event.node_kind.map(NodeKind::as_str),
        };
        let outcome = self
            .redactor
            .redact_in(&context, type_name, event.payload.built());
        if let Some(warning) = outcome.warning() {
            self.inner().warner.warn(warning.key, &warning.message);
        }
        if !outcome.keep() {
            return;
        }
        self.stamp_held_time(&mut event);
        let spliced = verbatim.and_then(|member| {
            let text = std::str::from_utf8(&member.text).ok()?;
            let json = shrink::serialize_with_verbatim(
                event.payload.built(),
                member.key,
                text,
                shrink::MAX_PAYLOAD_BYTES,
            );
            if json.is_none() {
                // Too big to go out whole: read it, and shrink the payload as usual.
                let value = self.session.resolve(HostValue::Text(member.text));
                event.payload.set_member(member.key, value);
            }
            json
        });
        let serialized = match spliced {
            Some(json) => shrink::Serialized {
                original_bytes: json.len(),
                json,
                truncated: false,
            },
            None => shrink::serialize_payload(
                event.payload.built(),
                shrink::MAX_PAYLOAD_BYTES,
                Some(type_name),
            ),
        };
        if serialized.truncated {
            let frame =
                wire::encode_envelope(PROTOCOL_VERSION, 0, 0, "r", type_name, &serialized.json);
            let valid = matches!(
                wire::parse_envelope(frame.as_bytes()),
                wire::ParseOutcome::Ok(_)
            );
            let warning = if valid {
                self.shrink_warnings
                    .shrunk(type_name, serialized.original_bytes)
            } else {
                self.shrink_warnings
                    .invalid(type_name, serialized.original_bytes)
            };
            if let Some(message) = warning {
                self.inner()
                    .warner
                    .warn(&format!("payload-budget:{type_name}"), &message);
            }
        }
        let frame = wire::encode_envelope(
            PROTOCOL_VERSION,
            event.seq,
            epoch_ms(),
            &event.run_id,
            type_name,
            &serialized.json,
        );
        let delivered = match self.link.as_mut() {
            Some(link) => match link.queue(frame.clone()) {
                Ok(()) => {
                    self.unflushed += 1;
                    true
                }
                Err(_) => {
                    self.link_failed();
                    false
                }
            },
            None => false,
        };
        let pushed = self
            .buffer
            .push_with(&event.run_id, event.seq, frame, delivered);
        if let Some(warning) = pushed.warning {
            self.inner().warner.warn("buffer-overflow", &warning);
        }
        if self.buffer.has_spilled() {
            self.spill();
        }
    }

    /// Writes what the ring spilled to the spool (gap markers for a dropped segment take
    /// fresh seqs).
    pub(super) fn spill(&mut self) {
        let items = self.buffer.take_spilled();
        let inner = self.session.inner.clone();
        let mut next_seq = || {
            let mut shared = inner.shared.lock();
            shared.seq += 1;
            shared.seq - 1
        };
        self.spooler.write(
            items,
            &mut self.buffer,
            &mut next_seq,
            epoch_ms(),
            &inner.warner,
        );
    }

    /// The session ends: the spool keeps what never reached a debugger, or goes.
    pub(super) fn finish_spool(&mut self) {
        let inner = self.session.inner.clone();
        let mut next_seq = || {
            let mut shared = inner.shared.lock();
            shared.seq += 1;
            shared.seq - 1
        };
        let attached = self.link.is_some();
        self.spooler.finish(
            attached,
            &mut self.buffer,
            &mut next_seq,
            epoch_ms(),
            &inner.warner,
        );
    }

    /// The event's deferred member, taken when it can go out exactly as the host wrote it
    /// ([`HostValue::Stringified`]): nothing reads the value (no hide switch is on, the loop
    /// guard is not keying this event), it fits the payload budget, and it nests less deeply
    /// than [`shrink::depth::MAX_VALUE_DEPTH`] (deeper parts would be cut). Its grammar is
    /// `JSON.stringify`'s, so only its brackets are read: parsing it only to write the same
    /// bytes again was about half the worker's time for a 1 KB tool call.
    pub(super) fn take_verbatim(&self, event: &mut OutEvent) -> Option<DeferredText> {
        if self.redactor.active() || event.loop_deferred || event.loop_output.is_some() {
            return None;
        }
        let forwardable = |m: &mut DeferredMember| {
            matches!(&m.value, HostValue::Stringified(text)
                if text.len() <= shrink::MAX_PAYLOAD_BYTES
                    && crate::json::nests_less_than(text, shrink::depth::MAX_VALUE_DEPTH))
        };
        let member = event.deferred_member.take_if(forwardable)?;
        match member.value {
            HostValue::Stringified(text) => Some(DeferredText {
                key: member.key,
                text,
            }),
            _ => None,
        }
    }

    pub(super) fn stamp_held_time(&mut self, event: &mut OutEvent) {
        let payload = event.payload.built();
        match event.event_type {
            MessageType::NodeStarted => {
                if let (Some(node), Some(instance)) = (
                    payload.get("nodeId").and_then(Value::as_str),
                    payload.get("instanceId").and_then(Value::as_str),
                ) {
                    self.ledger.started(&event.run_id, node, instance);
                }
            }
            MessageType::ExecResumed => {
                if let Some((node_id, held_ms)) = &event.held {
                    self.ledger.credit(&event.run_id, node_id, *held_ms);
                }
            }
            MessageType::NodeFinished | MessageType::NodeError => {
                let ends = event.event_type == MessageType::NodeFinished;
                let Some(node) = payload
                    .get("nodeId")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                else {
                    return;
                };
                let instance = payload
                    .get("instanceId")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                // A `node.error` stamps the held time so far but leaves the execution open:
                // its `error` gate may still hold, and the `node.finished` that follows a
                // continue, retry, inject or abort carries that time too.
                let held = if ends {
                    self.ledger.ended(&event.run_id, &node, instance.as_deref())
                } else {
                    self.ledger
                        .so_far(&event.run_id, &node, instance.as_deref())
                };
                if let (Some(held), Some(map)) = (held, payload.as_object_mut()) {
                    if !map.contains_key("heldMs") {
                        map.insert("heldMs", Value::from(held));
                    }
                }
            }
            MessageType::RunFinished => self.ledger.forget_run(&event.run_id),
            _ => {}
        }
    }
}
