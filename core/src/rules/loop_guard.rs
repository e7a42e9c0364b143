//! The loop guard: hold (or warn about) an agent that makes the same call again and again.
//!
//! Rule v3 ("a loop is the same call back-to-back"): per run and per watched node kind the
//! guard keeps ONE streak `{nodeId, fingerprint, count, firstSeq, lastSeq}`.
//!
//! - A start is *watched* when the guard is enabled (threshold > 0, mode not off), its kind
//!   is in `kinds` and neither its node id nor its name is in `allow_nodes`.
//! - A watched start with a readable input extends its kind's streak when node id and
//!   fingerprint ([`crate::fingerprint`]) match, and otherwise replaces it with a fresh
//!   streak of count 1.
//! - A watched start whose input cannot be read clears its kind's streak.
//! - Unwatched starts touch nothing: an LLM step between two identical tool calls does not
//!   separate them, an allow-listed call is invisible.
//! - The before-gate of a call holds when its kind's streak is this node's, its count has
//!   reached the threshold and this count has not held yet (a retry does not hold again).
//!
//! The 0.6 loop kinds (`cycle`, `error-repeat`) live in [`history`]: each (run, watched
//! kind) also remembers its last [`LOOP_HISTORY_SIZE`] completed calls. They are **off by
//! default** ([`LoopDetect`]): the spec says an agent alternating between two tools is not
//! held, so they hold only when a user opts in (`loopGuard.detect`, `GRAPHMIND_LOOP_DETECT`).
//! Precedence at one gate: repeat (v3) > cycle > error-repeat.
//!
//! State is bounded: at most [`MAX_LOOP_RUNS`] runs (least recently used evicted), one
//! streak and one history per watched kind, [`MAX_OPEN_CALLS_PER_RUN`] open calls per run.
//! The guard keeps no reference to a caller's value. It is not synchronised: a session
//! wraps it in its lock and can fingerprint outside the lock with
//! [`LoopGuard::fingerprint_start`].

mod history;
mod key;

use crate::canonical::write_escaped;
use crate::fingerprint::HashSink;
use crate::json::{JsStr, Map, Value};
use history::{CallEntry, KindHistory, OpenCall, OutDigest, Outcome};
use sha2::{Digest, Sha256};
use std::sync::{Arc, OnceLock};

pub use history::{
    CYCLE_LAPS, CYCLE_MAX_PERIOD, CYCLE_MIN_PERIOD, ERROR_REPEAT_COUNT, LOOP_HISTORY_SIZE,
    MAX_OUTPUT_CANONICAL_CHARS,
};

/// Distinct runs whose loop state is kept; the least recently used is evicted past this.
pub const MAX_LOOP_RUNS: usize = 64;
/// Started-but-unfinished watched calls remembered per run; the oldest is forgotten past this.
pub const MAX_OPEN_CALLS_PER_RUN: usize = 256;
/// Default number of identical back-to-back calls that make a loop.
pub const DEFAULT_LOOP_THRESHOLD: u32 = 3;
/// Default watched node kinds.
pub const DEFAULT_LOOP_KINDS: &[&str] = &["tool"];
/// The detector names `loopGuard.detect` / `GRAPHMIND_LOOP_DETECT` take. `repeat` (rule v3)
/// is always on; naming it is allowed and changes nothing.
pub const LOOP_DETECTORS: &[&str] = &["repeat", "cycle", "error-repeat"];
/// What every warning line starts with (the session's warner prints it).
pub const WARNING_PREFIX: &str = "[graphmind] ";
/// What a hidden fingerprint is replaced with on the wire.
pub const REDACTED: &str = "__REDACTED__";

/// What the guard does at the threshold (`GRAPHMIND_ON_LOOP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopMode {
    /// Hold the call while a debugger is attached; warn once per streak when not.
    Pause,
    /// Never hold; warn once per streak.
    Warn,
    /// Nothing at all, not even fingerprinting.
    Off,
}

/// The resolved loop-guard settings (options > environment > defaults, resolved elsewhere).
#[derive(Clone, Debug, PartialEq)]
pub struct LoopGuardConfig {
    /// Identical back-to-back calls that count as a loop; 0 turns the guard off.
    pub threshold: u32,
    /// What to do at the threshold.
    pub mode: LoopMode,
    /// Node ids (`tool:pollJob`) or names (`pollJob`) never watched.
    pub allow_nodes: Vec<String>,
    /// Keys removed at every depth before fingerprinting.
    pub ignore_keys: Vec<String>,
    /// Node kinds watched.
    pub kinds: Vec<String>,
    /// The detectors beyond rule v3, each off unless asked for.
    pub detect: LoopDetect,
}

/// The opt-in loop detectors of the reference's 0.6 client. Both are off by default, since
/// they hold calls the spec says are not held (alternating tools; the same error with
/// different arguments).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopDetect {
    /// `cycle`: 2 to 4 calls repeated in identical laps, results included.
    pub cycle: bool,
    /// `error-repeat`: a node's last calls failed with an identical error.
    pub error_repeat: bool,
}

impl LoopDetect {
    /// Both detectors on.
    pub const ALL: LoopDetect = LoopDetect {
        cycle: true,
        error_repeat: true,
    };

    /// Whether any detector beyond rule v3 is on (the history is kept only then).
    pub fn any(self) -> bool {
        self.cycle || self.error_repeat
    }

    /// The detectors named in `names` ([`LOOP_DETECTORS`], any case, trimmed, empty names
    /// skipped), and the names that are none of them.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> (LoopDetect, Vec<String>) {
        let mut detect = LoopDetect::default();
        let mut unknown = Vec::new();
        for name in names {
            let raw = name.as_ref();
            match raw.trim().to_ascii_lowercase().as_str() {
                "" | "repeat" => {}
                "cycle" => detect.cycle = true,
                "error-repeat" => detect.error_repeat = true,
                _ => unknown.push(raw.to_owned()),
            }
        }
        (detect, unknown)
    }

    /// The names of the detectors on, rule v3's `repeat` first (it is always on).
    pub fn names(self) -> Vec<&'static str> {
        let mut out = vec!["repeat"];
        if self.cycle {
            out.push("cycle");
        }
        if self.error_repeat {
            out.push("error-repeat");
        }
        out
    }
}

