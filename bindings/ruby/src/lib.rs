//! `graphmind_native`: the Ruby skin of `graphmind-core`.
//!
//! Translation only: Ruby values to core values and back, the core's session, runs and
//! gated steps as Ruby objects, and waits that release the GVL. Every rule (what an action
//! means, when to gate, redaction, defaults, environment parsing) is the core's.

mod convert;
mod llm;
mod pure;
mod wait;

use convert::{from_value, to_rust_string, to_value, write_packed};
use graphmind_core::config::{resolve_json, EnvSnapshot, SdkFlavor};
use graphmind_core::event::{ErrorInfo, NodeKind};
use graphmind_core::host_value::HostValue;
use graphmind_core::json::packed::PackedWriter;
use graphmind_core::json::{JsStr, Value as J};
use graphmind_core::session::{Gate, NodeRef, Run, RunOutcome, Session};
use graphmind_core::step::{Next, Step};
use graphmind_core::surface::{next_code, pure as core_pure};
use graphmind_core::{json, shrink};
use magnus::value::Lazy;
use magnus::{function, method, prelude::*, Error, IntoValue, RArray, RHash, Ruby, Symbol, Value};
use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The extension's Rust allocations (the core's values and events) use mimalloc: a
/// wrapped call's values are built on the Ruby thread and freed on the core's worker
/// thread, a pattern glibc's malloc serves slowly (arena consolidation on every large
/// request). Ruby's own objects keep Ruby's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Warnings waiting for the Ruby logger (the sink runs on the core's threads, which may not
/// call Ruby).
type WarnQueue = Arc<Mutex<Vec<String>>>;

/// Upper bound on queued warnings not yet taken by Ruby.
pub const MAX_QUEUED_WARNINGS: usize = 1_000;

fn secs(s: f64) -> Duration {
    if s.is_finite() && s > 0.0 {
        Duration::from_secs_f64(s.min(1.0e9))
    } else {
        Duration::ZERO
    }
}

fn env_snapshot(ruby: &Ruby, env: Value) -> EnvSnapshot {
    if env.is_nil() {
        EnvSnapshot::from_process()
    } else {
        EnvSnapshot::from_json(&to_value(ruby, env))
    }
}

/// `Graphmind::Native::Session`: one core session.
#[magnus::wrap(class = "Graphmind::Native::Session", free_immediately, size)]
struct RbSession {
    session: Session,
    warnings: Option<WarnQueue>,
}

impl RbSession {
    /// `new(options_camel_case_hash, env_hash_or_nil, queue_warnings)`.
    fn new(ruby: &Ruby, options: Value, env: Value, queue_warnings: bool) -> Self {
        let config = resolve_json(
            &to_value(ruby, options),
            &env_snapshot(ruby, env),
            SdkFlavor::Ruby,
        );
        let (sink, warnings): (graphmind_core::warn::WarnSink, Option<WarnQueue>) =
            if queue_warnings {
                let queue: WarnQueue = Arc::new(Mutex::new(Vec::new()));
                let q = queue.clone();
                (
                    Arc::new(move |line: &str| {
                        if let Ok(mut q) = q.lock() {
                            if q.len() < MAX_QUEUED_WARNINGS {
                                q.push(line.to_string());
                            }
                        }
                    }),
                    Some(queue),
                )
            } else {
                (Arc::new(|line: &str| eprintln!("{line}")), None)
            };
        let session = Session::new(config, sink);
        // Fork safety lives in the core's pthread_atfork hooks, inside fork() itself: a
        // Process._fork hook would hold the session's locks across Ruby code, where a thread
        // holding the GVL may wait for them.
        graphmind_core::fork::register(&session);
        RbSession { session, warnings }
    }

    fn take_warnings(&self) -> Vec<String> {
        match &self.warnings {
            Some(q) => q
                .lock()
                .map(|mut q| std::mem::take(&mut *q))
                .unwrap_or_default(),
            None => Vec::new(),
        }
    }

    fn config(ruby: &Ruby, rb_self: &Self) -> Result<Value, Error> {
        from_value(ruby, &rb_self.session.config().to_json())
    }

    fn enabled(&self) -> bool {
        self.session.is_enabled()
    }

