//! The core's LLM step from Ruby: `Graphmind::Native.llm_step(session, run_id, run_name,
//! api, request, sdk)` returns a `Graphmind::Native::LlmStep`, whose gate methods answer
//! like `Step`'s (`[:run]`, `[:result]`, `[:inject, reply]`, `[:reraise]`, `[:abort]`, or
//! what a Ruby interrupt delivered during a hold, raised), the reply already in the provider's shape. The Ruby integrations only
//! read their clients' objects into Hashes and back.

use graphmind_core::gate::GateDecision;
use graphmind_core::llm_step::{LlmRun, LlmStep};
use graphmind_core::session::{Gate, Session};
use graphmind_core::step::Next;
use graphmind_core::surface::pure::{self, PureError};
use magnus::{function, method, prelude::*, Error, RArray, RModule, Ruby, Value};
use std::cell::RefCell;

use crate::convert::{from_value, to_value};
use crate::{error_info, next_to_ruby, wait, RbSession};

/// `Graphmind::Native::LlmStep`: one model call.
#[magnus::wrap(class = "Graphmind::Native::LlmStep", free_immediately, size)]
struct RbLlmStep {
    session: Session,
    step: RefCell<LlmStep>,
}

enum Point {
    Before,
    After(graphmind_core::json::Value),
    Error(graphmind_core::event::ErrorInfo),
}

impl RbLlmStep {
    fn drive(&self, ruby: &Ruby, point: Point) -> Result<RArray, Error> {
        let gate = {
            let Ok(mut step) = self.step.try_borrow_mut() else {
                return next_to_ruby(ruby, &Next::ReturnResult);
            };
            match &point {
                Point::Before => step.before(),
                Point::After(response) => step.after(response),
                Point::Error(info) => step.error(info.clone()),
            }
        };
        let decision = match gate {
            Gate::Continue => GateDecision::proceed(),
            Gate::Held(pending) => match wait::await_gate(&self.session, &pending) {
                Ok(d) => d,
                Err(interrupt) => {
                    if let Ok(mut step) = self.step.try_borrow_mut() {
                        step.on_ungated_error(false);
                    }
                    return Err(interrupt);
                }
            },
        };
        let next = {
            let mut step = self.step.borrow_mut();
            match &point {
                Point::Before => step.on_before(decision),
                Point::After(response) => step.on_after(decision, response),
                Point::Error(_) => step.on_error(decision),
            }
        };
        next_to_ruby(ruby, &next)
    }

    fn before(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        rb_self.drive(ruby, Point::Before)
    }

    fn after(ruby: &Ruby, rb_self: &Self, response: Value) -> Result<RArray, Error> {
        rb_self.drive(ruby, Point::After(to_value(ruby, response)))
    }

    fn error(ruby: &Ruby, rb_self: &Self, error: Value) -> Result<RArray, Error> {
        rb_self.drive(ruby, Point::Error(error_info(error)))
    }

    fn ungated(&self, aborted: bool) {
        if let Ok(mut step) = self.step.try_borrow_mut() {
            step.on_ungated_error(aborted);
        }
    }

    fn stream_started(&self) {
        if let Ok(mut step) = self.step.try_borrow_mut() {
            step.stream_started();
        }
    }

    fn chunk(ruby: &Ruby, rb_self: &Self, chunk: Value) {
        let value = to_value(ruby, chunk);
        if let Ok(mut step) = rb_self.step.try_borrow_mut() {
            step.stream_chunk(&value);
        }
    }

    /// `stream_end(error_or_nil, aborted, final_message_or_nil)`.
    fn stream_end(ruby: &Ruby, rb_self: &Self, error: Value, aborted: bool, last: Value) {
        let error = (!error.is_nil()).then(|| error_info(error));
        let last = (!last.is_nil()).then(|| to_value(ruby, last));
        if let Ok(mut step) = rb_self.step.try_borrow_mut() {
            step.stream_end(error, aborted, last.as_ref());
        }
    }

    fn instance_id(&self) -> String {
        self.step.borrow().node().instance_id.clone()
    }

    fn finished(&self) -> bool {
        self.step.borrow().is_finished()
    }
}

fn llm_step(
    ruby: &Ruby,
    session: &RbSession,
    run_id: Option<String>,
    run_name: Option<String>,
    api: String,
    request: Value,
    sdk: Option<String>,
) -> Result<RbLlmStep, Error> {
    let api = pure::api(&api).map_err(|e| api_error(ruby, e))?;
    let request = to_value(ruby, request);
    let run = LlmRun {
        run_id: run_id.as_deref(),
        run_name: run_name.as_deref(),
    };
    let step = LlmStep::start(&session.session, run, api, &request, sdk.as_deref());
    Ok(RbLlmStep {
        session: session.session.clone(),
        step: RefCell::new(step),
    })
}

fn api_error(ruby: &Ruby, e: PureError) -> Error {
    Error::new(ruby.exception_arg_error(), e.to_string())
}

/// `decode(api, response)`: `[output, usage_or_nil]` as the core's codec reads it.
fn decode(ruby: &Ruby, api: String, response: Value) -> Result<RArray, Error> {
    let (output, usage) =
        pure::codec_decode(&api, &to_value(ruby, response)).map_err(|e| api_error(ruby, e))?;
    let out = ruby.ary_new_capa(2);
    out.push(from_value(ruby, &output)?)?;
    match &usage {
        Some(u) => out.push(from_value(ruby, u)?)?,
        None => out.push(ruby.qnil())?,
    }
    Ok(out)
}

/// `request_input(api, request)`: what `node.started.input` records of a request of `api`.
fn request_input(ruby: &Ruby, api: String, request: Value) -> Result<Value, Error> {
    let input = pure::codec_request_input(&api, &to_value(ruby, request))
        .map_err(|e| api_error(ruby, e))?;
    from_value(ruby, &input)
}

/// Registers `Native.llm_step`, `Native.llm_decode`, `Native.llm_request_input` and
/// `Native::LlmStep`.
pub fn init(ruby: &Ruby, native: &RModule) -> Result<(), Error> {
    native.define_singleton_method("llm_step", function!(llm_step, 6))?;
    native.define_singleton_method("llm_decode", function!(decode, 2))?;
    native.define_singleton_method("llm_request_input", function!(request_input, 2))?;
    let class = native.define_class("LlmStep", ruby.class_object())?;
    class.define_method("before", method!(RbLlmStep::before, 0))?;
    class.define_method("after", method!(RbLlmStep::after, 1))?;
    class.define_method("error", method!(RbLlmStep::error, 1))?;
    class.define_method("ungated", method!(RbLlmStep::ungated, 1))?;
    class.define_method("stream_started", method!(RbLlmStep::stream_started, 0))?;
    class.define_method("chunk", method!(RbLlmStep::chunk, 1))?;
    class.define_method("stream_end", method!(RbLlmStep::stream_end, 3))?;
    class.define_method("instance_id", method!(RbLlmStep::instance_id, 0))?;
    class.define_method("finished?", method!(RbLlmStep::finished, 0))?;
    Ok(())
}
