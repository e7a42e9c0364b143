//! Nodes recorded from a framework's callbacks (LangChain's handlers): `watch_node` (the
//! core's [`Step`]) and `watch_model` (the core's [`LlmStep`], through a provider codec),
//! both as one `WatchedStep` whose gates only watch ([`GateDecision::watched`]: `inject`
//! and `retry` cannot be delivered by a callback, so they continue with the core's
//! warning). The skin calls `before()`, `after(output)`, `error(exc)` as the callbacks
//! arrive; each answers `(code, gate)`: `NEXT_HELD` with the held gate (wait on it, then
//! `resume(decision)`), `NEXT_ABORT` (the run ends: raise), else `NEXT_RUN` (go on).
//! Node's `Session.watchNode` / `watchModel` drive the same core calls.

use graphmind_core::codec::Api;
use graphmind_core::failure_once::{FailureId, GatedFailures};
use graphmind_core::gate::{GateDecision, PausePoint};
use graphmind_core::host_value::HostValue;
use graphmind_core::json::Value;
use graphmind_core::llm_step::{LlmRun, LlmStep};
use graphmind_core::session::{Gate, NodeRef, Session};
use graphmind_core::step::{Next, Step};
use graphmind_core::sync::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::llm::sdk_value;
use crate::{held, host_value, kind_of, Decision, NativeSession};
use graphmind_core::surface::next_code;

/// The attribute a reported exception carries its failure number in (the same object
/// climbing through every level is the same failure).
const FAILURE_ATTR: &str = "__graphmind_failure__";

/// The next failure number (`0` is "unnamed" in the core).
static NEXT_FAILURE: AtomicU64 = AtomicU64::new(1);

/// The failures whose error gate was offered, per session (one pause per failure).
pub type SessionFailures = Arc<Mutex<GatedFailures>>;

/// What is being watched: a node, or a model call. One lives inside each watched step (a
/// callback's node), so the variants' sizes differ without a cost worth a box.
#[allow(clippy::large_enum_variant)]
enum Watched {
    Node(Step),
    Model(LlmStep),
}

struct State {
    step: Watched,
    point: PausePoint,
    /// The node's output at its `after` gate.
    output: Option<HostValue>,
    /// The model's answer at its `after` gate.
    response: Option<Value>,
}

/// One node recorded from callbacks; its gates only watch.
#[pyclass(module = "graphmind._native")]
pub struct WatchedStep {
    state: Mutex<State>,
    session: Session,
    failures: SessionFailures,
    /// `(integration, label, hint)`: how the warning for an undeliverable action reads.
    watch: Watch,
}

fn code_of(next: &Next) -> u8 {
    if matches!(next, Next::Abort) {
        next_code::ABORT
    } else {
        next_code::RUN
    }
}

impl WatchedStep {
    fn new(session: &NativeSession, step: Watched, watch: Watch) -> WatchedStep {
        WatchedStep {
            state: Mutex::new(State {
                step,
                point: PausePoint::Before,
                output: None,
                response: None,
            }),
            session: session.session.clone(),
            failures: session.failures.clone(),
            watch,
        }
    }

    /// `(NEXT_HELD, gate)` for a held gate, else the decision `continue` applied.
    fn settle(&self, py: Python<'_>, gate: Gate) -> PyResult<(u8, Py<PyAny>)> {
        match held(&self.session, gate) {
            Some(h) => Ok((next_code::HELD, Py::new(py, h)?.into_any())),
            None => Ok((self.apply(GateDecision::proceed()), py.None())),
        }
    }

    /// What the decision at the current point means, as a watching gate carries it out.
    fn apply(&self, decision: GateDecision) -> u8 {
        let (integration, label, hint) = &self.watch;
        let (decision, warning) = decision.watched(integration, label, hint);
        if let Some((key, message)) = warning {
            self.session.warn(&key, &message);
        }
        let mut s = self.state.lock();
        let point = s.point;
        let output = s.output.take();
        let response = s.response.take();
        let next = match (&mut s.step, point) {
            (Watched::Node(step), PausePoint::Before) => step.on_before(decision),
            (Watched::Node(step), PausePoint::After) => step.on_after_host(decision, output),
            (Watched::Node(step), PausePoint::Error) => step.on_error(decision),
            (Watched::Model(step), PausePoint::Before) => step.on_before(decision),
            (Watched::Model(step), PausePoint::After) => {
                step.on_after(decision, &response.unwrap_or(Value::Null))
            }
            (Watched::Model(step), PausePoint::Error) => step.on_error(decision),
        };
        code_of(&next)
    }
}

/// The failure number `error` carries (given on its first report); `0` when it cannot
/// carry one (then it is gated wherever it is reported).
fn failure_of(error: &Bound<'_, PyAny>) -> FailureId {
    if let Ok(n) = error.getattr(FAILURE_ATTR).and_then(|v| v.extract::<u64>()) {
        return n;
    }
    let n = NEXT_FAILURE.fetch_add(1, Ordering::Relaxed);
    if error.setattr(FAILURE_ATTR, n).is_ok() {
        n
    } else {
        0
    }
}

#[pymethods]
impl WatchedStep {
    /// The node id (`llm:step`, `chain:<name>`, ...).
    #[getter]
    fn node_id(&self) -> String {
        match &self.state.lock().step {
            Watched::Node(s) => s.node().node_id.clone(),
            Watched::Model(s) => s.node().node_id.clone(),
        }
    }