    fn attached(&self) -> bool {
        self.session.is_attached()
    }

    fn ready(&self, timeout: f64) -> bool {
        let session = self.session.clone();
        wait::ready_without_gvl(&session, secs(timeout))
    }

    fn start_run(ruby: &Ruby, rb_self: &Self, name: Value, meta: Value) -> RbRun {
        let name = lossy(name);
        let meta = match to_value(ruby, meta) {
            J::Object(m) => Some(m),
            _ => None,
        };
        RbRun {
            run: rb_self.session.start_run(&name, meta.as_ref()),
            session: rb_self.session.clone(),
        }
    }

    fn implicit_run(&self) -> RbRun {
        RbRun {
            run: self.session.implicit_run(),
            session: self.session.clone(),
        }
    }

    /// `finish_run(run, status, error)`: status `:ok`, `:error` (with the exception) or
    /// `:aborted`.
    fn finish_run(&self, run: &RbRun, status: Symbol, error: Value) {
        let outcome = match status.name().as_deref() {
            Ok("aborted") => RunOutcome::Aborted,
            Ok("error") => RunOutcome::Error(error_info(error)),
            _ => RunOutcome::Ok,
        };
        self.session.finish_run(&run.run, outcome);
    }

    /// The run's root node (`agent:<name>`) started.
    fn agent_node_started(&self, run: &RbRun) {
        self.session.agent_node_started(&run.run);
    }

    /// `agent_node_finished(run, duration_ms, status, error)`: the run's root node ended
    /// (`:ok`, `:error` with the exception, `:aborted`).
    fn agent_node_finished(&self, run: &RbRun, duration_ms: f64, status: Symbol, error: Value) {
        let outcome = match status.name().as_deref() {
            Ok("aborted") => RunOutcome::Aborted,
            Ok("error") => RunOutcome::Error(error_info(error)),
            _ => RunOutcome::Ok,
        };
        self.session
            .agent_node_finished(&run.run, duration_ms, &outcome);
    }

    fn emit(
        ruby: &Ruby,
        rb_self: &Self,
        run_id: Option<Value>,
        event_type: Value,
        payload: Value,
    ) -> Option<u64> {
        let run_id = run_id.map(lossy);
        rb_self.session.emit(
            run_id.as_deref(),
            &lossy(event_type),
            to_value(ruby, payload),
        )
    }

    /// `step(run_id, kind, name, node_id, parent_id, input, editable)`: `node.started`, and
    /// the gated call's state machine.
    #[allow(clippy::too_many_arguments)]
    fn step(
        ruby: &Ruby,
        rb_self: &Self,
        run_id: Option<Value>,
        kind: Value,
        name: Value,
        node_id: Option<Value>,
        parent_id: Option<Value>,
        input: Value,
        editable: bool,
    ) -> RbStep {
        let (run_id, name) = (run_id.map(lossy), lossy(name));
        let (node_id, parent_id) = (node_id.map(lossy), parent_id.map(lossy));
        let kind = NodeKind::parse(&lossy(kind)).unwrap_or(NodeKind::Custom);
        let node = match node_id {
            Some(id) => NodeRef::with_id(kind, &name, &id),
            None => NodeRef::new(kind, &name),
        };
        let input = if input.is_nil() {
            None
        } else {
            Some(host_value(ruby, &rb_self.session, input))
        };
        let step = Step::start_host(
            &rb_self.session,
            run_id.as_deref(),
            node,
            parent_id.as_deref(),
            input,
            editable,
        );
        RbStep {
            session: rb_self.session.clone(),
            step: RefCell::new(Some(step)),
        }
    }

    /// `replay_begin(spec)`: replays a recorded run from now on (`spec`: the `replay`
    /// option's value); the next run started is answered from it. Returns the report.
    fn replay_begin(ruby: &Ruby, rb_self: &Self, spec: Value) -> Result<Value, Error> {
        let report = graphmind_core::replay::begin_value(&rb_self.session, &to_value(ruby, spec));
        from_value(ruby, &report.to_value())
    }

