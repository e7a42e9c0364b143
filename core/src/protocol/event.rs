//! Protocol v1 message types: the closed vocabularies (node kinds, statuses, pause points,
//! ...), the node-identity conventions, and one typed payload builder per message type.
//!
//! Every builder turns into a [`Value`] whose keys come in the order the reference
//! TypeScript client writes them: the fields the protocol names first, in the client's
//! order, then any caller-supplied `extra` fields (the protocol is loose: unknown payload
//! fields travel untouched), then the fields the session adds last (`redaction`, then
//! `heldMs`). Optional fields are left out when `None`, never written as `null`.
//!
//! The envelope around a payload is written by [`crate::wire::encode_envelope`]; the
//! [`Message::encode`] shortcut does both.

#[macro_use]
pub mod declare;

use crate::json::{self, JsStr, Map, Value};
pub use declare::FieldSpec;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The protocol's major version: the `gm` field of every envelope. Peers reject an envelope
/// whose `gm` differs from theirs.
pub const PROTOCOL_VERSION: u32 = 1;

/// The envelope `runId` of messages bound to no run: the handshake, breakpoints and mode.
pub const WILDCARD_RUN_ID: &str = "*";

/// Capabilities an app announces in `hello`, in the reference client's order. The set is
/// open on the wire: a peer must accept strings it does not know.
pub const KNOWN_CAPABILITIES: [&str; 7] = [
    "pause",
    "step",
    "inject",
    "retry",
    "abort",
    "run-claim",
    "edit-input",
];

/// Id of the single logical LLM node of a provider SDK's agent loop.
pub const LLM_STEP_NODE_ID: &str = "llm:step";
/// Name of that node.
pub const LLM_STEP_NODE_NAME: &str = "step";
/// Id of the node an MCP proxy session hangs every request off.
pub const MCP_SESSION_NODE_ID: &str = "mcp:session";
/// Id of the LLM node a server-initiated MCP `sampling/createMessage` becomes.
pub const MCP_SAMPLING_NODE_ID: &str = "llm:sampling";

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $(#[doc = concat!("`", $text, "` on the wire.")] $(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in the schema's order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Every wire spelling, in the schema's order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The value spelled `s` on the wire, if it is one (exact, case-sensitive).
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownVariant;
            fn from_str(s: &str) -> Result<Self, UnknownVariant> {
                $name::parse(s).ok_or(UnknownVariant { what: stringify!($name) })
            }
        }

        impl From<$name> for Value {
            fn from(v: $name) -> Value {
                Value::from(v.as_str())
            }
        }

        impl declare::ToWire for $name {
            fn to_wire(&self) -> Value {
                Value::from(self.as_str())
            }
        }
    };
}

impl Default for RunMode {
    /// `run`: a debugger that said nothing holds only at its breakpoints.
    fn default() -> Self {
        RunMode::Run
    }
}

/// A string that names no value of a closed vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a known {what}")]
pub struct UnknownVariant {
    /// Which vocabulary.
    pub what: &'static str,
}

wire_enum! {
    /// What kind of graph node an event refers to.
    NodeKind {
        /// A run's top-level agent.
        Agent => "agent",
        /// A model call.
        Llm => "llm",
        /// A tool call (MCP tool calls too).
        Tool => "tool",
        /// A chain or graph node of a framework.
        Chain => "chain",
        /// A retriever.
        Retriever => "retriever",
        /// An MCP server session.
        Server => "server",
        /// An MCP `resources/read`.
        Resource => "resource",
        /// An MCP `prompts/get`.
        Prompt => "prompt",
        /// Anything else (custom spans, protocol chatter).
        Custom => "custom",
    }
}

wire_enum! {
    /// Terminal status of a run or a node.
    RunStatus { Ok => "ok", Error => "error", Aborted => "aborted" }
}

wire_enum! {
    /// Where in a node's life a gate sits.
    PausePoint { Before => "before", After => "after", Error => "error" }
}

wire_enum! {
    /// How a held gate is released.
    ResumeAction { Continue => "continue", Retry => "retry", Inject => "inject", Abort => "abort" }
}

wire_enum! {
    /// The debuggee's execution mode.
    RunMode { Run => "run", Step => "step" }
}

wire_enum! {
    /// Why a gate holds (`exec.paused.reason`).
    PauseReason { Breakpoint => "breakpoint", Error => "error", Step => "step", Loop => "loop" }
}

wire_enum! {
    /// Which loop detector held (`exec.paused.loop.kind`; absent means `repeat`).
    LoopKind { Repeat => "repeat", Cycle => "cycle", ErrorRepeat => "error-repeat" }
}

wire_enum! {
    /// Which smart breakpoint raised a hold (`exec.paused.smart.rule`).
    SmartRule { ErrorResult => "error-result", TruncatedToolCall => "truncated-tool-call" }
}

wire_enum! {
    /// Why a proposed input edit was refused (`exec.refused.code`).
    RefusalCode {
        Schema => "schema",
        Shape => "shape",
        Placeholder => "placeholder",
        Truncated => "truncated",
        Disabled => "disabled",
        Unsupported => "unsupported",
    }
}

