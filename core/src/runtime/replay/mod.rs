//! Replay: a recorded run answers the live app's tool and model calls until the fork point
//! or the first call whose input differs, then the run goes live.
//!
//! ```text
//! GRAPHMIND_REPLAY=<run id>[@<nodeId>#<n>] | GRAPHMIND_REPLAY_FILE=<export> | option `replay`
//!   -> config::Config::replay (a ReplaySpec)
//! Session::start_run  -> on_run_start: the recording is loaded (once) and bound to this run
//!                        (same name), run.started.meta gets replayOf / from
//! Step::start / LlmStep::start -> decide(): Replay(answer) | Live(why) | Off
//!   Replay: no gate, no function call; node.started / node.finished carry `replayed: true`
//!           and the skin gets Next::ReturnInjected(output) (a model call: the provider
//!           reply rebuilt by the codec, or Next::Stream of rebuilt chunks), or
//!           Next::Raise(error) for a recorded error
//!   Live:   node.started carries `replayLive: {reason, at, differs?}`; every later call
//!           of the run is live
//! ```
//!
//! Executions are matched per node in the order they started: the live call of `nodeId`
//! number `n` is answered by the recorded one number `n` when their inputs have the same
//! key ([`recording::match_key`]: the canonical fingerprint of the input, nulls left out,
//! tool-call argument text compared as its value). Bad input (no such file or run, not an
//! export, a recording of another app) is one warning and a live run: replay never stops
//! the app.

pub mod fetch;
pub mod recording;
pub mod spec;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use recording::{Execution, Outcome, Recording};
pub use spec::{ForkPoint, ReplaySource, ReplaySpec};

use crate::json::{Map, Value};
use crate::session::Session;

/// `run.started.meta` key: the id of the run being replayed.
pub const META_REPLAY_OF: &str = "replayOf";
/// `run.started.meta` key: the fork point, `<nodeId>#<n>`.
pub const META_FROM: &str = "from";
/// `node.started` / `node.finished` field of an execution answered from the recording.
pub const FIELD_REPLAYED: &str = "replayed";
/// `node.started` field of the execution where the replay went live.
pub const FIELD_LIVE: &str = "replayLive";

/// `replayLive` field of a divergence: the recorded call's match key.
pub const FIELD_RECORDED_KEY: &str = "recordedKey";
/// `replayLive` field of a divergence: the live call's match key.
pub const FIELD_LIVE_KEY: &str = "liveKey";

/// What differed at a divergence: the input's paths and both match keys.
struct Divergence {
    paths: Vec<String>,
    recorded_key: String,
    live_key: String,
}

/// Why a replay went live at a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveReason {
    /// The fork point asked for.
    Fork,
    /// The call's input differs from the recorded one.
    Diverged,
    /// The recording has no such call.
    Unrecorded,
    /// The recorded call never finished.
    Unfinished,
    /// A model call of an API (or a stream) whose reply replay cannot rebuild yet.
    Unsupported,
}

impl LiveReason {
    /// `fork`, `diverged`, `unrecorded`, `unfinished`, `unsupported`.
    pub fn as_str(self) -> &'static str {
        match self {
            LiveReason::Fork => "fork",
            LiveReason::Diverged => "diverged",
            LiveReason::Unrecorded => "unrecorded",
            LiveReason::Unfinished => "unfinished",
            LiveReason::Unsupported => "unsupported",
        }
    }
}

/// A recorded answer to a live call.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// What the call returns or raises.
    pub outcome: Outcome,
    /// The recorded usage (model calls).
    pub usage: Option<Value>,
    /// The output is the edited one (`--output`), not the recorded one.
    pub edited: bool,
}

/// What a call does under replay.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// No replay for this call: record and run it as always.
    Off,
    /// Answer it from the recording.
    Replay(Answer),
    /// The replay went live here: run it, and record this `replayLive` field on its
    /// `node.started`.
    Live(Map),
}

/// What a replay has done so far (the test helpers' report).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayReport {
    /// The recorded run.
    pub replay_of: Option<String>,
    /// The run it answers.
    pub run_id: Option<String>,
    /// Calls answered from the recording.
    pub replayed: u64,
    /// Where it went live, with the `replayLive` field recorded there.
    pub live: Option<Map>,
    /// Why nothing was replayed, when the recording could not be used.
    pub error: Option<String>,
}

impl ReplayReport {
    /// `{replayOf, runId, replayed, live, error}`.
    pub fn to_value(&self) -> Value {
        let opt = |s: &Option<String>| s.as_deref().map_or(Value::Null, Value::from);
        let mut m = Map::with_capacity(5);
        m.insert("replayOf", opt(&self.replay_of));
        m.insert("runId", opt(&self.run_id));
        m.insert("replayed", Value::from(self.replayed));
        m.insert("live", self.live.clone().map_or(Value::Null, Value::Object));
        m.insert("error", opt(&self.error));
        Value::Object(m)
    }
}

