//! `graphmind._native`: the Rust core (`graphmind-core`) as a Python extension module.
//!
//! This crate translates values and idioms only. Every rule (options, kill switch,
//! redaction, shrinking, loop guard, gates, what a resume action means) is the core's:
//! a wrapper drives [`graphmind_core::step::Step`] and does what its `Next` says.
//!
//! Waiting: a held gate releases the GIL (`py.detach`) and waits in slices of
//! [`SIGNAL_SLICE`] only to run the interpreter's signal handlers, so Ctrl-C works; an
//! asyncio waiter hands the core a completion callback instead and never blocks its loop.

mod alloc;
mod convert;
mod llm;
mod pure;
mod watch;

/// The module's Rust allocations (the values handed to the core, freed on its worker
/// thread) go through mimalloc: glibc's malloc serialises those cross-thread frees on the
/// caller's arena lock, which made malloc/free a third of a tool call's cost.
#[global_allocator]
static ALLOC: alloc::Mi = alloc::Mi;

use convert::{
    fields_value, py_str, to_py, to_value, to_value_or_marker, write_fields_packed, write_packed,
};
use graphmind_core::config::{self, EnvSnapshot, SdkFlavor};
use graphmind_core::event::{ErrorInfo, GraphNodeHint, NodeKind, TokenChannel};
use graphmind_core::gate::{GateDecision, GateNode, PausePoint, PendingGate, ResumeAction};
use graphmind_core::host_value::HostValue;
use graphmind_core::json::packed::PackedWriter;
use graphmind_core::json::{JsStr, Value};
use graphmind_core::session::{Gate, GateOptions, NodeRef, Run, RunOutcome, Session};
use graphmind_core::step::{Next, Step};
use graphmind_core::surface::next_code;
use graphmind_core::sync::Mutex;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a blocked gate waits between two checks of the interpreter's signals.
pub const SIGNAL_SLICE: Duration = Duration::from_millis(100);

/// Set when the interpreter is shutting down: warnings then go to stderr from Rust.
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

fn secs(s: f64) -> Duration {
    if s.is_finite() && s > 0.0 {
        Duration::from_secs_f64(s)
    } else {
        Duration::ZERO
    }
}

// -- warnings: delivered to the Python sink on a thread that holds no core lock ------------
//
// The core calls a session's sink on its own threads, sometimes holding a lock, so a line is
// queued and one process-wide thread (`graphmind-log`) hands it to Python. At exit
// (`_shutting_down`, from the package's `atexit` hook, before the interpreter finalizes) that
// thread is stopped from entering Python again, a call it is making is waited for (the GIL
// let go meanwhile), and whatever is still queued is delivered on the exiting thread, which
// holds the GIL. From then on lines go to stderr from Rust. So no thread of ours ever enters
// an interpreter that is finalizing (the `PyGILState_Release` abort), and no warning the core
// decided to print is lost in the queue when the process ends.

/// How long the exit hook waits for a logger call in progress on the log thread.
pub const LOG_EXIT_WAIT: Duration = Duration::from_secs(2);

/// One queued warning line and the logger it goes to.
type LogLine = (Arc<Py<PyAny>>, String);

#[derive(Default)]
struct LogState {
    /// The process that started the log thread (a forked child starts its own).
    thread_pid: Option<u32>,
    lines: VecDeque<LogLine>,
    /// The log thread is inside a Python call.
    in_python: bool,
}

/// The queue between the core's threads and the log thread.
struct LogQueue {
    state: std::sync::Mutex<LogState>,
    changed: std::sync::Condvar,
}

static LOG_QUEUE: LogQueue = LogQueue {
    state: std::sync::Mutex::new(LogState {
        thread_pid: None,
        lines: VecDeque::new(),
        in_python: false,
    }),
    changed: std::sync::Condvar::new(),
};

