//! GraphMind for Node.js: `graphmind-core` through napi-rs.
//!
//! This crate only translates. Values cross as JSON text (JavaScript's own
//! `JSON.stringify`, which escapes lone surrogates, into the core's WTF-8 parser, read
//! through a reused buffer (`text.rs`); the core's writer back into `JSON.parse`), gates
//! deliver their decision through one unref'd `ThreadsafeFunction` per session, and every
//! wrapped call is a [`Step`] addressed by a small integer handle. A wrapped function's node
//! (`kind:name`) is registered once as a call site, so a call that nobody holds crosses
//! into Rust twice (`stepCall`, `stepAfter`) with one JSON text each. What an action means,
//! when to gate, how to redact: all in the core.

#![deny(clippy::all)]
// napi-rs registers the exported functions only outside `cfg(test)`: in the test build
// they look unused.
#![cfg_attr(test, allow(dead_code))]

use graphmind_core::config::{self, EnvSnapshot, SdkFlavor};
use graphmind_core::event::{ErrorInfo, Message, NodeFinished, NodeKind, RunStatus};
use graphmind_core::failure_once::GatedFailures;
use graphmind_core::gate::{GateDecision, PausePoint};
use graphmind_core::host_value::HostValue;
use graphmind_core::json::{self, Map, Value};
use graphmind_core::llm as core_llm;
use graphmind_core::payload_cap;
use graphmind_core::session::{normalize_duration, Gate, NodeRef, Run, RunOutcome, Session};
use graphmind_core::step::{Next, Step};
use graphmind_core::surface::next_code;
use graphmind_core::warn::{stderr_sink, WarnSink};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod gate_options;
mod llm;
mod pure;
mod text;

/// The addon's own allocator. Every wrapped call builds its input and output as
/// `json::Value` trees on the JS thread, and the session's worker thread drops them once
/// sent or buffered: with glibc's malloc those cross-thread frees land in the JS thread's
/// arena under its lock, and the JS thread's next allocations pay for consolidating them
/// (about a third of its time in the 1 KB tool-call benchmark). mimalloc frees into the
/// owning page's thread-free list instead. It serves only this library's Rust allocations.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use napi::JsString;
use text::{host_text_opt, parse_js_opt};

/// The dispatcher: called on the JS thread with the token of a gate whose decision arrived.
type Dispatch = ThreadsafeFunction<u32, (), u32, Status, false, true>;
/// The logger: called on the JS thread with one warning line.
type LogFn = ThreadsafeFunction<String, (), String, Status, false, true>;

/// What the wrapper does next: the core's encoding of [`Next`]
/// ([`graphmind_core::surface::next_code`]) as the `i32`s napi hands JS, which reads the
/// same numbers by name from `nextCodes()`.
pub mod code {
    use graphmind_core::surface::next_code as core;
    /// Call the function with the live input.
    pub const RUN: i32 = core::RUN as i32;
    /// Call the function with the edited input (`stepValue`).
    pub const RUN_EDITED: i32 = core::RUN_EDITED as i32;
    /// Return the function's own result.
    pub const RETURN_RESULT: i32 = core::RETURN_RESULT as i32;
    /// A debugger holds the step: wait for the dispatcher, then call `stepResume`.
    pub const HELD: i32 = core::HELD as i32;
}

/// The core's codes of a step's next move by name (`RUN`, `HELD`, ...), and `CODE_SPAN`:
/// what index.js switches on.
#[napi]
pub fn next_codes() -> std::collections::HashMap<String, u32> {
    let mut out: std::collections::HashMap<String, u32> = next_code::NAMED
        .iter()
        .map(|(name, code)| (name.to_string(), u32::from(*code)))
        .collect();
    out.insert("CODE_SPAN".into(), u32::from(next_code::CODE_SPAN));
    out
}

fn parse_json(text: &str) -> Result<Value> {
    json::parse_str(text)
        .map_err(|e| Error::from_reason(format!("graphmind: invalid JSON from the binding: {e}")))
}

fn parse_opt(text: Option<String>) -> Result<Option<Value>> {
    text.map(|t| parse_json(&t)).transpose()
}

fn kind_of(kind: &str) -> NodeKind {
    NodeKind::parse(kind).unwrap_or(NodeKind::Custom)
}