wire_enum! {
    /// The channel of one streamed delta (`node.token.deltas[].t`).
    TokenChannel { Text => "text", Reasoning => "reasoning", ToolArgs => "tool-args" }
}

wire_enum! {
    /// Every message type protocol v1 defines, in the schema's order.
    MessageType {
        /// app -> viewer: a run began.
        RunStarted => "run.started",
        /// app -> viewer: a run ended.
        RunFinished => "run.finished",
        /// app -> viewer: static graph structure (and the replay gap marker).
        GraphHint => "graph.hint",
        /// app -> viewer: a node started.
        NodeStarted => "node.started",
        /// app -> viewer: streamed deltas.
        NodeToken => "node.token",
        /// app -> viewer: a node finished.
        NodeFinished => "node.finished",
        /// app -> viewer: a node threw.
        NodeError => "node.error",
        /// app -> viewer: a gate holds.
        ExecPaused => "exec.paused",
        /// app -> viewer: an input edit was refused; the gate still holds.
        ExecRefused => "exec.refused",
        /// app -> viewer: a gate was released.
        ExecResumed => "exec.resumed",
        /// viewer -> app: release a gate.
        ExecResume => "exec.resume",
        /// viewer -> app: add a breakpoint.
        BreakpointSet => "breakpoint.set",
        /// viewer -> app: remove a breakpoint.
        BreakpointClear => "breakpoint.clear",
        /// viewer -> app: switch run / step.
        ModeSet => "mode.set",
        /// app -> viewer: first frame on a new socket.
        Hello => "hello",
        /// viewer -> app: the answer to `hello`, with the full debug state.
        HelloAck => "hello.ack",
    }
}

/// Which side sends a message type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// An event: the instrumented app sends it to the viewer.
    Event,
    /// A control: the viewer sends it to the app.
    Control,
    /// The handshake (`hello` from the app, `hello.ack` from the viewer).
    Handshake,
}

impl MessageType {
    /// Who sends this type.
    pub const fn direction(self) -> Direction {
        use MessageType::*;
        match self {
            ExecResume | BreakpointSet | BreakpointClear | ModeSet => Direction::Control,
            Hello | HelloAck => Direction::Handshake,
            _ => Direction::Event,
        }
    }

    /// Whether the envelope's `runId` is the wildcard `*` by convention: the handshake,
    /// breakpoints and mode. `exec.resume` names the run it releases, events their run.
    pub const fn uses_wildcard_run_id(self) -> bool {
        use MessageType::*;
        matches!(
            self,
            BreakpointSet | BreakpointClear | ModeSet | Hello | HelloAck
        )
    }
}

// ---------------------------------------------------------------------------------------
// Node identity
// ---------------------------------------------------------------------------------------

/// A logical node's id, `<kind>:<name>`: stable per place in the code, so the viewer draws
/// one node for it and lights it up once per execution (`instanceId`).
pub fn node_id(kind: NodeKind, name: &str) -> String {
    let mut id = String::with_capacity(kind.as_str().len() + 1 + name.len());
    id.push_str(kind.as_str());
    id.push(':');
    id.push_str(name);
    id
}

/// `agent:<runName>`: the node of a run's agent (its `instanceId` is the run id).
pub fn agent_node_id(run_name: &str) -> String {
    node_id(NodeKind::Agent, run_name)
}

/// `tool:<toolName>` (its `instanceId` is the tool call id).
pub fn tool_node_id(tool_name: &str) -> String {
    node_id(NodeKind::Tool, tool_name)
}

/// `chain:<name>` (its `instanceId` is the framework's run id).
pub fn chain_node_id(name: &str) -> String {
    node_id(NodeKind::Chain, name)
}

/// `retriever:<name>` (its `instanceId` is the framework's run id).
pub fn retriever_node_id(name: &str) -> String {
    node_id(NodeKind::Retriever, name)
}

/// `resource:<uri>`: an MCP `resources/read`.
pub fn resource_node_id(uri: &str) -> String {
    node_id(NodeKind::Resource, uri)
}

/// `prompt:<name>`: an MCP `prompts/get`.
pub fn prompt_node_id(name: &str) -> String {
    node_id(NodeKind::Prompt, name)
}

/// `mcp:<method>`: any other MCP method, recorded as a `custom` node named after it.
pub fn mcp_method_node_id(method: &str) -> String {
    format!("mcp:{method}")
}

/// `<invocationId>:s<step>`: the instance id of one step of the `llm:step` node.
pub fn llm_step_instance_id(invocation_id: &str, step: u64) -> String {
    format!("{invocation_id}:s{step}")
}

static ID_COUNTER: AtomicU64 = AtomicU64::new(0);

/// `len` lowercase hex digits (at most 32) of OS randomness ([`crate::random`]), different
/// between calls and between processes. Not a secret: ids only have to be unique.
pub fn random_hex(len: usize) -> String {
    let mut out = crate::random::to_hex(&crate::random::bytes_or_fallback::<16>());
    out.truncate(len.min(32));
    out
}