impl LogQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `line` for `sink`, starting the log thread in this process if needed.
    fn push(&'static self, sink: &Arc<Py<PyAny>>, line: &str) {
        let mut state = self.lock();
        if SHUTTING_DOWN.load(Ordering::Acquire) {
            drop(state);
            eprintln!("{line}");
            return;
        }
        let pid = std::process::id();
        if state.thread_pid != Some(pid) {
            // A forked child inherits the queue but not the thread (nor a call in progress).
            state.in_python = false;
            let started = std::thread::Builder::new()
                .name("graphmind-log".into())
                .spawn(move || self.deliver_loop());
            if started.is_err() {
                drop(state);
                eprintln!("{line}");
                return;
            }
            state.thread_pid = Some(pid);
        }
        state.lines.push_back((sink.clone(), line.to_string()));
        self.changed.notify_all();
    }

    /// The log thread: one line at a time into Python, until the exit hook closes the door.
    fn deliver_loop(&self) {
        let mut state = self.lock();
        loop {
            if SHUTTING_DOWN.load(Ordering::Acquire) {
                // The exit hook delivers what is queued; this thread never enters Python again.
                return;
            }
            let Some((sink, line)) = state.lines.pop_front() else {
                state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            state.in_python = true;
            drop(state);
            Python::attach(|py| {
                if let Err(e) = sink.call1(py, (line,)) {
                    e.print(py);
                }
            });
            state = self.lock();
            state.in_python = false;
            self.changed.notify_all();
        }
    }

    /// The exit hook's part: no more Python calls from the log thread; waits for one in
    /// progress (the GIL released) up to [`LOG_EXIT_WAIT`], then delivers the rest here.
    fn close(&self, py: Python<'_>) {
        let rest: Vec<LogLine> = py.detach(|| {
            let mut state = self.lock();
            SHUTTING_DOWN.store(true, Ordering::Release);
            self.changed.notify_all();
            let deadline = std::time::Instant::now() + LOG_EXIT_WAIT;
            while state.in_python {
                let now = std::time::Instant::now();
                if now >= deadline {
                    break;
                }
                state = self
                    .changed
                    .wait_timeout(state, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            state.lines.drain(..).collect()
        });
        for (sink, line) in rest {
            if let Err(e) = sink.call1(py, (line,)) {
                e.print(py);
            }
        }
    }
}

fn log_sender(sink: Arc<Py<PyAny>>) -> impl Fn(&str) + Send + Sync + 'static {
    move |line: &str| LOG_QUEUE.push(&sink, line)
}

// -- decisions and gates ---------------------------------------------------------------------

/// A gate's decision, as the wrappers hand it back to their step.
#[pyclass(module = "graphmind._native", frozen)]
pub struct Decision {
    inner: GateDecision,
}

#[pymethods]
impl Decision {
    /// `continue`, `retry`, `inject` or `abort`.
    #[getter]
    fn action(&self) -> &'static str {
        self.inner.action.as_str()
    }

    /// The injected output (`None` unless `inject`).
    #[getter]
    fn output<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.inner.output {
            Some(v) => to_py(py, v),
            None => Ok(py.None().into_bound(py)),
        }
    }

    fn __repr__(&self) -> String {
        format!("Decision({})", self.inner.action.as_str())
    }
}

fn proceed() -> Decision {
    Decision {
        inner: GateDecision::proceed(),
    }
}

/// A held gate: wait on it (sync) or hand it a callback (asyncio).
#[pyclass(module = "graphmind._native")]
pub struct HeldGate {
    pending: Mutex<Option<PendingGate>>,
    pause_id: String,
    session: Session,
}

#[pymethods]
impl HeldGate {
    /// The pause id the debugger resumes.
    #[getter]
    fn pause_id(&self) -> &str {
        &self.pause_id
    }

    /// Blocks until the debugger decides, with the GIL released; signal handlers run every
    /// 100 ms (a raised `KeyboardInterrupt` discards the gate and propagates).
    fn wait(&self, py: Python<'_>) -> PyResult<Decision> {
        let pending = match self.pending.lock().take() {
            Some(p) => p,
            None => return Ok(proceed()),
        };
        loop {
            let got = py.detach(|| pending.wait_timeout(SIGNAL_SLICE));
            if let Some(decision) = got {
                return Ok(Decision { inner: decision });
            }
            if let Err(e) = py.check_signals() {
                let session = self.session.clone();
                let id = self.pause_id.clone();
                py.detach(move || session.discard_gate(&id));
                return Err(e);
            }
        }
    }

    /// Calls `callback(decision)` once, on the thread that releases the gate (or now).
    fn on_decision(&self, callback: Py<PyAny>) -> PyResult<()> {
        let pending = self
            .pending
            .lock()
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("gate already awaited"))?;
        pending.on_decision(move |decision| {
            if SHUTTING_DOWN.load(Ordering::Acquire) {
                // The interpreter is finalizing: entering it now would abort the process.
                return;
            }
            Python::attach(|py| {
                let d = Decision { inner: decision };
                if let Err(e) = callback.call1(py, (d,)) {
                    e.print(py);
                }
            });
        });
        Ok(())
    }

    /// Releases the gate as `continue` because its waiter went away (a cancelled task).
    fn discard(&self, py: Python<'_>) -> bool {
        let session = self.session.clone();
        let id = self.pause_id.clone();
        py.detach(move || session.discard_gate(&id))
    }
}

