//! What the debugger sends, handled on the reader thread: `exec.resume` (with edits and
//! injected outputs), breakpoint and mode updates, the link's end (every held gate released
//! as `continue`), and pause timeouts.

use super::*;

impl Session {
    /// An `exec.resume` from the debugger (reader thread). Unknown pauses are ignored (the
    /// first resume won); a refused edit or inject leaves the gate held and says why.
    pub(super) fn handle_resume(&self, payload: &Value) {
        let Some(pause_id) = payload.get("pauseId").and_then(Value::as_str) else {
            return;
        };
        let Some(action) = payload
            .get("action")
            .and_then(Value::as_str)
            .and_then(ResumeAction::parse)
        else {
            return;
        };
        let request_id = payload.get("requestId").and_then(Value::as_str);
        let mut shared = self.inner.shared.lock();
        let Some(gate) = shared.engine.peek(pause_id) else {
            return;
        };
        let (run_id, kind, point) = (gate.run_id.clone(), gate.node.kind.clone(), gate.point);
        let mut decision = GateDecision {
            action,
            output: None,
            input: None,
        };
        let mut edited = None;
        let refusal = if let Some(proposed) = payload.get("input") {
            match self.accept_edit(&shared, pause_id, action, point, &kind, proposed) {
                Ok(merged) => {
                    edited = Some(merged.clone());
                    decision.input = Some(merged);
                    None
                }
                Err(refusal) => Some(refusal),
            }
        } else if action == ResumeAction::Inject {
            let value = payload.get("output").cloned().unwrap_or(Value::Null);
            match edit_input::check_proposed_value(&value) {
                Ok(()) => {
                    decision.output = Some(value);
                    None
                }
                Err(refusal) => Some(refusal),
            }
        } else {
            None
        };
        if let Some(refusal) = refusal {
            self.emit_refused(
                &mut shared,
                (pause_id, &run_id, &kind),
                &refusal,
                request_id,
            );
            return;
        }
        let Some(gate) = shared.engine.take(pause_id) else {
            return;
        };
        self.announce_release(&mut shared, &gate, action, request_id, edited);
        let mut others = Vec::new();
        if action == ResumeAction::Abort {
            if let Some(signal) = shared.runs.get(&gate.run_id) {
                signal.abort(ABORTED_FROM_DEBUGGER);
            }
            others = self.take_aborted_run_gates(&mut shared, &gate.run_id);
        }
        drop(shared);
        gate.release(decision);
        release_abort(others);
    }

    /// The edit conditions in the reference's order, then the inject guard on the input, the
    /// pollution check, and the merge into the live input.
    pub(super) fn accept_edit(
        &self,
        shared: &Shared,
        pause_id: &str,
        action: ResumeAction,
        point: PausePoint,
        kind: &str,
        proposed: &Value,
    ) -> Result<Value, edit_input::EditRefusal> {
        use crate::event::RefusalCode;
        let refuse = |code, message: &str| {
            Err(edit_input::EditRefusal {
                code,
                message: message.to_string(),
            })
        };
        if !self.inner.config.edit_input {
            return refuse(
                RefusalCode::Disabled,
                "input edits are turned off in this app (GRAPHMIND_DISABLE_EDIT_INPUT)",
            );
        }
        if !self.edits_honoured(shared) {
            return refuse(
                RefusalCode::Disabled,
                "this debugger has not enabled input edits",
            );
        }
        let Some(live) = shared.editable.get(pause_id) else {
            return refuse(
                RefusalCode::Unsupported,
                "this pause cannot run with an edited input",
            );
        };
        let fits = (action == ResumeAction::Continue && point == PausePoint::Before)
            || (action == ResumeAction::Retry && point != PausePoint::Before);
        if !fits {
            return refuse(
                RefusalCode::Shape,
                "an edited input needs continue at a before gate, or retry at an after or error gate",
            );
        }
        let hidden = self.inner.config.hide.covers_pause_input(Some(kind));
        crate::tool_edit::check_edit(
            live.as_ref(),
            Some(proposed),
            hidden,
            shared.edit_schemas.get(pause_id),
        )
    }

    /// A control frame from the debugger (reader thread).
    pub(super) fn handle_control(&self, text: &str) {
        let envelope = match wire::parse_envelope(text.as_bytes()) {
            wire::ParseOutcome::Ok(envelope) => envelope,
            wire::ParseOutcome::Invalid(invalid) => {
                self.inner.warner.warn(
                    "transport-invalid",
                    &format!("ignoring invalid frame: {}", invalid.reason),
                );
                return;
            }
            _ => return, // unknown types and stray versions: tolerated
        };
        let Some(payload) = envelope.payload() else {
            return;
        };
        match envelope.message_type {
            Some(MessageType::ExecResume) => self.handle_resume(payload),
            Some(MessageType::BreakpointSet) => {
                if let Some(m) = payload
                    .get("matcher")
                    .and_then(BreakpointMatcher::from_value)
                {
                    self.inner.shared.lock().engine.add_breakpoint(m);
                }
            }
            Some(MessageType::BreakpointClear) => {
                if let Some(m) = payload
                    .get("matcher")
                    .and_then(BreakpointMatcher::from_value)
                {
                    self.inner.shared.lock().engine.remove_breakpoint(&m);
                }
            }
            Some(MessageType::ModeSet) => {
                if let Some(mode) = payload
                    .get("mode")
                    .and_then(Value::as_str)
                    .and_then(RunMode::parse)
                {
                    self.inner.shared.lock().engine.set_mode(mode);
                }
            }
            _ => {}
        }
    }

    /// The link with generation `generation` is gone: fail open. Every held gate continues,
    /// breakpoints and mode are forgotten until the next `hello.ack`.
    pub(super) fn handle_detached(&self, generation: u64) {
        let gates;
        {
            let mut shared = self.inner.shared.lock();
            if shared.link_generation != generation || !shared.engine_attached {
                return;
            }
            shared.engine_attached = false;
            self.inner.attached.store(false, Ordering::Release);
            shared.hub_capabilities = None;
            shared.engine.disarm();
            gates = shared.engine.take_all();
            self.announce_continues(&mut shared, &gates);
            Self::send_control(&shared, Control::Detached(generation));
        }
        release_continue(gates);
    }

    /// Releases the gates whose pause timeout passed (worker thread).
    pub(super) fn release_expired(&self) {
        let gates;
        {
            let mut shared = self.inner.shared.lock();
            gates = shared.engine.take_expired(Instant::now());
            self.announce_continues(&mut shared, &gates);
        }
        release_continue(gates);
    }

    pub(super) fn next_pause_deadline(&self) -> Option<Instant> {
        self.inner.shared.lock().engine.next_deadline()
    }
}

/// The reader thread: control frames in, until the link closes; then fail open at once.
pub(super) fn read_loop(session: Session, mut reader: Box<dyn LinkReader>, generation: u64) {
    loop {
        match reader.next_text() {
            Ok(text) => session.handle_control(&text),
            Err(_) => {
                session.handle_detached(generation);
                return;
            }
        }
    }
}