impl Default for LoopGuardConfig {
    fn default() -> Self {
        LoopGuardConfig {
            threshold: DEFAULT_LOOP_THRESHOLD,
            mode: LoopMode::Pause,
            allow_nodes: Vec::new(),
            ignore_keys: crate::canonical::DEFAULT_IGNORE_KEYS
                .iter()
                .map(|k| k.to_string())
                .collect(),
            kinds: DEFAULT_LOOP_KINDS.iter().map(|k| k.to_string()).collect(),
            detect: LoopDetect::default(),
        }
    }
}

/// A call's input (or output) as the caller could read it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoopValue<'a> {
    /// Read; `None` when the call had none (canonicalised as `null`).
    Read(Option<&'a Value>),
    /// Reading it failed (a throwing getter, a host value that could not be converted
    /// faithfully), or the event never reached the wire: equal to nothing.
    Unreadable,
}

impl<'a> From<Option<&'a Value>> for LoopValue<'a> {
    fn from(v: Option<&'a Value>) -> Self {
        LoopValue::Read(v)
    }
}

impl<'a> From<&'a Value> for LoopValue<'a> {
    fn from(v: &'a Value) -> Self {
        LoopValue::Read(Some(v))
    }
}

/// One `node.started`, as the guard needs it.
#[derive(Clone, Copy, Debug)]
pub struct NodeStart<'a> {
    /// The run it belongs to.
    pub run_id: &'a str,
    /// The node id (`tool:search`).
    pub node_id: &'a str,
    /// The node's name (`search`); see [`default_node_name`].
    pub name: &'a str,
    /// The node kind (`tool`, `llm`, ...).
    pub kind: &'a str,
    /// The instance id, which correlates `node.error` / `node.finished` with this start.
    pub instance_id: Option<&'a str>,
    /// The input.
    pub input: LoopValue<'a>,
    /// The envelope seq the start received.
    pub seq: u64,
}

impl<'a> NodeStart<'a> {
    /// A start with the default name (see [`default_node_name`]) and no instance id.
    pub fn new(
        run_id: &'a str,
        node_id: &'a str,
        kind: &'a str,
        input: LoopValue<'a>,
        seq: u64,
    ) -> Self {
        NodeStart {
            run_id,
            node_id,
            name: default_node_name(node_id),
            kind,
            instance_id: None,
            input,
            seq,
        }
    }

    /// With this name.
    pub fn name(mut self, name: &'a str) -> Self {
        self.name = name;
        self
    }

    /// With this instance id.
    pub fn instance(mut self, instance_id: &'a str) -> Self {
        self.instance_id = Some(instance_id);
        self
    }
}

/// A node's name when none was given: its id after the first colon (`tool:search` →
/// `search`), or the whole id.
pub fn default_node_name(node_id: &str) -> &str {
    node_id.split_once(':').map_or(node_id, |(_, name)| name)
}

/// Which detector held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    /// v3: the same call back-to-back (`loop.kind` absent on the wire).
    Repeat,
    /// A lap of `period` calls repeated `laps` times with identical results.
    Cycle {
        /// Calls per lap (2..=4).
        period: u32,
        /// Identical laps seen before this hold.
        laps: u32,
    },
    /// The node failed with the same error [`ERROR_REPEAT_COUNT`] times or more.
    ErrorRepeat,
}

/// What `exec.paused.loop` carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopInfo {
    /// Which detector held.
    pub kind: LoopKind,
    /// v3: identical back-to-back calls including this one; cycle: identical laps;
    /// error-repeat: identical failures before this call.
    pub repeats: u32,
    /// Seq of the first `node.started` of the evidence.
    pub first_seq: u64,
    /// Seq of the held call's `node.started`.
    pub last_seq: u64,
    /// v3: the call's fingerprint; cycle / error-repeat: a per-process salted digest;
    /// [`REDACTED`] when a hide switch covers it.
    pub fingerprint: String,
}

impl LoopInfo {
    /// The `loop` object of `exec.paused`: `repeats`, `firstSeq`, `lastSeq`, `fingerprint`,
    /// then `kind` (and `period`, `laps` for a cycle) for the 0.6 kinds.
    pub fn to_wire(&self) -> Value {
        self.to_event().to_value()
    }

    /// The wire type `exec.paused.loop` is built from.
    pub fn to_event(&self) -> crate::event::LoopInfo {
        use crate::event::LoopKind as WireKind;
        let (kind, period, laps) = match self.kind {
            LoopKind::Repeat => (None, None, None),
            LoopKind::Cycle { period, laps } => (
                Some(WireKind::Cycle),
                Some(u64::from(period)),
                Some(u64::from(laps)),
            ),
            LoopKind::ErrorRepeat => (Some(WireKind::ErrorRepeat), None, None),
        };
        crate::event::LoopInfo {
            repeats: u64::from(self.repeats),
            first_seq: self.first_seq,
            last_seq: self.last_seq,
            fingerprint: self.fingerprint.as_str().into(),
            kind,
            period,
            laps,
            extra: Map::new(),
        }
    }
}

/// Which of a node's values the hide switches cover, for the fingerprint a hold reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopHide {
    /// The node's input is hidden (`hideInputs`, or `hideToolArgs` on a tool node).
    pub input: bool,
    /// The node's output is hidden (`hideOutputs`, or `hideToolResults` on a tool node).
    pub output: bool,
}

impl LoopHide {
    /// From the four switches and whether the node is a tool node.
    pub fn for_node(
        hide_inputs: bool,
        hide_outputs: bool,
        hide_tool_args: bool,
        hide_tool_results: bool,
        tool: bool,
    ) -> Self {
        LoopHide {
            input: hide_inputs || (hide_tool_args && tool),
            output: hide_outputs || (hide_tool_results && tool),
        }
    }
}

