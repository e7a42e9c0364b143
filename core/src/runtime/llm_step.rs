//! One model call: the LLM step every provider integration drives, beside the tool
//! [`Step`] and with the same [`Next`] vocabulary. The skin reads its client library's
//! request, answer and stream chunks into [`Value`]s; this module records them through the
//! provider codecs ([`crate::codec`]) and says what to do next:
//!
//! ```text
//! let step = LlmStep::start(..)                    // graph.hint (first step of a run), node.started
//! loop {
//!     wait(step.before()) -> step.on_before(d)     // Run / ReturnInjected(reply) / Abort
//!     send the request    -> answer | stream | error
//!     answer: wait(step.after(&answer)) -> step.on_after(d, &answer)  // ReturnResult / ReturnInjected / Run / Abort
//!     stream: step.stream_started(); per chunk step.stream_chunk(&chunk); step.stream_end(..)
//!     error:  wait(step.error(info)) -> step.on_error(d)       // Reraise / ReturnInjected / Run / Abort
//! }
//! ```
//!
//! `Run` after `after` or `error` means: back to the top (the `before` gate is offered again,
//! then the request is sent again). A retried request stays one execution: `node.finished`
//! carries `attempts` when there was more than one. An injected value comes back as the
//! provider-shaped reply ([`codec::injected_reply`]), which the skin turns into its SDK's
//! own type; the node records the value as the debugger gave it. Streams have no `after`
//! gate (the answer is already flowing); their deltas are batched into `node.token` by the
//! session (`tokenIntervalMs`).
//!
//! Smart breakpoints ([`crate::smart`]): with a debugger attached, the `after` gate of a
//! non-streamed answer holds (`reason: breakpoint`, `smart.rule: truncated-tool-call`) when
//! the model stopped at the token limit or the content filter while asking for tool calls
//! (`GRAPHMIND_BREAK_ON_TRUNCATED` / `breakOnTruncated`, default on). A stream has no
//! `after` gate, so it is never held for that.
//!
//! Instance ids are `<invocation>:s<N>` ([`InvocationTracker`]): a request that continues the
//! previous one of its run (`previous_response_id` naming its answer, or the same first
//! message with more messages) is the next step of the same invocation. The first step of a
//! run announces the run's agent node, the `llm:step` node and the tools offered in one
//! `graph.hint`. Tool definitions are recorded once per run (`tools` / `toolSchemas`).

use std::collections::VecDeque;

use crate::codec::{self, Api, Decoded, PromptKey, StreamDecoder};
use crate::event::{self, ErrorInfo, GraphNodeHint, NodeKind, RunStatus, TokenUsage};
use crate::gate::{GateDecision, ResumeAction};
use crate::json::{JsStr, Map, Value};
use crate::llm::{self, ToolSchemaMemory};
use crate::session::{Gate, NodeRef, Session};
use crate::step::{Next, Step};

/// The node every provider model call is recorded under.
pub const LLM_NODE_ID: &str = "llm:step";
/// Its display name.
pub const LLM_NODE_NAME: &str = "step";
/// Invocation scopes (runs) remembered per session, oldest forgotten first.
pub const MAX_INVOCATION_SCOPES: usize = 256;
/// Runs whose `graph.hint` was sent, remembered per session.
pub const MAX_HINTED_RUNS: usize = 256;
/// The scope of model calls made outside any run.
pub const NO_RUN_SCOPE: &str = "no-run";

// -- invocations -----------------------------------------------------------------------------

/// Where a request lands: its invocation and its index in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepPosition {
    /// `inv_…`.
    pub invocation_id: String,
    /// 0-based step index.
    pub index: usize,
}

impl StepPosition {
    /// The instance id: `<invocation>:s<N>`.
    pub fn instance_id(&self) -> String {
        format!("{}:s{}", self.invocation_id, self.index)
    }
}

#[derive(Debug)]
struct Scope {
    key: String,
    invocation_id: String,
    steps: usize,
    first: String,
    length: usize,
    last_response_id: Option<String>,
}

/// Groups requests into invocations, per scope (the run id, or [`NO_RUN_SCOPE`]).
#[derive(Debug, Default)]
pub struct InvocationTracker {
    scopes: VecDeque<Scope>,
}