/// The per-process key of [`new_id`]; 0 until first use (and again after a fork).
static ID_KEY: AtomicU64 = AtomicU64::new(0);

/// A globally unique id `<prefix>_<12 hex>`, as runs are named (`run_3f9a…`).
///
/// Called once per node execution, so it is cheap: a per-process random key and a counter
/// through a bijective mixer (distinct within a process, unpredictable across processes), no
/// clock read and no hashing state.
pub fn new_id(prefix: &str) -> String {
    let mut key = ID_KEY.load(Ordering::Relaxed);
    if key == 0 {
        key = u64::from_str_radix(&random_hex(16), 16).unwrap_or(1) | 1;
        key = match ID_KEY.compare_exchange(0, key, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => key,
            Err(current) => current,
        };
    }
    let n = ID_COUNTER.fetch_add(1, Ordering::Relaxed);
    let bits = splitmix64(key ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut out = String::with_capacity(prefix.len() + 13);
    out.push_str(prefix);
    out.push('_');
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for shift in (16..64).step_by(4).rev() {
        out.push(HEX[((bits >> shift) & 0xf) as usize] as char);
    }
    out
}

/// Forgets the per-process key of [`new_id`] (a forked child must not repeat its parent's ids).
pub fn reseed_ids() {
    ID_KEY.store(0, Ordering::Relaxed);
}

/// SplitMix64's finalizer: a bijection on u64 that spreads every input bit.
fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Compact per-process ids `<prefix>_<base>_<n>` (pauses, fallback instance ids): a random
/// 6-hex base per generator, then a counter from 1.
#[derive(Debug)]
pub struct CounterIds {
    prefix: String,
    base: String,
    next: AtomicU64,
}

impl CounterIds {
    /// A generator with a fresh random base.
    pub fn new(prefix: &str) -> Self {
        Self::with_base(prefix, &random_hex(6))
    }

    /// A generator with a given base (tests; a forked child re-seeds with a new one).
    pub fn with_base(prefix: &str, base: &str) -> Self {
        CounterIds {
            prefix: prefix.to_owned(),
            base: base.to_owned(),
            next: AtomicU64::new(1),
        }
    }

    /// The next id.
    pub fn next_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}_{}_{}", self.prefix, self.base, n)
    }
}

// ---------------------------------------------------------------------------------------
// Payload pieces
// ---------------------------------------------------------------------------------------