    /// `replay_end`: stops replaying; the last report (`nil` when not replaying).
    fn replay_end(ruby: &Ruby, rb_self: &Self) -> Result<Value, Error> {
        let report = graphmind_core::replay::end(&rb_self.session);
        report.map_or_else(
            || Ok(ruby.qnil().as_value()),
            |r| from_value(ruby, &r.to_value()),
        )
    }

    /// `replay_report`: what the replay has done so far (`nil` when not replaying).
    fn replay_report(ruby: &Ruby, rb_self: &Self) -> Result<Value, Error> {
        let report = graphmind_core::replay::report(&rb_self.session);
        report.map_or_else(
            || Ok(ruby.qnil().as_value()),
            |r| from_value(ruby, &r.to_value()),
        )
    }

    fn stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let s = rb_self.session.stats();
        let h = ruby.hash_new();
        h.aset(ruby.to_symbol("enabled"), s.enabled)?;
        h.aset(ruby.to_symbol("attached"), s.attached)?;
        h.aset(ruby.to_symbol("buffered"), s.buffered)?;
        h.aset(ruby.to_symbol("dropped"), s.dropped)?;
        h.aset(ruby.to_symbol("lost"), s.lost)?;
        h.aset(ruby.to_symbol("pending_gaps"), s.pending_gaps)?;
        h.aset(ruby.to_symbol("held_gates"), s.held_gates)?;
        h.aset(ruby.to_symbol("seq"), s.seq)?;
        Ok(h)
    }

    fn flush(&self, timeout: f64) -> bool {
        let session = self.session.clone();
        wait::without_gvl(move || session.flush(secs(timeout)))
    }

    /// The core's exit bound in seconds: connect + handshake timeouts, then the ring's delivery.
    fn exit_deadline(&self) -> f64 {
        self.session.exit_deadline().as_secs_f64()
    }

    fn dispose(&self, deadline: f64) {
        let session = self.session.clone();
        wait::without_gvl(move || session.dispose(secs(deadline)));
    }
}

/// A name or id from Ruby (a String of any encoding, a Symbol, anything with `to_s`) as
/// text: bytes that are not UTF-8 are replaced, never raised about (the app's call goes on,
/// its name recorded lossily).
fn lossy(v: Value) -> String {
    to_rust_string(v)
}

/// An exception as the wire's error info: class name, message, backtrace.
fn error_info(error: Value) -> ErrorInfo {
    if error.is_nil() {
        return ErrorInfo::new("Error", "");
    }
    let name = convert::class_name(error);
    let message = error
        .funcall::<_, _, Value>("message", ())
        .map(to_rust_string)
        .unwrap_or_default();
    let mut info = ErrorInfo::new(name.as_str(), message.as_str());
    if let Ok(Some(trace)) = error.funcall::<_, _, Option<Vec<String>>>("backtrace", ()) {
        if !trace.is_empty() {
            info.stack = Some(JsStr::from(trace.join("\n").as_str()));
        }
    }
    info
}

/// `Graphmind::Native::Run`: a run's id, name and abort signal.
#[magnus::wrap(class = "Graphmind::Native::Run", free_immediately, size)]
struct RbRun {
    run: Run,
    session: Session,
}

impl RbRun {
    fn run_id(&self) -> String {
        self.run.run_id.clone()
    }
    fn name(&self) -> String {
        self.run.name.clone()
    }
    fn aborted(&self) -> bool {
        self.run.signal.is_aborted()
    }
    fn reason(&self) -> Option<String> {
        self.run.signal.reason()
    }
    /// Aborts the run: its signal, and its gates still held (the core's rule).
    fn abort(&self, reason: Value) {
        let reason = lossy(reason);
        let session = self.session.clone();
        let run = self.run.clone();
        wait::without_gvl(move || {
            session.abort_run(&run, &reason);
        });
    }
}

/// `Graphmind::Native::Step`: one gated call. Each gate method waits (GVL released) and
/// returns what to do next: `[:run]`, `[:run, edited_input]`, `[:result]`,
/// `[:inject, value]`, `[:reraise]`, `[:abort]`; or it raises what a Ruby interrupt
/// (Thread#raise, Timeout, Ctrl-C) delivered during the wait, the gate released as
/// `continue` and the node ended as `error` ([`wait::await_gate`]).
#[magnus::wrap(class = "Graphmind::Native::Step", free_immediately, size)]
struct RbStep {
    session: Session,
    step: RefCell<Option<Step>>,
}

