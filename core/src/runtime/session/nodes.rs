//! Node events: `node.started` / `node.finished` / `node.error`, streamed deltas batched
//! into one `node.token` per `tokenIntervalMs` (`Shared::pending_tokens`), and graph hints.

use super::*;

impl Session {
    /// `node.started` for `node` with `input`, in `run_id` (or the implicit run).
    pub fn node_started(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        parent_id: Option<&str>,
        input: Option<Value>,
    ) -> Option<u64> {
        self.node_started_host(run_id, node, parent_id, input.map(HostValue::Built))
    }

    /// [`Session::node_started`] with the input as a binding hands it over: JSON text is
    /// parsed by the worker while no debugger is attached (see [`HostValue`]).
    pub fn node_started_host(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        parent_id: Option<&str>,
        input: Option<HostValue>,
    ) -> Option<u64> {
        self.node_started_extra(run_id, node, parent_id, input, Map::new())
    }

    /// [`Session::node_started_host`] with further fields (a replay's `replayed` /
    /// `replayLive`, see [`crate::replay`]).
    pub fn node_started_extra(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        parent_id: Option<&str>,
        input: Option<HostValue>,
        extra: Map,
    ) -> Option<u64> {
        let mut started = NodeStarted::new(
            node.node_id.as_str(),
            node.kind,
            node.name.as_str(),
            node.instance_id.as_str(),
        );
        started.parent_id = parent_id.map(JsStr::from);
        started.extra = extra;
        let (input, deferred) = split_host_value(input, "input");
        started.input = input;
        self.emit_with(
            run_id,
            MessageType::NodeStarted,
            Payload::Started(Box::new(started)),
            deferred,
            Some(node),
        )
    }

    /// `node.finished` for `node`.
    pub fn node_finished(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        output: Option<Value>,
        duration_ms: f64,
        injected: bool,
    ) -> Option<u64> {
        self.node_finished_host(
            run_id,
            node,
            output.map(HostValue::Built),
            duration_ms,
            injected,
        )
    }

    /// [`Session::node_finished`] with the output as a binding hands it over (JSON text is
    /// parsed by the worker while no debugger is attached).
    pub fn node_finished_host(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        output: Option<HostValue>,
        duration_ms: f64,
        injected: bool,
    ) -> Option<u64> {
        let mut finished = NodeFinished::new(
            node.node_id.as_str(),
            normalize_duration(duration_ms),
            RunStatus::Ok,
        );
        finished.instance_id = Some(node.instance_id.as_str().into());
        if injected {
            finished.injected = Some(true);
        }
        self.emit_finished(run_id, node, finished, output)
    }

    /// Emits `finished` of `node` with its `output` as a binding handed it over (JSON text
    /// parsed by the worker while no debugger is attached).
    pub(crate) fn emit_finished(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        mut finished: NodeFinished,
        output: Option<HostValue>,
    ) -> Option<u64> {
        let (output, deferred) = split_host_value(output, "output");
        finished.output = output;
        self.emit_with(
            run_id,
            MessageType::NodeFinished,
            Payload::Finished(Box::new(finished)),
            deferred,
            Some(node),
        )
    }

    /// `node.error` for `node`.
    pub fn node_error(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        error: ErrorInfo,
    ) -> Option<u64> {
        let mut failed = NodeError::new(node.node_id.as_str(), error);
        failed.instance_id = Some(node.instance_id.as_str().into());
        self.emit_typed(run_id, MessageType::NodeError, failed.to_value())
    }

    /// A streamed delta of `node`. Deltas of the same execution are batched for up to
    /// `tokenIntervalMs` (default 34 ms) into one `node.token`; any other event of the
    /// session sends the batch first, so order is kept. Returns the seq when this call sent
    /// a frame.
    pub fn node_token(
        &self,
        run_id: Option<&str>,
        node: &NodeRef,
        channel: TokenChannel,
        text: &str,
    ) -> Option<u64> {
        let mut shared = self.recording(MessageType::NodeToken)?;
        let run_id = self.run_id_or_implicit(&mut shared, run_id);
        let interval = millis(self.inner.config.token_interval_ms);
        let delta = TokenDelta::new(channel, text);
        if let Some(batch) = shared.pending_tokens.as_mut() {
            let same = batch.run_id == run_id
                && batch.node_id == node.node_id
                && batch.instance_id == node.instance_id;
            if same && batch.opened.elapsed() < interval {
                batch.deltas.push(delta);
                return None;
            }
        }
        let sent = self.flush_tokens_locked(&mut shared);
        shared.pending_tokens = Some(TokenBatch {
            run_id,
            node_id: node.node_id.clone(),
            instance_id: node.instance_id.clone(),
            deltas: vec![delta],
            opened: Instant::now(),
        });
        if interval.is_zero() {
            return self.flush_tokens_locked(&mut shared);
        }
        sent
    }

    /// Sends the pending token batch, if any.
    pub(super) fn flush_tokens_locked(&self, shared: &mut Shared) -> Option<u64> {
        let batch = shared.pending_tokens.take()?;
        let mut token = NodeToken::new(batch.node_id.as_str(), batch.deltas);
        token
            .extra
            .insert("instanceId", Value::from(batch.instance_id.as_str()));
        self.enqueue(
            shared,
            &batch.run_id,
            MessageType::NodeToken,
            token.to_value(),
            None,
            None,
        )
    }

    /// When the pending token batch is due (worker thread).
    pub(super) fn token_deadline(&self) -> Option<Instant> {
        let shared = self.inner.shared.lock();
        let batch = shared.pending_tokens.as_ref()?;
        Some(batch.opened + millis(self.inner.config.token_interval_ms))
    }

    /// Sends the pending token batch when it is due (worker thread).
    pub(super) fn flush_due_tokens(&self) {
        let mut shared = self.inner.shared.lock();
        let due = shared
            .pending_tokens
            .as_ref()
            .is_some_and(|b| b.opened.elapsed() >= millis(self.inner.config.token_interval_ms));
        if due {
            self.flush_tokens_locked(&mut shared);
        }
    }

    /// `graph.hint` announcing nodes ahead of running.
    pub fn graph_hint(&self, run_id: Option<&str>, nodes: Vec<GraphNodeHint>) -> Option<u64> {
        self.emit_typed(
            run_id,
            MessageType::GraphHint,
            GraphHint::new(nodes).to_value(),
        )
    }
}