impl InvocationTracker {
    /// Where the next request of `scope` lands.
    pub fn next(&mut self, scope: &str, key: &PromptKey) -> StepPosition {
        if let Some(s) = self.scopes.iter_mut().find(|s| s.key == scope) {
            let chained = key.previous_response_id.is_some()
                && key.previous_response_id == s.last_response_id;
            if chained || (s.first == key.first && key.length > s.length) {
                s.steps += 1;
                s.first = key.first.clone();
                s.length = key.length;
                return StepPosition {
                    invocation_id: s.invocation_id.clone(),
                    index: s.steps - 1,
                };
            }
        }
        let invocation_id = event::new_id("inv");
        self.scopes.retain(|s| s.key != scope);
        while self.scopes.len() >= MAX_INVOCATION_SCOPES {
            self.scopes.pop_front();
        }
        self.scopes.push_back(Scope {
            key: scope.to_string(),
            invocation_id: invocation_id.clone(),
            steps: 1,
            first: key.first.clone(),
            length: key.length,
            last_response_id: None,
        });
        StepPosition {
            invocation_id,
            index: 0,
        }
    }

    /// The answer `scope`'s last request produced (for `previous_response_id` chaining).
    pub fn note_response_id(&mut self, scope: &str, id: &str) {
        if let Some(s) = self.scopes.iter_mut().find(|s| s.key == scope) {
            if !id.is_empty() {
                s.last_response_id = Some(id.to_string());
            }
        }
    }
}

/// What a session remembers about its model calls. Kept in the session, under a lock the
/// fork protocol holds (a process-wide table of them had a lock no fork carried across:
/// a child forked while another thread held it waited for it forever).
#[derive(Debug, Default)]
pub(crate) struct LlmMemory {
    invocations: InvocationTracker,
    schemas: ToolSchemaMemory,
    hinted: VecDeque<String>,
    /// The input schemas the requests declared, for edits of plain tool functions.
    declared: crate::declared_schema::DeclaredSchemas,
}

impl LlmMemory {
    /// Whether `scope` is hinted for the first time (then it is remembered).
    fn first_hint(&mut self, scope: &str) -> bool {
        if self.hinted.iter().any(|s| s == scope) {
            return false;
        }
        while self.hinted.len() >= MAX_HINTED_RUNS {
            self.hinted.pop_front();
        }
        self.hinted.push_back(scope.to_string());
        true
    }
}

/// The input schema this run's model requests declared for tool `name` (see
/// [`crate::declared_schema`]), compiled; `None` when none did.
pub fn declared_tool_schema(
    session: &Session,
    run_id: Option<&str>,
    name: &str,
) -> Option<crate::edit_schema::InputSchema> {
    let mut m = session.llm_memory().lock();
    m.declared.lookup(run_id.unwrap_or(NO_RUN_SCOPE), name)
}

// -- the step --------------------------------------------------------------------------------

/// The run a model call belongs to, as the skin knows it.
#[derive(Clone, Copy, Debug, Default)]
pub struct LlmRun<'a> {
    /// The run id (`None`: the implicit run).
    pub run_id: Option<&'a str>,
    /// The run's name (its agent node `agent:<name>` is the step's parent).
    pub run_name: Option<&'a str>,
}

/// A wire `TokenUsage` value as the typed struct.
pub fn token_usage(value: &Value) -> Option<TokenUsage> {
    let count = |k: &str| value.get(k).and_then(|v| llm::token_count(Some(v)));
    let mut usage = TokenUsage::new(count("inputTokens")?, count("outputTokens")?);
    usage.inclusive = value.get("inclusive").and_then(Value::as_bool);
    usage.cache_read_tokens = count("cacheReadTokens");
    usage.cache_write_tokens = count("cacheWriteTokens");
    usage.reasoning_tokens = count("reasoningTokens");
    Some(usage)
}

/// One model call in flight.
pub struct LlmStep {
    step: Step,
    session: Session,
    api: Api,
    scope: String,
    model: Option<Value>,
    attempts: u32,
    stream: Option<StreamDecoder>,
    stream_only: bool,
    /// The answer [`LlmStep::after`] decoded, for [`LlmStep::on_after`].
    decoded: Option<Decoded>,
    /// A recorded answer this call returns without sending the request, and whether the
    /// request asked for a stream ([`crate::replay`]).
    replay: Option<(crate::replay::Answer, bool)>,
}

