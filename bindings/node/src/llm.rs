//! Model calls: the core's [`LlmStep`] for the AI SDK's `wrapModel` (and any provider the
//! core has a codec for). JavaScript hands over the request, the answer and each stream
//! part as JSON text; the step records them through the provider codec and answers with
//! the same codes as a tool step (`code`), so `index.js` drives both with one loop and
//! waits for a held gate on the event loop (the session's dispatcher), never blocking it.

use super::{code, error_info, failure_id, NativeSession, CODE_SPAN};
use graphmind_core::codec::Api;
use graphmind_core::gate::{GateDecision, PausePoint};
use graphmind_core::json::Value;
use graphmind_core::llm_step::{LlmRun, LlmStep};
use graphmind_core::session::Gate;
use napi::bindgen_prelude::*;
use napi::JsString;
use napi_derive::napi;
use std::collections::HashMap;

/// One model call in flight, and the gate it waits on.
pub(crate) struct LlmSlot {
    step: LlmStep,
    point: PausePoint,
    /// The answer recorded at the `after` gate being waited on.
    response: Option<Value>,
    /// The run the call belongs to.
    run_id: Option<String>,
    /// Whether its answer is a stream being recorded.
    streaming: bool,
}

/// The session's model calls in flight, by handle (the handles share the tool steps'
/// numbering, so the dispatcher's token names exactly one of them).
pub(crate) type LlmSlots = HashMap<u32, LlmSlot>;

fn unknown() -> Error {
    Error::from_reason("graphmind: unknown model call")
}

#[napi]
impl NativeSession {
    /// Starts a model call of `api` (`ai-sdk`, `openai-chat`, ...: the codec names) with
    /// `request` (JSON) and offers its `before` gate, in one crossing: returns
    /// `handle * 8 + code`. `parent_id`: the node the call belongs to (default: the run's
    /// agent node).
    #[napi]
    #[allow(clippy::too_many_arguments)] // the JS call's positional arguments, one crossing
    pub fn llm_call(
        &mut self,
        env: Env,
        run_id: Option<String>,
        run_name: Option<String>,
        api: String,
        request_json: JsString<'_>,
        sdk: Option<String>,
        parent_id: Option<String>,
    ) -> Result<f64> {
        let api = Api::from_name(&api)
            .ok_or_else(|| Error::from_reason(format!("graphmind: unknown model API {api:?}")))?;
        let request = super::text::parse_js(&request_json, &mut self.scratch)?;
        let run = LlmRun {
            run_id: run_id.as_deref(),
            run_name: run_name.as_deref(),
        };
        let step = LlmStep::start_under(
            &self.session,
            run,
            parent_id.as_deref(),
            api,
            &request,
            sdk.as_deref(),
        );
        let gate = step.before();
        let handle = self.token();
        self.llm.insert(
            handle,
            LlmSlot {
                step,
                point: PausePoint::Before,
                response: None,
                run_id,
                streaming: false,
            },
        );
        match self.llm_gate(&env, handle, gate) {
            Ok(code) => Ok(handle as f64 * CODE_SPAN + code as f64),
            Err(e) => {
                self.llm.remove(&handle);
                Err(e)
            }
        }
    }

    fn llm_gate(&mut self, env: &Env, handle: u32, gate: Gate) -> Result<i32> {
        match gate {
            Gate::Continue => self.llm_apply(env, handle, GateDecision::proceed()),
            Gate::Held(pending) => {
                self.hold(env, pending, handle)?;
                Ok(code::HELD)
            }
        }
    }

    /// Applies a decision; `Run` after `after` or `error` (a retry) goes back to the top:
    /// the `before` gate is offered again before the request is sent again.
    fn llm_apply(&mut self, env: &Env, handle: u32, decision: GateDecision) -> Result<i32> {
        let slot = self.llm.get_mut(&handle).ok_or_else(unknown)?;
        let retried = slot.point != PausePoint::Before;
        let next = match slot.point {
            PausePoint::Before => slot.step.on_before(decision),
            PausePoint::After => {
                let response = slot.response.take().unwrap_or(Value::Null);
                slot.step.on_after(decision, &response)
            }
            PausePoint::Error => slot.step.on_error(decision),
        };
        let code = self.next_code(handle, next);
        if code != code::RUN {
            self.llm.remove(&handle);
        } else if retried {
            let slot = self.llm.get_mut(&handle).ok_or_else(unknown)?;
            slot.point = PausePoint::Before;
            let gate = slot.step.before();
            return self.llm_gate(env, handle, gate);
        }
        Ok(code)
    }