enum Point {
    Before,
    After(Option<HostValue>),
    Error(ErrorInfo),
}

impl RbStep {
    fn drive(&self, ruby: &Ruby, point: Point) -> Result<RArray, Error> {
        // The step is taken out while the gate waits and put back before any Ruby value is
        // built, so no RefCell borrow is ever held across a call into Ruby.
        let Some(mut step) = self
            .step
            .try_borrow_mut()
            .ok()
            .and_then(|mut slot| slot.take())
        else {
            return next_to_ruby(ruby, &Next::ReturnResult);
        };
        let next = self.decide(&mut step, point);
        if matches!(next, Ok(Next::Run { .. })) {
            *self.step.borrow_mut() = Some(step);
        } else {
            // The call has ended (its node is finished): the step, and the copy of the input
            // it keeps for edits, is freed now rather than when Ruby's GC sweeps this object.
            drop(step);
        }
        next_to_ruby(ruby, &next?)
    }

    /// Gates at `point` and applies the decision; `Err` when a Ruby interrupt ended the wait
    /// (the gate released as `continue`, the call ended as `error`).
    fn decide(&self, step: &mut Step, point: Point) -> Result<Next, Error> {
        let (gate, output, at_error) = match point {
            Point::Before => (step.before(), None, false),
            Point::After(output) => {
                let (gate, output) = step.after_output(output);
                (gate, Some(output), false)
            }
            Point::Error(info) => (step.error(info), None, true),
        };
        let decision = match gate {
            Gate::Continue => graphmind_core::gate::GateDecision::proceed(),
            Gate::Held(pending) => match wait::await_gate(&self.session, &pending) {
                Ok(d) => d,
                Err(interrupt) => {
                    step.on_ungated_error(false);
                    return Err(interrupt);
                }
            },
        };
        Ok(match output {
            None if at_error => step.on_error(decision),
            None => step.on_before(decision),
            Some(out) => step.on_after_host(decision, out),
        })
    }

    fn before(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        rb_self.drive(ruby, Point::Before)
    }

    fn after(ruby: &Ruby, rb_self: &Self, output: Value) -> Result<RArray, Error> {
        let out = if output.is_nil() {
            None
        } else {
            Some(host_value(ruby, &rb_self.session, output))
        };
        rb_self.drive(ruby, Point::After(out))
    }

    fn error(ruby: &Ruby, rb_self: &Self, error: Value) -> Result<RArray, Error> {
        rb_self.drive(ruby, Point::Error(error_info(error)))
    }

    fn ungated(&self, aborted: bool) {
        if let Ok(mut slot) = self.step.try_borrow_mut() {
            if let Some(step) = slot.as_mut() {
                step.on_ungated_error(aborted);
            }
        }
    }
}

fn ary(ruby: &Ruby, items: &[Value]) -> RArray {
    let a = ruby.ary_new_capa(items.len());
    for item in items {
        let _ = a.push(*item);
    }
    a
}

/// A frozen one-element Array `[:sym]`, built once: the decisions without a value are
/// returned to Ruby without allocating.
fn frozen_tag(ruby: &Ruby, name: &str) -> RArray {
    let a = ary(ruby, &[ruby.to_symbol(name).as_value()]);
    a.freeze();
    a
}

/// The tag of a code without a value (the core's [`next_code::name`]), built once.
fn next_tag(ruby: &Ruby, code: u8) -> RArray {
    frozen_tag(ruby, next_code::name(code).unwrap_or_default())
}

static NEXT_RUN: Lazy<RArray> = Lazy::new(|ruby| next_tag(ruby, next_code::RUN));
static NEXT_RESULT: Lazy<RArray> = Lazy::new(|ruby| next_tag(ruby, next_code::RETURN_RESULT));
static NEXT_RERAISE: Lazy<RArray> = Lazy::new(|ruby| next_tag(ruby, next_code::RERAISE));
static NEXT_ABORT: Lazy<RArray> = Lazy::new(|ruby| next_tag(ruby, next_code::ABORT));