/// A warning the session prints through its rate-limited warner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopWarning {
    /// The rate-limit key (`loop:tool:search`, `loop-cycle:…`, `loop-error:…`).
    pub key: String,
    /// The message, without [`WARNING_PREFIX`].
    pub message: String,
}

impl LoopWarning {
    /// The full line as printed: [`WARNING_PREFIX`] and the message.
    pub fn line(&self) -> String {
        format!("{WARNING_PREFIX}{}", self.message)
    }
}

/// What the session does about a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoopVerdict {
    /// Nothing.
    Continue,
    /// Hold the before-gate with `reason: "loop"` and this `loop`.
    Hold(LoopInfo),
    /// Print this warning (once per streak; the session's warner rate-limits by key).
    Warn(LoopWarning),
}

/// What recording a `node.started` gives back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartOutcome {
    /// The call's fingerprint; `None` when the start is not watched or its input could not
    /// be read.
    pub fingerprint: Option<String>,
    /// The streak's count after this start (0 when nothing was recorded).
    pub repeats: u32,
    /// [`LoopVerdict::Warn`] when nothing will hold this loop, else `Continue`.
    pub verdict: LoopVerdict,
}

/// A call's fingerprint, computed without the guard's state (so a session can do it
/// outside its lock): 16 bytes of SHA-256, or `None` when not comparable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartFingerprint(Option<Fp>);

/// 16 bytes of a digest.
pub(crate) type Fp = [u8; 16];

pub(crate) fn hex(fp: &Fp) -> String {
    crate::fingerprint::to_hex(fp)
}

/// The v3 streak of one (run, kind).
#[derive(Clone, Debug)]
struct Streak {
    node_id: JsStr,
    fingerprint: Fp,
    repeats: u32,
    first_seq: u64,
    last_seq: u64,
    /// This count already held.
    tripped: bool,
    /// This streak already produced its one warning.
    warned: bool,
    /// The fingerprint a hold of this streak reports, computed when it reaches the
    /// threshold.
    reported: Option<String>,
}

#[derive(Debug, Default)]
struct RunState {
    /// Per watched kind (index into the config's kinds): the v3 streak.
    streaks: Vec<Option<Streak>>,
    /// Per watched kind: the v4 history.
    histories: Vec<KindHistory>,
    /// Watched calls started and not completed, oldest first.
    open: std::collections::VecDeque<OpenCall>,
}

/// What the guard compares, without its books: the settings and the salt. It keys a call's
/// input ([`LoopKeyer::fingerprint_start`]) and outcome ([`LoopKeyer::key_finish`]) from
/// the values alone, so a session does that before it takes the guard's lock and holds the
/// lock only to update the books. Cloning it shares the settings.
#[derive(Clone, Debug)]
pub struct LoopKeyer {
    config: Arc<LoopGuardConfig>,
    salt: [u8; 32],
}

impl LoopKeyer {
    /// The settings.
    pub fn config(&self) -> &LoopGuardConfig {
        &self.config
    }

    /// False when nothing is ever fingerprinted (mode off or threshold 0).
    pub fn enabled(&self) -> bool {
        self.config.mode != LoopMode::Off && self.config.threshold > 0
    }

    /// Does the guard watch a start of this node?
    pub fn applies_to(&self, kind: &str, node_id: &str, name: &str) -> bool {
        self.kind_index(kind).is_some() && !self.allowed(node_id, name)
    }

    fn allowed(&self, node_id: &str, name: &str) -> bool {
        self.config
            .allow_nodes
            .iter()
            .any(|a| a == node_id || a == name)
    }

    fn kind_index(&self, kind: &str) -> Option<usize> {
        if !self.enabled() {
            return None;
        }
        self.config.kinds.iter().position(|k| k == kind)
    }

    /// The comparison key of a start ([`key`]: equal exactly when the canonical texts of
    /// `[nodeId, input]` are), or `None` inside when it is not comparable. Then
    /// [`LoopGuard::record_start`].
    pub fn fingerprint_start(&self, node_id: &str, input: LoopValue<'_>) -> StartFingerprint {
        match input {
            LoopValue::Unreadable => StartFingerprint(None),
            LoopValue::Read(value) => StartFingerprint(
                key::KeyWalker::new(&self.salt, &self.config.ignore_keys)
                    .comparable_call_key(node_id.as_bytes(), value),
            ),
        }
    }

    /// The keys of a `node.finished`'s outcome: `status` is the event's status (`ok`,
    /// `error`, ...), `emitted` false when the event never reached the wire. Then
    /// [`LoopGuard::record_finish`]. An error-shaped output ([`crate::smart::error_result_shape`])
    /// is also keyed as a result, which is the outcome when the call is a tool's.
    pub fn key_finish(
        &self,
        status: Option<&str>,
        output: LoopValue<'_>,
        emitted: bool,
    ) -> FinishKey {
        self.key_finish_with(status, output, emitted, false)
    }

    /// [`LoopKeyer::key_finish`] of an emitted event, leaving a successful output to be
    /// keyed later, by whoever holds it then ([`LoopGuard::record_finish`] gives the ticket,
    /// [`LoopKeyer::key_output`] the key, [`LoopGuard::fill_output`] takes it). Only a cycle
    /// compares successful outputs, so the application thread need not walk them: a
    /// session's worker does, as it serializes the event.
    pub fn key_finish_later(&self, status: Option<&str>, output: LoopValue<'_>) -> FinishKey {
        self.key_finish_with(status, output, true, true)
    }

    /// The key a successful output left for later ([`LoopKeyer::key_finish_later`]) gets.
    pub fn key_output(&self, output: Option<&Value>) -> OutputKey {
        OutputKey(history::outcome_digest(
            b"out",
            output,
            &self.config.ignore_keys,
            &self.salt,
        ))
    }