impl LlmStep {
    /// Starts a call of `api` with `request` (the request body as a value): the run's
    /// `graph.hint` when this is its first model call, then `node.started` with the recorded
    /// request (and `sdk` when given: the integration's name).
    pub fn start(
        session: &Session,
        run: LlmRun<'_>,
        api: Api,
        request: &Value,
        sdk: Option<&str>,
    ) -> LlmStep {
        LlmStep::start_under(session, run, None, api, request, sdk)
    }

    /// [`LlmStep::start`] with the step's parent node given (`parent_id`: a framework's
    /// node the call belongs to, a LangGraph node `chain:<name>`); `None` is the run's
    /// agent node, as for [`LlmStep::start`].
    pub fn start_under(
        session: &Session,
        run: LlmRun<'_>,
        parent_id: Option<&str>,
        api: Api,
        request: &Value,
        sdk: Option<&str>,
    ) -> LlmStep {
        let scope = run.run_id.unwrap_or(NO_RUN_SCOPE).to_string();
        let parent = match parent_id {
            Some(id) => Some(id.to_string()),
            None => run
                .run_name
                .map(|name| event::node_id(NodeKind::Agent, name)),
        };
        let tools = codec::request_tools(request);
        let (position, hint, captured) = {
            let mut m = session.llm_memory().lock();
            let position = m.invocations.next(&scope, &codec::prompt_key(api, request));
            let hint = m.first_hint(&scope);
            let captured = if session.is_enabled() {
                m.declared.record(&scope, tools);
                m.schemas.capture_tools(&scope, tools)
            } else {
                None
            };
            (position, hint, captured)
        };
        if hint {
            // Under a framework's node the agent node is not this step's to announce.
            let agent = if parent_id.is_some() {
                None
            } else {
                run.run_name
            };
            session.graph_hint(run.run_id, roster(parent.as_deref(), agent, tools));
        }
        let node = NodeRef {
            node_id: LLM_NODE_ID.to_string(),
            instance_id: position.instance_id(),
            kind: NodeKind::Llm,
            name: LLM_NODE_NAME.to_string(),
        };
        let mut input = codec::request_input(api, request);
        let streamed = request.get("stream").and_then(Value::as_bool) == Some(true);
        let (replay, replay_extra) = replay_decision(session, run.run_id, api, &input, streamed);
        if let Some(captured) = captured {
            if let Value::Object(fields) = captured.to_value() {
                for (k, v) in fields.iter() {
                    input.insert(k.clone(), v.clone());
                }
            }
        }
        let mut started = Map::with_capacity(8);
        started.insert("nodeId", Value::from(LLM_NODE_ID));
        started.insert("kind", Value::from("llm"));
        started.insert("name", Value::from(LLM_NODE_NAME));
        started.insert("instanceId", Value::from(node.instance_id.as_str()));
        if let Some(parent) = &parent {
            started.insert("parentId", Value::from(parent.as_str()));
        }
        started.insert("input", Value::Object(input));
        if let Some(sdk) = sdk {
            started.insert("sdk", Value::from(sdk));
        }
        for (k, v) in replay_extra.iter() {
            started.insert(k.clone(), v.clone());
        }
        session.emit(run.run_id, "node.started", Value::Object(started));
        LlmStep {
            step: Step::started_elsewhere(session, run.run_id, node),
            session: session.clone(),
            api,
            scope,
            model: request.get("model").filter(|m| !m.is_null()).cloned(),
            attempts: 0,
            stream: None,
            stream_only: false,
            decoded: None,
            replay: replay.map(|a| (a, streamed)),
        }
    }

    /// The call can only hand back the provider's own stream (Anthropic's
    /// `messages.stream()` helper): an `inject` at `before` cannot be made into one, so it
    /// acts as `continue`, with a warning.
    pub fn stream_only(&mut self) {
        self.stream_only = true;
    }

    /// The API this call speaks.
    pub fn api(&self) -> Api {
        self.api
    }

    /// The node being called (`llm:step`, this call's instance id).
    pub fn node(&self) -> &NodeRef {
        self.step.node()
    }

    /// Whether `node.finished` was recorded.
    pub fn is_finished(&self) -> bool {
        self.step.is_finished()
    }

    fn extra(&self, streaming: bool) -> Map {
        let mut extra = Map::with_capacity(2);
        if streaming {
            extra.insert("streaming", Value::Bool(true));
        }
        if self.attempts > 1 {
            extra.insert("attempts", Value::from(u64::from(self.attempts)));
        }
        extra
    }