wire_object! {
    /// The SDK an app is instrumented with (`{name, version}`).
    #[derive(Clone, Debug, PartialEq, Default)]
    pub struct SdkInfo {
        /// Package name, e.g. `ai` or `graphmind`.
        pub name: JsStr = "name",
        /// Its version.
        pub version: JsStr = "version",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl SdkInfo {
    /// `{name, version}`.
    pub fn new(name: impl Into<JsStr>, version: impl Into<JsStr>) -> Self {
        SdkInfo {
            name: name.into(),
            version: version.into(),
            extra: Map::new(),
        }
    }
}

wire_object! {
    /// A serialized error (`{name, message, stack?}`); `stack` may be left out or redacted.
    #[derive(Clone, Debug, PartialEq, Default)]
    pub struct ErrorInfo {
        /// The error's class name, e.g. `TypeError`.
        pub name: JsStr = "name",
        /// Its message.
        pub message: JsStr = "message",
        /// Its stack trace, if the sender keeps it.
        pub stack: Option<JsStr> = "stack",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl ErrorInfo {
    /// `{name, message}`.
    pub fn new(name: impl Into<JsStr>, message: impl Into<JsStr>) -> Self {
        ErrorInfo {
            name: name.into(),
            message: message.into(),
            ..Default::default()
        }
    }
}

wire_object! {
    /// Token usage of an LLM node.
    #[derive(Clone, Debug, PartialEq, Default)]
    pub struct TokenUsage {
        /// Prompt tokens (the total including cached ones when `inclusive`).
        pub input_tokens: u64 = "inputTokens",
        /// Output tokens.
        pub output_tokens: u64 = "outputTokens",
        /// `input_tokens` counts cached tokens too.
        pub inclusive: Option<bool> = "inclusive",
        /// Prompt tokens served from the provider's cache.
        pub cache_read_tokens: Option<u64> = "cacheReadTokens",
        /// Prompt tokens written to the provider's cache.
        pub cache_write_tokens: Option<u64> = "cacheWriteTokens",
        /// Output tokens spent on reasoning (included in `output_tokens`).
        pub reasoning_tokens: Option<u64> = "reasoningTokens",
        /// Further (provider-specific) counters, kept as given.
        pub extra: Map = ..,
    }
}

impl TokenUsage {
    /// `{inputTokens, outputTokens}`.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        TokenUsage {
            input_tokens,
            output_tokens,
            ..Default::default()
        }
    }
}

wire_object! {
    /// One streamed delta: channel `t`, text fragment `v`.
    #[derive(Clone, Debug, PartialEq)]
    pub struct TokenDelta {
        /// The channel.
        pub t: TokenChannel = "t",
        /// The text fragment.
        pub v: JsStr = "v",
        /// Further fields (the redactor adds `chars`), kept as given.
        pub extra: Map = ..,
    }
}

impl TokenDelta {
    /// `{t, v}`.
    pub fn new(t: TokenChannel, v: impl Into<JsStr>) -> Self {
        TokenDelta {
            t,
            v: v.into(),
            extra: Map::new(),
        }
    }
}

wire_object! {
    /// A breakpoint matcher: every field present must match, absent fields match anything,
    /// and an absent `point` means `before`. `{}` pauses before every node.
    #[derive(Clone, Debug, PartialEq, Default)]
    pub struct BreakpointMatcher {
        /// Match this node kind.
        pub kind: Option<NodeKind> = "kind",
        /// Match this node name.
        pub name: Option<JsStr> = "name",
        /// Match this gate (default `before`).
        pub point: Option<PausePoint> = "point",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl BreakpointMatcher {
    /// Reads a matcher from its wire object. `None` when it is not an object or a known
    /// field has the wrong type or an unknown value: such a matcher is ignored rather than
    /// matching more than it says.
    pub fn from_value(value: &Value) -> Option<Self> {
        let map = value.as_object()?;
        let mut matcher = BreakpointMatcher::default();
        for (key, v) in map.iter() {
            match (key.as_str(), v) {
                (Some("kind"), Value::String(s)) => {
                    matcher.kind = Some(NodeKind::parse(s.as_str()?)?)
                }
                (Some("name"), Value::String(s)) => matcher.name = Some(s.clone()),
                (Some("point"), Value::String(s)) => {
                    matcher.point = Some(PausePoint::parse(s.as_str()?)?)
                }
                (Some("kind" | "name" | "point"), Value::Null) => {}
                (Some("kind" | "name" | "point"), _) => return None,
                _ => {
                    matcher.extra.insert(key.clone(), v.clone());
                }
            }
        }
        Some(matcher)
    }
}

wire_object! {
    /// A node announced ahead of running by `graph.hint`.
    #[derive(Clone, Debug, PartialEq)]
    pub struct GraphNodeHint {
        /// Its logical id.
        pub node_id: JsStr = "nodeId",
        /// Its kind.
        pub kind: NodeKind = "kind",
        /// Its display name.
        pub name: JsStr = "name",
        /// The logical node it hangs under.
        pub parent_id: Option<JsStr> = "parentId",
        /// Further fields (`providerExecuted`, `ungated`, ...), kept as given.
        pub extra: Map = ..,
    }
}

impl GraphNodeHint {
    /// `{nodeId, kind, name}`.
    pub fn new(node_id: impl Into<JsStr>, kind: NodeKind, name: impl Into<JsStr>) -> Self {
        GraphNodeHint {
            node_id: node_id.into(),
            kind,
            name: name.into(),
            parent_id: None,
            extra: Map::new(),
        }
    }
}

wire_object! {
    /// Which payload fields the sender replaced with the redaction placeholder.
    #[derive(Clone, Debug, PartialEq, Default)]
    pub struct RedactionSummary {
        /// How many values were replaced.
        pub count: u64 = "count",
        /// The payload fields touched, e.g. `["input"]`.
        pub keys: Vec<JsStr> = "keys",
        /// Further fields (`failed: true`), kept as given.
        pub extra: Map = ..,
    }
}

wire_object! {
    /// Details of a loop hold (`exec.paused.loop`).
    #[derive(Clone, Debug, PartialEq, Default)]
    pub struct LoopInfo {
        /// Consecutive identical calls seen (laps, for a cycle).
        pub repeats: u64 = "repeats",
        /// Seq of the first event of the streak.
        pub first_seq: u64 = "firstSeq",
        /// Seq of the last event of the streak.
        pub last_seq: u64 = "lastSeq",
        /// Digest of the repeated input (or the placeholder when inputs are hidden).
        pub fingerprint: JsStr = "fingerprint",
        /// Which detector held; absent means `repeat`.
        pub kind: Option<LoopKind> = "kind",
        /// `cycle`: calls per lap.
        pub period: Option<u64> = "period",
        /// `cycle`: identical laps seen before this hold.
        pub laps: Option<u64> = "laps",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

wire_object! {
    /// Details of a smart-breakpoint hold (`exec.paused.smart`).
    #[derive(Clone, Debug, PartialEq)]
    pub struct SmartInfo {
        /// Which rule held.
        pub rule: SmartRule = "rule",
        /// A short value-free explanation (at most 200 characters by convention).
        pub detail: Option<JsStr> = "detail",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl SmartInfo {
    /// `{rule}`.
    pub fn new(rule: SmartRule) -> Self {
        SmartInfo {
            rule,
            detail: None,
            extra: Map::new(),
        }
    }
}

wire_object! {
    /// The replay gap marker's `gap` field (`{droppedCount, fromSeq, toSeq, reason}`):
    /// events lost from one run before they were sent.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct GapInfo {
        /// How many events were lost.
        pub dropped_count: u64 = "droppedCount",
        /// The smallest lost seq.
        pub from_seq: u64 = "fromSeq",
        /// The largest lost seq.
        pub to_seq: u64 = "toSeq",
        /// Why: [`GAP_REASON_BUFFER_OVERFLOW`] is the only reason protocol v1 knows.
        pub reason: &'static str = "reason",
    }
}

/// The `gap.reason` of events evicted from the replay buffer before they were sent.
pub const GAP_REASON_BUFFER_OVERFLOW: &str = "buffer-overflow";

// ---------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------

/// A typed payload of one message type.
pub trait Message {
    /// The envelope `type` this payload travels under.
    const TYPE: MessageType;

    /// The payload's declared fields in wire order (see [`declare`]).
    const FIELDS: &'static [FieldSpec];

    /// The payload as a JSON value, keys in wire order.
    fn to_value(&self) -> Value;

    /// [`Message::to_value`] consuming the message: the payloads an application hands over
    /// on every node (`node.started`, `node.finished`) are moved, not copied.
    fn into_value(self) -> Value
    where
        Self: Sized,
    {
        self.to_value()
    }

    /// The payload's compact JSON text.
    fn payload_json(&self) -> String {
        json::to_string(&self.to_value())
    }

    /// The whole envelope as one text frame (`gm` = [`PROTOCOL_VERSION`]).
    fn encode(&self, seq: u64, ts: u64, run_id: &str) -> String {
        crate::wire::encode_envelope(
            PROTOCOL_VERSION,
            seq,
            ts,
            run_id,
            Self::TYPE.as_str(),
            &self.payload_json(),
        )
    }
}

/// The declared payload fields of every message type, in wire order: the one list the
/// schema test and the server read the protocol from.
pub const fn declared_fields(message: MessageType) -> &'static [FieldSpec] {
    use MessageType as T;
    match message {
        T::RunStarted => RunStarted::FIELDS,
        T::RunFinished => RunFinished::FIELDS,
        T::GraphHint => GraphHint::FIELDS,
        T::NodeStarted => NodeStarted::FIELDS,
        T::NodeToken => NodeToken::FIELDS,
        T::NodeFinished => NodeFinished::FIELDS,
        T::NodeError => NodeError::FIELDS,
        T::ExecPaused => ExecPaused::FIELDS,
        T::ExecRefused => ExecRefused::FIELDS,
        T::ExecResumed => ExecResumed::FIELDS,
        T::ExecResume => ExecResume::FIELDS,
        T::BreakpointSet => BreakpointSet::FIELDS,
        T::BreakpointClear => BreakpointClear::FIELDS,
        T::ModeSet => ModeSet::FIELDS,
        T::Hello => Hello::FIELDS,
        T::HelloAck => HelloAck::FIELDS,
    }
}

wire_message! {
    /// `run.started` (app): a run began.
    #[derive(Clone, Debug, PartialEq)]
    pub struct RunStarted {
        /// The application's display name.
        pub app: JsStr = "app",
        /// The instrumented SDK.
        pub sdk: SdkInfo = "sdk",
        /// Free-form metadata; the session puts the run name first (`{name, ...}`).
        pub meta: Option<Map> = "meta",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl RunStarted {
    /// `{app, sdk}`.
    pub fn new(app: impl Into<JsStr>, sdk: SdkInfo) -> Self {
        RunStarted {
            app: app.into(),
            sdk,
            meta: None,
            extra: Map::new(),
        }
    }
}

wire_message! {
    /// `run.finished` (app): a run ended; `error` when it failed.
    #[derive(Clone, Debug, PartialEq)]
    pub struct RunFinished {
        /// How it ended.
        pub status: RunStatus = "status",
        /// The error, when `status` is `error`.
        pub error: Option<ErrorInfo> = "error",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl RunFinished {
    /// `{status}`.
    pub fn new(status: RunStatus) -> Self {
        RunFinished {
            status,
            error: None,
            extra: Map::new(),
        }
    }
}

wire_message! {
    /// `graph.hint` (app): nodes to pre-render; with `gap` it is the replay gap marker.
    #[derive(Clone, Debug, PartialEq, Default)]
    pub struct GraphHint {
        /// The announced nodes.
        pub nodes: Vec<GraphNodeHint> = "nodes",
        /// Set on a gap marker (then `nodes` is empty).
        pub gap: Option<GapInfo> = "gap",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl GraphHint {
    /// `{nodes}`.
    pub fn new(nodes: Vec<GraphNodeHint>) -> Self {
        GraphHint {
            nodes,
            ..Default::default()
        }
    }

    /// The gap marker `{nodes: [], gap}`.
    pub fn gap_marker(gap: GapInfo) -> Self {
        GraphHint {
            gap: Some(gap),
            ..Default::default()
        }
    }
}

wire_message! {
    /// `node.started` (app): one execution of a node began.
    #[derive(Clone, Debug, PartialEq)]
    pub struct NodeStarted {
        /// The logical node (`kind:name` by convention).
        pub node_id: JsStr = "nodeId",
        /// Its kind.
        pub kind: NodeKind = "kind",
        /// Its display name.
        pub name: JsStr = "name",
        /// This execution (unique per execution).
        pub instance_id: JsStr = "instanceId",
        /// The logical node it runs under.
        pub parent_id: Option<JsStr> = "parentId",
        /// What it was called with.
        pub input: Option<Value> = "input",
        /// Rendering hint: open folded.
        pub collapsed: Option<bool> = "collapsed",
        /// Further fields (`providerExecuted`, `ungated`, `method`, ...), kept as given.
        pub extra: Map = ..,
        /// Set by the redactor when it replaced the input.
        pub redaction: Option<RedactionSummary> = "redaction",
    }
}

impl NodeStarted {
    /// `{nodeId, kind, name, instanceId}`.
    pub fn new(
        node_id: impl Into<JsStr>,
        kind: NodeKind,
        name: impl Into<JsStr>,
        instance_id: impl Into<JsStr>,
    ) -> Self {
        NodeStarted {
            node_id: node_id.into(),
            kind,
            name: name.into(),
            instance_id: instance_id.into(),
            parent_id: None,
            input: None,
            collapsed: None,
            extra: Map::new(),
            redaction: None,
        }
    }
}

wire_message! {
    /// `node.token` (app): streamed deltas, batched.
    #[derive(Clone, Debug, PartialEq)]
    pub struct NodeToken {
        /// The logical node streaming.
        pub node_id: JsStr = "nodeId",
        /// The deltas, in order.
        pub deltas: Vec<TokenDelta> = "deltas",
        /// Further fields, kept as given.
        pub extra: Map = ..,
        /// Set by the redactor when it emptied delta texts.
        pub redaction: Option<RedactionSummary> = "redaction",
    }
}

impl NodeToken {
    /// `{nodeId, deltas}`.
    pub fn new(node_id: impl Into<JsStr>, deltas: Vec<TokenDelta>) -> Self {
        NodeToken {
            node_id: node_id.into(),
            deltas,
            extra: Map::new(),
            redaction: None,
        }
    }
}

wire_message! {
    /// `node.finished` (app): one execution of a node ended.
    #[derive(Clone, Debug, PartialEq)]
    pub struct NodeFinished {
        /// The logical node.
        pub node_id: JsStr = "nodeId",
        /// The execution this completes (optional on the wire; always set it).
        pub instance_id: Option<JsStr> = "instanceId",
        /// What it produced.
        pub output: Option<Value> = "output",
        /// Token usage (LLM nodes).
        pub usage: Option<TokenUsage> = "usage",
        /// Wall-clock end minus start in ms, held time included (fractional allowed, >= 0).
        pub duration_ms: f64 = "durationMs",
        /// How it ended.
        pub status: RunStatus = "status",
        /// The output was injected by the debugger rather than produced by the call.
        pub injected: Option<bool> = "injected",
        /// An injected output replaced an error.
        pub recovered_from_error: Option<bool> = "recoveredFromError",
        /// Further fields (`providerExecuted`, ...), kept as given.
        pub extra: Map = ..,
        /// Set by the redactor when it replaced the output.
        pub redaction: Option<RedactionSummary> = "redaction",
        /// Time held at gates in ms (added by the session; `durationMs - heldMs` ran).
        pub held_ms: Option<f64> = "heldMs",
    }
}

impl NodeFinished {
    /// `{nodeId, durationMs, status}`.
    pub fn new(node_id: impl Into<JsStr>, duration_ms: f64, status: RunStatus) -> Self {
        NodeFinished {
            node_id: node_id.into(),
            instance_id: None,
            output: None,
            usage: None,
            duration_ms,
            status,
            injected: None,
            recovered_from_error: None,
            extra: Map::new(),
            redaction: None,
            held_ms: None,
        }
    }
}

wire_message! {
    /// `node.error` (app): an execution threw (never redacted).
    #[derive(Clone, Debug, PartialEq)]
    pub struct NodeError {
        /// The logical node.
        pub node_id: JsStr = "nodeId",
        /// The execution that threw (optional on the wire; always set it).
        pub instance_id: Option<JsStr> = "instanceId",
        /// The error.
        pub error: ErrorInfo = "error",
        /// Further fields, kept as given.
        pub extra: Map = ..,
        /// Time held at gates so far in ms (added by the session).
        pub held_ms: Option<f64> = "heldMs",
    }
}

impl NodeError {
    /// `{nodeId, error}`.
    pub fn new(node_id: impl Into<JsStr>, error: ErrorInfo) -> Self {
        NodeError {
            node_id: node_id.into(),
            instance_id: None,
            error,
            extra: Map::new(),
            held_ms: None,
        }
    }
}

wire_message! {
    /// `exec.paused` (app): a gate holds until `exec.resume`.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ExecPaused {
        /// Names this hold.
        pub pause_id: JsStr = "pauseId",
        /// The logical node held.
        pub node_id: JsStr = "nodeId",
        /// Which gate.
        pub point: PausePoint = "point",
        /// Why it holds (every 0.6 hold carries one).
        pub reason: Option<PauseReason> = "reason",
        /// With `reason: loop`.
        pub loop_info: Option<LoopInfo> = "loop",
        /// With `reason: breakpoint` when a smart breakpoint held.
        pub smart: Option<SmartInfo> = "smart",
        /// The app can run the call with an edited input here (written only when true by
        /// the reference client; `Some(false)` is written as given).
        pub editable: Option<bool> = "editable",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl ExecPaused {
    /// `{pauseId, nodeId, point}`.
    pub fn new(pause_id: impl Into<JsStr>, node_id: impl Into<JsStr>, point: PausePoint) -> Self {
        ExecPaused {
            pause_id: pause_id.into(),
            node_id: node_id.into(),
            point,
            reason: None,
            loop_info: None,
            smart: None,
            editable: None,
            extra: Map::new(),
        }
    }
}

wire_message! {
    /// `exec.refused` (app): a proposed input edit was refused; the gate still holds.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ExecRefused {
        /// The hold the edit was for.
        pub pause_id: JsStr = "pauseId",
        /// Why.
        pub code: RefusalCode = "code",
        /// Short, value-free explanation.
        pub message: Option<JsStr> = "message",
        /// Echo of the `exec.resume.requestId` this answers.
        pub request_id: Option<JsStr> = "requestId",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl ExecRefused {
    /// `{pauseId, code}`.
    pub fn new(pause_id: impl Into<JsStr>, code: RefusalCode) -> Self {
        ExecRefused {
            pause_id: pause_id.into(),
            code,
            message: None,
            request_id: None,
            extra: Map::new(),
        }
    }
}

wire_message! {
    /// `exec.resumed` (app): a gate was released — by the debugger, or by the app itself
    /// (fail-open auto-continue, pause timeout, dispose).
    #[derive(Clone, Debug, PartialEq)]
    pub struct ExecResumed {
        /// The hold released.
        pub pause_id: JsStr = "pauseId",
        /// How.
        pub action: ResumeAction = "action",
        /// `edited.after`: the edited input the call actually ran with.
        pub edited_after: Option<Value> = ["edited", "after"],
        /// Echo of the `exec.resume.requestId` (absent on auto-continue).
        pub request_id: Option<JsStr> = "requestId",
        /// Who released it (stamped by the debugger, never by the app).
        pub principal: Option<JsStr> = "principal",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl ExecResumed {
    /// `{pauseId, action}`.
    pub fn new(pause_id: impl Into<JsStr>, action: ResumeAction) -> Self {
        ExecResumed {
            pause_id: pause_id.into(),
            action,
            edited_after: None,
            request_id: None,
            principal: None,
            extra: Map::new(),
        }
    }
}

wire_message! {
    /// `exec.resume` (viewer): release a held gate.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ExecResume {
        /// The hold to release.
        pub pause_id: JsStr = "pauseId",
        /// How.
        pub action: ResumeAction = "action",
        /// With `inject`: the value to use as the node's result.
        pub output: Option<Value> = "output",
        /// An edited input to run the call with (capability `edit-input`).
        pub input: Option<Value> = "input",
        /// Correlates the app's `exec.resumed` / `exec.refused`.
        pub request_id: Option<JsStr> = "requestId",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl ExecResume {
    /// `{pauseId, action}`.
    pub fn new(pause_id: impl Into<JsStr>, action: ResumeAction) -> Self {
        ExecResume {
            pause_id: pause_id.into(),
            action,
            output: None,
            input: None,
            request_id: None,
            extra: Map::new(),
        }
    }
}

wire_message! {
    /// `breakpoint.set` (viewer): add a breakpoint (matchers dedupe by exact equality).
    #[derive(Clone, Debug, PartialEq, Default)]
    pub struct BreakpointSet {
        /// The matcher.
        pub matcher: BreakpointMatcher = "matcher",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

wire_message! {
    /// `breakpoint.clear` (viewer): remove the breakpoint set with an identical matcher.
    #[derive(Clone, Debug, PartialEq, Default)]
    pub struct BreakpointClear {
        /// The matcher.
        pub matcher: BreakpointMatcher = "matcher",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

wire_message! {
    /// `mode.set` (viewer): switch between free running and single steps.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ModeSet {
        /// The mode.
        pub mode: RunMode = "mode",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl ModeSet {
    /// `{mode}`.
    pub fn new(mode: RunMode) -> Self {
        ModeSet {
            mode,
            extra: Map::new(),
        }
    }
}

wire_message! {
    /// `hello` (app): the first frame on a new socket.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Hello {
        /// `versions.protocol`: equals the envelope's `gm`.
        pub protocol: i64 = ["versions", "protocol"],
        /// `versions.client`: the client library's version.
        pub client_version: JsStr = ["versions", "client"],
        /// What the app can do (see [`KNOWN_CAPABILITIES`]).
        pub capabilities: Vec<JsStr> = "capabilities",
        /// The app's display name.
        pub app: Option<JsStr> = "app",
        /// The instrumented SDK.
        pub sdk: Option<SdkInfo> = "sdk",
        /// The `sessionToken` of the last `hello.ack`, to re-claim this app's runs.
        pub resume_token: Option<JsStr> = "resumeToken",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl Hello {
    /// `{versions: {protocol: 1, client}, capabilities}`.
    pub fn new(client_version: impl Into<JsStr>, capabilities: Vec<JsStr>) -> Self {
        Hello {
            protocol: i64::from(PROTOCOL_VERSION),
            client_version: client_version.into(),
            capabilities,
            app: None,
            sdk: None,
            resume_token: None,
            extra: Map::new(),
        }
    }
}

wire_message! {
    /// `hello.ack` (viewer): the answer to `hello`, carrying the full desired debug state so
    /// a reconnecting app is re-armed in one message.
    #[derive(Clone, Debug, PartialEq)]
    pub struct HelloAck {
        /// `versions.protocol`.
        pub protocol: i64 = ["versions", "protocol"],
        /// `versions.viewer`: the debugger's version.
        pub viewer_version: JsStr = ["versions", "viewer"],
        /// The app's capabilities the viewer will use.
        pub capabilities: Vec<JsStr> = "capabilities",
        /// Breakpoints to arm now.
        pub breakpoints: Vec<BreakpointMatcher> = "breakpoints",
        /// Mode to adopt now.
        pub mode: RunMode = "mode",
        /// Identity of this connection, echoed back as `hello.resumeToken` on reconnect.
        pub session_token: Option<JsStr> = "sessionToken",
        /// What this debugger implements (e.g. `edit-input`).
        pub hub_capabilities: Option<Vec<JsStr>> = "hubCapabilities",
        /// Further fields, kept as given.
        pub extra: Map = ..,
    }
}

impl HelloAck {
    /// `{versions: {protocol: 1, viewer}, capabilities, breakpoints: [], mode}`.
    pub fn new(viewer_version: impl Into<JsStr>, capabilities: Vec<JsStr>, mode: RunMode) -> Self {
        HelloAck {
            protocol: i64::from(PROTOCOL_VERSION),
            viewer_version: viewer_version.into(),
            capabilities,
            breakpoints: Vec::new(),
            mode,
            session_token: None,
            hub_capabilities: None,
            extra: Map::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabularies_round_trip() {
        for k in NodeKind::ALL {
            assert_eq!(NodeKind::parse(k.as_str()), Some(*k));
        }
        assert_eq!(NodeKind::ALL.len(), 9);
        assert_eq!(MessageType::ALL.len(), 16);
        let names: Vec<&str> = RefusalCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(RefusalCode::NAMES, names.as_slice());
        assert_eq!(RunStatus::NAMES, ["ok", "error", "aborted"]);
        assert_eq!(NodeKind::parse("Tool"), None);
        assert_eq!(
            "error-repeat".parse::<LoopKind>(),
            Ok(LoopKind::ErrorRepeat)
        );
        assert!("x".parse::<RunMode>().is_err());
    }

    #[test]
    fn identity_conventions() {
        assert_eq!(node_id(NodeKind::Tool, "search"), "tool:search");
        assert_eq!(agent_node_id("lossy"), "agent:lossy");
        assert_eq!(llm_step_instance_id("inv_ab12cd_3", 2), "inv_ab12cd_3:s2");
        assert_eq!(mcp_method_node_id("tools/list"), "mcp:tools/list");
        let ids = CounterIds::with_base("pause", "abc123");
        assert_eq!(ids.next_id(), "pause_abc123_1");
        assert_eq!(ids.next_id(), "pause_abc123_2");
        let a = new_id("run");
        let b = new_id("run");
        assert_eq!(a.len(), 16);
        assert!(a.starts_with("run_") && a[4..].bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn ids_are_distinct_and_a_reseeded_process_does_not_repeat_them() {
        let first: std::collections::HashSet<String> =
            (0..100_000).map(|_| new_id("inst")).collect();
        assert_eq!(first.len(), 100_000);
        // A forked child reseeds while its counter continues from the parent's: simulate a
        // child that would repeat the parent's counter values with a fresh key.
        let before = ID_COUNTER.load(Ordering::Relaxed);
        reseed_ids();
        ID_COUNTER.store(before - 100_000, Ordering::Relaxed);
        let again: Vec<String> = (0..100_000).map(|_| new_id("inst")).collect();
        ID_COUNTER.store(before + 100_000, Ordering::Relaxed);
        assert!(
            again.iter().all(|id| !first.contains(id)),
            "a reseeded key repeated an id"
        );
    }

    #[test]
    fn key_order_follows_the_client() {
        let mut p = NodeFinished::new("tool:search", 12.5, RunStatus::Ok);
        p.instance_id = Some("call_1".into());
        p.output = Some(json::Value::from("hi"));
        p.held_ms = Some(2.0);
        p.extra.insert("providerExecuted", Value::Bool(true));
        assert_eq!(
            p.payload_json(),
            r#"{"nodeId":"tool:search","instanceId":"call_1","output":"hi","durationMs":12.5,"status":"ok","providerExecuted":true,"heldMs":2}"#
        );
    }
}
