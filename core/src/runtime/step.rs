//! One gated call (a tool, a span): the state machine every SDK's wrapper drives.
//!
//! A wrapper that owns the call site is where `inject` and `retry` really work. The rules
//! of what each action means at each point live here once; a binding only waits at the
//! gate in its own idiom and does what [`Next`] says:
//!
//! ```text
//! let step = Step::start(..)                      // node.started
//! loop {
//!     wait(step.before())  -> step.on_before(d)   // Run / ReturnInjected / Abort
//!     call the function    -> ok(output) | err(e)
//!     ok:  wait(step.after())      -> step.on_after(d, &output)  // ReturnResult / ReturnInjected / Run / Abort
//!     err: wait(step.error(info))  -> step.on_error(d)           // Reraise / ReturnInjected / Run / Abort
//! }
//! ```
//!
//! | action   | before                | after                     | error                              |
//! |----------|-----------------------|---------------------------|------------------------------------|
//! | continue | run                   | return the result         | re-raise the original error        |
//! | retry    | run                   | discard, run again        | run again                          |
//! | inject   | skip, return output   | return output instead     | swallow, return output (`recoveredFromError`) |
//! | abort    | abort the run         | abort the run             | abort the run                      |

use crate::event::{ErrorInfo, NodeFinished, NodeKind, RunStatus};
use crate::gate::{GateDecision, PausePoint, ResumeAction};
use crate::host_value::HostValue;
use crate::json::Value;
use crate::session::{normalize_duration, Gate, GateOptions, NodeRef, Session};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

/// One call a wrapper makes on a [`Step`], for [`Step::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepCall {
    /// [`Step::before`].
    Before,
    /// [`Step::on_before`].
    OnBefore,
    /// [`Step::after`].
    After,
    /// [`Step::on_after`] / [`Step::on_after_host`].
    OnAfter,
    /// [`Step::error`].
    Error,
    /// [`Step::on_error`].
    OnError,
    /// [`Step::on_ungated_error`].
    UngatedError,
}

/// Where a step is in the order the module's diagram draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    /// Started, no gate asked yet: only the before gate comes next.
    Started,
    /// The before gate was asked: its decision comes next.
    BeforeAsked,
    /// The function runs: the after gate (it returned) or the error gate (it raised).
    Running,
    /// A retry: the function runs again, with or without passing the before gate again.
    Retrying,
    /// The after gate was asked: its decision comes next.
    AfterAsked,
    /// The error gate was asked: its decision comes next.
    ErrorAsked,
    /// `node.finished` was recorded: nothing more.
    Finished,
}

impl Phase {
    const ALL: [Phase; 7] = [
        Phase::Started,
        Phase::BeforeAsked,
        Phase::Running,
        Phase::Retrying,
        Phase::AfterAsked,
        Phase::ErrorAsked,
        Phase::Finished,
    ];
}

/// The phase, kept in an atomic so the gates stay `&self` (and a `Step` `Sync`).
#[derive(Debug)]
struct PhaseCell(AtomicU8);

impl PhaseCell {
    fn new(phase: Phase) -> PhaseCell {
        PhaseCell(AtomicU8::new(phase as u8))
    }

    fn get(&self) -> Phase {
        Phase::ALL[self.0.load(Ordering::Relaxed) as usize]
    }

    fn set(&self, phase: Phase) {
        self.0.store(phase as u8, Ordering::Relaxed);
    }
}

/// A call made on a step out of its order (see the module's diagram). Nothing was recorded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("step {node_id}: {call:?} is out of order ({why})")]
pub struct StepMisuse {
    /// The node of the step.
    pub node_id: String,
    /// The call refused.
    pub call: StepCall,
    /// What the step was waiting for instead.
    pub why: &'static str,
}

/// What the wrapper does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Call the function; with `input` when the debugger's edit was accepted (call it with
    /// these arguments instead of the live ones).
    Run {
        /// The edited input, if any.
        input: Option<Value>,
    },
    /// Return the function's own result (it has been recorded).
    ReturnResult,
    /// Return this value instead of calling (or instead of the result or the error).
    ReturnInjected(Value),
    /// Re-raise the function's original error.
    Reraise,
    /// Raise the binding's abort error: the run was aborted.
    Abort,
    /// Raise this error as the binding raises a tool's error (a replayed call whose
    /// recorded execution raised it; see [`crate::replay`]).
    Raise(ErrorInfo),
    /// Return a stream of these chunks instead of calling (a replayed streamed model
    /// call: the provider's chunks rebuilt by its codec, each as the client library's
    /// chunk type).
    Stream(Vec<Value>),
}

