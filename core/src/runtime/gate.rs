//! The gate engine: the bookkeeping of held gates.
//!
//! The session decides *whether* a gate holds (attached? a matching breakpoint? step mode? a
//! loop?); this module keeps what is held: pause ids, the debugger's breakpoints and mode,
//! pause deadlines, and the slot each waiting caller is woken through. A held gate is
//! released exactly once — by a resume, a pause timeout, a detach or a dispose — and every
//! release is announced by the session as `exec.resumed`.
//!
//! Callers wait in one of two ways (see `docs/gates.md`): a blocking wait with a deadline
//! ([`PendingGate::wait_timeout`]), used by C, sync Python and Ruby with their interpreter
//! lock released; or a completion callback ([`PendingGate::on_decision`]), used by asyncio
//! and Node, which must never block their loop. Both are woken by the thread that releases
//! the gate; nothing polls.

use crate::json::Value;
use crate::sync::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::event::{BreakpointMatcher, PausePoint, PauseReason, ResumeAction, RunMode};

/// Whether `matcher` arms `point` of `node`: every given field must match; an absent
/// `point` means `before`, so `{}` holds before every node.
pub fn matcher_matches(matcher: &BreakpointMatcher, point: PausePoint, node: &GateNode) -> bool {
    matcher.point.unwrap_or(PausePoint::Before) == point
        && matcher.kind.is_none_or(|k| k.as_str() == node.kind)
        && matcher
            .name
            .as_ref()
            .is_none_or(|n| *n == node.name.as_str())
}

/// Whether two matchers name the same breakpoint (unknown extra fields do not count).
pub fn matcher_equals(a: &BreakpointMatcher, b: &BreakpointMatcher) -> bool {
    a.kind == b.kind && a.name == b.name && a.point == b.point
}

/// The node a gate belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateNode {
    /// Stable node id (`tool:search`).
    pub node_id: String,
    /// Node kind (`tool`, `llm`, ...).
    pub kind: String,
    /// Display name (`search`).
    pub name: String,
}

/// What the caller does next at a gate.
#[derive(Clone, Debug, PartialEq)]
pub struct GateDecision {
    /// The chosen action.
    pub action: ResumeAction,
    /// The injected output (`inject` only).
    pub output: Option<Value>,
    /// An accepted edited input (`continue` at `before`, `retry` at `after`/`error`): run
    /// the step with it instead of the live input.
    pub input: Option<Value>,
}

impl GateDecision {
    /// `continue`, nothing changed: what every fail-open release decides.
    pub fn proceed() -> Self {
        GateDecision {
            action: ResumeAction::Continue,
            output: None,
            input: None,
        }
    }

    /// What a gate that can only watch does with this decision: a framework callback
    /// (LangChain's) can end the chain but cannot replace a result or run the call again.
    /// `integration` names the warning's key (`<integration>-inject`), `label` the gate in
    /// its text, `hint` (the skin's own API) what to use instead.
    pub fn at_watching_gate(&self, integration: &str, label: &str, hint: &str) -> WatchingNext {
        match self.action {
            ResumeAction::Continue => WatchingNext::Continue,
            ResumeAction::Abort => WatchingNext::Abort,
            action @ (ResumeAction::Inject | ResumeAction::Retry) => {
                let action = action.as_str();
                WatchingNext::ContinueInstead {
                    key: format!("{integration}-{action}"),
                    message: format!(
                        "`{action}` is not supported at a {label} callback gate (a callback cannot \
                         replace a result); continued instead. {hint}"
                    ),
                }
            }
        }
    }
}

impl GateDecision {
    /// The decision a watching gate can carry out in place of `self`, and the warning
    /// `(key, message)` to give when that is not the one asked for
    /// ([`GateDecision::at_watching_gate`]): `abort` stays `abort`; `continue`, `inject`
    /// and `retry` become a plain `continue` (an edit or an injected value dropped: a
    /// callback can neither run the call with other arguments nor hand back a result).
    /// A step applying the result ends as it really went, never as if something had been
    /// injected.
    pub fn watched(
        &self,
        integration: &str,
        label: &str,
        hint: &str,
    ) -> (GateDecision, Option<(String, String)>) {
        match self.at_watching_gate(integration, label, hint) {
            WatchingNext::Abort => (
                GateDecision {
                    action: ResumeAction::Abort,
                    output: None,
                    input: None,
                },
                None,
            ),
            WatchingNext::Continue => (GateDecision::proceed(), None),
            WatchingNext::ContinueInstead { key, message } => {
                (GateDecision::proceed(), Some((key, message)))
            }
        }
    }
}