fn point_of(point: &str) -> Result<PausePoint> {
    PausePoint::parse(point)
        .ok_or_else(|| Error::from_reason(format!("graphmind: unknown pause point {point:?}")))
}

fn flavor_of(name: &str) -> SdkFlavor {
    SdkFlavor::parse(name).unwrap_or(SdkFlavor::Node)
}

fn decision_json(decision: &GateDecision) -> String {
    let mut m = Map::new();
    m.insert("action", Value::from(decision.action.as_str()));
    if let Some(output) = &decision.output {
        m.insert("output", output.clone());
    }
    if let Some(input) = &decision.input {
        m.insert("input", input.clone());
    }
    json::to_string(&Value::Object(m))
}

struct StepSlot {
    step: Step,
    /// The point of the gate being waited on.
    point: PausePoint,
    /// The output recorded at the `after` gate being waited on.
    output: Option<HostValue>,
}

/// A wrapped function's node, registered once (`callSite`).
struct CallSite {
    kind: NodeKind,
    name: String,
    editable: bool,
    /// The tool's input schema an edited argument must match (`siteInputSchema`).
    input_schema: Option<graphmind_core::edit_schema::InputSchema>,
}

/// At most this many distinct call sites are kept (a wrapper made per call with ever new
/// names falls back to `stepStart`, which names the node on every call).
const MAX_CALL_SITES: usize = 4096;

/// `stepCall` packs the step's handle and its first code as `handle * CODE_SPAN + code`.
const CODE_SPAN: f64 = next_code::CODE_SPAN as f64;

struct NodeSlot {
    node: NodeRef,
    run_id: Option<String>,
    started: Instant,
}

/// A session snapshot (the reference's `SessionStats`).
#[napi(object)]
pub struct NativeStats {
    pub enabled: bool,
    pub attached: bool,
    pub buffered: f64,
    pub dropped: f64,
    pub lost: f64,
    pub pending_gaps: f64,
    pub held_gates: f64,
    pub seq: f64,
}

/// One GraphMind session, used from the JS thread only.
#[napi]
pub struct NativeSession {
    session: Session,
    dispatch: Arc<Dispatch>,
    /// Gates whose decision has not been taken yet: while non-zero the dispatcher is ref'd,
    /// so a held step keeps the process alive; at zero it is unref'd.
    held: u32,
    next_token: u32,
    decisions: Arc<Mutex<HashMap<u32, GateDecision>>>,
    pauses: HashMap<u32, String>,
    steps: HashMap<u32, StepSlot>,
    llm: llm::LlmSlots,
    values: HashMap<u32, Value>,
    nodes: HashMap<u32, NodeSlot>,
    runs: HashMap<String, Run>,
    sites: Vec<CallSite>,
    site_ids: HashMap<(String, String, bool), u32>,
    /// The failures whose error gate was offered (one pause per failure, the core's rule).
    pub(crate) failures: GatedFailures,
    /// The host's cap on recorded node inputs and outputs (`setMaxPayloadChars`).
    max_payload_chars: Option<usize>,
    /// The buffer JSON text from JavaScript is read into (reused across calls).
    scratch: Vec<u8>,
}

/// A skin's failure number as the core's [`graphmind_core::failure_once::FailureId`]
/// (none, negative or fractional: unnamed).
pub(crate) fn failure_id(failure: Option<f64>) -> graphmind_core::failure_once::FailureId {
    match failure {
        Some(n) if n >= 1.0 && n.fract() == 0.0 && n <= u64::MAX as f64 => n as u64,
        _ => 0,
    }
}

/// `ready()` off the JS thread.
pub struct ReadyTask {
    session: Session,
    timeout: Duration,
}

impl Task for ReadyTask {
    type Output = bool;
    type JsValue = bool;
    fn compute(&mut self) -> Result<bool> {
        Ok(self.session.ready(self.timeout))
    }
    fn resolve(&mut self, _env: Env, output: bool) -> Result<bool> {
        Ok(output)
    }
}

/// `dispose()` off the JS thread (it waits up to its deadline for the flush).
pub struct DisposeTask {
    session: Session,
    deadline: Duration,
}