/// One gated call in flight.
pub struct Step {
    session: Session,
    run_id: Option<String>,
    node: NodeRef,
    started: Instant,
    editable: bool,
    /// The input an edit merges into, kept only while a debugger that could edit it is
    /// attached (copying 1 KB per call for nobody is most of a detached call's cost).
    live_input: Option<Value>,
    kept_input: bool,
    /// The tool's input schema an edit must match.
    input_schema: Option<crate::edit_schema::InputSchema>,
    finished: bool,
    phase: PhaseCell,
    /// Set by the LLM step: recorded on `node.finished` beside the output.
    finish_usage: Option<crate::event::TokenUsage>,
    finish_extra: crate::json::Map,
    /// A recorded answer this call returns without running ([`crate::replay`]).
    replay: Option<crate::replay::Answer>,
}

/// The `replayed` marker (and `replayEdited` for an edited output) a replayed execution
/// records on `node.started` and `node.finished`.
pub(crate) fn replay_marks(edited: bool) -> crate::json::Map {
    let mut m = crate::json::Map::with_capacity(2);
    m.insert(crate::replay::FIELD_REPLAYED, Value::Bool(true));
    if edited {
        m.insert("replayEdited", Value::Bool(true));
    }
    m
}

impl Step {
    /// Starts a call of `node`: emits `node.started` with `input`. `editable` offers the
    /// pauses of this call as editable (tool arguments), merging edits into `input`.
    pub fn start(
        session: &Session,
        run_id: Option<&str>,
        node: NodeRef,
        parent_id: Option<&str>,
        input: Option<Value>,
        editable: bool,
    ) -> Step {
        Step::start_host(
            session,
            run_id,
            node,
            parent_id,
            input.map(HostValue::Built),
            editable,
        )
    }

    /// [`Step::start`] with the input as the binding hands it over: JSON text costs this
    /// thread only its bytes while no debugger is attached (the worker parses it).
    pub fn start_host(
        session: &Session,
        run_id: Option<&str>,
        node: NodeRef,
        parent_id: Option<&str>,
        input: Option<HostValue>,
        editable: bool,
    ) -> Step {
        let (input, replay, started_extra) = if editable {
            Step::replay_decision(session, run_id, &node, input)
        } else {
            (input, None, crate::json::Map::new())
        };
        let kept_input = editable && session.is_attached() && replay.is_none();
        let (input, live_input) = match input {
            Some(input) if kept_input => {
                let value = session.resolve(input);
                let live = value.clone();
                (Some(HostValue::Built(value)), Some(live))
            }
            other => (other, None),
        };
        session.node_started_extra(run_id, &node, parent_id, input, started_extra);
        Step {
            session: session.clone(),
            run_id: run_id.map(str::to_string),
            node,
            started: Instant::now(),
            editable,
            live_input,
            kept_input,
            input_schema: None,
            finished: false,
            phase: PhaseCell::new(Phase::Started),
            finish_usage: None,
            finish_extra: crate::json::Map::new(),
            replay,
        }
    }

    /// Whether a replay answers this call ([`crate::replay::decide`]): tool calls whose
    /// wrapper owns the call (the editable ones: it can skip or re-run them; a tool node a
    /// framework's callback only observes runs whatever the step says), never spans or
    /// agents. The input is resolved only while replaying.
    fn replay_decision(
        session: &Session,
        run_id: Option<&str>,
        node: &NodeRef,
        input: Option<HostValue>,
    ) -> (
        Option<HostValue>,
        Option<crate::replay::Answer>,
        crate::json::Map,
    ) {
        use crate::replay::{self, Decision};
        if node.kind != crate::event::NodeKind::Tool || !replay::is_replaying(session) {
            return (input, None, crate::json::Map::new());
        }
        let value = input.map(|i| session.resolve(i));
        let decision = replay::decide(session, run_id, &node.node_id, value.as_ref(), true);
        let input = value.map(HostValue::Built);
        match decision {
            Decision::Off => (input, None, crate::json::Map::new()),
            Decision::Live(field) => {
                let mut extra = crate::json::Map::with_capacity(1);
                extra.insert(replay::FIELD_LIVE, Value::Object(field));
                (input, None, extra)
            }
            Decision::Replay(answer) => {
                let extra = replay_marks(answer.edited);
                (input, Some(answer), extra)
            }
        }
    }

