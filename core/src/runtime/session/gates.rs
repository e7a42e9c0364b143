//! Gates on the application thread: holding a node at a pause point (breakpoints, step
//! mode, the loop guard, smart pauses), aborting a run's held gates, discarding one, and the
//! `exec.resumed` / `exec.refused` announcements made under the session lock before a gate
//! is woken.

use super::*;

impl Session {
    /// The gate at `point` of `node`: [`Gate::Continue`] at once when nothing holds (the fast
    /// path: detached, or attached with nothing matching), else a held gate to wait on.
    /// Whoever waits applies the decision; an `abort` has already aborted the run's signal.
    pub fn gate(
        &self,
        run_id: Option<&str>,
        point: PausePoint,
        node: &GateNode,
        options: GateOptions,
    ) -> Gate {
        if !self.inner.config.enabled || !self.inner.attached.load(Ordering::Acquire) {
            return Gate::Continue;
        }
        let mut shared = self.inner.shared.lock();
        if !shared.engine_attached || shared.disposed {
            return Gate::Continue;
        }
        let run_id = self.run_id_or_implicit(&mut shared, run_id);
        let loop_hold = if point == PausePoint::Before {
            let hide = self.loop_hide(&node.kind);
            match self.inner.loop_guard.lock().consult_before(
                &run_id,
                &node.kind,
                &node.node_id,
                &node.name,
                true,
                hide,
            ) {
                LoopVerdict::Hold(info) => Some(info),
                _ => None,
            }
        } else {
            None
        };
        let smart = options
            .result
            .as_ref()
            .and_then(|result| self.smart_hold(point, &node.kind, result));
        if loop_hold.is_none() && smart.is_none() && !shared.engine.should_pause(point, node) {
            return Gate::Continue;
        }
        self.flush_tokens_locked(&mut shared);
        let reason = if loop_hold.is_some() {
            PauseReason::Loop
        } else if smart.is_some() {
            PauseReason::Breakpoint
        } else {
            shared.engine.reason_for(point, node)
        };
        let editable = options.editable && self.edits_honoured(&shared);
        let pending = shared.engine.hold(point, node.clone(), &run_id, editable);
        if editable {
            if let Some(schema) = options.input_schema {
                shared
                    .edit_schemas
                    .insert(pending.pause_id().to_string(), schema);
            }
            shared
                .editable
                .insert(pending.pause_id().to_string(), options.live_input);
        }
        let mut paused = ExecPaused::new(pending.pause_id(), node.node_id.as_str(), point);
        paused.reason = Some(reason);
        paused.loop_info = loop_hold.map(|info| info.to_event());
        if paused.loop_info.is_none() {
            paused.smart =
                smart.map(|info| smart::on_wire(info, &node.kind, &self.inner.config.hide));
        }
        if editable {
            paused.editable = Some(true);
        }
        let kind = NodeKind::parse(&node.kind);
        self.enqueue(
            &mut shared,
            &run_id,
            MessageType::ExecPaused,
            paused.to_value(),
            kind,
            None,
        );
        Gate::Held(pending)
    }

    /// Whether a gate at `point` in `run_id` could hold now, for any node: `false` means
    /// that with the session as it is (detached; or attached with no step mode, no
    /// breakpoint at `point` and, before a call, no loop-guard rule the next start could
    /// trip) [`Session::gate`] returns [`Gate::Continue`] for a gate given no
    /// [`GateOptions::result`] (a result can raise a smart hold). Conservative (`true` does
    /// not mean it will hold); for a caller that forwards a message before recording it.
    pub fn may_hold(&self, run_id: &str, point: PausePoint) -> bool {
        if !self.inner.config.enabled || !self.inner.attached.load(Ordering::Acquire) {
            return false;
        }
        let watch = point == PausePoint::Before && self.inner.loop_holds;
        if watch && self.inner.loop_backlog.load(Ordering::Acquire) > 0 {
            return true;
        }
        let shared = self.inner.shared.lock();
        if !shared.engine_attached || shared.disposed {
            return false;
        }
        if shared.engine.mode() == RunMode::Step && point != PausePoint::After {
            return true;
        }
        if shared
            .engine
            .breakpoints()
            .iter()
            .any(|m| m.point.unwrap_or(PausePoint::Before) == point)
        {
            return true;
        }
        watch && self.inner.loop_guard.lock().may_hold_next(run_id, true)
    }