/// [`GateDecision::at_watching_gate`]: what a watching gate does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchingNext {
    /// Go on.
    Continue,
    /// End the call (and what it belongs to) as aborted.
    Abort,
    /// Go on, after one rate-limited warning `(key, message)`: the action asked for cannot
    /// be delivered here.
    ContinueInstead {
        /// The warning's rate-limit key.
        key: String,
        /// The warning's text.
        message: String,
    },
}

type DecisionCallback = Box<dyn FnOnce(GateDecision) + Send + 'static>;

enum SlotState {
    Waiting(Option<DecisionCallback>),
    Decided(GateDecision),
    Taken,
}

/// Where one held gate's decision is delivered.
struct GateSlot {
    state: Mutex<SlotState>,
    wake: Condvar,
}

impl GateSlot {
    fn fulfil(&self, decision: GateDecision) {
        let callback = {
            let mut state = self.state.lock();
            match std::mem::replace(&mut *state, SlotState::Taken) {
                SlotState::Waiting(Some(callback)) => Some(callback),
                SlotState::Waiting(None) => {
                    *state = SlotState::Decided(decision.clone());
                    self.wake.notify_all();
                    None
                }
                // Already decided: the first release wins.
                other => {
                    *state = other;
                    None
                }
            }
        };
        if let Some(callback) = callback {
            // A callback that panics must not take the releasing thread down.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(decision)));
        }
    }
}

/// A gate that holds: wait on it, or hand it a callback.
pub struct PendingGate {
    pause_id: String,
    slot: Arc<GateSlot>,
}

impl std::fmt::Debug for PendingGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingGate")
            .field("pause_id", &self.pause_id)
            .finish()
    }
}

impl PendingGate {
    /// The pause id the debugger resumes.
    pub fn pause_id(&self) -> &str {
        &self.pause_id
    }

    /// Blocks until the gate is released or `timeout` passes (`None`: the timeout passed,
    /// the gate is still held; call again). Never polls: the releasing thread wakes it.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<GateDecision> {
        let deadline = Instant::now() + timeout;
        let mut state = self.slot.state.lock();
        loop {
            if let SlotState::Decided(decision) = &*state {
                let decision = decision.clone();
                *state = SlotState::Taken;
                return Some(decision);
            }
            if matches!(&*state, SlotState::Taken) {
                return Some(GateDecision::proceed());
            }
            if Instant::now() >= deadline {
                return None;
            }
            state = self.slot.wake.wait_until(state, deadline).0;
        }
    }

    /// Blocks until the gate is released.
    pub fn wait(&self) -> GateDecision {
        loop {
            if let Some(decision) = self.wait_timeout(Duration::from_secs(3600)) {
                return decision;
            }
        }
    }

    /// Calls `callback` once with the decision, on the thread that releases the gate (or at
    /// once, on this thread, when it was already released).
    pub fn on_decision(self, callback: impl FnOnce(GateDecision) + Send + 'static) {
        let mut state = self.slot.state.lock();
        match std::mem::replace(&mut *state, SlotState::Taken) {
            SlotState::Decided(decision) => {
                drop(state);
                callback(decision);
            }
            SlotState::Waiting(_) => *state = SlotState::Waiting(Some(Box::new(callback))),
            SlotState::Taken => {
                drop(state);
                callback(GateDecision::proceed());
            }
        }
    }
}

/// A held gate as the engine keeps it.
pub struct HeldGate {
    /// Its pause id.
    pub pause_id: String,
    /// The node it belongs to.
    pub node: GateNode,
    /// Where it sits.
    pub point: PausePoint,
    /// The run it belongs to.
    pub run_id: String,
    /// Whether an edited input may be offered with a resume.
    pub editable: bool,
    /// When it opened (monotonic).
    pub opened_at: Instant,
    /// When a pause timeout auto-continues it.
    pub deadline: Option<Instant>,
    slot: Arc<GateSlot>,
}