/// One session's replay, kept in the session under a lock the fork protocol holds (a
/// process-wide table of them had a lock no fork carried across: a child forked while
/// another thread held it waited for it forever).
#[derive(Debug)]
pub(crate) struct Replayer {
    spec: ReplaySpec,
    recording: Option<Recording>,
    bound_run: Option<String>,
    live: bool,
    counts: HashMap<String, u32>,
    edited_target: Option<(String, u32)>,
    report: ReplayReport,
}

/// Sessions given a replayer and not ended: while none is, no call takes a session's
/// replay lock (the fast path of [`decide`]). A session dropped while replaying leaves it
/// up, which costs the other sessions only that lock.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` on `session`'s replayer, under its lock; `None` when it has none.
fn with_replayer<R>(session: &Session, f: impl FnOnce(&mut Replayer) -> R) -> Option<R> {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return None;
    }
    session.replay_slot().lock().as_mut().map(f)
}

fn register(session: &Session, replayer: Replayer) {
    if session.replay_slot().lock().replace(replayer).is_none() {
        ACTIVE.fetch_add(1, Ordering::AcqRel);
    }
}

/// Loads `spec`'s recording for `session` (the server's address from its config) and
/// checks it fits: one warning and `None` when it does not.
fn load(session: &Session, spec: &ReplaySpec) -> Result<Recording, String> {
    let loaded = match &spec.source {
        ReplaySource::File(path) => fetch::load_file(path),
        ReplaySource::Run(run) => fetch::load_run(&session.config().url, run),
    };
    let recording = loaded.map_err(|e| e.to_string())?;
    let app = session.config().app_name.as_str();
    if let Some(recorded) = recording.app.as_deref() {
        if recorded != app {
            return Err(format!(
                "run {} was recorded by the app {recorded:?}, not {app:?}",
                recording.run_id
            ));
        }
    }
    Ok(recording)
}

fn new_replayer(session: &Session, spec: ReplaySpec) -> Replayer {
    let mut report = ReplayReport::default();
    let recording = match load(session, &spec) {
        Ok(r) => Some(r),
        Err(why) => {
            session.warn("replay-load", &format!("replay: {why}; running live"));
            report.error = Some(why);
            None
        }
    };
    let mut edited_target = None;
    if let (Some(rec), Some(_)) = (&recording, &spec.output) {
        match spec.fork.as_ref().and_then(|f| rec.before(&f.node_id, f.n)) {
            Some(target) => edited_target = Some(target.clone()),
            None => session.warn(
                "replay-output",
                "replay: an edited output needs a fork point with a recorded call before it; \
                 the recorded outputs are used",
            ),
        }
    }
    report.replay_of = recording.as_ref().map(|r| r.run_id.clone());
    Replayer {
        spec,
        recording,
        bound_run: None,
        live: false,
        counts: HashMap::new(),
        edited_target,
        report,
    }
}

/// Starts replaying `spec` in `session` now (the test helpers; the variables and the
/// option are read by the session itself): the next run started is answered from it.
/// Loads at once; a recording that cannot be used is warned about and reported
/// ([`report`]), and runs stay live.
pub fn begin(session: &Session, spec: ReplaySpec) -> ReplayReport {
    let replayer = new_replayer(session, spec);
    let report = replayer.report.clone();
    register(session, replayer);
    report
}

/// [`begin`] with the `replay` option's value (`"<run id>[@<nodeId>#<n>]"` or `{run?,
/// file?, from?, output?}`), as a test helper hands it over: a value that names no
/// replay is reported (`error`) and nothing is replayed.
pub fn begin_value(session: &Session, value: &Value) -> ReplayReport {
    let mut warnings = Vec::new();
    match spec::resolve(
        Some(value),
        &crate::config::EnvSnapshot::new(),
        &mut warnings,
    ) {
        Some(spec) => begin(session, spec),
        None => ReplayReport {
            error: Some(warnings.join("; ")),
            ..Default::default()
        },
    }
}

/// Stops replaying in `session`: later calls run live. Returns the last report.
pub fn end(session: &Session) -> Option<ReplayReport> {
    let replayer = session.replay_slot().lock().take()?;
    ACTIVE.fetch_sub(1, Ordering::AcqRel);
    Some(replayer.report)
}

/// Whether `session` is replaying a run now (bound to a run, not yet live): the fast
/// check a step makes before it resolves its input for [`decide`].
pub fn is_replaying(session: &Session) -> bool {
    with_replayer(session, |r| {
        !r.live && r.bound_run.is_some() && r.recording.is_some()
    })
    .unwrap_or(false)
}

/// What `session`'s replay has done so far (`None`: not replaying).
pub fn report(session: &Session) -> Option<ReplayReport> {
    with_replayer(session, |r| r.report.clone())
}

/// A run starts: the session's replay (from its config, loaded on the first run) binds
/// to it when it is the first run with the recorded run's name. Returns the meta fields
/// to add (`replayOf`, `from`).
pub fn on_run_start(session: &Session, run_id: &str, name: &str) -> Option<Map> {
    if with_replayer(session, |_| ()).is_none() {
        let spec = session.config().replay.clone()?;
        if !session.is_enabled() {
            return None;
        }
        // Registered once per session whether or not it loads: a bad one warns once.
        register(session, new_replayer(session, spec));
    }
    with_replayer(session, |r| bind(session, r, run_id, name))?
}