fn held(session: &Session, gate: Gate) -> Option<HeldGate> {
    match gate {
        Gate::Continue => None,
        Gate::Held(p) => Some(HeldGate {
            pause_id: p.pause_id().to_string(),
            pending: Mutex::new(Some(p)),
            session: session.clone(),
        }),
    }
}

// -- steps -----------------------------------------------------------------------------------

/// What a wrapper does next: `(code, value)`, the codes the core defines
/// ([`next_code`]), exported as `NEXT_<NAME>`.
fn next_to_py(py: Python<'_>, next: Next) -> PyResult<(u8, Py<PyAny>)> {
    if let Next::Raise(e) = &next {
        // Raised by the Python side as a tool error: `(name, message, stack)`.
        let stack = e.stack.as_ref().map(|s| s.to_string_lossy().into_owned());
        let parts = (
            e.name.to_string_lossy().into_owned(),
            e.message.to_string_lossy().into_owned(),
            stack,
        );
        return Ok((
            next_code::RAISE,
            parts.into_pyobject(py)?.into_any().unbind(),
        ));
    }
    let (code, value) = next_code::split(next);
    let value = match value {
        Some(v) => to_py(py, &v)?.unbind(),
        None => py.None(),
    };
    Ok((code, value))
}

/// One gated call (a tool, a span): the core's `Step`, driven from Python.
#[pyclass(module = "graphmind._native")]
pub struct NativeStep {
    step: Mutex<Step>,
    session: Session,
}

/// What a step does after one of its gates: held, `(NEXT_HELD, gate)` for Python to wait
/// on; not held, `decide` applied at once with `continue`. Tool steps and model steps alike.
pub(crate) fn after_gate<S>(
    py: Python<'_>,
    session: &Session,
    step: &Mutex<S>,
    gate: Gate,
    decide: impl FnOnce(&mut S, GateDecision) -> Next,
) -> PyResult<(u8, Py<PyAny>)> {
    match held(session, gate) {
        None => next_to_py(py, decide(&mut step.lock(), GateDecision::proceed())),
        Some(h) => Ok((next_code::HELD, Py::new(py, h)?.into_any())),
    }
}

impl NativeStep {
    fn waiting(
        &self,
        py: Python<'_>,
        gate: Gate,
        decide: impl FnOnce(&mut Step, GateDecision) -> Next,
    ) -> PyResult<(u8, Py<PyAny>)> {
        after_gate(py, &self.session, &self.step, gate, decide)
    }
}

fn error_info(
    name: &Bound<'_, PyString>,
    message: &Bound<'_, PyString>,
    stack: Option<&Bound<'_, PyString>>,
) -> ErrorInfo {
    let mut info = ErrorInfo::new(py_str(name), py_str(message));
    info.stack = stack.map(py_str);
    info
}

#[pymethods]
impl NativeStep {
    /// The node id (`tool:search`).
    #[getter]
    fn node_id(&self) -> String {
        self.step.lock().node().node_id.clone()
    }

    /// The instance id of this call.
    #[getter]
    fn instance_id(&self) -> String {
        self.step.lock().node().instance_id.clone()
    }

    /// The `before` gate: `(code, value)`; `NEXT_HELD` with a gate when held.
    fn before(&self, py: Python<'_>) -> PyResult<(u8, Py<PyAny>)> {
        let gate = self.step.lock().before();
        self.waiting(py, gate, |s, d| s.on_before(d))
    }

    /// Applies a `before` decision.
    fn on_before(&self, py: Python<'_>, decision: &Decision) -> PyResult<(u8, Py<PyAny>)> {
        let next = self.step.lock().on_before(decision.inner.clone());
        next_to_py(py, next)
    }

    /// The `after` gate for `output` (the function's result).
    fn after(&self, py: Python<'_>, output: &Bound<'_, PyAny>) -> PyResult<(u8, Py<PyAny>)> {
        let (gate, value) = self
            .step
            .lock()
            .after_output(Some(host_value(&self.session, output)));
        self.waiting(py, gate, |s, d| s.on_after_host(d, value))
    }

    /// Applies an `after` decision to `output`.
    fn on_after(
        &self,
        py: Python<'_>,
        decision: &Decision,
        output: &Bound<'_, PyAny>,
    ) -> PyResult<(u8, Py<PyAny>)> {
        let value = to_value_or_marker(output);
        let next = self
            .step
            .lock()
            .on_after(decision.inner.clone(), Some(value));
        next_to_py(py, next)
    }