    fn reply(&self, next: Next) -> Next {
        match next {
            Next::ReturnInjected(value) => {
                let mut request = Map::with_capacity(1);
                if let Some(model) = &self.model {
                    request.insert("model", model.clone());
                }
                Next::ReturnInjected(codec::injected_reply(
                    self.api,
                    value,
                    &Value::Object(request),
                ))
            }
            other => other,
        }
    }

    /// The gate before the request is sent (offered again before every retry). A replayed
    /// call is answered without a pause.
    pub fn before(&self) -> Gate {
        if self.replay.is_some() {
            self.step.skip_before();
            return Gate::Continue;
        }
        self.step.before()
    }

    /// What the `before` decision means (`retry` before anything was sent is `continue`).
    /// A replayed call ends here with its recorded answer: the provider's reply rebuilt
    /// from it (`ReturnInjected`), its stream's chunks (`Stream`), or its error (`Raise`).
    pub fn on_before(&mut self, mut decision: GateDecision) -> Next {
        self.attempts += 1;
        if let Some((answer, streamed)) = self.replay.take() {
            return self.replayed(&answer, streamed);
        }
        if self.stream_only && decision.action == ResumeAction::Inject {
            self.session.warn(
                "llm-stream-inject",
                "`inject` is not supported where the client hands back its own stream \
                 (a provider stream cannot be made up); continuing. Inject at a non-streamed \
                 call, or wrap the call site with a span.",
            );
            decision = GateDecision::proceed();
        }
        self.step.annotate(None, self.extra(false));
        let next = self.step.on_before(decision);
        self.reply(next)
    }

    fn replayed(&mut self, answer: &crate::replay::Answer, streamed: bool) -> Next {
        let output = match &answer.outcome {
            crate::replay::Outcome::Output(o) => o.clone().unwrap_or(Value::Null),
            _ => Value::Null,
        };
        self.step.annotate(
            answer.usage.as_ref().and_then(token_usage),
            self.extra(streamed),
        );
        if let Some(error) = self.step.end_replayed(answer) {
            return Next::Raise(error);
        }
        let model = self.model.as_ref();
        if streamed {
            Next::Stream(codec::rebuild::stream_from_output(
                self.api,
                &output,
                answer.usage.as_ref(),
                model,
            ))
        } else {
            Next::ReturnInjected(codec::rebuild::reply_from_output(
                self.api,
                &output,
                answer.usage.as_ref(),
                model,
            ))
        }
    }

    /// The gate after a complete answer `response` arrived (the answer as a value). With a
    /// debugger attached the answer is decoded here, once, and the smart breakpoints see
    /// its normalised output: tool calls cut off at the token limit or by the content
    /// filter hold as `truncated-tool-call`.
    pub fn after(&mut self, response: &Value) -> Gate {
        if !self.session.is_attached() || !self.session.smart_switches().truncated {
            self.decoded = None;
            return self.step.after();
        }
        let decoded = codec::decode_response(self.api, response);
        let output = Value::Object(decoded.output.clone());
        self.decoded = Some(decoded);
        self.step.after_seeing(Some(output))
    }

    /// What the `after` decision means for `response` (the answer as a value, the one
    /// [`LlmStep::after`] was given).
    pub fn on_after(&mut self, decision: GateDecision, response: &Value) -> Next {
        let decoded = match self.decoded.take() {
            Some(decoded) => decoded,
            None => codec::decode_response(self.api, response),
        };
        self.note_answer(&decoded, false);
        self.observe_builtin(&decoded.output);
        let next = self
            .step
            .on_after(decision, Some(Value::Object(decoded.output)));
        self.reply(next)
    }

    /// The request failed: records `node.error` and returns the `error` gate. An abort or
    /// an interrupt is never held: call [`LlmStep::on_ungated_error`] instead.
    pub fn error(&mut self, error: ErrorInfo) -> Gate {
        self.step.error(error)
    }

    /// [`LlmStep::error`], gated only at the first level to report `failure`
    /// ([`Step::error_once`]).
    pub fn error_once(
        &mut self,
        error: ErrorInfo,
        failure: crate::failure_once::FailureId,
        gated: &mut crate::failure_once::GatedFailures,
    ) -> Gate {
        self.step.error_once(error, failure, gated)
    }