    /// The smart breakpoint a gate at `point` raises for a node of `kind` with `result`.
    pub(super) fn smart_hold(
        &self,
        point: PausePoint,
        kind: &str,
        result: &Value,
    ) -> Option<SmartInfo> {
        let on = self.smart_switches();
        match point {
            PausePoint::After => smart::detect_after(kind, result, on),
            PausePoint::Error => smart::detect_at_error(kind, result, on),
            PausePoint::Before => None,
        }
    }

    /// The smart breakpoints this session has on.
    pub fn smart_switches(&self) -> smart::SmartSwitches {
        smart::SmartSwitches {
            error_result: self.inner.config.break_on_error_result,
            truncated: self.inner.config.break_on_truncated,
        }
    }

    pub(super) fn loop_hide(&self, kind: &str) -> LoopHide {
        let h = self.inner.config.hide;
        LoopHide::for_node(
            h.inputs,
            h.outputs,
            h.tool_args,
            h.tool_results,
            kind == "tool",
        )
    }

    pub(super) fn edits_honoured(&self, shared: &Shared) -> bool {
        self.inner.config.edit_input
            && shared
                .hub_capabilities
                .as_ref()
                .is_some_and(|caps| caps.iter().any(|c| c == "edit-input"))
    }

    /// Aborts `run` (the app aborted it; a debugger's abort of one gate does the same):
    /// its signal, and every gate of the run still held, released as `abort` and announced
    /// so (each waiter then ends its call as aborted, nothing of the run runs on). The rule
    /// every binding's abort goes through. Returns how many held gates it released.
    pub fn abort_run(&self, run: &Run, reason: &str) -> usize {
        run.signal.abort(reason);
        let gates = {
            let mut shared = self.inner.shared.lock();
            self.take_aborted_run_gates(&mut shared, &run.run_id)
        };
        let released = gates.len();
        release_abort(gates);
        released
    }

    /// Takes the still-held gates of an aborted run and announces each as `abort`.
    pub(super) fn take_aborted_run_gates(
        &self,
        shared: &mut Shared,
        run_id: &str,
    ) -> Vec<HeldGate> {
        let gates = shared.engine.take_run(run_id);
        for gate in &gates {
            self.announce_release(shared, gate, ResumeAction::Abort, None, None);
        }
        gates
    }

    /// Releases a held gate whose waiter went away (a cancelled task): `continue`, announced
    /// like any other release. Returns whether it was still held.
    pub fn discard_gate(&self, pause_id: &str) -> bool {
        let gate = {
            let mut shared = self.inner.shared.lock();
            let Some(gate) = shared.engine.take(pause_id) else {
                return false;
            };
            self.announce_release(&mut shared, &gate, ResumeAction::Continue, None, None);
            gate
        };
        gate.release(GateDecision::proceed());
        true
    }

    /// Emits `exec.resumed` for a gate about to be released (the caller releases it after
    /// dropping the lock).
    pub(super) fn announce_release(
        &self,
        shared: &mut Shared,
        gate: &HeldGate,
        action: ResumeAction,
        request_id: Option<&str>,
        edited: Option<Value>,
    ) {
        shared.editable.remove(&gate.pause_id);
        shared.edit_schemas.remove(&gate.pause_id);
        let mut resumed = ExecResumed::new(gate.pause_id.as_str(), action);
        resumed.edited_after = edited;
        resumed.request_id = request_id.map(JsStr::from);
        let held = Some((gate.node.node_id.clone(), gate.held_ms(Instant::now())));
        let kind = NodeKind::parse(&gate.node.kind);
        self.enqueue(
            shared,
            &gate.run_id,
            MessageType::ExecResumed,
            resumed.to_value(),
            kind,
            held,
        );
    }

    pub(super) fn emit_refused(
        &self,
        shared: &mut Shared,
        gate: (&str, &str, &str),
        refusal: &edit_input::EditRefusal,
        request_id: Option<&str>,
    ) {
        let (pause_id, run_id, kind) = gate;
        let mut refused = ExecRefused::new(pause_id, refusal.code);
        refused.message = Some(refusal.message.as_str().into());
        refused.request_id = request_id.map(JsStr::from);
        self.enqueue(
            shared,
            run_id,
            MessageType::ExecRefused,
            refused.to_value(),
            NodeKind::parse(kind),
            None,
        );
    }
}

/// Wakes every gate in `gates` with `abort` (after their release was announced).
pub(super) fn release_abort(gates: Vec<HeldGate>) {
    for gate in gates {
        gate.release(GateDecision {
            action: ResumeAction::Abort,
            output: None,
            input: None,
        });
    }
}

/// Wakes every gate in `gates` with `continue` (after their release was announced).
pub(super) fn release_continue(gates: Vec<HeldGate>) {
    for gate in gates {
        gate.release(GateDecision::proceed());
    }
}