    /// The function raised an ordinary error: records it and returns the `error` gate.
    #[pyo3(signature = (name, message, stack=None))]
    fn error(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        message: &Bound<'_, PyString>,
        stack: Option<&Bound<'_, PyString>>,
    ) -> PyResult<(u8, Py<PyAny>)> {
        let info = error_info(name, message, stack);
        let gate = self.step.lock().error(info);
        self.waiting(py, gate, |s, d| s.on_error(d))
    }

    /// Applies an `error` decision.
    fn on_error(&self, py: Python<'_>, decision: &Decision) -> PyResult<(u8, Py<PyAny>)> {
        let next = self.step.lock().on_error(decision.inner.clone());
        next_to_py(py, next)
    }

    /// An abort or an interrupt: never held; the call ends `aborted` or `error`.
    fn ungated_error(&self, aborted: bool) {
        self.step.lock().on_ungated_error(aborted);
    }

    /// Ends a span: `output` recorded unless `None`.
    fn finish(&self, py: Python<'_>, output: &Bound<'_, PyAny>) -> PyResult<(u8, Py<PyAny>)> {
        let value = if output.is_none() {
            None
        } else {
            Some(host_value(&self.session, output))
        };
        let next = self
            .step
            .lock()
            .on_after_host(GateDecision::proceed(), value);
        next_to_py(py, next)
    }
}

/// A wrapped callable's node, read once when it is wrapped: `NativeSession.start` then
/// takes no string from Python per call (under `abi3-py39` each `&str` argument costs a
/// temporary `bytes` object and a copy). `params`: the names of a signature made only of
/// named parameters, for `NativeSession.enter_call`.
#[pyclass(module = "graphmind._native", frozen)]
pub struct NodeSpec {
    kind: NodeKind,
    name: String,
    node_id: Option<String>,
    parent_id: Option<String>,
    params: Option<Vec<Param>>,
}

/// A call's arguments bound to parameter names, in order.
type BoundFields<'a, 'py> = Vec<(&'a JsStr, Bound<'py, PyAny>)>;

/// What entering a step answers: the step, then `(code, value)` as `NativeStep.before`.
type Entered = (Py<NativeStep>, u8, Py<PyAny>);

/// One named parameter: as recorded, and the `str` to look it up among keyword arguments.
struct Param {
    name: JsStr,
    key: Py<PyString>,
}

#[pymethods]
impl NodeSpec {
    /// What `NativeSession.enter_call` records as the input of this call (`None`: it
    /// leaves the call to `describe`), for the tests.
    fn _recorded_call_json(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: &Bound<'_, PyDict>,
        defaults: &Bound<'_, PyDict>,
    ) -> PyResult<Option<String>> {
        Ok(self
            .bind(py, args, kwargs, defaults)?
            .map(|fields| graphmind_core::json::to_string(&fields_value(&fields))))
    }

    #[new]
    #[pyo3(signature = (kind, name, node_id=None, parent_id=None, params=None))]
    fn new(
        kind: &str,
        name: &str,
        node_id: Option<&str>,
        parent_id: Option<&str>,
        params: Option<Vec<Bound<'_, PyString>>>,
    ) -> Self {
        NodeSpec {
            kind: kind_of(kind),
            name: name.to_string(),
            node_id: node_id.map(str::to_string),
            parent_id: parent_id.map(str::to_string),
            params: params.map(|names| {
                names
                    .iter()
                    .map(|n| Param {
                        name: py_str(n),
                        key: n.clone().unbind(),
                    })
                    .collect()
            }),
        }
    }
}

impl NodeSpec {
    /// The call's arguments bound to the node's `params` as `wrap._Arguments.describe`
    /// binds a signature of named parameters: `args` in order, then each remaining name
    /// from `kwargs`, else from `defaults`, else left out. `None` where `describe` goes
    /// past that (no `params`, more positional arguments than names, a name given both
    /// ways, a keyword that names no parameter).
    fn bind<'a, 'py>(
        &'a self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: &Bound<'py, PyDict>,
        defaults: &Bound<'py, PyDict>,
    ) -> PyResult<Option<BoundFields<'a, 'py>>> {
        let Some(params) = &self.params else {
            return Ok(None);
        };
        let n = args.len();
        if n > params.len() {
            return Ok(None);
        }
        let keywords = kwargs.len();
        let mut used = 0;
        let mut fields = Vec::with_capacity(params.len());
        for (i, p) in params.iter().enumerate() {
            let key = p.key.bind(py);
            if i < n {
                if keywords > 0 && kwargs.contains(key)? {
                    return Ok(None);
                }
                fields.push((&p.name, args.get_item(i)?));
            } else if let Some(v) = if keywords > 0 {
                kwargs.get_item(key)?
            } else {
                None
            } {
                fields.push((&p.name, v));
                used += 1;
            } else if let Some(v) = defaults.get_item(key)? {
                fields.push((&p.name, v));
            }
        }
        Ok(if used == keywords { Some(fields) } else { None })
    }

