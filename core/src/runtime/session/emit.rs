//! The emit pipeline on the application thread: checks an event, keys it for the loop
//! guard (holding the call when the guard says so), and hands it to the worker through the
//! producer handle ([`super::handoff`]). Deferred payload members (host values still in JSON
//! text) are resolved here or, later, by the worker.

use super::*;

impl Session {
    /// Emits one event that an app sends (`node.started`, `node.token`, `node.finished`,
    /// `node.error`, `graph.hint`, `run.started`, `run.finished`) into `run_id` (or the
    /// implicit run). Other types are ignored with a warning. Returns the event's `seq`, or
    /// `None` when nothing was emitted.
    pub fn emit(&self, run_id: Option<&str>, event_type: &str, payload: Value) -> Option<u64> {
        if !self.inner.config.enabled {
            return None;
        }
        let kind = match check_emit(event_type, &payload) {
            Ok(kind) => kind,
            Err(refused) => {
                self.inner
                    .warner
                    .warn(&format!("emit-type:{event_type}"), &refused.to_string());
                return None;
            }
        };
        self.emit_typed(run_id, kind, payload)
    }

    /// Hands an app event to the worker. `node.started`, `node.finished` and `node.error`
    /// also feed the loop guard: at once while a debugger is attached and the guard may hold
    /// (its before-gate may hold this very call), else on the worker (then a loop can only be
    /// warned about, and keying a kilobyte of input and output twice per node is most of
    /// what a node would cost the application thread). Order is kept across the switch: the
    /// first update made at once waits (briefly, never holding the session lock) for the
    /// worker to apply the deferred ones.
    pub(super) fn emit_typed(
        &self,
        run_id: Option<&str>,
        event_type: MessageType,
        payload: Value,
    ) -> Option<u64> {
        self.emit_with(run_id, event_type, Payload::Built(payload), None, None)
    }

    /// [`Session::emit_typed`] with one payload member possibly still in JSON text. It stays
    /// text (parsed by the worker) while no debugger is attached; attached, it is parsed here
    /// first, since the loop guard and the gates read it on this thread. `node` is the node
    /// of a `node.started` / `node.finished`: when the guard runs here, a start's input is
    /// keyed before any lock is taken, so the locks are held only for the books (the worker,
    /// which takes them too, is not kept waiting for a kilobyte's walk). A successful
    /// output is keyed by the worker instead: only a cycle compares outputs, and a start
    /// that could close one first waits for the keys it compares
    /// ([`Session::await_loop_outputs`]).
    pub(super) fn emit_with(
        &self,
        run_id: Option<&str>,
        event_type: MessageType,
        mut payload: Payload,
        mut deferred_member: Option<DeferredMember>,
        node: Option<&NodeRef>,
    ) -> Option<u64> {
        let attached = self.inner.attached.load(Ordering::Acquire);
        if deferred_member.is_some() && attached {
            self.resolve_member(&mut payload, deferred_member.take());
        }
        let loop_event = self.inner.loop_watch
            && matches!(
                event_type,
                MessageType::NodeStarted | MessageType::NodeFinished | MessageType::NodeError
            );
        let mut loop_keys = None;
        if loop_event && attached && self.inner.loop_holds {
            if let Some(node) = node {
                loop_keys = key_loop_event(&self.inner.loop_keyer, event_type, node, &payload);
                if let Some(LoopKeys::Start(node, fp)) = loop_keys {
                    self.await_loop_outputs(run_id, node, fp);
                }
            }
            self.wait_loop_backlog();
        }
        let mut shared = self.recording(event_type)?;
        if deferred_member.is_some() && shared.engine_attached {
            // Attached between the check above and the lock: rare, parse under the lock.
            self.resolve_member(&mut payload, deferred_member.take());
        }
        self.flush_tokens_locked(&mut shared);
        let run_id = self.run_id_or_implicit(&mut shared, run_id);
        let seq = shared.seq;
        let defer = loop_event && !(shared.engine_attached && self.inner.loop_holds);
        let mut loop_output = None;
        if loop_event && !defer && loop_keys.is_none() {
            // Attached between the check above and the lock: key here.
            if let Some(node) = node {
                loop_keys = key_loop_event(&self.inner.loop_keyer, event_type, node, &payload);
            }
        }
        if loop_event && !defer {
            let (warning, ticket) = note_loop(
                &mut self.inner.loop_guard.lock(),
                &run_id,
                event_type,
                &payload,
                seq,
                true,
                loop_keys,
            );
            if let Some(w) = warning {
                self.inner.warner.warn(&w.key, &w.message);
            }
            if ticket.is_some() {
                self.inner
                    .loop_outputs_pending
                    .fetch_add(1, Ordering::AcqRel);
                loop_output = ticket;
            }
        }
        if defer {
            self.inner.loop_backlog.fetch_add(1, Ordering::AcqRel);
        }
        let event = OutEvent {
            seq: shared.seq,
            run_id: run_id.clone(),
            event_type,
            payload,
            node_kind: None,
            held: None,
            loop_deferred: defer,
            loop_output,
            deferred_member,
        };
        let handed = self.send_or_return(&mut shared, event);
        if let (Handed::Dropped(_), Some(ticket)) = (&handed, loop_output) {
            // Its output will never be keyed: the call equals nothing.
            self.inner
                .loop_guard
                .lock()
                .fill_output(&run_id, ticket, None);
            self.inner
                .loop_outputs_pending
                .fetch_sub(1, Ordering::AcqRel);
        }
        match handed {
            Handed::Sent(seq) => Some(seq),
            Handed::Dropped(Some(event)) if defer => {
                self.defer_dropped(&mut shared, *event);
                None
            }
            Handed::Dropped(returned) => {
                if defer {
                    self.inner.loop_backlog.fetch_sub(1, Ordering::AcqRel);
                }
                if let Some(mut event) =
                    returned.filter(|_| loop_event && event_type == MessageType::NodeStarted)
                {
                    // Never reached the wire: it is not "the call right before" the next
                    // one of its kind (the same books as a dropped deferred start).
                    note_dropped(&mut self.inner.loop_guard.lock(), &mut event);
                }
                None
            }
        }
    }

