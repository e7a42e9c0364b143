//! The core's LLM step and provider codecs from Python (`graphmind._native.llm_step`,
//! `NativeLlmStep`). The integrations under `graphmind/integrations/` read a client
//! library's request, answer and stream chunks with [`sdk_value`] and do what the step's
//! `(code, value)` says, exactly as a tool wrapper does with `NativeStep`.

use graphmind_core::codec::{self, Api};
use graphmind_core::gate::GateDecision;
use graphmind_core::json::{Map, Value};
use graphmind_core::llm_step::{LlmRun, LlmStep};
use graphmind_core::session::Session;
use graphmind_core::sync::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

use crate::convert::{py_str, to_py, to_value_or_marker};
use crate::{after_gate, error_info, next_to_py, Decision, NativeSession};
use graphmind_core::surface::pure;

/// Type names of the client libraries' "argument not given" sentinels.
const NOT_GIVEN_TYPES: [&str; 2] = ["NotGiven", "Omit"];

fn is_not_given(obj: &Bound<'_, PyAny>) -> bool {
    obj.get_type()
        .name()
        .map(|n| NOT_GIVEN_TYPES.iter().any(|t| n == *t))
        .unwrap_or(false)
}

/// A client library's object as a core value: a pydantic model (the `openai` / `anthropic`
/// types) by its `model_dump()`, which pydantic-core runs in C, else the general converter, with
/// the entries of a top-level mapping (a call's keyword arguments) that hold a `NOT_GIVEN`
/// sentinel left out.
pub fn sdk_value(obj: &Bound<'_, PyAny>) -> Value {
    let Ok(d) = obj.cast_exact::<PyDict>() else {
        return model_value(obj);
    };
    let mut m = Map::with_capacity(d.len());
    for (k, v) in d.iter() {
        let Ok(key) = k.cast::<PyString>() else {
            continue;
        };
        if is_not_given(&v) {
            continue;
        }
        m.insert(py_str(key), to_value_or_marker(&v));
    }
    Value::Object(m)
}

/// How a client library's pydantic model is read (`model_dump(**DUMP_OPTIONS)`):
/// `serialize_as_any` keeps the runtime fields (a `ChatGeneration` held where its base
/// `Generation` is declared, as in LangChain's `LLMResult`, keeps its `message`);
/// `exclude_unset` keeps what the answer set, i.e. what the provider sent, and leaves out
/// the dozens of optional fields it did not send (each `None`, which every codec reads as
/// absent anyway): a smaller dict, cheaper to make and to read.
const DUMP_OPTIONS: [&str; 2] = ["serialize_as_any", "exclude_unset"];

/// The keyword arguments of [`DUMP_OPTIONS`], made once.
static DUMP_KWARGS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// A pydantic model by `model_dump` ([`DUMP_OPTIONS`]); anything else by the general
/// converter.
fn model_value(obj: &Bound<'_, PyAny>) -> Value {
    let py = obj.py();
    if obj
        .hasattr(intern!(py, "__pydantic_fields__"))
        .unwrap_or(false)
    {
        let kwargs = DUMP_KWARGS.get_or_try_init(py, || -> PyResult<Py<PyDict>> {
            let kwargs = PyDict::new(py);
            for option in DUMP_OPTIONS {
                kwargs.set_item(option, true)?;
            }
            Ok(kwargs.unbind())
        });
        if let Ok(kwargs) = kwargs {
            if let Ok(dumped) =
                obj.call_method(intern!(py, "model_dump"), (), Some(kwargs.bind(py)))
            {
                return to_value_or_marker(&dumped);
            }
        }
    }
    to_value_or_marker(obj)
}