    fn key_finish_with(
        &self,
        status: Option<&str>,
        output: LoopValue<'_>,
        emitted: bool,
        later: bool,
    ) -> FinishKey {
        let LoopValue::Read(output) = output else {
            return FinishKey(match status {
                Some("error") if emitted => OutcomeKey::Error { shaped: None },
                _ => OutcomeKey::Unknown,
            });
        };
        let shaped = || {
            let shape = crate::smart::error_result_shape(output?)?;
            Some(ShapedResult {
                key: history::outcome_digest(b"res", output, &self.config.ignore_keys, &self.salt),
                returned: shape.is_returned(),
            })
        };
        FinishKey(match status {
            _ if !emitted => OutcomeKey::Unknown,
            Some("ok") => OutcomeKey::Ok {
                // Numbered when the call enters its history.
                out: if later {
                    OutDigest::Later(0)
                } else {
                    OutDigest::Known(self.key_output(output).0)
                },
                shaped: shaped(),
            },
            Some("error") => OutcomeKey::Error { shaped: shaped() },
            _ => OutcomeKey::Unknown,
        })
    }
}

/// A `node.finished`'s outcome keyed from its status and output alone
/// ([`LoopKeyer::key_finish`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FinishKey(OutcomeKey);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutcomeKey {
    /// Equals nothing: not emitted, an unreadable output on success, another status.
    Unknown,
    /// Status `ok`: the output's key (or a key to come), and its key as a result when it
    /// is error-shaped.
    Ok {
        out: OutDigest,
        shaped: Option<ShapedResult>,
    },
    /// Status `error`: the output's key as a result when it is error-shaped.
    Error { shaped: Option<ShapedResult> },
}

/// A successful output's key, computed after its call completed ([`LoopKeyer::key_output`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputKey(Option<Fp>);

/// Which completed call waits for its output's key ([`LoopGuard::record_finish`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputTicket {
    kind: usize,
    /// Unique among the tickets of its guard, so a run evicted and started again never
    /// takes another call's key.
    number: u64,
}

/// An error-shaped output keyed as a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ShapedResult {
    /// `None`: too large to key.
    key: Option<Fp>,
    /// A failure the tool returned (not an adapter's wrapped throw).
    returned: bool,
}

impl FinishKey {
    /// The outcome and its digest for a call of a tool (`is_tool`) or not, whose latest
    /// `node.error` had the digest `thrown`; `None`: unknown.
    fn outcome(self, is_tool: bool, thrown: Option<Fp>) -> Option<(Outcome, OutDigest)> {
        let failed = |shaped: Option<ShapedResult>| shaped.filter(|_| is_tool);
        match self.0 {
            OutcomeKey::Unknown => None,
            OutcomeKey::Ok { shaped, out } => Some(match failed(shaped) {
                Some(result) => (Outcome::Fail, OutDigest::Known(result.key)),
                None => (Outcome::Ok, out),
            }),
            OutcomeKey::Error { shaped } => {
                let digest = match failed(shaped) {
                    Some(result) if result.returned => result.key,
                    _ if thrown.is_some() => thrown,
                    Some(result) => result.key,
                    None => None,
                };
                Some((Outcome::Fail, OutDigest::Known(digest)))
            }
        }
    }
}

/// The loop guard of one session.
#[derive(Debug)]
pub struct LoopGuard {
    keyer: LoopKeyer,
    /// Runs, least recently used first.
    runs: Vec<(String, RunState)>,
    /// Output tickets handed out ([`LoopGuard::record_finish`]).
    tickets_issued: u64,
}

impl LoopGuard {
    /// A guard with the per-process salt for the 0.6 digests.
    pub fn new(config: LoopGuardConfig) -> Self {
        Self::with_salt(config, *process_salt())
    }

    /// A guard whose 0.6 digests use `salt` (tests).
    pub fn with_salt(config: LoopGuardConfig, salt: [u8; 32]) -> Self {
        LoopGuard {
            keyer: LoopKeyer {
                config: Arc::new(config),
                salt,
            },
            runs: Vec::new(),
            tickets_issued: 0,
        }
    }

    /// What keys calls for this guard, to use outside its lock.
    pub fn keyer(&self) -> &LoopKeyer {
        &self.keyer
    }

    /// The settings.
    pub fn config(&self) -> &LoopGuardConfig {
        self.keyer.config()
    }

    /// False when nothing is ever fingerprinted (mode off or threshold 0).
    pub fn enabled(&self) -> bool {
        self.keyer.enabled()
    }

    /// Runs currently tracked.
    pub fn tracked_runs(&self) -> usize {
        self.runs.len()
    }

    /// Does the guard watch a start of this node?
    pub fn applies_to(&self, kind: &str, node_id: &str, name: &str) -> bool {
        self.keyer.applies_to(kind, node_id, name)
    }

    fn allowed(&self, node_id: &str, name: &str) -> bool {
        self.keyer.allowed(node_id, name)
    }

    fn kind_index(&self, kind: &str) -> Option<usize> {
        self.keyer.kind_index(kind)
    }

    /// [`LoopKeyer::fingerprint_start`].
    pub fn fingerprint_start(&self, node_id: &str, input: LoopValue<'_>) -> StartFingerprint {
        self.keyer.fingerprint_start(node_id, input)
    }

    /// The fingerprint a start reports: the first 16 bytes of SHA-256 of the canonical
    /// `[nodeId, input]`, in hex ([`crate::fingerprint`]'s rule, with the guard's ignore
    /// keys). Computed only when it is shown, never to compare.
    fn reported_fingerprint(&self, node_id: &str, input: Option<&Value>) -> String {
        let mut sink = HashSink::new(Sha256::new());
        crate::canonical::write_canonical_call(
            node_id.as_bytes(),
            input,
            &self.keyer.config.ignore_keys,
            &mut sink,
        );
        let digest = sink.finish();
        hex(&history::fp_of(&digest))
    }