    /// A node event dropped while its loop-guard update was deferred: the update still has
    /// to happen, after the updates queued before it (a dropped finish whose start is still
    /// queued would otherwise find nothing to close, and leak an open call). The worker
    /// makes it from the event's head (its input or output stripped, so the queue keeps no
    /// payload of a dropped event); with the queue itself full, this thread makes it.
    pub(super) fn defer_dropped(&self, shared: &mut Shared, mut event: OutEvent) {
        if let Some(map) = event.payload.built().as_object_mut() {
            map.remove("input");
            map.remove("output");
        }
        event.deferred_member = None;
        match shared.outbox.hand(Outgoing::LoopOnly(event)) {
            Ok(()) => {}
            Err(TrySendError::Full(Outgoing::LoopOnly(mut event)))
            | Err(TrySendError::Disconnected(Outgoing::LoopOnly(mut event))) => {
                self.inner.loop_backlog.fetch_sub(1, Ordering::AcqRel);
                note_dropped(&mut self.inner.loop_guard.lock(), &mut event);
            }
            Err(_) => {
                self.inner.loop_backlog.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Before the loop guard records a start that could close a cycle: waits until the worker
    /// keyed the successful outputs the cycle check would compare (at most
    /// [`LOOP_BACKLOG_WAIT`]; those still unkeyed then count as different). Nothing to wait
    /// for unless the calls before this one repeat, node by node and input by input.
    pub(super) fn await_loop_outputs(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        fp: StartFingerprint,
    ) {
        if self.inner.loop_outputs_pending.load(Ordering::Acquire) == 0 {
            return;
        }
        let run_id = match run_id {
            Some(id) => std::borrow::Cow::Borrowed(id),
            None => match &self.inner.shared.lock().implicit_run {
                Some(run) => std::borrow::Cow::Owned(run.run_id.clone()),
                None => return,
            },
        };
        let awaits = || {
            self.inner.loop_guard.lock().awaits_output(
                &run_id,
                node.kind.as_str(),
                &node.node_id,
                fp,
            )
        };
        if !awaits() {
            return;
        }
        // The keys come from the worker, which may be lingering before its next batch.
        Self::wake_worker(&self.inner.shared.lock());
        let deadline = Instant::now() + LOOP_BACKLOG_WAIT;
        while awaits() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Waits until the worker applied every deferred loop-guard update (at most
    /// [`LOOP_BACKLOG_WAIT`]; only right after an attach is there anything to wait for).
    pub(super) fn wait_loop_backlog(&self) {
        if self.inner.loop_backlog.load(Ordering::Acquire) == 0 {
            return;
        }
        let deadline = Instant::now() + LOOP_BACKLOG_WAIT;
        while self.inner.loop_backlog.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// The core value of `value`, warning (rate-limited) when it was text that is not JSON.
    pub(crate) fn resolve(&self, value: HostValue) -> Value {
        let resolved = value.into_value();
        if resolved.invalid_text {
            self.inner.warner.warn("json-text", INVALID_TEXT_WARNING);
        }
        resolved.value
    }

    /// Parses a deferred member into its placeholder (on the application thread when a
    /// debugger is attached, else on the worker).
    pub(super) fn resolve_member(&self, payload: &mut Payload, member: Option<DeferredMember>) {
        let Some(member) = member else {
            return;
        };
        let value = self.resolve(member.value);
        payload.set_member(member.key, value);
    }
}