    fn node_ref(&self) -> NodeRef {
        match &self.node_id {
            Some(id) => NodeRef::with_id(self.kind, &self.name, id),
            None => NodeRef::new(self.kind, &self.name),
        }
    }
}

// -- runs ------------------------------------------------------------------------------------

/// A run started in the core: id, name and abort signal.
#[pyclass(module = "graphmind._native", frozen)]
pub struct NativeRun {
    run: Run,
}

#[pymethods]
impl NativeRun {
    /// The run id.
    #[getter]
    fn run_id(&self) -> &str {
        &self.run.run_id
    }

    /// The run name.
    #[getter]
    fn name(&self) -> &str {
        &self.run.name
    }

    /// Whether the run was aborted (by the debugger or the app).
    #[getter]
    fn aborted(&self) -> bool {
        self.run.signal.is_aborted()
    }

    /// Why it was aborted.
    #[getter]
    fn reason(&self) -> Option<String> {
        self.run.signal.reason()
    }

    /// Aborts the run (idempotent).
    fn abort(&self, reason: &str) {
        self.run.signal.abort(reason);
    }
}

// -- the session -------------------------------------------------------------------------------

/// The core session, one per `graphmind.Session`.
#[pyclass(module = "graphmind._native", frozen)]
pub struct NativeSession {
    session: Session,
    /// The failures whose error gate was offered (one pause per failure, `watch.rs`).
    failures: watch::SessionFailures,
}

fn kind_of(kind: &str) -> NodeKind {
    NodeKind::parse(kind).unwrap_or(NodeKind::Custom)
}

#[pymethods]
impl NativeSession {
    /// `options`: the reference's option names in camelCase, durations in ms; `env`: a
    /// mapping standing for the environment (`None`: the process environment); `sink`:
    /// called with each warning line.
    #[new]
    #[pyo3(signature = (options, env, sink))]
    fn new(
        options: &Bound<'_, PyAny>,
        env: Option<&Bound<'_, PyAny>>,
        sink: Py<PyAny>,
    ) -> PyResult<Self> {
        let options = to_value_or_marker(options);
        let env = match env {
            None => EnvSnapshot::from_process(),
            Some(e) => EnvSnapshot::from_json(&to_value_or_marker(e)),
        };
        let config = config::resolve_json(&options, &env, SdkFlavor::Python);
        let session = Session::new(config, Arc::new(log_sender(Arc::new(sink))));
        // Fork safety lives in the core's pthread_atfork hooks, inside fork() itself:
        // os.register_at_fork hooks would hold the session's locks across Python code, where
        // a thread holding the GIL may wait for them.
        graphmind_core::fork::register(&session);
        Ok(NativeSession {
            session,
            failures: Default::default(),
        })
    }