fn api_of(name: &str) -> PyResult<Api> {
    pure::api(name).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// One model call: the core's `LlmStep`, driven from Python like `NativeStep`.
#[pyclass(module = "graphmind._native")]
pub struct NativeLlmStep {
    step: Mutex<LlmStep>,
    session: Session,
}

impl NativeLlmStep {
    fn decided(
        &self,
        py: Python<'_>,
        gate: graphmind_core::session::Gate,
        decide: impl FnOnce(&mut LlmStep, GateDecision) -> graphmind_core::step::Next,
    ) -> PyResult<(u8, Py<PyAny>)> {
        after_gate(py, &self.session, &self.step, gate, decide)
    }
}

#[pymethods]
impl NativeLlmStep {
    /// This call's instance id (`<invocation>:s<N>`).
    #[getter]
    fn instance_id(&self) -> String {
        self.step.lock().node().instance_id.clone()
    }

    /// Whether `node.finished` was recorded.
    #[getter]
    fn finished(&self) -> bool {
        self.step.lock().is_finished()
    }

    /// The `before` gate: `(code, value)`; `NEXT_HELD` with a gate when held. An injected
    /// value comes back as the provider-shaped reply.
    fn before(&self, py: Python<'_>) -> PyResult<(u8, Py<PyAny>)> {
        let gate = self.step.lock().before();
        self.decided(py, gate, |s, d| s.on_before(d))
    }

    /// Applies a `before` decision.
    fn on_before(&self, py: Python<'_>, decision: &Decision) -> PyResult<(u8, Py<PyAny>)> {
        let next = self.step.lock().on_before(decision.inner.clone());
        next_to_py(py, next)
    }

    /// The `after` gate for a complete answer (the client library's object).
    fn after(&self, py: Python<'_>, response: &Bound<'_, PyAny>) -> PyResult<(u8, Py<PyAny>)> {
        let value = sdk_value(response);
        let gate = self.step.lock().after(&value);
        self.decided(py, gate, |s, d| s.on_after(d, &value))
    }

    /// Applies an `after` decision to the answer.
    fn on_after(
        &self,
        py: Python<'_>,
        decision: &Decision,
        response: &Bound<'_, PyAny>,
    ) -> PyResult<(u8, Py<PyAny>)> {
        let value = sdk_value(response);
        let next = self.step.lock().on_after(decision.inner.clone(), &value);
        next_to_py(py, next)
    }

    /// The request raised an ordinary error: records it and returns the `error` gate.
    #[pyo3(signature = (name, message, stack=None))]
    fn error(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        message: &Bound<'_, PyString>,
        stack: Option<&Bound<'_, PyString>>,
    ) -> PyResult<(u8, Py<PyAny>)> {
        let gate = self.step.lock().error(error_info(name, message, stack));
        self.decided(py, gate, |s, d| s.on_error(d))
    }

    /// Applies an `error` decision.
    fn on_error(&self, py: Python<'_>, decision: &Decision) -> PyResult<(u8, Py<PyAny>)> {
        let next = self.step.lock().on_error(decision.inner.clone());
        next_to_py(py, next)
    }

    /// An abort or an interrupt: never held.
    fn ungated_error(&self, aborted: bool) {
        self.step.lock().on_ungated_error(aborted);
    }

    /// The call can only hand back the provider's own stream: `inject` at `before` acts
    /// as `continue` (warned).
    fn stream_only(&self) {
        self.step.lock().stream_only();
    }

    /// The request answered with a stream.
    fn stream_started(&self) {
        self.step.lock().stream_started();
    }

    /// One stream chunk / event as the app received it.
    fn chunk(&self, chunk: &Bound<'_, PyAny>) {
        let value = sdk_value(chunk);
        self.step.lock().stream_chunk(&value);
    }

    /// A text delta read through a helper (`text_stream`).
    fn text(&self, text: &Bound<'_, PyString>) {
        self.step.lock().stream_text(&py_str(text));
    }

    /// The stream ended (`name`/`message`: the error that broke it; `aborted`: the run was
    /// aborted; `final_message`: what the client library accumulated).
    #[pyo3(signature = (name=None, message=None, stack=None, aborted=false, final_message=None))]
    fn stream_end(
        &self,
        name: Option<&Bound<'_, PyString>>,
        message: Option<&Bound<'_, PyString>>,
        stack: Option<&Bound<'_, PyString>>,
        aborted: bool,
        final_message: Option<&Bound<'_, PyAny>>,
    ) {
        let error = match (name, message) {
            (Some(n), Some(m)) => Some(error_info(n, m, stack)),
            _ => None,
        };
        let last = final_message.filter(|m| !m.is_none()).map(sdk_value);
        self.step.lock().stream_end(error, aborted, last.as_ref());
    }
}

/// Starts a model call of `api` (`openai-chat`, `openai-responses`, `anthropic`, ...):
/// `request` is the request body (the call's keyword arguments).
#[pyfunction]
#[pyo3(signature = (session, run_id, run_name, api, request, sdk=None))]
fn llm_step(
    session: &NativeSession,
    run_id: Option<&str>,
    run_name: Option<&str>,
    api: &str,
    request: &Bound<'_, PyAny>,
    sdk: Option<&str>,
) -> PyResult<NativeLlmStep> {
    let api = api_of(api)?;
    let request = sdk_value(request);
    let step = LlmStep::start(
        &session.session,
        LlmRun { run_id, run_name },
        api,
        &request,
        sdk,
    );
    Ok(NativeLlmStep {
        step: Mutex::new(step),
        session: session.session.clone(),
    })
}

/// What a complete answer of `api` records: `(output, usage)`.
#[pyfunction]
fn llm_decode<'py>(
    py: Python<'py>,
    api: &str,
    response: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (output, usage) = pure::codec_decode(api, &sdk_value(response))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let usage = match &usage {
        Some(u) => to_py(py, u)?,
        None => py.None().into_bound(py),
    };
    Ok((to_py(py, &output)?, usage))
}

/// What `node.started.input` of a call of `api` records of `request` (the request codec).
#[pyfunction]
fn llm_request_input<'py>(
    py: Python<'py>,
    api: &str,
    request: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    to_py(
        py,
        &Value::Object(codec::request_input(api_of(api)?, &sdk_value(request))),
    )
}

/// The injected value as `api`'s reply (plain data; the integration makes it its SDK's type).
#[pyfunction]
#[pyo3(signature = (api, value, model=None))]
fn llm_injected_reply<'py>(
    py: Python<'py>,
    api: &str,
    value: &Bound<'py, PyAny>,
    model: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut request = Map::new();
    if let Some(m) = model {
        request.insert("model", Value::from(m));
    }
    to_py(
        py,
        &codec::injected_reply(api_of(api)?, sdk_value(value), &Value::Object(request)),
    )
}

/// A client library's object as the core reads it (for tests and the docs' examples).
#[pyfunction(name = "sdk_value")]
fn sdk_value_py<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &sdk_value(obj))
}

/// Adds the LLM step's class and functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeLlmStep>()?;
    m.add_function(wrap_pyfunction!(llm_step, m)?)?;
    m.add_function(wrap_pyfunction!(llm_decode, m)?)?;
    m.add_function(wrap_pyfunction!(llm_request_input, m)?)?;
    m.add_function(wrap_pyfunction!(llm_injected_reply, m)?)?;
    m.add_function(wrap_pyfunction!(sdk_value_py, m)?)?;
    Ok(())
}