/// `sym` tagging `code`, the core's name for it.
fn tag(ruby: &Ruby, code: u8) -> Value {
    ruby.to_symbol(next_code::name(code).unwrap_or_default())
        .as_value()
}

fn next_to_ruby(ruby: &Ruby, next: &Next) -> Result<RArray, Error> {
    Ok(match next {
        Next::Run { input: None } => ruby.get_inner(&NEXT_RUN),
        Next::Run { input: Some(v) } => ary(
            ruby,
            &[tag(ruby, next_code::RUN_EDITED), from_value(ruby, v)?],
        ),
        Next::ReturnResult => ruby.get_inner(&NEXT_RESULT),
        Next::ReturnInjected(v) => ary(
            ruby,
            &[tag(ruby, next_code::RETURN_INJECTED), from_value(ruby, v)?],
        ),
        Next::Reraise => ruby.get_inner(&NEXT_RERAISE),
        Next::Abort => ruby.get_inner(&NEXT_ABORT),
        // A replayed call's recorded error: `[:raise, name, message, stack]`, raised by the
        // Ruby side as a Graphmind::ReplayedError.
        Next::Raise(e) => ary(
            ruby,
            &[
                tag(ruby, next_code::RAISE),
                ruby.str_new(&e.name.to_string_lossy()).as_value(),
                ruby.str_new(&e.message.to_string_lossy()).as_value(),
                e.stack.as_ref().map_or_else(
                    || ruby.qnil().as_value(),
                    |s| ruby.str_new(&s.to_string_lossy()).as_value(),
                ),
            ],
        ),
        // A replayed streamed model call: `[:stream, [chunk, ...]]`, the provider's chunks
        // rebuilt, fed to the app's stream consumer by the Ruby side.
        Next::Stream(chunks) => {
            let list = ruby.ary_new_capa(chunks.len());
            for chunk in chunks {
                list.push(from_value(ruby, chunk)?)?;
            }
            ary(ruby, &[tag(ruby, next_code::STREAM), list.as_value()])
        }
    })
}

/// `canonical_json(value, ignore_keys)`: the loop guard's canonical form (`nil` keys: the
/// default ignore list).
fn canonical_json(ruby: &Ruby, v: Value, ignore: Option<Vec<String>>) -> String {
    core_pure::canonical_json(&to_value(ruby, v), ignore.as_deref())
}

fn call_input(ruby: &Ruby, input: Value, absent: bool) -> Option<J> {
    if absent {
        None
    } else {
        Some(to_value(ruby, input))
    }
}

/// `canonical_call(node_id, input, absent, ignore_keys)`: the text a fingerprint hashes.
fn canonical_call(
    ruby: &Ruby,
    node_id: Value,
    input: Value,
    absent: bool,
    ignore: Option<Vec<String>>,
) -> String {
    let input = call_input(ruby, input, absent);
    core_pure::canonical_call(&to_js(node_id), input.as_ref(), ignore.as_deref())
}

/// `fingerprint(node_id, input, absent, ignore_keys)`.
fn fingerprint_of(
    ruby: &Ruby,
    node_id: Value,
    input: Value,
    absent: bool,
    ignore: Option<Vec<String>>,
) -> String {
    let input = call_input(ruby, input, absent);
    core_pure::fingerprint(&to_js(node_id), input.as_ref(), ignore.as_deref())
}

fn to_js(v: Value) -> JsStr {
    match magnus::RString::from_value(v) {
        Some(s) => convert::rstring_to_js(s),
        None => JsStr::from(to_rust_string(v).as_str()),
    }
}

/// `serialize_payload(value, max_bytes, type)` -> `[json, shrunk]`.
fn serialize_payload(
    ruby: &Ruby,
    v: Value,
    max: usize,
    event_type: Option<String>,
) -> Result<RArray, Error> {
    let s = shrink::serialize_payload(&to_value(ruby, v), max, event_type.as_deref());
    Ok(ary(
        ruby,
        &[
            ruby.str_new(&s.json).as_value(),
            s.truncated.into_value_with(ruby),
        ],
    ))
}