impl HeldGate {
    /// Milliseconds held so far, at 0.01 ms resolution.
    pub fn held_ms(&self, now: Instant) -> f64 {
        let ms = now.saturating_duration_since(self.opened_at).as_secs_f64() * 1000.0;
        (ms * 100.0).round() / 100.0
    }

    /// Wakes the waiting caller with `decision`. Consumes the gate: a gate is released once.
    pub fn release(self, decision: GateDecision) {
        self.slot.fulfil(decision);
    }
}

/// The debugger's breakpoints and mode, and every held gate.
#[derive(Default)]
pub struct GateEngine {
    breakpoints: Vec<BreakpointMatcher>,
    mode: RunMode,
    held: HashMap<String, HeldGate>,
    next_pause: u64,
    pause_timeout: Option<Duration>,
}

impl GateEngine {
    /// An engine whose gates auto-continue after `pause_timeout` (`None`: hold forever).
    pub fn new(pause_timeout: Option<Duration>) -> Self {
        GateEngine {
            pause_timeout,
            ..GateEngine::default()
        }
    }

    /// Adopts the debugger's full state (from `hello.ack`).
    pub fn arm(&mut self, breakpoints: Vec<BreakpointMatcher>, mode: RunMode) {
        self.breakpoints = Vec::new();
        for matcher in breakpoints {
            self.add_breakpoint(matcher);
        }
        self.mode = mode;
    }

    /// Forgets the debugger's state (on detach).
    pub fn disarm(&mut self) {
        self.breakpoints.clear();
        self.mode = RunMode::Run;
    }

    /// Sets the mode (`mode.set`).
    pub fn set_mode(&mut self, mode: RunMode) {
        self.mode = mode;
    }

    /// The current mode.
    pub fn mode(&self) -> RunMode {
        self.mode
    }

    /// Adds a breakpoint (`breakpoint.set`); an equal one is not added twice.
    pub fn add_breakpoint(&mut self, matcher: BreakpointMatcher) {
        if !self
            .breakpoints
            .iter()
            .any(|existing| matcher_equals(existing, &matcher))
        {
            self.breakpoints.push(matcher);
        }
    }

    /// Removes a breakpoint (`breakpoint.clear`).
    pub fn remove_breakpoint(&mut self, matcher: &BreakpointMatcher) {
        self.breakpoints
            .retain(|existing| !matcher_equals(existing, matcher));
    }

    /// The armed breakpoints.
    pub fn breakpoints(&self) -> &[BreakpointMatcher] {
        &self.breakpoints
    }

    /// Whether a debugger breakpoint matches.
    pub fn breakpoint_matches(&self, point: PausePoint, node: &GateNode) -> bool {
        self.breakpoints
            .iter()
            .any(|m| matcher_matches(m, point, node))
    }

    /// Whether the debugger's state holds this point: step mode holds every `before` and
    /// `error` point, and any matching breakpoint holds.
    pub fn should_pause(&self, point: PausePoint, node: &GateNode) -> bool {
        (self.mode == RunMode::Step && point != PausePoint::After)
            || self.breakpoint_matches(point, node)
    }

    /// Why a hold that no built-in rule raised holds.
    pub fn reason_for(&self, point: PausePoint, node: &GateNode) -> PauseReason {
        if point == PausePoint::Error {
            PauseReason::Error
        } else if self.breakpoint_matches(point, node) {
            PauseReason::Breakpoint
        } else {
            PauseReason::Step
        }
    }

    /// Registers a held gate and returns its pause id and the caller's side of it.
    pub fn hold(
        &mut self,
        point: PausePoint,
        node: GateNode,
        run_id: &str,
        editable: bool,
    ) -> PendingGate {
        self.next_pause += 1;
        let pause_id = format!("pause_{}", self.next_pause);
        let now = Instant::now();
        let slot = Arc::new(GateSlot {
            state: Mutex::new(SlotState::Waiting(None)),
            wake: Condvar::new(),
        });
        self.held.insert(
            pause_id.clone(),
            HeldGate {
                pause_id: pause_id.clone(),
                node,
                point,
                run_id: run_id.to_string(),
                editable,
                opened_at: now,
                deadline: self.pause_timeout.map(|t| now + t),
                slot: slot.clone(),
            },
        );
        PendingGate { pause_id, slot }
    }