    /// What the `error` decision means.
    pub fn on_error(&mut self, decision: GateDecision) -> Next {
        self.step.annotate(None, self.extra(false));
        let next = self.step.on_error(decision);
        self.reply(next)
    }

    /// The request raised something never held (an abort, an interrupt).
    pub fn on_ungated_error(&mut self, aborted: bool) -> Next {
        self.step.annotate(None, self.extra(false));
        self.step.on_ungated_error(aborted)
    }

    /// The request answered with a stream: chunks follow, no `after` gate.
    pub fn stream_started(&mut self) {
        if self.stream.is_none() {
            self.stream = Some(StreamDecoder::new(self.api));
        }
    }

    /// One chunk / event of the stream, as the app received it: its deltas go out as
    /// `node.token` (batched by the session).
    pub fn stream_chunk(&mut self, chunk: &Value) {
        let api = self.api;
        let decoder = self.stream.get_or_insert_with(|| StreamDecoder::new(api));
        let deltas = decoder.push(chunk);
        for (channel, text) in deltas {
            self.token(channel, &text);
        }
    }

    /// A text delta read through a helper rather than as a raw event.
    pub fn stream_text(&mut self, text: &JsStr) {
        let api = self.api;
        let decoder = self.stream.get_or_insert_with(|| StreamDecoder::new(api));
        if let Some((channel, text)) = decoder.push_text(text) {
            self.token(channel, &text);
        }
    }

    fn token(&self, channel: event::TokenChannel, text: &JsStr) {
        let text = text.to_string_lossy();
        self.session
            .node_token(self.step_run_id(), self.step.node(), channel, &text);
    }

    fn step_run_id(&self) -> Option<&str> {
        (self.scope != NO_RUN_SCOPE).then_some(self.scope.as_str())
    }

    /// The stream ended: `error` when it broke or one of its parts reported a failure (an AI
    /// SDK `error` part; then `node.error` first, status `error`),
    /// `aborted` when the run was aborted meanwhile; `final_message` is what the client
    /// library accumulated, when it did. Once; later calls do nothing.
    pub fn stream_end(
        &mut self,
        error: Option<ErrorInfo>,
        aborted: bool,
        final_message: Option<&Value>,
    ) {
        if self.step.is_finished() {
            return;
        }
        let decoded: Decoded = match &self.stream {
            Some(decoder) => decoder.finish(final_message),
            None => StreamDecoder::new(self.api).finish(final_message),
        };
        // A stream that reported its failure in a part (AI SDK `error`) failed too.
        let error = error.or_else(|| self.stream.as_ref().and_then(StreamDecoder::error));
        self.note_answer(&decoded, true);
        let status = if aborted {
            RunStatus::Aborted
        } else if let Some(error) = error {
            self.session
                .node_error(self.step_run_id(), self.step.node(), error);
            RunStatus::Error
        } else {
            RunStatus::Ok
        };
        self.observe_builtin(&decoded.output);
        self.step.end(Some(Value::Object(decoded.output)), status);
    }

    /// Notes what every answer tells, streamed or not: its response id (the next request
    /// of the same invocation chains on it) and, on the node, its usage and extra fields.
    fn note_answer(&mut self, decoded: &Decoded, streamed: bool) {
        if let Some(id) = decoded.response_id.as_ref().and_then(JsStr::as_str) {
            self.session
                .llm_memory()
                .lock()
                .invocations
                .note_response_id(&self.scope, id);
        }
        self.step.annotate(
            decoded.usage.as_ref().and_then(token_usage),
            self.extra(streamed),
        );
    }

    /// The tools the provider ran during this call (`builtinTools` of its decoded output),
    /// recorded as observed nodes under the step (see [`crate::llm_builtin`]).
    fn observe_builtin(&self, output: &Map) {
        let node = self.step.node();
        let run_id = self.step_run_id();
        crate::llm_builtin::observe_builtin_tools(
            |event_type, payload| {
                self.session.emit(run_id, event_type, payload);
            },
            node.node_id.as_str(),
            node.instance_id.as_str(),
            output,
        );
    }
}