    /// The resolved configuration (`Config::to_json`).
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.session.config().to_json())
    }

    /// Whether the session records.
    #[getter]
    fn enabled(&self) -> bool {
        self.session.is_enabled()
    }

    /// Whether a debugger is attached.
    #[getter]
    fn attached(&self) -> bool {
        self.session.is_attached()
    }

    /// The URL it connects to.
    #[getter]
    fn url(&self) -> String {
        self.session.config().url.clone()
    }

    /// Waits up to `timeout` seconds for a debugger (GIL released).
    fn ready(&self, py: Python<'_>, timeout: f64) -> bool {
        let s = self.session.clone();
        let t = secs(timeout);
        py.detach(move || s.ready(t))
    }

    /// Starts a run.
    #[pyo3(signature = (name, meta=None))]
    fn start_run(&self, name: &str, meta: Option<&Bound<'_, PyAny>>) -> NativeRun {
        let meta = meta.map(to_value_or_marker);
        let meta_map = match &meta {
            Some(Value::Object(m)) => Some(m),
            _ => None,
        };
        NativeRun {
            run: self.session.start_run(name, meta_map),
        }
    }

    /// Finishes a run: `status` is `ok`, `error` or `aborted`.
    #[pyo3(signature = (run, status, name=None, message=None, stack=None))]
    fn finish_run(
        &self,
        run: &NativeRun,
        status: &str,
        name: Option<&Bound<'_, PyString>>,
        message: Option<&Bound<'_, PyString>>,
        stack: Option<&Bound<'_, PyString>>,
    ) {
        let outcome = match (status, name, message) {
            ("error", Some(n), Some(m)) => RunOutcome::Error(error_info(n, m, stack)),
            ("aborted", _, _) => RunOutcome::Aborted,
            _ => RunOutcome::Ok,
        };
        self.session.finish_run(&run.run, outcome);
    }

    /// The run's root node (`agent:<name>`) started, with the run id as instance id.
    fn run_node_started(&self, run: &NativeRun) {
        self.session.agent_node_started(&run.run);
    }

    /// The run's root node finished (`status`), after an error when given.
    #[pyo3(signature = (run, duration_ms, status, name=None, message=None, stack=None))]
    fn run_node_finished(
        &self,
        run: &NativeRun,
        duration_ms: f64,
        status: &str,
        name: Option<&Bound<'_, PyString>>,
        message: Option<&Bound<'_, PyString>>,
        stack: Option<&Bound<'_, PyString>>,
    ) {
        let outcome = match (status, name, message) {
            ("aborted", _, _) => RunOutcome::Aborted,
            (_, Some(n), Some(m)) => RunOutcome::Error(error_info(n, m, stack)),
            ("error", _, _) => {
                RunOutcome::Error(graphmind_core::event::ErrorInfo::new("Error", ""))
            }
            _ => RunOutcome::Ok,
        };
        self.session
            .agent_node_finished(&run.run, duration_ms, &outcome);
    }

    /// Starts one gated call: `node.started` with `input` (converted; unreadable parts
    /// become the degraded marker). `editable` offers its pauses as editable.
    #[pyo3(signature = (run_id, kind, name, node_id=None, parent_id=None, input=None, editable=false))]
    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        run_id: Option<&str>,
        kind: &str,
        name: &str,
        node_id: Option<&str>,
        parent_id: Option<&str>,
        input: Option<&Bound<'_, PyAny>>,
        editable: bool,
    ) -> NativeStep {
        let kind = kind_of(kind);
        let node = match node_id {
            Some(id) => NodeRef::with_id(kind, name, id),
            None => NodeRef::new(kind, name),
        };
        let input = input
            .filter(|i| !i.is_none())
            .map(|i| host_value(&self.session, i));
        let step = Step::start_host(&self.session, run_id, node, parent_id, input, editable);
        self.native_step(step)
    }

    /// `step` for a prepared node in `run` (`None`: the implicit run).
    #[pyo3(signature = (run, node, input=None, editable=false))]
    fn start(
        &self,
        run: Option<&NativeRun>,
        node: &NodeSpec,
        input: Option<&Bound<'_, PyAny>>,
        editable: bool,
    ) -> NativeStep {
        let input = input
            .filter(|i| !i.is_none())
            .map(|i| host_value(&self.session, i));
        self.start_node(run, node, input, editable)
    }

    /// `start` then the `before` gate, in one call: `(step, code, value)`, `code` and
    /// `value` as `NativeStep.before` returns them.
    fn enter(
        &self,
        py: Python<'_>,
        run: Option<&NativeRun>,
        node: &NodeSpec,
        input: Option<&Bound<'_, PyAny>>,
        editable: bool,
    ) -> PyResult<Entered> {
        let input = input
            .filter(|i| !i.is_none())
            .map(|i| host_value(&self.session, i));
        self.enter_with(py, run, node, input, editable)
    }

    /// `enter` for a call of a signature made only of named parameters (the node's
    /// `params`), binding `args`, then `kwargs`, then `defaults` (name -> default) to the
    /// names in order, as `wrap._Arguments.describe` does, and building the recorded input
    /// `{param: value, ...}` field by field as converting that dict would
    /// (`convert::fields_value`). `None` where `describe` would go past that simple binding
    /// (more positional arguments than names, a name given twice, an unknown keyword):
    /// the caller describes the call itself then. Editable.
    fn enter_call(
        &self,
        py: Python<'_>,
        run: Option<&NativeRun>,
        node: &NodeSpec,
        args: &Bound<'_, PyTuple>,
        kwargs: &Bound<'_, PyDict>,
        defaults: &Bound<'_, PyDict>,
    ) -> PyResult<Option<Entered>> {
        let Some(fields) = node.bind(py, args, kwargs, defaults)? else {
            return Ok(None);
        };
        let input = host_value_of(
            &self.session,
            |buf| write_fields_packed(&fields, buf),
            || fields_value(&fields),
        );
        self.enter_with(py, run, node, Some(input), true).map(Some)
    }

    /// A bare gate at `point` (`before`, `after`, `error`) of a node: `None` when nothing
    /// holds, else the held gate (the caller applies the decision itself).
    fn gate(
        &self,
        run_id: Option<&str>,
        point: &str,
        node_id: &str,
        kind: &str,
        name: &str,
    ) -> Option<HeldGate> {
        let point = PausePoint::parse(point)?;
        let node = GateNode {
            node_id: node_id.into(),
            kind: kind.into(),
            name: name.into(),
        };
        held(
            &self.session,
            self.session
                .gate(run_id, point, &node, GateOptions::default()),
        )
    }

    /// Emits a raw app event (`node.started`, ...) into `run_id` (or the implicit run).
    fn emit(
        &self,
        run_id: Option<&str>,
        event_type: &str,
        payload: &Bound<'_, PyAny>,
    ) -> Option<u64> {
        self.session
            .emit(run_id, event_type, to_value_or_marker(payload))
    }

    /// `node.token` with one delta (`channel`: text, reasoning, tool-args).
    #[allow(clippy::too_many_arguments)]
    fn token(
        &self,
        run_id: Option<&str>,
        kind: &str,
        name: &str,
        node_id: &str,
        instance_id: &str,
        channel: &str,
        text: &Bound<'_, PyString>,
    ) {
        let node = NodeRef {
            node_id: node_id.into(),
            instance_id: instance_id.into(),
            kind: kind_of(kind),
            name: name.into(),
        };
        let channel = TokenChannel::parse(channel).unwrap_or(TokenChannel::Text);
        let text = py_str(text);
        self.session
            .node_token(run_id, &node, channel, &text.to_string_lossy());
    }

    /// One rate-limited warning (`key` groups repeats) through the session's log sink.
    fn warn(&self, key: &str, message: &str) {
        self.session.warn(key, message);
    }

    /// `graph.hint`: each node a mapping with `nodeId`, `kind`, `name`, optional `parentId`.
    fn graph_hint(&self, run_id: Option<&str>, nodes: Vec<Bound<'_, PyAny>>) {
        let mut hints = Vec::new();
        for n in nodes {
            let Ok(Value::Object(m)) = to_value(&n) else {
                continue;
            };
            let text = |k: &str| m.get(k).and_then(|v| v.as_js_str()).cloned();
            let (Some(id), Some(name)) = (text("nodeId"), text("name")) else {
                continue;
            };
            let kind = text("kind")
                .and_then(|k| k.as_str().and_then(NodeKind::parse))
                .unwrap_or(NodeKind::Custom);
            let mut hint = GraphNodeHint::new(id, kind, name);
            hint.parent_id = text("parentId");
            for (k, v) in m.iter() {
                if !matches!(k.as_str(), Some("nodeId" | "name" | "kind" | "parentId")) {
                    hint.extra.insert(k.clone(), v.clone());
                }
            }
            hints.push(hint);
        }
        if !hints.is_empty() {
            self.session.graph_hint(run_id, hints);
        }
    }

    /// Starts replaying a recorded run (`spec`: the `replay` option's value, a run
    /// reference or `{file?, run?, from?, output?}`); the next run started is answered
    /// from it. Returns the report (`error` says why nothing will be replayed).
    fn replay_begin<'py>(
        &self,
        py: Python<'py>,
        spec: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let report = graphmind_core::replay::begin_value(&self.session, &to_value_or_marker(spec));
        to_py(py, &report.to_value())
    }

    /// Stops replaying; returns the last report (`None` when not replaying).
    fn replay_end<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        graphmind_core::replay::end(&self.session)
            .map(|r| to_py(py, &r.to_value()))
            .transpose()
    }

    /// What the replay has done so far (`None` when not replaying).
    fn replay_report<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        graphmind_core::replay::report(&self.session)
            .map(|r| to_py(py, &r.to_value()))
            .transpose()
    }

    /// Diagnostics: `(enabled, attached, buffered, dropped, held_gates, seq, lost)`.
    fn stats(&self) -> (bool, bool, u64, u64, u64, u64, u64) {
        let s = self.session.stats();
        (
            s.enabled,
            s.attached,
            s.buffered,
            s.dropped,
            s.held_gates,
            s.seq,
            s.lost,
        )
    }

    /// The abort signal state of a live run (`None` when unknown).
    fn run_aborted(&self, run_id: &str) -> Option<bool> {
        self.session.run_signal(run_id).map(|s| s.is_aborted())
    }

    /// Waits up to `timeout` seconds for everything emitted to reach the socket.
    fn flush(&self, py: Python<'_>, timeout: f64) -> bool {
        let s = self.session.clone();
        let t = secs(timeout);
        py.detach(move || s.flush(t))
    }

    /// How long `dispose()` and the exit hook wait, in seconds: the core's bound (connect +
    /// handshake timeouts, then the delivery of the ring).
    fn exit_deadline(&self) -> f64 {
        self.session.exit_deadline().as_secs_f64()
    }

    /// Releases held gates, flushes and closes, within `deadline` seconds. Idempotent.
    fn dispose(&self, py: Python<'_>, deadline: f64) {
        let s = self.session.clone();
        let t = secs(deadline);
        py.detach(move || s.dispose(t));
    }
}