    /// `node.started`: fingerprint, extend or replace the kind's streak, open the call for
    /// the history and look for a cycle or an error-repeat. `attached` tells whether a
    /// debugger would hold the call; when nothing will hold it, the outcome carries the one
    /// warning of its streak. The outcome also carries the call's reported fingerprint
    /// (SHA-256, which costs as much again as the rest: a session uses
    /// [`LoopGuard::observe_start`]).
    pub fn on_node_started(&mut self, start: &NodeStart<'_>, attached: bool) -> StartOutcome {
        let mut outcome = self.observe_start(start, attached);
        if outcome.repeats > 0 {
            if let LoopValue::Read(input) = start.input {
                outcome.fingerprint = Some(self.reported_fingerprint(start.node_id, input));
            }
        }
        outcome
    }

    /// [`LoopGuard::on_node_started`] without the reported fingerprint (`None`).
    pub fn observe_start(&mut self, start: &NodeStart<'_>, attached: bool) -> StartOutcome {
        if !self.applies_to(start.kind, start.node_id, start.name) {
            return StartOutcome {
                fingerprint: None,
                repeats: 0,
                verdict: LoopVerdict::Continue,
            };
        }
        let fp = self.fingerprint_start(start.node_id, start.input);
        self.record_start(start, fp, attached)
    }

    /// [`LoopGuard::on_node_started`] with a fingerprint computed beforehand.
    pub fn record_start(
        &mut self,
        start: &NodeStart<'_>,
        fp: StartFingerprint,
        attached: bool,
    ) -> StartOutcome {
        let nothing = StartOutcome {
            fingerprint: None,
            repeats: 0,
            verdict: LoopVerdict::Continue,
        };
        let Some(kind) = self.kind_index(start.kind) else {
            return nothing;
        };
        if self.allowed(start.node_id, start.name) {
            return nothing;
        }
        let kinds = self.keyer.config.kinds.len();
        let threshold = self.keyer.config.threshold;
        let salt = self.keyer.salt;
        let detect = self.keyer.config.detect;
        let state = self.state_for(start.run_id, kinds);
        state.histories[kind].verdict = None;
        let instance_id = start.instance_id;
        let Some(fp) = fp.0 else {
            // The call happened with arguments nobody can compare: the previous call is no
            // longer "the call right before" the next one.
            state.streaks[kind] = None;
            open_call(
                state,
                OpenCall::new(kind, start.node_id, instance_id, None, start.seq),
            );
            return nothing;
        };
        let (repeats, unreported) = match &mut state.streaks[kind] {
            Some(s) if s.node_id == start.node_id && s.fingerprint == fp => {
                s.repeats = s.repeats.saturating_add(1);
                s.last_seq = start.seq;
                s.tripped = false;
                (s.repeats, s.reported.is_none())
            }
            slot => {
                *slot = Some(Streak {
                    node_id: start.node_id.into(),
                    fingerprint: fp,
                    repeats: 1,
                    first_seq: start.seq,
                    last_seq: start.seq,
                    tripped: false,
                    warned: false,
                    reported: None,
                });
                (1, true)
            }
        };
        open_call(
            state,
            OpenCall::new(kind, start.node_id, instance_id, Some(fp), start.seq),
        );
        let history = &mut state.histories[kind];
        let cycle = if detect.cycle {
            history.detect_cycle(start.node_id, &fp, start.seq, &salt)
        } else {
            None
        };
        let detected = cycle.or_else(|| {
            detect
                .error_repeat
                .then(|| history.detect_error_repeat(start.node_id.as_bytes(), start.seq, &salt))
                .flatten()
        });
        if let Some(info) = &detected {
            history.verdict = Some(history::Verdict {
                node_id: start.node_id.to_owned(),
                info: info.clone(),
                tripped: false,
            });
        }
        let at_threshold = repeats >= threshold;
        if at_threshold && unreported {
            let input = match start.input {
                LoopValue::Read(v) => v,
                LoopValue::Unreadable => None,
            };
            let reported = self.reported_fingerprint(start.node_id, input);
            if let Some(s) = self
                .state_mut(start.run_id)
                .and_then(|state| state.streaks[kind].as_mut())
            {
                s.reported = Some(reported);
            }
        }
        let mut outcome = StartOutcome {
            fingerprint: None,
            repeats,
            verdict: LoopVerdict::Continue,
        };
        if self.keyer.config.mode == LoopMode::Pause && attached {
            return outcome;
        }
        let because = if self.keyer.config.mode == LoopMode::Warn {
            "GRAPHMIND_ON_LOOP=warn, so it is not being held"
        } else {
            "no debugger is attached to hold it (start `npx graphmind-ai` to pause it there)"
        };
        if !at_threshold {
            if let Some(info) = detected {
                outcome.verdict =
                    LoopVerdict::Warn(kind_warning(&info, start.node_id, start.name, because));
            }
            return outcome;
        }
        let Some(state) = self.state_mut(start.run_id) else {
            return outcome;
        };
        let Some(streak) = state.streaks[kind].as_mut() else {
            return outcome;
        };
        if streak.warned {
            return outcome;
        }
        streak.warned = true;
        outcome.verdict = LoopVerdict::Warn(LoopWarning {
            key: format!("loop:{}", start.node_id),
            message: repeat_warning_message(start.name, start.node_id, streak.repeats, because),
        });
        outcome
    }

    /// A watched start whose node id could not be read (bindings only): it clears its
    /// kind's streak and enters the history as a call that equals nothing.
    pub fn on_unidentified_start(&mut self, run_id: &str, kind: &str, seq: u64) {
        let Some(kind) = self.kind_index(kind) else {
            return;
        };
        let kinds = self.keyer.config.kinds.len();
        let state = self.state_for(run_id, kinds);
        state.histories[kind].verdict = None;
        state.streaks[kind] = None;
        state.histories[kind].push(CallEntry::unknown(None, seq));
    }