/// Binds `r` to the run `run_id` named `name` when it is the recorded one (see
/// [`on_run_start`]).
fn bind(session: &Session, r: &mut Replayer, run_id: &str, name: &str) -> Option<Map> {
    if r.bound_run.is_some() {
        return None;
    }
    let recording = r.recording.as_ref()?;
    if let Some(recorded) = recording.run_name.as_deref() {
        if recorded != name {
            session.warn(
                "replay-name",
                &format!("replay: run {name:?} is not the recorded run {recorded:?}; it runs live"),
            );
            return None;
        }
    }
    let mut meta = Map::with_capacity(2);
    meta.insert(META_REPLAY_OF, Value::from(recording.run_id.as_str()));
    if let Some(fork) = &r.spec.fork {
        meta.insert(META_FROM, Value::from(fork.to_text()));
    }
    r.bound_run = Some(run_id.to_string());
    r.report.run_id = Some(run_id.to_string());
    Some(meta)
}

/// What the live call number `n` of `node_id` in `run_id` does, its `input` compared with
/// the recorded one (a model call: its request's input, without tool definitions).
/// `answerable`: whether a recorded answer could be handed to this call (a stream this
/// codec cannot rebuild cannot); when not, the replay goes live here.
pub fn decide(
    session: &Session,
    run_id: Option<&str>,
    node_id: &str,
    input: Option<&Value>,
    answerable: bool,
) -> Decision {
    let Some(run_id) = run_id else {
        return Decision::Off;
    };
    with_replayer(session, |r| {
        decide_with(session, r, run_id, node_id, input, answerable)
    })
    .unwrap_or(Decision::Off)
}

/// [`decide`] for the session's replayer `r`.
fn decide_with(
    session: &Session,
    r: &mut Replayer,
    run_id: &str,
    node_id: &str,
    input: Option<&Value>,
    answerable: bool,
) -> Decision {
    if r.live || r.bound_run.as_deref() != Some(run_id) {
        return Decision::Off;
    }
    let Some(recording) = r.recording.as_ref() else {
        return Decision::Off;
    };
    let n = {
        let c = r.counts.entry(node_id.to_string()).or_insert(0);
        *c += 1;
        *c
    };
    let at = format!("{node_id}#{n}");
    let live = |reason: LiveReason, diverged: Option<Divergence>| {
        let mut m = Map::with_capacity(5);
        m.insert("reason", Value::from(reason.as_str()));
        m.insert("at", Value::from(at.as_str()));
        if let Some(d) = diverged {
            m.insert(
                "differs",
                Value::Array(d.paths.into_iter().map(Value::from).collect()),
            );
            m.insert(FIELD_RECORDED_KEY, Value::from(d.recorded_key));
            m.insert(FIELD_LIVE_KEY, Value::from(d.live_key));
        }
        m
    };
    let outcome = if r
        .spec
        .fork
        .as_ref()
        .is_some_and(|f| f.node_id == node_id && f.n == n)
    {
        Err(live(LiveReason::Fork, None))
    } else {
        match recording.execution(node_id, n) {
            None => Err(live(LiveReason::Unrecorded, None)),
            Some(exec) => {
                let key = recording::match_key(node_id, input);
                if key != exec.key {
                    let divergence = Divergence {
                        paths: recording::diff_paths(exec.input.as_ref(), input),
                        recorded_key: exec.key.clone(),
                        live_key: key,
                    };
                    Err(live(LiveReason::Diverged, Some(divergence)))
                } else if exec.outcome == Outcome::Unfinished {
                    Err(live(LiveReason::Unfinished, None))
                } else if !answerable {
                    Err(live(LiveReason::Unsupported, None))
                } else {
                    Ok((exec.outcome.clone(), exec.usage.clone()))
                }
            }
        }
    };
    match outcome {
        Ok((recorded, usage)) => {
            r.report.replayed += 1;
            let edited = r
                .edited_target
                .as_ref()
                .is_some_and(|(id, k)| id == node_id && *k == n);
            let outcome = match (&r.spec.output, edited) {
                (Some(v), true) => Outcome::Output(Some(v.clone())),
                _ => recorded,
            };
            Decision::Replay(Answer {
                outcome,
                usage,
                edited,
            })
        }
        Err(field) => {
            r.live = true;
            r.report.live = Some(field.clone());
            let reason = field.get("reason").and_then(Value::as_str).unwrap_or("");
            if reason != LiveReason::Fork.as_str() {
                let differs = field
                    .get("differs")
                    .map(|d| format!(" ({})", crate::json::to_string(d)))
                    .unwrap_or_default();
                session.warn(
                    "replay-live",
                    &format!("replay: {at} {reason}{differs}; the run is live from here"),
                );
            }
            Decision::Live(field)
        }
    }
}

#[cfg(test)]
mod tests;