impl NativeSession {
    /// A started step handed to Python.
    fn native_step(&self, step: Step) -> NativeStep {
        NativeStep {
            step: Mutex::new(step),
            session: self.session.clone(),
        }
    }

    /// `node.started` of a prepared node in `run` (`None`: the implicit run), as a step.
    fn start_node(
        &self,
        run: Option<&NativeRun>,
        node: &NodeSpec,
        input: Option<HostValue>,
        editable: bool,
    ) -> NativeStep {
        let run_id = run.map(|r| r.run.run_id.as_str());
        let step = Step::start_host(
            &self.session,
            run_id,
            node.node_ref(),
            node.parent_id.as_deref(),
            input,
            editable,
        );
        self.native_step(step)
    }

    fn enter_with(
        &self,
        py: Python<'_>,
        run: Option<&NativeRun>,
        node: &NodeSpec,
        input: Option<HostValue>,
        editable: bool,
    ) -> PyResult<Entered> {
        let step = self.start_node(run, node, input, editable);
        let gate = step.step.lock().before();
        let (code, value) = step.waiting(py, gate, |s, d| s.on_before(d))?;
        Ok((Py::new(py, step)?, code, value))
    }
}

/// A node's input or output as the core takes it: packed while detached, converted
/// otherwise ([`HostValue::packed_or_built`]).
fn host_value(session: &Session, obj: &Bound<'_, PyAny>) -> HostValue {
    host_value_of(
        session,
        |buf| write_packed(obj, buf),
        || to_value_or_marker(obj),
    )
}