impl Task for DisposeTask {
    type Output = ();
    type JsValue = ();
    fn compute(&mut self) -> Result<()> {
        self.session.dispose(self.deadline);
        Ok(())
    }
    fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
        Ok(())
    }
}

#[napi]
impl NativeSession {
    /// A session from the reference's camelCase options (JSON), the environment (JSON object
    /// of strings, or the process environment), the SDK flavor, the dispatcher and an
    /// optional logger. Config warnings are logged by the session itself.
    #[napi(constructor)]
    pub fn new(
        options_json: String,
        env_json: Option<String>,
        flavor: String,
        dispatch: Function<'_, u32, ()>,
        logger: Option<Function<'_, String, ()>>,
    ) -> Result<Self> {
        let options = parse_json(&options_json)?;
        let env = match env_json {
            Some(text) => EnvSnapshot::from_json(&parse_json(&text)?),
            None => EnvSnapshot::from_process(),
        };
        let config = config::resolve_json(&options, &env, flavor_of(&flavor));
        let dispatch: Dispatch = dispatch
            .build_threadsafe_function()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        let sink: WarnSink = match logger {
            Some(f) => {
                let log: LogFn = f
                    .build_threadsafe_function()
                    .callee_handled::<false>()
                    .weak::<true>()
                    .build()?;
                Arc::new(move |line: &str| {
                    log.call(line.to_string(), ThreadsafeFunctionCallMode::NonBlocking);
                })
            }
            None => stderr_sink(),
        };
        Ok(NativeSession {
            session: Session::new(config, sink),
            dispatch: Arc::new(dispatch),
            held: 0,
            next_token: 0,
            decisions: Arc::new(Mutex::new(HashMap::new())),
            pauses: HashMap::new(),
            steps: HashMap::new(),
            llm: HashMap::new(),
            values: HashMap::new(),
            nodes: HashMap::new(),
            runs: HashMap::new(),
            sites: Vec::new(),
            site_ids: HashMap::new(),
            failures: GatedFailures::new(),
            max_payload_chars: None,
            scratch: Vec::new(),
        })
    }

    /// Whether the session records (the kill switch's verdict).
    #[napi(getter)]
    pub fn enabled(&self) -> bool {
        self.session.is_enabled()
    }

    /// Whether a debugger is attached now.
    #[napi(getter)]
    pub fn attached(&self) -> bool {
        self.session.is_attached()
    }

    /// The resolved configuration (`Config::to_json`), as JSON.
    #[napi]
    pub fn config_json(&self) -> String {
        json::to_string(&self.session.config().to_json())
    }

    /// The session's waits (`ready`, `dispose`) as an object of their own: a promise
    /// returned by one of this object's methods would borrow it until it settles, so every
    /// `&mut` call meanwhile (the held step that `dispose` releases) would be refused.
    #[napi]
    pub fn waits(&self) -> NativeWaits {
        NativeWaits {
            session: self.session.clone(),
        }
    }

    /// Writes one rate-limited warning through the session's sink.
    #[napi]
    pub fn warn(&self, key: String, message: String) {
        self.session.warn(&key, &message);
    }

    /// Starts a run; returns its id.
    #[napi]
    pub fn start_run(&mut self, name: String, meta_json: Option<String>) -> Result<String> {
        let meta = match parse_opt(meta_json)? {
            Some(Value::Object(m)) => Some(m),
            _ => None,
        };
        let run = self.session.start_run(&name, meta.as_ref());
        let id = run.run_id.clone();
        self.runs.insert(id.clone(), run);
        Ok(id)
    }

    /// Finishes a run: `status` is `ok`, `error` (with the error's name and message) or
    /// `aborted`.
    #[napi]
    pub fn finish_run(
        &mut self,
        run_id: String,
        status: String,
        error_name: Option<String>,
        error_message: Option<String>,
        stack: Option<String>,
    ) {
        self.end_run_streams(&run_id, status == "aborted");
        if let Some(run) = self.runs.remove(&run_id) {
            let outcome = match status.as_str() {
                "aborted" => RunOutcome::Aborted,
                "error" => RunOutcome::Error(error_info(error_name, error_message, stack)),
                _ => RunOutcome::Ok,
            };
            self.session.finish_run(&run, outcome);
        }
    }