    /// A step whose `node.started` its caller emitted itself (the LLM step records extra
    /// fields there); never editable.
    pub(crate) fn started_elsewhere(
        session: &Session,
        run_id: Option<&str>,
        node: NodeRef,
    ) -> Step {
        Step {
            session: session.clone(),
            run_id: run_id.map(str::to_string),
            node,
            started: Instant::now(),
            editable: false,
            live_input: None,
            kept_input: false,
            input_schema: None,
            finished: false,
            phase: PhaseCell::new(Phase::Started),
            finish_usage: None,
            finish_extra: crate::json::Map::new(),
            replay: None,
        }
    }

    /// The gate before the call is skipped (a replayed model call): the step moves on
    /// as if it continued.
    pub(crate) fn skip_before(&self) {
        if !self.finished {
            self.phase.set(Phase::BeforeAsked);
        }
    }

    /// What `node.finished` carries beside the output, whichever way the step ends next.
    pub(crate) fn annotate(
        &mut self,
        usage: Option<crate::event::TokenUsage>,
        extra: crate::json::Map,
    ) {
        self.finish_usage = usage;
        self.finish_extra = extra;
    }

    /// Ends the step now with `output` and `status` (a stream that ended).
    pub(crate) fn end(&mut self, output: Option<Value>, status: RunStatus) {
        self.finish(output.map(HostValue::Built), status, false, false);
    }

    /// The node being called.
    pub fn node(&self) -> &NodeRef {
        &self.node
    }

    /// An edited input of this call must match `schema` after the merge (the tool's
    /// declared input schema): an edit that does not is refused (`schema`) and the gate
    /// stays held.
    pub fn set_input_schema(&mut self, schema: Option<crate::edit_schema::InputSchema>) {
        self.input_schema = schema;
    }

    /// Whether `call` is the step's next move in the module's order: before → its
    /// decision → after or error → its decision, a retry going back to the function (or to
    /// the before gate), [`Step::on_ungated_error`] at any point until the step finished.
    /// A binding that must refuse misuse (the C ABI's `GM_INVALID_STATE`) asks this first;
    /// the methods themselves never record anything for a finished step.
    pub fn check(&self, call: StepCall) -> Result<(), StepMisuse> {
        use Phase::*;
        use StepCall as C;
        let allowed = match (self.phase.get(), call) {
            (Finished, _) => Err("the step is finished"),
            (_, C::UngatedError) => Ok(()),
            (Started | Retrying, C::Before) => Ok(()),
            (BeforeAsked, C::OnBefore) => Ok(()),
            (Running | Retrying, C::After | C::Error) => Ok(()),
            (AfterAsked, C::OnAfter) => Ok(()),
            (ErrorAsked, C::OnError) => Ok(()),
            (Started, _) => Err("the before gate comes first"),
            (BeforeAsked, _) => Err("the before gate's decision comes next"),
            (Running, _) => Err("the function runs: the after or error gate comes next"),
            (Retrying, _) => Err("a retry: the before gate or the function comes next"),
            (AfterAsked, _) => Err("the after gate's decision comes next"),
            (ErrorAsked, _) => Err("the error gate's decision comes next"),
        };
        allowed.map_err(|why| StepMisuse {
            node_id: self.node.node_id.clone(),
            call,
            why,
        })
    }

    /// Whether the step recorded its `node.finished`.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// A pause is offered as editable only when the step kept the live input (a debugger
    /// that attaches mid-call sees this call's later pauses as not editable).
    fn gate(&self, point: PausePoint, result: Option<Value>) -> Gate {
        if !self.session.is_attached() {
            // What `Session::gate` answers at once too, without building the gate identity.
            return Gate::Continue;
        }
        let offer = self.editable && self.kept_input && self.session.is_attached();
        let options = GateOptions {
            editable: offer,
            live_input: if offer { self.live_input.clone() } else { None },
            input_schema: if offer { self.edit_schema() } else { None },
            result,
        };
        self.session.gate(
            self.run_id.as_deref(),
            point,
            &self.node.gate_node(),
            options,
        )
    }

    /// The schema an edit of this step must match: its own, else (a tool) the one the run's
    /// model requests declared for its name.
    fn edit_schema(&self) -> Option<crate::edit_schema::InputSchema> {
        self.input_schema.clone().or_else(|| {
            (self.node.kind == NodeKind::Tool).then(|| {
                crate::llm_step::declared_tool_schema(
                    &self.session,
                    self.run_id.as_deref(),
                    &self.node.name,
                )
            })?
        })
    }

    /// The gate before the function runs.
    pub fn before(&self) -> Gate {
        if self.finished {
            return Gate::Continue;
        }
        self.phase.set(Phase::BeforeAsked);
        if self.replay.is_some() {
            // A replayed call is answered without a pause (see `on_before`).
            return Gate::Continue;
        }
        self.gate(PausePoint::Before, None)
    }