/// [`host_value`] of a value packed by `write` or converted by `convert`.
fn host_value_of(
    session: &Session,
    write: impl FnOnce(&mut PackedWriter) -> bool,
    convert: impl FnOnce() -> Value,
) -> HostValue {
    HostValue::packed_or_built(session.is_attached(), write, convert)
}

/// Called by the package's `atexit` hook, after the sessions are disposed: the queued
/// warnings are delivered now, on this thread, and later ones go to stderr from Rust.
#[pyfunction]
fn _shutting_down(py: Python<'_>) {
    LOG_QUEUE.close(py);
}

/// Which resume actions exist (for the `.pyi` and tests).
#[pyfunction]
fn resume_actions() -> Vec<&'static str> {
    ResumeAction::ALL.iter().map(|a| a.as_str()).collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeSession>()?;
    m.add_class::<NativeRun>()?;
    m.add_class::<NodeSpec>()?;
    m.add_class::<NativeStep>()?;
    m.add_class::<HeldGate>()?;
    m.add_class::<Decision>()?;
    m.add_function(wrap_pyfunction!(_shutting_down, m)?)?;
    m.add_function(wrap_pyfunction!(resume_actions, m)?)?;
    for (name, code) in next_code::NAMED {
        m.add(format!("NEXT_{name}"), code)?;
    }
    m.add("DEFAULT_URL", config::DEFAULT_URL)?;
    m.add("PROTOCOL_VERSION", graphmind_core::event::PROTOCOL_VERSION)?;
    m.add("CORE_VERSION", graphmind_core::config::CLIENT_VERSION)?;
    m.add(
        "MAX_PAYLOAD_BYTES",
        graphmind_core::shrink::MAX_PAYLOAD_BYTES,
    )?;
    pure::register(m)?;
    llm::register(m)?;
    watch::register(m)?;
    Ok(())
}