    /// This call's instance id (the core's).
    #[getter]
    fn instance_id(&self) -> String {
        match &self.state.lock().step {
            Watched::Node(s) => s.node().instance_id.clone(),
            Watched::Model(s) => s.node().instance_id.clone(),
        }
    }

    /// The `before` gate: `(code, gate)`.
    fn before(&self, py: Python<'_>) -> PyResult<(u8, Py<PyAny>)> {
        let gate = {
            let mut s = self.state.lock();
            s.point = PausePoint::Before;
            match &s.step {
                Watched::Node(step) => step.before(),
                Watched::Model(step) => step.before(),
            }
        };
        self.settle(py, gate)
    }

    /// The work ended with `output` (a model call's: its answer, read through the codec):
    /// `node.finished` once the `after` gate is passed. `(code, gate)`.
    fn after(&self, py: Python<'_>, output: &Bound<'_, PyAny>) -> PyResult<(u8, Py<PyAny>)> {
        let gate = {
            let mut s = self.state.lock();
            s.point = PausePoint::After;
            let (gate, out, response) = match &mut s.step {
                Watched::Node(step) => {
                    let value = (!output.is_none()).then(|| host_value(&self.session, output));
                    let (gate, value) = step.after_output(value);
                    (gate, value, None)
                }
                Watched::Model(step) => {
                    let value = sdk_value(output);
                    (step.after(&value), None, Some(value))
                }
            };
            s.output = out;
            s.response = response;
            gate
        };
        self.settle(py, gate)
    }

    /// The work raised `error` (`name`, `message`, `stack` as read from it): `node.error`,
    /// and the `error` gate at the first level reporting this exception only.
    #[pyo3(signature = (error, name, message, stack=None))]
    fn error(
        &self,
        py: Python<'_>,
        error: &Bound<'_, PyAny>,
        name: &Bound<'_, PyString>,
        message: &Bound<'_, PyString>,
        stack: Option<&Bound<'_, PyString>>,
    ) -> PyResult<(u8, Py<PyAny>)> {
        let info = crate::error_info(name, message, stack);
        let failure = failure_of(error);
        let gate = {
            let mut gated = self.failures.lock();
            let mut s = self.state.lock();
            s.point = PausePoint::Error;
            match &mut s.step {
                Watched::Node(step) => step.error_once(info, failure, &mut gated),
                Watched::Model(step) => step.error_once(info, failure, &mut gated),
            }
        };
        self.settle(py, gate)
    }

    /// The decision of the held gate arrived: `NEXT_ABORT` or `NEXT_RUN`.
    fn resume(&self, decision: &Decision) -> u8 {
        self.apply(decision.inner.clone())
    }

    /// A streamed piece of a model call (LangChain's token chunk): its deltas go out as
    /// `node.token`.
    fn chunk(&self, chunk: &Bound<'_, PyAny>) {
        let value = sdk_value(chunk);
        if let Watched::Model(step) = &mut self.state.lock().step {
            step.stream_chunk(&value);
        }
    }

    /// The work raised something never held (an abort, an interrupt): it ends `aborted`
    /// (or `error`).
    fn ungated(&self, aborted: bool) {
        match &mut self.state.lock().step {
            Watched::Node(step) => {
                step.on_ungated_error(aborted);
            }
            Watched::Model(step) => {
                step.on_ungated_error(aborted);
            }
        }
    }
}

/// `(integration, label, hint)` from the skin's triple.
type Watch = (String, String, String);

/// A node of `kind` and `name` seen through a callback: `node.started` (under `parent_id`,
/// with `input`) in `run_id`; its gates only watch.
#[pyfunction]
#[pyo3(signature = (session, run_id, kind, name, parent_id, input, watch))]
fn watch_node(
    session: &NativeSession,
    run_id: Option<&str>,
    kind: &str,
    name: &str,
    parent_id: Option<&str>,
    input: Option<&Bound<'_, PyAny>>,
    watch: Watch,
) -> WatchedStep {
    let core = &session.session;
    let input = input.filter(|i| !i.is_none()).map(|i| host_value(core, i));
    let step = Step::start_host(
        core,
        run_id,
        NodeRef::new(kind_of(kind), name),
        parent_id,
        input,
        false,
    );
    WatchedStep::new(session, Watched::Node(step), watch)
}

/// A model call seen through a callback: the core's LLM step (`llm:step`) with `request`
/// read through the codec of `api` (`langchain`), under `parent_id` (default: the run's
/// agent node); its gates only watch.
#[pyfunction]
#[pyo3(signature = (session, run_id, run_name, api, request, parent_id, sdk, watch))]
#[allow(clippy::too_many_arguments)]
fn watch_model(
    session: &NativeSession,
    run_id: Option<&str>,
    run_name: Option<&str>,
    api: &str,
    request: &Bound<'_, PyAny>,
    parent_id: Option<&str>,
    sdk: Option<&str>,
    watch: Watch,
) -> PyResult<WatchedStep> {
    let api = Api::from_name(api)
        .ok_or_else(|| PyValueError::new_err(format!("unknown model API {api:?}")))?;
    let core = &session.session;
    let request = sdk_value(request);
    let step = LlmStep::start_under(
        core,
        LlmRun { run_id, run_name },
        parent_id,
        api,
        &request,
        sdk,
    );
    Ok(WatchedStep::new(session, Watched::Model(step), watch))
}

/// Adds the watched steps to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<WatchedStep>()?;
    m.add_function(wrap_pyfunction!(watch_node, m)?)?;
    m.add_function(wrap_pyfunction!(watch_model, m)?)?;
    Ok(())
}