    /// What the `before` decision means.
    pub fn on_before(&mut self, decision: GateDecision) -> Next {
        if self.finished {
            return self.after_finish();
        }
        self.phase.set(Phase::Running);
        if let Some(answer) = self.replay.take() {
            return self.replayed(answer);
        }
        match decision.action {
            ResumeAction::Abort => {
                self.finish(None, RunStatus::Aborted, false, false);
                Next::Abort
            }
            ResumeAction::Inject => {
                let output = decision.output.unwrap_or(Value::Null);
                self.finish(Some(output.clone().into()), RunStatus::Ok, true, false);
                Next::ReturnInjected(output)
            }
            ResumeAction::Continue | ResumeAction::Retry => self.run_with(decision.input),
        }
    }

    /// Ends the call with its recorded answer: the output returned as an injected one
    /// is (without `injected`), or the recorded error raised.
    fn replayed(&mut self, answer: crate::replay::Answer) -> Next {
        for (k, v) in replay_marks(answer.edited).iter() {
            self.finish_extra.insert(k.clone(), v.clone());
        }
        match answer.outcome {
            crate::replay::Outcome::Output(output) => {
                let output = output.unwrap_or(Value::Null);
                self.finish(Some(output.clone().into()), RunStatus::Ok, false, false);
                Next::ReturnInjected(output)
            }
            crate::replay::Outcome::Error(error) => {
                self.session
                    .node_error(self.run_id.as_deref(), &self.node, error.clone());
                self.finish(None, RunStatus::Error, false, false);
                Next::Raise(error)
            }
            crate::replay::Outcome::Unfinished => Next::Run { input: None },
        }
    }

    /// Ends a replayed model call (its `node.finished` carries `extra` and the marks).
    pub(crate) fn end_replayed(&mut self, answer: &crate::replay::Answer) -> Option<ErrorInfo> {
        for (k, v) in replay_marks(answer.edited).iter() {
            self.finish_extra.insert(k.clone(), v.clone());
        }
        match &answer.outcome {
            crate::replay::Outcome::Error(error) => {
                self.session
                    .node_error(self.run_id.as_deref(), &self.node, error.clone());
                self.finish(None, RunStatus::Error, false, false);
                Some(error.clone())
            }
            crate::replay::Outcome::Output(output) => {
                self.finish(
                    output.clone().map(HostValue::Built),
                    RunStatus::Ok,
                    false,
                    false,
                );
                None
            }
            crate::replay::Outcome::Unfinished => {
                self.finish(None, RunStatus::Aborted, false, false);
                None
            }
        }
    }

    fn run_with(&mut self, input: Option<Value>) -> Next {
        if self.phase.get() != Phase::Running {
            self.phase.set(Phase::Retrying);
        }
        if let Some(edited) = &input {
            self.live_input = Some(edited.clone());
            self.kept_input = true;
        }
        Next::Run { input }
    }

    /// The gate after the function returned (no smart breakpoint sees its result: see
    /// [`Step::after_output`]).
    pub fn after(&self) -> Gate {
        self.after_seeing(None)
    }

    /// The gate after the function returned `output`: with a debugger attached the smart
    /// breakpoints see it (a tool's error-shaped result holds as `error-result`). Hands the
    /// output back for [`Step::on_after_host`], parsed when it had to be looked at.
    pub fn after_output(&self, output: Option<HostValue>) -> (Gate, Option<HostValue>) {
        if self.finished
            || !self.session.is_attached()
            || !self.session.smart_switches().error_result
        {
            return (self.after(), output);
        }
        let value = output.map(|o| self.session.resolve(o));
        let gate = self.after_seeing(value.clone());
        (gate, value.map(HostValue::Built))
    }

    /// The `after` gate, the smart breakpoints seeing `result`.
    pub(crate) fn after_seeing(&self, result: Option<Value>) -> Gate {
        if self.finished {
            return Gate::Continue;
        }
        self.phase.set(Phase::AfterAsked);
        self.gate(PausePoint::After, result)
    }

    /// What the `after` decision means; `output` is the function's result as recorded.
    pub fn on_after(&mut self, decision: GateDecision, output: Option<Value>) -> Next {
        self.on_after_host(decision, output.map(HostValue::Built))
    }