    /// Aborts a run (the app aborted its controller): its signal, and its gates still held
    /// (the core's rule).
    #[napi]
    pub fn abort_run(&self, run_id: String, reason: String) {
        if let Some(run) = self.runs.get(&run_id) {
            self.session.abort_run(run, &reason);
        }
    }

    /// Whether the run's signal was aborted (by the debugger, or by the app).
    #[napi]
    pub fn run_aborted(&self, run_id: String) -> bool {
        self.runs
            .get(&run_id)
            .map(|r| r.signal.is_aborted())
            .unwrap_or(false)
    }

    /// Emits one raw event; returns its `seq`, or `null` when nothing was emitted.
    #[napi]
    pub fn emit(
        &mut self,
        run_id: Option<String>,
        event_type: String,
        payload_json: JsString<'_>,
    ) -> Result<Option<f64>> {
        let payload = text::parse_js(&payload_json, &mut self.scratch)?;
        Ok(self
            .session
            .emit(run_id.as_deref(), &event_type, payload)
            .map(|s| s as f64))
    }

    /// Refs the dispatcher while a gate is held (a held step keeps the process alive), and
    /// unrefs it when none is (an idle session never does).
    fn set_ref(&self, env: &Env, on: bool) -> Result<()> {
        let raw = self.dispatch.raw();
        // SAFETY: called on the JS thread that created the threadsafe function, which is
        // alive for as long as this session (it is released only when the session drops).
        let status = unsafe {
            if on {
                napi::sys::napi_ref_threadsafe_function(env.raw(), raw)
            } else {
                napi::sys::napi_unref_threadsafe_function(env.raw(), raw)
            }
        };
        if status == napi::sys::Status::napi_ok {
            Ok(())
        } else {
            Err(Error::from_reason(
                "graphmind: could not (un)ref the gate dispatcher",
            ))
        }
    }

    fn hold(
        &mut self,
        env: &Env,
        pending: graphmind_core::gate::PendingGate,
        token: u32,
    ) -> Result<()> {
        self.pauses.insert(token, pending.pause_id().to_string());
        self.held += 1;
        if self.held == 1 {
            self.set_ref(env, true)?;
        }
        let decisions = self.decisions.clone();
        let dispatch = self.dispatch.clone();
        pending.on_decision(move |decision| {
            decisions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(token, decision);
            dispatch.call(token, ThreadsafeFunctionCallMode::NonBlocking);
        });
        Ok(())
    }