    /// The held gate with this id, if any.
    pub fn peek(&self, pause_id: &str) -> Option<&HeldGate> {
        self.held.get(pause_id)
    }

    /// Takes a held gate out to release it; `None` when unknown (already released: the
    /// first resume wins).
    pub fn take(&mut self, pause_id: &str) -> Option<HeldGate> {
        self.held.remove(pause_id)
    }

    /// Takes every held gate (detach, dispose).
    pub fn take_all(&mut self) -> Vec<HeldGate> {
        let mut all: Vec<HeldGate> = self.held.drain().map(|(_, g)| g).collect();
        all.sort_by_key(|g| g.opened_at);
        all
    }

    /// Takes every held gate of run `run_id`, oldest first (the run was aborted).
    pub fn take_run(&mut self, run_id: &str) -> Vec<HeldGate> {
        let ids: Vec<String> = self
            .held
            .values()
            .filter(|g| g.run_id == run_id)
            .map(|g| g.pause_id.clone())
            .collect();
        let mut gates: Vec<HeldGate> = ids.iter().filter_map(|id| self.held.remove(id)).collect();
        gates.sort_by_key(|g| g.opened_at);
        gates
    }

    /// Takes the gates whose pause timeout has passed.
    pub fn take_expired(&mut self, now: Instant) -> Vec<HeldGate> {
        let expired: Vec<String> = self
            .held
            .values()
            .filter(|g| g.deadline.is_some_and(|d| d <= now))
            .map(|g| g.pause_id.clone())
            .collect();
        expired
            .iter()
            .filter_map(|id| self.held.remove(id))
            .collect()
    }