    /// [`Step::on_after`] with the output as the binding hands it over (see
    /// [`Step::start_host`]).
    pub fn on_after_host(&mut self, decision: GateDecision, output: Option<HostValue>) -> Next {
        if self.finished {
            return self.after_finish();
        }
        self.phase.set(Phase::Retrying);
        match decision.action {
            ResumeAction::Continue => {
                self.finish(output, RunStatus::Ok, false, false);
                Next::ReturnResult
            }
            ResumeAction::Retry => self.run_with(decision.input),
            ResumeAction::Inject => {
                let injected = decision.output.unwrap_or(Value::Null);
                self.finish(Some(injected.clone().into()), RunStatus::Ok, true, false);
                Next::ReturnInjected(injected)
            }
            ResumeAction::Abort => {
                self.finish(output, RunStatus::Aborted, false, false);
                Next::Abort
            }
        }
    }

    /// The function raised: records `node.error` and returns the `error` gate. An abort
    /// error or an interrupt (Ctrl-C, task cancellation) is never held: call
    /// [`Step::on_ungated_error`] instead.
    pub fn error(&mut self, error: ErrorInfo) -> Gate {
        if self.finished {
            // A finished node gets no `node.error` and no pause after the fact.
            return Gate::Continue;
        }
        self.phase.set(Phase::ErrorAsked);
        self.session
            .node_error(self.run_id.as_deref(), &self.node, error);
        self.gate(PausePoint::Error, None)
    }

    /// [`Step::error`] for a failure that climbs through nested steps (a framework's
    /// levels): `node.error` is recorded at every level, but only the first level to report
    /// `failure` (the innermost) offers the error gate; the others continue at once, so
    /// [`Step::on_error`] with [`GateDecision::proceed`] re-raises there. One pause per
    /// failure (`crate::failure_once`).
    pub fn error_once(
        &mut self,
        error: ErrorInfo,
        failure: crate::failure_once::FailureId,
        gated: &mut crate::failure_once::GatedFailures,
    ) -> Gate {
        if gated.first_report(failure) {
            return self.error(error);
        }
        if !self.finished {
            self.phase.set(Phase::ErrorAsked);
            self.session
                .node_error(self.run_id.as_deref(), &self.node, error);
        }
        Gate::Continue
    }

    /// What the `error` decision means.
    pub fn on_error(&mut self, decision: GateDecision) -> Next {
        if self.finished {
            return self.after_finish();
        }
        self.phase.set(Phase::Retrying);
        match decision.action {
            ResumeAction::Inject => {
                let output = decision.output.unwrap_or(Value::Null);
                self.finish(Some(output.clone().into()), RunStatus::Ok, true, true);
                Next::ReturnInjected(output)
            }
            ResumeAction::Retry => self.run_with(decision.input),
            ResumeAction::Abort => {
                self.finish(None, RunStatus::Aborted, false, false);
                Next::Abort
            }
            ResumeAction::Continue => {
                self.finish(None, RunStatus::Error, false, false);
                Next::Reraise
            }
        }
    }

    /// The function raised something that is never held (an abort, an interrupt): the call
    /// ends `aborted` or `error` and the wrapper re-raises it.
    pub fn on_ungated_error(&mut self, aborted: bool) -> Next {
        self.finish(
            None,
            if aborted {
                RunStatus::Aborted
            } else {
                RunStatus::Error
            },
            false,
            false,
        );
        Next::Reraise
    }

    /// What a decision on a finished step means: nothing more to do. The result was
    /// recorded already; a binding that checked [`Step::check`] never gets here.
    fn after_finish(&self) -> Next {
        Next::ReturnResult
    }

    fn finish(
        &mut self,
        output: Option<HostValue>,
        status: RunStatus,
        injected: bool,
        recovered: bool,
    ) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.phase.set(Phase::Finished);
        let elapsed = self.started.elapsed().as_secs_f64() * 1000.0;
        let mut finished = NodeFinished::new(
            self.node.node_id.as_str(),
            normalize_duration(elapsed),
            status,
        );
        finished.instance_id = Some(self.node.instance_id.as_str().into());
        if injected {
            finished.injected = Some(true);
        }
        if recovered {
            finished.recovered_from_error = Some(true);
        }
        finished.usage = self.finish_usage.take();
        finished.extra = std::mem::take(&mut self.finish_extra);
        self.session
            .emit_finished(self.run_id.as_deref(), &self.node, finished, output);
    }
}

impl Drop for Step {
    /// A call abandoned mid-way (a panic, a cancelled task) still ends in the graph.
    fn drop(&mut self) {
        if !self.finished {
            self.finish(None, RunStatus::Aborted, false, false);
        }
    }
}

/// The node identity a tool wrapper uses: kind `tool`, id `tool:<name>`.
pub fn tool_node(name: &str) -> NodeRef {
    NodeRef::new(NodeKind::Tool, name)
}
