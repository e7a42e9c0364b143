//! Runs: starting and finishing them, the implicit run, the agent node that frames a run,
//! and the per-run abort signals (`Shared::runs`) that gates and the app consult.

use super::*;

impl Session {
    /// Starts a run: emits `run.started` with `meta: {name, ...session meta, ...meta}`.
    pub fn start_run(&self, name: &str, meta: Option<&Map>) -> Run {
        let run = Run::new(name);
        if !self.active() {
            return run;
        }
        // A replay binds to the run it answers and links it to the recorded one.
        let linked = crate::replay::on_run_start(self, &run.run_id, name).map(|mut extra| {
            for (k, v) in meta.into_iter().flat_map(Map::iter) {
                extra.insert(k.clone(), v.clone());
            }
            extra
        });
        let payload = self.run_started_payload(name, linked.as_ref().or(meta), false);
        let mut shared = self.lock_with_room(false);
        shared.runs.insert(run.run_id.clone(), run.signal.clone());
        self.ensure_worker(&mut shared);
        self.enqueue(
            &mut shared,
            &run.run_id,
            MessageType::RunStarted,
            payload,
            None,
            None,
        );
        run
    }

    pub(super) fn run_started_payload(
        &self,
        name: &str,
        meta: Option<&Map>,
        implicit: bool,
    ) -> Value {
        let config = &self.inner.config;
        let mut meta_out = Map::new();
        meta_out.insert("name", Value::from(name));
        if implicit {
            meta_out.insert("implicit", Value::Bool(true));
        }
        for source in [config.meta.as_ref(), meta].into_iter().flatten() {
            for (k, v) in source.iter() {
                meta_out.insert(k.clone(), v.clone());
            }
        }
        let mut started = RunStarted::new(
            config.app_name.as_str(),
            SdkInfo::new(config.sdk.name.as_str(), config.sdk.version.as_str()),
        );
        started.meta = Some(meta_out);
        started.to_value()
    }

    /// Finishes a run (`run.finished`). An aborted signal wins over `Ok` and `Error`, as in
    /// the reference. The first finish wins: a second one records nothing and returns
    /// `false` (the C ABI answers it `GM_INVALID_STATE`).
    pub fn finish_run(&self, run: &Run, outcome: RunOutcome) -> bool {
        if !run.signal.mark_finished() {
            return false;
        }
        let mut shared = self.lock_with_room(true);
        shared.runs.remove(&run.run_id);
        // The guard forgets the run once it has seen all of it: now when no update is
        // deferred, else when the worker reaches `run.finished` (forgetting it here ahead of
        // the worker lost the warnings of a fast run's last calls).
        if self.inner.loop_backlog.load(Ordering::Acquire) == 0 {
            self.inner.loop_guard.lock().forget(&run.run_id);
        }
        if !self.inner.config.enabled || shared.disposed {
            return true;
        }
        self.flush_tokens_locked(&mut shared);
        let mut finished = match (outcome, run.signal.is_aborted()) {
            (_, true) | (RunOutcome::Aborted, _) => RunFinished::new(RunStatus::Aborted),
            (RunOutcome::Ok, false) => RunFinished::new(RunStatus::Ok),
            (RunOutcome::Error(error), false) => {
                let mut f = RunFinished::new(RunStatus::Error);
                f.error = Some(error);
                f
            }
        };
        finished.extra = Map::new();
        self.enqueue(
            &mut shared,
            &run.run_id,
            MessageType::RunFinished,
            finished.to_value(),
            None,
            None,
        );
        true
    }

    /// The run's root node started: `agent:<name>` (kind `agent`), its instance id the run
    /// id, no input. Every SDK's run scope records it (the reference's clients do), so a
    /// run's graph has one root its calls hang under.
    pub fn agent_node_started(&self, run: &Run) -> Option<u64> {
        self.node_started(Some(&run.run_id), &agent_node(run), None, None)
    }

    /// The run's root node finished after `duration_ms`: `node.error` first when the run
    /// raised (`error`), then `node.finished` with the run's status (an aborted signal wins).
    pub fn agent_node_finished(&self, run: &Run, duration_ms: f64, outcome: &RunOutcome) {
        let node = agent_node(run);
        let run_id = Some(run.run_id.as_str());
        let status = match (outcome, run.signal.is_aborted()) {
            (_, true) | (RunOutcome::Aborted, _) => RunStatus::Aborted,
            (RunOutcome::Ok, false) => RunStatus::Ok,
            (RunOutcome::Error(error), false) => {
                self.node_error(run_id, &node, error.clone());
                RunStatus::Error
            }
        };
        let mut finished = NodeFinished::new(
            node.node_id.as_str(),
            normalize_duration(duration_ms),
            status,
        );
        finished.instance_id = Some(node.instance_id.as_str().into());
        self.emit_typed(run_id, MessageType::NodeFinished, finished.into_value());
    }

    /// The implicit run that events outside any run share (started on first use).
    pub fn implicit_run(&self) -> Run {
        let mut shared = self.inner.shared.lock();
        self.implicit_run_locked(&mut shared)
    }

    pub(super) fn implicit_run_locked(&self, shared: &mut Shared) -> Run {
        if let Some(run) = &shared.implicit_run {
            return run.clone();
        }
        let run = Run::new("implicit");
        shared.implicit_run = Some(run.clone());
        shared.runs.insert(run.run_id.clone(), run.signal.clone());
        if self.inner.config.enabled && !shared.disposed {
            let payload = self.run_started_payload("implicit", None, true);
            self.ensure_worker(shared);
            self.enqueue(
                shared,
                &run.run_id,
                MessageType::RunStarted,
                payload,
                None,
                None,
            );
        }
        run
    }

    pub(super) fn run_id_or_implicit(&self, shared: &mut Shared, run_id: Option<&str>) -> String {
        match run_id {
            Some(id) => id.to_string(),
            None => self.implicit_run_locked(shared).run_id,
        }
    }

    /// How many watched calls of `run_id` the loop guard holds open (started, not finished):
    /// diagnostics, e.g. to check that dropped events do not leak them.
    pub fn loop_open_calls(&self, run_id: &str) -> usize {
        self.inner.loop_guard.lock().open_calls(run_id)
    }

    /// The abort signal of a live run (`None` when it is unknown or finished).
    pub fn run_signal(&self, run_id: &str) -> Option<Arc<RunSignal>> {
        self.inner.shared.lock().runs.get(run_id).cloned()
    }
}