/// Whether a replay answers this model call: its request's input (`input`, tool
/// definitions aside) against the recorded one. Returns the answer and the fields
/// `node.started` carries (`replayed` or `replayLive`).
fn replay_decision(
    session: &Session,
    run_id: Option<&str>,
    api: Api,
    input: &Map,
    streamed: bool,
) -> (Option<crate::replay::Answer>, Map) {
    use crate::replay::{self, Decision};
    if !replay::is_replaying(session) {
        return (None, Map::new());
    }
    let answerable = codec::rebuild::can_replay(api, streamed);
    let value = Value::Object(input.clone());
    match replay::decide(session, run_id, LLM_NODE_ID, Some(&value), answerable) {
        Decision::Off => (None, Map::new()),
        Decision::Live(field) => {
            let mut extra = Map::with_capacity(1);
            extra.insert(replay::FIELD_LIVE, Value::Object(field));
            (None, extra)
        }
        Decision::Replay(answer) => {
            let extra = crate::step::replay_marks(answer.edited);
            (Some(answer), extra)
        }
    }
}

/// The `graph.hint` of a run's first model step: its agent node, `llm:step` under it, and
/// each tool offered (`tool:<name>`) under the step.
fn roster(parent: Option<&str>, run_name: Option<&str>, tools: &[Value]) -> Vec<GraphNodeHint> {
    let mut nodes = Vec::with_capacity(tools.len() + 2);
    if let (Some(parent), Some(name)) = (parent, run_name) {
        nodes.push(GraphNodeHint::new(parent, NodeKind::Agent, name));
    }
    let mut step = GraphNodeHint::new(LLM_NODE_ID, NodeKind::Llm, LLM_NODE_NAME);
    step.parent_id = parent.map(JsStr::from);
    nodes.push(step);
    for tool in tools {
        if let Some(name) = llm::tool_def_name(tool) {
            let name = name.to_string_lossy();
            let mut hint = GraphNodeHint::new(
                event::node_id(NodeKind::Tool, &name).as_str(),
                NodeKind::Tool,
                name.as_ref(),
            );
            hint.parent_id = Some(LLM_NODE_ID.into());
            nodes.push(hint);
        }
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(first: &str, length: usize, prev: Option<&str>) -> PromptKey {
        PromptKey {
            first: first.into(),
            length,
            previous_response_id: prev.map(str::to_string),
        }
    }

    #[test]
    fn a_growing_prompt_continues_its_invocation() {
        let mut t = InvocationTracker::default();
        let a = t.next("r", &key("m1", 1, None));
        let b = t.next("r", &key("m1", 3, None));
        let c = t.next("r", &key("m1", 3, None));
        assert_eq!(a.invocation_id, b.invocation_id);
        assert_eq!((a.index, b.index), (0, 1));
        assert_ne!(
            c.invocation_id, b.invocation_id,
            "a prompt that did not grow starts anew"
        );
        assert_eq!(c.index, 0);
        assert!(b.instance_id().ends_with(":s1"));
    }

    #[test]
    fn previous_response_id_chains_and_scopes_stay_apart() {
        let mut t = InvocationTracker::default();
        let a = t.next("r", &key("x", 1, None));
        t.note_response_id("r", "resp_1");
        let b = t.next("r", &key("y", 1, Some("resp_1")));
        assert_eq!(a.invocation_id, b.invocation_id);
        let other = t.next("s", &key("y", 2, Some("resp_1")));
        assert_ne!(
            other.invocation_id, a.invocation_id,
            "another run never continues this one"
        );
        let wrong = t.next("r", &key("y", 1, Some("resp_9")));
        assert_ne!(wrong.invocation_id, a.invocation_id);
    }

    #[test]
    fn the_tracker_is_bounded() {
        let mut t = InvocationTracker::default();
        for i in 0..(MAX_INVOCATION_SCOPES + 10) {
            t.next(&format!("r{i}"), &key("m", 1, None));
        }
        assert_eq!(t.scopes.len(), MAX_INVOCATION_SCOPES);
    }

    #[test]
    fn usage_values_become_typed() {
        let v = crate::json::parse_str(
            r#"{"inputTokens":3,"outputTokens":4,"inclusive":true,"cacheReadTokens":1}"#,
        )
        .unwrap();
        let u = token_usage(&v).unwrap();
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_tokens),
            (3, 4, Some(1))
        );
        assert_eq!(
            crate::json::to_string(&u.to_value()),
            crate::json::to_string(&v)
        );
    }
}