    /// Whether [`LoopGuard::consult_before`] could hold the next watched start in `run_id`
    /// (any node, any input) while `attached`: conservative, for a caller that wants to act
    /// before it records the start. `false` when the guard is not in mode pause, when no
    /// streak is one call short of the threshold and no history could trip a cycle or an
    /// error repeat.
    pub fn may_hold_next(&self, run_id: &str, attached: bool) -> bool {
        if self.keyer.config.mode != LoopMode::Pause || !attached || !self.enabled() {
            return false;
        }
        if self.keyer.config.threshold <= 1 {
            return true;
        }
        let Some((_, state)) = self.runs.iter().find(|(id, _)| id == run_id) else {
            return false;
        };
        let threshold = self.keyer.config.threshold;
        state
            .streaks
            .iter()
            .flatten()
            .any(|s| s.repeats.saturating_add(1) >= threshold)
            || (self.keyer.config.detect.any() && state.histories.iter().any(|h| h.may_detect()))
    }

    /// The before-gate of a call (consulted only in mode pause while `attached`): hold when
    /// this start is the Nth identical back-to-back call, else the start of a cycle's next
    /// lap, else the call after identical failures. Each start holds at most once: a retry
    /// that re-enters the gate runs on. The reported fingerprint follows `hide`.
    pub fn consult_before(
        &mut self,
        run_id: &str,
        kind: &str,
        node_id: &str,
        name: &str,
        attached: bool,
        hide: LoopHide,
    ) -> LoopVerdict {
        if self.keyer.config.mode != LoopMode::Pause
            || !attached
            || !self.applies_to(kind, node_id, name)
        {
            return LoopVerdict::Continue;
        }
        let Some(kind) = self.kind_index(kind) else {
            return LoopVerdict::Continue;
        };
        let threshold = self.keyer.config.threshold;
        let Some(state) = self.state_mut(run_id) else {
            return LoopVerdict::Continue;
        };
        let history = &mut state.histories[kind];
        if let Some(streak) = state.streaks[kind].as_mut() {
            if streak.node_id == node_id && !streak.tripped && streak.repeats >= threshold {
                streak.tripped = true;
                if let Some(v) = history.verdict.as_mut() {
                    if v.node_id == node_id {
                        v.tripped = true;
                    }
                }
                return LoopVerdict::Hold(LoopInfo {
                    kind: LoopKind::Repeat,
                    repeats: streak.repeats,
                    first_seq: streak.first_seq,
                    last_seq: streak.last_seq,
                    fingerprint: if hide.input {
                        REDACTED.to_owned()
                    } else {
                        streak.reported.clone().unwrap_or_default()
                    },
                });
            }
        }
        match history.verdict.as_mut() {
            Some(v) if v.node_id == node_id && !v.tripped => {
                v.tripped = true;
                let mut info = v.info.clone();
                if hide.input || hide.output {
                    info.fingerprint = REDACTED.to_owned();
                }
                LoopVerdict::Hold(info)
            }
            _ => LoopVerdict::Continue,
        }
    }

    /// `node.error` of a watched call: remember its error (name and message; `None` when
    /// either could not be read as a string, which makes the error unknown).
    pub fn on_node_error(
        &mut self,
        run_id: &str,
        node_id: &str,
        instance_id: Option<&str>,
        name: Option<&JsStr>,
        message: Option<&JsStr>,
    ) {
        if !self.enabled() {
            return;
        }
        let salt = self.keyer.salt;
        let Some(state) = self.state_mut(run_id) else {
            return;
        };
        let Some(index) = find_open(state, node_id, instance_id) else {
            return;
        };
        state.open[index].err_fp = match (name, message) {
            (Some(name), Some(message)) => Some(thrown_error_digest(name, message, &salt)),
            _ => None,
        };
    }

    /// `node.finished` of a watched call: it completes into its kind's history. `status` is
    /// the event's status (`ok`, `error`, `aborted`, ...); `emitted` is false when the event
    /// never reached the wire.
    pub fn on_node_finished(
        &mut self,
        run_id: &str,
        node_id: &str,
        instance_id: Option<&str>,
        status: Option<&str>,
        output: LoopValue<'_>,
        emitted: bool,
    ) {
        if !self.enabled() {
            return;
        }
        let Some(call) = self.take_open(run_id, node_id, instance_id) else {
            return;
        };
        let key = self.keyer.key_finish(status, output, emitted);
        self.complete(call, key);
    }

    /// [`LoopGuard::on_node_finished`] with the outcome keyed beforehand
    /// ([`LoopKeyer::key_finish`], [`LoopKeyer::key_finish_later`]). Gives a ticket when the
    /// call waits for its output's key: hand it to [`LoopGuard::fill_output`] with the key, or
    /// with `None` when the output will never be keyed.
    pub fn record_finish(
        &mut self,
        run_id: &str,
        node_id: &str,
        instance_id: Option<&str>,
        key: FinishKey,
    ) -> Option<OutputTicket> {
        if !self.enabled() {
            return None;
        }
        let call = self.take_open(run_id, node_id, instance_id)?;
        self.complete(call, key)
    }

    /// Gives the call of `ticket` in `run_id` its output's key (`None`: unknown, the call
    /// equals nothing). A call no longer remembered is let go.
    pub fn fill_output(&mut self, run_id: &str, ticket: OutputTicket, key: Option<OutputKey>) {
        if let Some(state) = self.state_mut(run_id) {
            if let Some(history) = state.histories.get_mut(ticket.kind) {
                history.fill(ticket.number, key.and_then(|k| k.0));
            }
        }
    }

    /// Whether recording this start now would compare, for a cycle, an output whose key is
    /// still to come: a caller that can wait for the keys does so first (cycles are rare, so
    /// the wait is too), else those calls count as different.
    pub fn awaits_output(
        &self,
        run_id: &str,
        kind: &str,
        node_id: &str,
        fp: StartFingerprint,
    ) -> bool {
        if !self.keyer.config.detect.cycle {
            return false;
        }
        let (Some(kind), Some(fp)) = (self.kind_index(kind), fp.0) else {
            return false;
        };
        self.runs
            .iter()
            .find(|(id, _)| id == run_id)
            .is_some_and(|(_, state)| state.histories[kind].awaits_output(node_id, &fp))
    }