/// `resolve_config(options_camel_case, env_hash, flavor)` -> the resolved configuration (a
/// Hash); `flavor` defaults to `ruby`.
fn resolve_config(
    ruby: &Ruby,
    options: Value,
    env: Value,
    flavor: Option<String>,
) -> Result<Value, Error> {
    let flavor = match flavor {
        None => SdkFlavor::Ruby,
        Some(name) => SdkFlavor::parse(&name).ok_or_else(|| {
            Error::new(
                ruby.exception_arg_error(),
                format!("unknown SDK flavor {name:?}"),
            )
        })?,
    };
    let config = resolve_json(&to_value(ruby, options), &env_snapshot(ruby, env), flavor);
    from_value(ruby, &config.to_json())
}

/// Parses JSON text with the core's parser (lone surrogates and key order kept).
fn parse_json(ruby: &Ruby, text: magnus::RString) -> Result<Value, Error> {
    // SAFETY: copied before Ruby runs again.
    let bytes = unsafe { text.as_slice() }.to_vec();
    match json::parse(&bytes) {
        Ok(v) => from_value(ruby, &v),
        Err(e) => Err(Error::new(ruby.exception_arg_error(), e.to_string())),
    }
}

/// `redact_events(switches, events)`: runs a sequence of events (`{type, runId, nodeKind,
/// payload}`) through one core redactor with the given hide switches (`hideInputs`, ...);
/// returns `[kept, payload]` per event. The pure function the redaction vectors check.
fn redact_events(ruby: &Ruby, switches: Value, events: Value) -> Result<RArray, Error> {
    use graphmind_core::redact::{EventContext, HideSwitches, Redactor};
    let switches = to_value(ruby, switches);
    let on = |k: &str| switches.get(k).and_then(J::as_bool).unwrap_or(false);
    let mut redactor = Redactor::new(HideSwitches {
        inputs: on("hideInputs"),
        outputs: on("hideOutputs"),
        tool_args: on("hideToolArgs"),
        tool_results: on("hideToolResults"),
    });
    let out = ruby.ary_new();
    let events = to_value(ruby, events);
    for event in events.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let ty = event.get("type").and_then(J::as_str).unwrap_or("");
        let ctx = EventContext {
            run_id: event.get("runId").and_then(J::as_str).unwrap_or(""),
            node_kind: event.get("nodeKind").and_then(J::as_str),
        };
        let mut payload = event.get("payload").cloned().unwrap_or(J::Null);
        let kept = redactor.redact_in(&ctx, ty, &mut payload).keep();
        out.push(ary(
            ruby,
            &[kept.into_value_with(ruby), from_value(ruby, &payload)?],
        ))?;
    }
    Ok(out)
}

/// Writes a value as `JSON.stringify` would.
fn to_json(ruby: &Ruby, v: Value) -> String {
    json::to_string(&to_value(ruby, v))
}

/// A node's input or output as the core takes it: plain data packed while detached,
/// converted otherwise ([`HostValue::packed_or_built`]).
fn host_value(ruby: &Ruby, session: &Session, v: Value) -> HostValue {
    HostValue::packed_or_built(
        session.is_attached(),
        |buf| write_packed(v, buf),
        || to_value(ruby, v),
    )
}

/// What a detached step records for `v` when it crosses packed (decoded by the core and
/// written as the recording would be); `nil` when it is converted instead. For the tests:
/// it must equal [`to_json`] wherever it is not `nil`.
fn detached_json(ruby: &Ruby, v: Value) -> Result<Option<String>, Error> {
    let mut buf = PackedWriter::new();
    if !write_packed(v, &mut buf) {
        return Ok(None);
    }
    match json::packed::decode(buf.as_bytes()) {
        Ok(value) => Ok(Some(json::to_string(&value))),
        Err(e) => Err(Error::new(
            ruby.exception_runtime_error(),
            format!("the packed path wrote an unreadable value: {e}"),
        )),
    }
}