    /// The model answered `response` (JSON): the `after` gate.
    #[napi]
    pub fn llm_after(&mut self, env: Env, handle: u32, response_json: JsString<'_>) -> Result<i32> {
        let response = super::text::parse_js(&response_json, &mut self.scratch)?;
        let slot = self.llm.get_mut(&handle).ok_or_else(unknown)?;
        slot.point = PausePoint::After;
        let gate = slot.step.after(&response);
        slot.response = Some(response);
        self.llm_gate(&env, handle, gate)
    }

    /// The request failed: `node.error` and the `error` gate (`failure`: see
    /// [`NativeSession::step_error`]).
    #[napi]
    pub fn llm_error(
        &mut self,
        env: Env,
        handle: u32,
        name: String,
        message: String,
        stack: Option<String>,
        failure: Option<f64>,
    ) -> Result<i32> {
        let slot = self.llm.get_mut(&handle).ok_or_else(unknown)?;
        slot.point = PausePoint::Error;
        let gate = slot.step.error_once(
            error_info(Some(name), Some(message), stack),
            failure_id(failure),
            &mut self.failures,
        );
        self.llm_gate(&env, handle, gate)
    }

    /// The decision of the call's held gate arrived: apply it.
    #[napi]
    pub fn llm_resume(&mut self, env: Env, handle: u32) -> Result<i32> {
        let decision = self
            .take(&env, handle)?
            .unwrap_or_else(GateDecision::proceed);
        self.llm_apply(&env, handle, decision)
    }

    /// [`NativeSession::llm_resume`] at a gate that can only watch (a framework's callback,
    /// see [`NativeSession::step_resume_watching`]).
    #[napi]
    pub fn llm_resume_watching(
        &mut self,
        env: Env,
        handle: u32,
        integration: String,
        label: String,
        hint: String,
    ) -> Result<i32> {
        let decision = self.take_watched(&env, handle, &integration, &label, &hint)?;
        self.llm_apply(&env, handle, decision)
    }

    /// The request raised something never held (an abort): the call ends.
    #[napi]
    pub fn llm_ungated(&mut self, handle: u32, aborted: bool) {
        if let Some(mut slot) = self.llm.remove(&handle) {
            slot.step.on_ungated_error(aborted);
        }
    }

    /// The request answered with a stream: its parts follow (`llmStreamChunk`), then
    /// `llmStreamEnd`. Returns `RETURN_RESULT` (a stream has no `after` gate).
    #[napi]
    pub fn llm_stream_started(&mut self, handle: u32) -> Result<i32> {
        let slot = self.llm.get_mut(&handle).ok_or_else(unknown)?;
        slot.streaming = true;
        slot.step.stream_started();
        Ok(code::RETURN_RESULT)
    }

    /// One stream part (JSON), as the app reads it: its deltas go out as `node.token`.
    #[napi]
    pub fn llm_stream_chunk(&mut self, handle: u32, chunk_json: JsString<'_>) -> Result<()> {
        let chunk = super::text::parse_js(&chunk_json, &mut self.scratch)?;
        if let Some(slot) = self.llm.get_mut(&handle) {
            slot.step.stream_chunk(&chunk);
        }
        Ok(())
    }

    /// The stream ended: with an error (name and message given), aborted, or complete.
    #[napi]
    pub fn llm_stream_end(
        &mut self,
        handle: u32,
        aborted: bool,
        error_name: Option<String>,
        error_message: Option<String>,
        stack: Option<String>,
    ) {
        if let Some(mut slot) = self.llm.remove(&handle) {
            let error = error_name.map(|name| error_info(Some(name), error_message, stack));
            slot.step.stream_end(error, aborted, None);
        }
    }
}

impl NativeSession {
    /// The run `run_id` finishes: the streams of its model calls still being recorded (the
    /// app stopped reading one, or its end is still on its way) end first, with what they
    /// carried so far, so that every `node.finished` of the run precedes its
    /// `run.finished`.
    pub(crate) fn end_run_streams(&mut self, run_id: &str, aborted: bool) {
        let open: Vec<u32> = self
            .llm
            .iter()
            .filter(|(_, slot)| slot.streaming && slot.run_id.as_deref() == Some(run_id))
            .map(|(handle, _)| *handle)
            .collect();
        for handle in open {
            if let Some(mut slot) = self.llm.remove(&handle) {
                slot.step.stream_end(None, aborted, None);
            }
        }
    }
}