    /// Forgets every output key still to come (their keyer is gone: a forked child).
    pub fn drop_later_outputs(&mut self) {
        for (_, state) in &mut self.runs {
            state.histories.iter_mut().for_each(KindHistory::drop_later);
        }
    }

    /// Removes the open call a finish belongs to, making its run the most recently used.
    fn take_open(
        &mut self,
        run_id: &str,
        node_id: &str,
        instance_id: Option<&str>,
    ) -> Option<OpenCall> {
        let pos = self.runs.iter().position(|(id, _)| id == run_id)?;
        let index = find_open(&self.runs[pos].1, node_id, instance_id)?;
        let entry = self.runs.remove(pos);
        self.runs.push(entry);
        self.runs.last_mut()?.1.open.remove(index)
    }

    /// Enters a call taken by [`LoopGuard::take_open`] into its kind's history; the ticket
    /// when its output's key is still to come.
    fn complete(&mut self, call: OpenCall, key: FinishKey) -> Option<OutputTicket> {
        if !self.keyer.config.detect.any() {
            // Only the opt-in detectors read the history: keep none, key no output.
            return None;
        }
        let is_tool = self.keyer.config.kinds[call.kind] == "tool";
        let kind = call.kind;
        let mut entry = entry_for(call, key, is_tool);
        let ticket = matches!(entry.out, OutDigest::Later(_)).then(|| {
            self.tickets_issued += 1;
            OutputTicket {
                kind,
                number: self.tickets_issued,
            }
        });
        if let Some(ticket) = ticket {
            entry.out = OutDigest::Later(ticket.number);
        }
        let (_, state) = self.runs.last_mut()?;
        state.histories[kind].push(entry);
        ticket
    }

    /// How many calls of `run_id` are open (started, not yet finished): diagnostics.
    pub fn open_calls(&self, run_id: &str) -> usize {
        self.runs
            .iter()
            .find(|(id, _)| id == run_id)
            .map_or(0, |(_, s)| s.open.len())
    }

    /// Drops everything remembered about a run.
    pub fn forget(&mut self, run_id: &str) {
        self.runs.retain(|(id, _)| id != run_id);
    }

    fn state_mut(&mut self, run_id: &str) -> Option<&mut RunState> {
        self.runs
            .iter_mut()
            .find(|(id, _)| id == run_id)
            .map(|(_, s)| s)
    }

    /// The run's state, made most recently used (created, evicting the least recently
    /// used run, when new).
    fn state_for(&mut self, run_id: &str, kinds: usize) -> &mut RunState {
        match self.runs.iter().position(|(id, _)| id == run_id) {
            Some(pos) => {
                let entry = self.runs.remove(pos);
                self.runs.push(entry);
            }
            None => {
                if self.runs.len() >= MAX_LOOP_RUNS {
                    self.runs.remove(0);
                }
                let state = RunState {
                    streaks: vec![None; kinds],
                    histories: (0..kinds).map(|_| KindHistory::default()).collect(),
                    open: Default::default(),
                };
                self.runs.push((run_id.to_owned(), state));
            }
        }
        let last = self.runs.len() - 1;
        &mut self.runs[last].1
    }
}

fn open_call(state: &mut RunState, call: OpenCall) {
    if call.instance_id.is_some() {
        // A restarted instance id: the older start will never complete.
        if let Some(i) = state
            .open
            .iter()
            .position(|o| o.node_id == call.node_id && o.instance_id == call.instance_id)
        {
            state.open.remove(i);
        }
    }
    state.open.push_back(call);
    if state.open.len() > MAX_OPEN_CALLS_PER_RUN {
        state.open.pop_front();
    }
}

/// The open call a `node.error` / `node.finished` belongs to: the newest with this
/// instance id; else the node's newest open call without one; for an event without an
/// instance id, the node's newest open call.
fn find_open(state: &RunState, node_id: &str, instance_id: Option<&str>) -> Option<usize> {
    let open = &state.open;
    match instance_id {
        Some(id) => open
            .iter()
            .rposition(|c| {
                c.node_id == node_id && c.instance_id.as_ref().is_some_and(|own| own == id)
            })
            .or_else(|| {
                open.iter()
                    .rposition(|c| c.node_id == node_id && c.instance_id.is_none())
            }),
        None => open.iter().rposition(|c| c.node_id == node_id),
    }
}

fn entry_for(call: OpenCall, key: FinishKey, is_tool: bool) -> CallEntry {
    let known = call
        .in_fp
        .and_then(|in_fp| Some((in_fp, key.outcome(is_tool, call.err_fp)?)));
    match known {
        Some((in_fp, (outcome, out))) => CallEntry {
            node_id: Some(call.node_id),
            in_fp: Some(in_fp),
            outcome: Some(outcome),
            out,
            start_seq: call.start_seq,
        },
        None => CallEntry::unknown(Some(call.node_id), call.start_seq),
    }
}

/// The salted digest of a thrown error: name and message, each [`crate::smart::error_text_key`]'d.
fn thrown_error_digest(name: &JsStr, message: &JsStr, salt: &[u8; 32]) -> Fp {
    let mut mac = crate::fingerprint::SaltedHasher::new(salt);
    mac.put(b"err\0[");
    write_escaped(crate::smart::error_text_key(name).as_bytes(), &mut mac);
    mac.put(b",");
    write_escaped(crate::smart::error_text_key(message).as_bytes(), &mut mac);
    mac.put(b"]");
    history::fp_of(&mac.finish())
}

use crate::canonical::Sink as _;

/// The v3 warning: `possible loop: NAME (NODE_ID) was called N× in a row with identical
/// arguments; BECAUSE. Polling on purpose? add it to loopGuard.allowNodes;
/// GRAPHMIND_ON_LOOP=off silences this`.
pub fn repeat_warning_message(name: &str, node_id: &str, repeats: u32, because: &str) -> String {
    format!(
        "possible loop: {name} ({node_id}) was called {repeats}\u{d7} in a row with identical arguments; \
         {because}. Polling on purpose? add it to loopGuard.allowNodes; GRAPHMIND_ON_LOOP=off silences this"
    )
}