#[magnus::init(name = "graphmind_native")]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let graphmind = ruby.define_module("Graphmind")?;
    let native = graphmind.define_module("Native")?;
    native.define_singleton_method("canonical_json", function!(canonical_json, 2))?;
    native.define_singleton_method("fingerprint", function!(fingerprint_of, 4))?;
    native.define_singleton_method("canonical_call", function!(canonical_call, 4))?;
    native.define_singleton_method("serialize_payload", function!(serialize_payload, 3))?;
    native.define_singleton_method("resolve_config", function!(resolve_config, 3))?;
    native.define_singleton_method("parse_json", function!(parse_json, 1))?;
    native.define_singleton_method("to_json", function!(to_json, 1))?;
    native.define_singleton_method("detached_json", function!(detached_json, 1))?;
    native.define_singleton_method("redact_events", function!(redact_events, 2))?;
    pure::register(ruby, native)?;
    llm::init(ruby, &native)?;
    native.const_set("CORE_VERSION", graphmind_core::config::CLIENT_VERSION)?;
    native.const_set(
        "MAX_VALUE_DEPTH",
        graphmind_core::shrink::depth::MAX_VALUE_DEPTH,
    )?;

    let session = native.define_class("Session", ruby.class_object())?;
    session.define_singleton_method("new", function!(RbSession::new, 3))?;
    session.define_method("config", method!(RbSession::config, 0))?;
    session.define_method("take_warnings", method!(RbSession::take_warnings, 0))?;
    session.define_method("enabled?", method!(RbSession::enabled, 0))?;
    session.define_method("attached?", method!(RbSession::attached, 0))?;
    session.define_method("ready", method!(RbSession::ready, 1))?;
    session.define_method("start_run", method!(RbSession::start_run, 2))?;
    session.define_method("implicit_run", method!(RbSession::implicit_run, 0))?;
    session.define_method("finish_run", method!(RbSession::finish_run, 3))?;
    session.define_method(
        "agent_node_started",
        method!(RbSession::agent_node_started, 1),
    )?;
    session.define_method(
        "agent_node_finished",
        method!(RbSession::agent_node_finished, 4),
    )?;
    session.define_method("emit", method!(RbSession::emit, 3))?;
    session.define_method("step", method!(RbSession::step, 7))?;
    session.define_method("stats", method!(RbSession::stats, 0))?;
    session.define_method("replay_begin", method!(RbSession::replay_begin, 1))?;
    session.define_method("replay_end", method!(RbSession::replay_end, 0))?;
    session.define_method("replay_report", method!(RbSession::replay_report, 0))?;
    session.define_method("flush", method!(RbSession::flush, 1))?;
    session.define_method("dispose", method!(RbSession::dispose, 1))?;
    session.define_method("exit_deadline", method!(RbSession::exit_deadline, 0))?;

    let run = native.define_class("Run", ruby.class_object())?;
    run.define_method("run_id", method!(RbRun::run_id, 0))?;
    run.define_method("name", method!(RbRun::name, 0))?;
    run.define_method("aborted?", method!(RbRun::aborted, 0))?;
    run.define_method("reason", method!(RbRun::reason, 0))?;
    run.define_method("abort!", method!(RbRun::abort, 1))?;

    let step = native.define_class("Step", ruby.class_object())?;
    step.define_method("before", method!(RbStep::before, 0))?;
    step.define_method("after", method!(RbStep::after, 1))?;
    step.define_method("error", method!(RbStep::error, 1))?;
    step.define_method("ungated", method!(RbStep::ungated, 1))?;
    force_lazy_values(ruby);
    Ok(())
}

/// Builds every lazily made Ruby value now, while `require` runs on one thread. magnus
/// makes each wrapped class's handle and each [`Lazy`] on first use inside a
/// `OnceLock::get_or_init` whose closure calls Ruby (`const_get`), where Ruby may switch
/// threads: a second thread making its first call then blocks on the `OnceLock` while it
/// holds the GVL, and the first never gets the GVL back (the first-requests deadlock of a
/// threaded server).
fn force_lazy_values(ruby: &Ruby) {
    use magnus::TypedData;
    let _ = RbSession::class(ruby);
    let _ = RbRun::class(ruby);
    let _ = RbStep::class(ruby);
    pure::force_lazy_values(ruby);
    for lazy in [&NEXT_RUN, &NEXT_RESULT, &NEXT_RERAISE, &NEXT_ABORT] {
        Lazy::force(lazy, ruby);
    }
}