    /// The earliest pause deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.held.values().filter_map(|g| g.deadline).min()
    }

    /// How many gates are held.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(kind: &str, name: &str) -> GateNode {
        GateNode {
            node_id: format!("{kind}:{name}"),
            kind: kind.into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_watching_gate_continues_or_aborts_and_warns_about_what_it_cannot_deliver() {
        let decide = |action| GateDecision {
            action,
            ..GateDecision::proceed()
        };
        let at = |action| decide(action).at_watching_gate("langchain", "LangChain", "Wrap it.");
        assert_eq!(at(ResumeAction::Continue), WatchingNext::Continue);
        assert_eq!(at(ResumeAction::Abort), WatchingNext::Abort);
        assert_eq!(
            at(ResumeAction::Inject),
            WatchingNext::ContinueInstead {
                key: "langchain-inject".into(),
                message: "`inject` is not supported at a LangChain callback gate (a callback \
                          cannot replace a result); continued instead. Wrap it."
                    .into(),
            }
        );
        assert!(matches!(
            at(ResumeAction::Retry),
            WatchingNext::ContinueInstead { key, .. } if key == "langchain-retry"
        ));
    }

    #[test]
    fn a_watched_decision_is_continue_or_abort_with_nothing_to_deliver() {
        let asked = |action| GateDecision {
            action,
            output: Some(Value::from("made up")),
            input: Some(Value::from("edited")),
        };
        let (inject, warning) =
            asked(ResumeAction::Inject).watched("langgraph", "LangGraph", "Wrap it.");
        assert_eq!(inject, GateDecision::proceed());
        assert_eq!(
            warning.map(|(key, _)| key).as_deref(),
            Some("langgraph-inject")
        );
        let (retry, warning) =
            asked(ResumeAction::Retry).watched("langgraph", "LangGraph", "Wrap it.");
        assert_eq!(retry, GateDecision::proceed());
        assert!(warning.is_some_and(|(_, message)| message.ends_with("Wrap it.")));
        let (cont, warning) = asked(ResumeAction::Continue).watched("langgraph", "LangGraph", "");
        assert_eq!((cont, warning), (GateDecision::proceed(), None));
        let (abort, warning) = asked(ResumeAction::Abort).watched("langgraph", "LangGraph", "");
        assert_eq!(abort.action, ResumeAction::Abort);
        assert_eq!((abort.output, abort.input, warning), (None, None, None));
    }

    #[test]
    fn matchers_default_to_before_and_match_every_given_field() {
        let any = BreakpointMatcher::default();
        assert!(matcher_matches(
            &any,
            PausePoint::Before,
            &node("tool", "a")
        ));
        assert!(!matcher_matches(
            &any,
            PausePoint::After,
            &node("tool", "a")
        ));
        let m = BreakpointMatcher {
            kind: Some(crate::event::NodeKind::Tool),
            name: Some("a".into()),
            point: Some(PausePoint::Error),
            ..BreakpointMatcher::default()
        };
        assert!(matcher_matches(&m, PausePoint::Error, &node("tool", "a")));
        assert!(!matcher_matches(&m, PausePoint::Error, &node("llm", "a")));
        assert!(!matcher_matches(&m, PausePoint::Error, &node("tool", "b")));
    }

    #[test]
    fn step_mode_holds_before_and_error_but_not_after() {
        let mut engine = GateEngine::new(None);
        engine.set_mode(RunMode::Step);
        let n = node("tool", "a");
        assert!(engine.should_pause(PausePoint::Before, &n));
        assert!(engine.should_pause(PausePoint::Error, &n));
        assert!(!engine.should_pause(PausePoint::After, &n));
        assert_eq!(engine.reason_for(PausePoint::Before, &n), PauseReason::Step);
    }

    #[test]
    fn first_release_wins_and_wakes_the_waiter() {
        let mut engine = GateEngine::new(None);
        let pending = engine.hold(PausePoint::Before, node("tool", "a"), "run_1", false);
        let id = pending.pause_id().to_string();
        let waiter = std::thread::spawn(move || pending.wait());
        let gate = engine.take(&id).unwrap();
        assert!(engine.take(&id).is_none());
        gate.release(GateDecision {
            action: ResumeAction::Inject,
            output: Some(Value::from(7i64)),
            input: None,
        });
        let decision = waiter.join().unwrap();
        assert_eq!(decision.action, ResumeAction::Inject);
        assert_eq!(decision.output, Some(Value::from(7i64)));
    }

    #[test]
    fn callbacks_fire_once_on_the_releasing_thread_or_at_once() {
        let mut engine = GateEngine::new(None);
        let pending = engine.hold(PausePoint::After, node("llm", "m"), "run_1", false);
        let (tx, rx) = std::sync::mpsc::channel();
        let id = pending.pause_id().to_string();
        pending.on_decision(move |d| tx.send(d.action).unwrap());
        engine.take(&id).unwrap().release(GateDecision::proceed());
        assert_eq!(rx.recv().unwrap(), ResumeAction::Continue);

        let pending = engine.hold(PausePoint::After, node("llm", "m"), "run_1", false);
        let id = pending.pause_id().to_string();
        engine.take(&id).unwrap().release(GateDecision {
            action: ResumeAction::Abort,
            output: None,
            input: None,
        });
        let (tx, rx) = std::sync::mpsc::channel();
        pending.on_decision(move |d| tx.send(d.action).unwrap());
        assert_eq!(rx.recv().unwrap(), ResumeAction::Abort);
    }

    #[test]
    fn pause_timeouts_expire_in_order() {
        let mut engine = GateEngine::new(Some(Duration::from_millis(0)));
        let _a = engine.hold(PausePoint::Before, node("tool", "a"), "r", false);
        assert!(engine.next_deadline().is_some());
        let expired = engine.take_expired(Instant::now());
        assert_eq!(expired.len(), 1);
        assert_eq!(engine.held_count(), 0);
    }

    #[test]
    fn wait_timeout_returns_none_while_held() {
        let mut engine = GateEngine::new(None);
        let pending = engine.hold(PausePoint::Before, node("tool", "a"), "r", false);
        assert!(pending.wait_timeout(Duration::from_millis(5)).is_none());
        assert_eq!(engine.held_count(), 1);
    }
}