    fn take(&mut self, env: &Env, token: u32) -> Result<Option<GateDecision>> {
        let decision = self
            .decisions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&token);
        if decision.is_some() && self.pauses.remove(&token).is_some() {
            self.held = self.held.saturating_sub(1);
            if self.held == 0 {
                self.set_ref(env, false)?;
            }
        }
        Ok(decision)
    }

    fn token(&mut self) -> u32 {
        self.next_token = self.next_token.wrapping_add(1).max(1);
        self.next_token
    }

    /// Keeps a step just started (its `before` gate next) under a fresh handle.
    fn keep_step(&mut self, step: Step) -> u32 {
        let handle = self.token();
        let slot = StepSlot {
            step,
            point: PausePoint::Before,
            output: None,
        };
        self.steps.insert(handle, slot);
        handle
    }

    /// The decision of a released gate, as JSON `{action, output?, input?}`.
    #[napi]
    pub fn take_decision(&mut self, env: Env, token: u32) -> Result<Option<String>> {
        Ok(self.take(&env, token)?.map(|d| decision_json(&d)))
    }

    /// Releases a held gate whose waiter went away (its run's signal aborted): `continue`,
    /// announced like any release. The dispatcher still announces the token.
    #[napi]
    pub fn discard_gate(&self, token: u32) -> bool {
        match self.pauses.get(&token) {
            Some(pause_id) => self.session.discard_gate(pause_id),
            None => false,
        }
    }

    /// Starts one gated call (`core::step::Step`): `node.started` with the input. Returns
    /// the step's handle.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn step_start(
        &mut self,
        run_id: Option<String>,
        kind: String,
        name: String,
        node_id: Option<String>,
        parent_id: Option<String>,
        input_json: Option<JsString<'_>>,
        editable: bool,
    ) -> Result<u32> {
        let input = parse_js_opt(input_json.as_ref(), &mut self.scratch)?
            .map(|v| payload_cap::cap_value(v, self.max_payload_chars));
        let kind = kind_of(&kind);
        let node = match node_id {
            Some(id) => NodeRef::with_id(kind, &name, &id),
            None => NodeRef::new(kind, &name),
        };
        let step = Step::start(
            &self.session,
            run_id.as_deref(),
            node,
            parent_id.as_deref(),
            input,
            editable,
        );
        let handle = self.keep_step(step);
        Ok(handle)
    }

    /// Registers a wrapped function's node `kind:name` (same arguments, same number), or
    /// `null` past [`MAX_CALL_SITES`].
    #[napi]
    pub fn call_site(&mut self, kind: String, name: String, editable: bool) -> Option<u32> {
        let key = (kind, name, editable);
        if let Some(&id) = self.site_ids.get(&key) {
            return Some(id);
        }
        if self.sites.len() >= MAX_CALL_SITES {
            return None;
        }
        let id = self.sites.len() as u32;
        self.sites.push(CallSite {
            kind: kind_of(&key.0),
            name: key.1.clone(),
            editable,
            input_schema: None,
        });
        self.site_ids.insert(key, id);
        Some(id)
    }

    /// The JSON Schema an edited input of `site`'s calls must match (the tool's declared
    /// input schema; `null` clears it). Returns `null`, or why the schema cannot be used
    /// (then edits are not schema-checked).
    #[napi]
    pub fn site_input_schema(
        &mut self,
        site: u32,
        schema_json: Option<JsString<'_>>,
    ) -> Result<Option<String>> {
        let schema = parse_js_opt(schema_json.as_ref(), &mut self.scratch)?;
        let slot = self
            .sites
            .get_mut(site as usize)
            .ok_or_else(|| Error::from_reason("graphmind: unknown call site"))?;
        let (compiled, problem) = match schema
            .as_ref()
            .map(graphmind_core::edit_schema::InputSchema::compile)
        {
            None => (None, None),
            Some(Ok(s)) => (Some(s), None),
            Some(Err(e)) => (None, Some(e.to_string())),
        };
        slot.input_schema = compiled;
        Ok(problem)
    }

    /// `stepStart` and `stepBefore` of a call of `site`, in one crossing: returns
    /// `handle * 8 + code` (the step's handle and what to do first).
    #[napi]
    pub fn step_call(
        &mut self,
        env: Env,
        site: u32,
        run_id: Option<String>,
        input_json: Option<JsString<'_>>,
    ) -> Result<f64> {
        self.enter_site(&env, site, run_id, input_json, None)
    }

    /// `stepCall` of a tool execution the model asked for: `call` (the tool call the app's
    /// dispatch passed along, `tools[name](args, toolCall)`) gives the execution the
    /// provider's call id as its instance id (the core's `llm::tool_call_instance_id`);
    /// without one it gets a fresh id, as `stepCall` does.
    #[napi]
    pub fn step_call_for(
        &mut self,
        env: Env,
        site: u32,
        run_id: Option<String>,
        input_json: Option<JsString<'_>>,
        call: Object<'_>,
    ) -> Result<f64> {
        let ids = call_id_members(&env, &call);
        let instance =
            core_llm::tool_call_instance_id(&ids).map(|id| id.to_string_lossy().into_owned());
        self.enter_site(&env, site, run_id, input_json, instance)
    }

    fn enter_site(
        &mut self,
        env: &Env,
        site: u32,
        run_id: Option<String>,
        input_json: Option<JsString<'_>>,
        instance: Option<String>,
    ) -> Result<f64> {
        let input = host_text_opt(input_json.as_ref(), &mut self.scratch)?;
        let site = self
            .sites
            .get(site as usize)
            .ok_or_else(|| Error::from_reason("graphmind: unknown call site"))?;
        let mut node = NodeRef::new(site.kind, &site.name);
        if let Some(id) = instance {
            node.instance_id = id;
        }
        let mut step = Step::start_host(
            &self.session,
            run_id.as_deref(),
            node,
            None,
            input,
            site.editable,
        );
        step.set_input_schema(site.input_schema.clone());
        let gate = step.before();
        let handle = self.keep_step(step);
        match self.step_gate(env, handle, gate) {
            Ok(code) => Ok(handle as f64 * CODE_SPAN + code as f64),
            Err(e) => {
                // The step ends `aborted` as it drops; the caller runs the function unrecorded.
                self.steps.remove(&handle);
                Err(e)
            }
        }
    }

    fn next_code(&mut self, handle: u32, next: Next) -> i32 {
        let finished = !matches!(next, Next::Run { .. });
        let (code, value) = next_code::split(next);
        if let Some(v) = value {
            self.values.insert(handle, v);
        }
        if finished {
            self.steps.remove(&handle);
        }
        i32::from(code)
    }

    fn step_gate(&mut self, env: &Env, handle: u32, gate: Gate) -> Result<i32> {
        match gate {
            Gate::Continue => self.apply(handle, GateDecision::proceed()),
            Gate::Held(pending) => {
                self.hold(env, pending, handle)?;
                Ok(code::HELD)
            }
        }
    }

    fn apply(&mut self, handle: u32, decision: GateDecision) -> Result<i32> {
        let slot = self
            .steps
            .get_mut(&handle)
            .ok_or_else(|| Error::from_reason("graphmind: unknown step"))?;
        let next = match slot.point {
            PausePoint::Before => slot.step.on_before(decision),
            PausePoint::After => {
                let output = slot.output.take();
                slot.step.on_after_host(decision, output)
            }
            PausePoint::Error => slot.step.on_error(decision),
        };
        Ok(self.next_code(handle, next))
    }

    /// The gate before the call.
    #[napi]
    pub fn step_before(&mut self, env: Env, handle: u32) -> Result<i32> {
        let slot = self
            .steps
            .get_mut(&handle)
            .ok_or_else(|| Error::from_reason("graphmind: unknown step"))?;
        slot.point = PausePoint::Before;
        let gate = slot.step.before();
        self.step_gate(&env, handle, gate)
    }

    /// The call returned `output` (JSON): the gate after it.
    #[napi]
    pub fn step_after(
        &mut self,
        env: Env,
        handle: u32,
        output_json: Option<JsString<'_>>,
    ) -> Result<i32> {
        let output = host_text_opt(output_json.as_ref(), &mut self.scratch)?
            .map(|v| payload_cap::cap_host(v, self.max_payload_chars));
        let slot = self
            .steps
            .get_mut(&handle)
            .ok_or_else(|| Error::from_reason("graphmind: unknown step"))?;
        slot.point = PausePoint::After;
        let (gate, output) = slot.step.after_output(output);
        slot.output = output;
        self.step_gate(&env, handle, gate)
    }

    /// The call threw: `node.error` and the gate at `error`. `failure` names the thrown
    /// value (the same number at every level it climbs through; `0` or none: unnamed): only
    /// the first level to report a failure offers its gate (`Step::error_once`).
    #[napi]
    pub fn step_error(
        &mut self,
        env: Env,
        handle: u32,
        name: String,
        message: String,
        stack: Option<String>,
        failure: Option<f64>,
    ) -> Result<i32> {
        let slot = self
            .steps
            .get_mut(&handle)
            .ok_or_else(|| Error::from_reason("graphmind: unknown step"))?;
        slot.point = PausePoint::Error;
        let gate = slot.step.error_once(
            error_info(Some(name), Some(message), stack),
            failure_id(failure),
            &mut self.failures,
        );
        self.step_gate(&env, handle, gate)
    }

    /// Caps the node inputs (`stepStart`) and outputs (`stepAfter`) this session records at
    /// `max_chars` characters of JSON (`core::payload_cap`); `null` or a negative number: no
    /// cap. The app's values are never touched.
    #[napi]
    pub fn set_max_payload_chars(&mut self, max_chars: Option<f64>) {
        self.max_payload_chars = match max_chars {
            Some(n) if n >= 0.0 && n.is_finite() => Some(n as usize),
            _ => None,
        };
    }

    /// The decision of the step's held gate arrived (the dispatcher named `handle`): apply it.
    #[napi]
    pub fn step_resume(&mut self, env: Env, handle: u32) -> Result<i32> {
        let decision = self
            .take(&env, handle)?
            .unwrap_or_else(GateDecision::proceed);
        self.apply(handle, decision)
    }

    /// [`NativeSession::step_resume`] at a gate that can only watch (a framework's callback,
    /// LangGraph's): the decision as [`GateDecision::watched`] makes it, its warning given
    /// once through the session, so the code is `RUN`, `RETURN_RESULT`, `RERAISE` or
    /// `ABORT`. `integration` keys the warning, `label` names the gate, `hint` says what to
    /// use instead.
    #[napi]
    pub fn step_resume_watching(
        &mut self,
        env: Env,
        handle: u32,
        integration: String,
        label: String,
        hint: String,
    ) -> Result<i32> {
        let decision = self.take_watched(&env, handle, &integration, &label, &hint)?;
        self.apply(handle, decision)
    }

    /// The debugger's decision at the watching gate `handle` (continue when none came),
    /// reduced to what a watching gate carries out, its warning given.
    pub(crate) fn take_watched(
        &mut self,
        env: &Env,
        handle: u32,
        integration: &str,
        label: &str,
        hint: &str,
    ) -> Result<GateDecision> {
        let decision = self
            .take(env, handle)?
            .unwrap_or_else(GateDecision::proceed);
        let (decision, warning) = decision.watched(integration, label, hint);
        if let Some((key, message)) = warning {
            self.session.warn(&key, &message);
        }
        Ok(decision)
    }

    /// The call threw something never held (an abort): it ends `aborted` or `error`.
    #[napi]
    pub fn step_ungated(&mut self, handle: u32, aborted: bool) {
        if let Some(mut slot) = self.steps.remove(&handle) {
            slot.step.on_ungated_error(aborted);
        }
    }

    /// The edited input (`RUN_EDITED`) or the injected value (`RETURN_INJECTED`), as JSON.
    #[napi]
    pub fn step_value(&mut self, handle: u32) -> Option<String> {
        self.values.remove(&handle).map(|v| json::to_string(&v))
    }

    /// Starts an ungated node (a run's agent node): `node.started`. Returns its handle.
    #[napi]
    pub fn node_start(
        &mut self,
        run_id: Option<String>,
        kind: String,
        name: String,
        input_json: Option<JsString<'_>>,
    ) -> Result<u32> {
        let input = parse_js_opt(input_json.as_ref(), &mut self.scratch)?;
        let node = NodeRef::new(kind_of(&kind), &name);
        self.session
            .node_started(run_id.as_deref(), &node, None, input);
        let handle = self.token();
        self.nodes.insert(
            handle,
            NodeSlot {
                node,
                run_id,
                started: Instant::now(),
            },
        );
        Ok(handle)
    }

    /// Ends an ungated node: `status` `ok`, `error` (after `node.error`) or `aborted`.
    #[napi]
    pub fn node_finish(
        &mut self,
        handle: u32,
        status: String,
        error_name: Option<String>,
        error_message: Option<String>,
    ) {
        let Some(slot) = self.nodes.remove(&handle) else {
            return;
        };
        let status = RunStatus::parse(&status).unwrap_or(RunStatus::Ok);
        if status == RunStatus::Error {
            self.session.node_error(
                slot.run_id.as_deref(),
                &slot.node,
                error_info(error_name, error_message, None),
            );
        }
        let elapsed = normalize_duration(slot.started.elapsed().as_secs_f64() * 1000.0);
        let mut finished = NodeFinished::new(slot.node.node_id.as_str(), elapsed, status);
        finished.instance_id = Some(slot.node.instance_id.as_str().into());
        self.session
            .emit(slot.run_id.as_deref(), "node.finished", finished.to_value());
    }

    /// Starts replaying a recorded run from now on (`spec_json`: the `replay` option's
    /// value as JSON); the next run started is answered from it. The report, as JSON.
    #[napi]
    pub fn replay_begin(&self, spec_json: String) -> Result<String> {
        let spec = parse_json(&spec_json)?;
        let report = graphmind_core::replay::begin_value(&self.session, &spec);
        Ok(json::to_string(&report.to_value()))
    }

    /// Stops replaying; the last report as JSON (`null` when not replaying).
    #[napi]
    pub fn replay_end(&self) -> Option<String> {
        graphmind_core::replay::end(&self.session).map(|r| json::to_string(&r.to_value()))
    }

    /// What the replay has done so far, as JSON (`null` when not replaying).
    #[napi]
    pub fn replay_report(&self) -> Option<String> {
        graphmind_core::replay::report(&self.session).map(|r| json::to_string(&r.to_value()))
    }

    /// A diagnostics snapshot.
    #[napi]
    pub fn stats(&self) -> NativeStats {
        let s = self.session.stats();
        NativeStats {
            enabled: s.enabled,
            attached: s.attached,
            buffered: s.buffered as f64,
            dropped: s.dropped as f64,
            lost: s.lost as f64,
            pending_gaps: s.pending_gaps as f64,
            held_gates: s.held_gates as f64,
            seq: s.seq as f64,
        }
    }

    /// Waits up to `timeout_ms` until every event so far is handed to the socket (blocking;
    /// for tests and benchmarks).
    #[napi]
    pub fn flush_sync(&self, timeout_ms: f64) -> bool {
        self.session
            .flush(Duration::from_millis(timeout_ms.max(0.0) as u64))
    }

    /// The core's exit deadline in milliseconds: connect + handshake timeouts, then the ring's
    /// delivery.
    #[napi]
    pub fn exit_deadline_ms(&self) -> f64 {
        self.session.exit_deadline().as_millis() as f64
    }

    /// `dispose` on this thread, blocking up to `deadline_ms`: for the process 'exit' hook,
    /// which may not wait for the event loop.
    #[napi]
    pub fn dispose_sync(&self, deadline_ms: f64) {
        self.session
            .dispose(Duration::from_millis(deadline_ms.max(0.0) as u64));
    }
}