const KIND_HINT: &str = "Polling on purpose? add it to loopGuard.allowNodes (GRAPHMIND_LOOP_ALLOW); GRAPHMIND_ON_LOOP=off silences this";

fn kind_warning(info: &LoopInfo, node_id: &str, name: &str, because: &str) -> LoopWarning {
    match info.kind {
        LoopKind::Cycle { period, .. } => LoopWarning {
            key: format!("loop-cycle:{node_id}"),
            message: format!(
                "possible loop: {name} ({node_id}) starts round {} of a cycle of {period} calls that repeated {}\u{d7} \
                 with identical arguments and identical results; {because}. {KIND_HINT}",
                info.repeats + 1,
                info.repeats
            ),
        },
        _ => LoopWarning {
            key: format!("loop-error:{node_id}"),
            message: format!(
                "possible loop: {name} ({node_id}) failed {}\u{d7} in a row with the same error and is being called again; \
                 {because}. {KIND_HINT}",
                info.repeats
            ),
        },
    }
}

/// The per-process key of every 0.6 digest: random, never sent, never logged.
fn process_salt() -> &'static [u8; 32] {
    static SALT: OnceLock<[u8; 32]> = OnceLock::new();
    SALT.get_or_init(new_salt)
}

fn new_salt() -> [u8; 32] {
    crate::random::bytes_or_fallback()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default settings with both opt-in detectors on, so the history is kept.
    fn with_history() -> LoopGuardConfig {
        LoopGuardConfig {
            detect: LoopDetect::ALL,
            ..LoopGuardConfig::default()
        }
    }

    #[test]
    fn by_default_no_history_is_kept_and_no_output_waits_for_its_key() {
        let mut guard = LoopGuard::with_salt(LoopGuardConfig::default(), [1; 32]);
        let input = Value::from("q");
        for seq in 0..4 {
            let start = NodeStart::new("r", "tool:t", "tool", LoopValue::from(&input), seq);
            let fp = guard.keyer().fingerprint_start("tool:t", start.input);
            assert!(!guard.awaits_output("r", "tool", "tool:t", fp));
            guard.record_start(&start, fp, true);
            let key = guard
                .keyer()
                .key_finish_later(Some("ok"), LoopValue::from(&input));
            assert_eq!(guard.record_finish("r", "tool:t", None, key), None);
        }
        let (_, state) = guard.runs.iter().find(|(id, _)| id == "r").unwrap();
        assert!(state.histories[0].newest().is_none());
    }

    #[test]
    fn detector_names_are_read_in_any_case_and_unknown_ones_are_returned() {
        let (d, unknown) = LoopDetect::from_names(&[" Cycle", "repeat", "", "loops"]);
        assert_eq!(
            d,
            LoopDetect {
                cycle: true,
                error_repeat: false
            }
        );
        assert_eq!(unknown, vec!["loops".to_owned()]);
        assert_eq!(LoopDetect::ALL.names(), LOOP_DETECTORS);
        assert_eq!(LoopDetect::default().names(), vec!["repeat"]);
    }

    /// Starts and finishes one successful call of `tool:t` in `run`, its output left for
    /// later; the ticket.
    fn call(guard: &mut LoopGuard, run: &str, seq: u64) -> OutputTicket {
        let input = Value::from(seq as i64);
        let start = NodeStart::new(run, "tool:t", "tool", LoopValue::from(&input), seq);
        let fp = guard.keyer().fingerprint_start("tool:t", start.input);
        guard.record_start(&start, fp, true);
        let key = guard
            .keyer()
            .key_finish_later(Some("ok"), LoopValue::from(&input));
        guard
            .record_finish(run, "tool:t", None, key)
            .expect("left for later")
    }

    fn newest(guard: &LoopGuard, run: &str) -> OutDigest {
        let (_, state) = guard.runs.iter().find(|(id, _)| id == run).unwrap();
        state.histories[0].newest().unwrap().out
    }

    #[test]
    fn a_ticket_fills_only_its_own_call_even_after_its_run_was_evicted() {
        let mut guard = LoopGuard::with_salt(with_history(), [1; 32]);
        let stale = call(&mut guard, "r", 1);
        for other in 0..MAX_LOOP_RUNS {
            call(&mut guard, &format!("other{other}"), 2);
        }
        // "r" was evicted; its next call starts a fresh history.
        let fresh = call(&mut guard, "r", 3);
        let key = guard.keyer().key_output(Some(&Value::from(1i64)));
        guard.fill_output("r", stale, Some(key));
        assert!(matches!(newest(&guard, "r"), OutDigest::Later(_)));
        guard.fill_output("r", fresh, Some(key));
        assert_eq!(newest(&guard, "r"), OutDigest::Known(key.0));
        // A dropped event's ticket leaves its call unknown.
        let dropped = call(&mut guard, "r", 4);
        guard.fill_output("r", dropped, None);
        assert_eq!(newest(&guard, "r"), OutDigest::Known(None));
    }

    #[test]
    fn an_error_shaped_tool_result_is_a_failure_keyed_at_once() {
        let mut guard = LoopGuard::with_salt(with_history(), [1; 32]);
        let input = Value::from("q");
        let start = NodeStart::new("r", "tool:t", "tool", LoopValue::from(&input), 1);
        let fp = guard.keyer().fingerprint_start("tool:t", start.input);
        guard.record_start(&start, fp, true);
        let output = crate::json::parse_str(r#"{"isError":true,"content":[]}"#).unwrap();
        let key = guard
            .keyer()
            .key_finish_later(Some("ok"), LoopValue::from(&output));
        assert_eq!(guard.record_finish("r", "tool:t", None, key), None);
        assert!(matches!(newest(&guard, "r"), OutDigest::Known(Some(_))));
    }
}