/// A session's waits, off the JS thread. napi-rs keeps the object a method was called on
/// borrowed until the promise it returned settles; these live on an object of their own
/// so that the session stays free for the calls a release wakes up.
#[napi]
pub struct NativeWaits {
    session: Session,
}

#[napi]
impl NativeWaits {
    /// Connects now and resolves whether a debugger attached within `timeout_ms`.
    #[napi]
    pub fn ready(&self, timeout_ms: f64) -> AsyncTask<ReadyTask> {
        let timeout = Duration::from_millis(timeout_ms.max(0.0) as u64);
        AsyncTask::new(ReadyTask {
            session: self.session.clone(),
            timeout,
        })
    }

    /// Releases every held gate, flushes and closes, within `deadline_ms`.
    #[napi]
    pub fn dispose(&self, deadline_ms: f64) -> AsyncTask<DisposeTask> {
        let deadline = Duration::from_millis(deadline_ms.max(0.0) as u64);
        AsyncTask::new(DisposeTask {
            session: self.session.clone(),
            deadline,
        })
    }
}

/// The members of a tool call object that may carry its id ([`core_llm::TOOL_CALL_ID_KEYS`]),
/// the string ones, as a value for the core to read. A getter that throws is skipped (its
/// exception cleared): the call still runs, under a fresh instance id.
fn call_id_members(env: &Env, call: &Object<'_>) -> Value {
    let mut members = Map::new();
    for key in core_llm::TOOL_CALL_ID_KEYS {
        match call.get::<Unknown>(key) {
            Ok(Some(v)) if matches!(v.get_type(), Ok(ValueType::String)) => {
                // SAFETY: the value's type was just checked to be a string.
                if let Ok(text) = unsafe { v.cast::<String>() } {
                    members.insert(key, Value::from(text.as_str()));
                }
            }
            Ok(_) => {}
            Err(_) => {
                let mut pending = std::ptr::null_mut();
                // SAFETY: on the JS thread, inside this call's scope.
                unsafe { napi::sys::napi_get_and_clear_last_exception(env.raw(), &mut pending) };
            }
        }
    }
    Value::Object(members)
}

fn error_info(name: Option<String>, message: Option<String>, stack: Option<String>) -> ErrorInfo {
    let mut info = ErrorInfo::new(
        name.unwrap_or_else(|| "Error".into()),
        message.unwrap_or_default(),
    );
    info.stack = stack.map(Into::into);
    info
}
