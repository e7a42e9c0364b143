//! What every LLM integration records about a model step, built once so that every SDK
//! agrees (contract C1 of the reference, 0.6.0+):
//!
//! - [`normalize_finish_reason`] / [`finish_fields`]: `output.finishReason` in six values,
//!   the provider's own string kept as `rawFinishReason`.
//! - [`tool_call`]: one requested call as `{id?, name, input, inputText?}`.
//! - [`make_usage`] and the provider mappers ([`provider_usage`]): the wire `TokenUsage`,
//!   `inputTokens` being the TOTAL prompt and `inclusive: true` always.
//! - [`sanitize_tool_definition`], [`schema_hash`] and [`ToolSchemaMemory::capture_tools`]:
//!   `tools: [{name, schemaHash}]` plus each definition once per run in `toolSchemas`,
//!   without credentials.
//! - [`pick_params`]: the allow-listed sampling parameters actually sent.
//!
//! Everything here is pure bookkeeping over [`Value`]s and never panics.

use std::collections::{HashSet, VecDeque};

use sha2::{Digest, Sha256};

use crate::canonical::canonical_json_with;
use crate::json::{self, JsStr, Map, Number, Value};

// -- finish reasons ---------------------------------------------------------------------

/// The normalized `output.finishReason` of an LLM node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// The model finished its turn.
    Stop,
    /// A token limit cut it off.
    Length,
    /// It stopped to call tools.
    ToolCalls,
    /// A safety system stopped it.
    ContentFilter,
    /// The provider reported an error.
    Error,
    /// Anything else.
    Other,
}

impl FinishReason {
    /// Every value, in the wire's order.
    pub const ALL: [FinishReason; 6] = [
        FinishReason::Stop,
        FinishReason::Length,
        FinishReason::ToolCalls,
        FinishReason::ContentFilter,
        FinishReason::Error,
        FinishReason::Other,
    ];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool-calls",
            FinishReason::ContentFilter => "content-filter",
            FinishReason::Error => "error",
            FinishReason::Other => "other",
        }
    }
}

/// Provider spellings (lower-cased, `-` and white space folded to `_`) and what they mean.
/// Anything not listed is [`FinishReason::Other`]. `pause_turn` (Anthropic: the turn was
/// paused for a long-running server tool) is deliberately not a stop.
const FINISH_REASON_MAP: &[(&str, FinishReason)] = &[
    ("stop", FinishReason::Stop),
    ("end_turn", FinishReason::Stop),
    ("stop_sequence", FinishReason::Stop),
    ("eos", FinishReason::Stop),
    ("eos_token", FinishReason::Stop),
    ("complete", FinishReason::Stop),
    ("completed", FinishReason::Stop),
    ("finished", FinishReason::Stop),
    ("length", FinishReason::Length),
    ("max_tokens", FinishReason::Length),
    ("max_output_tokens", FinishReason::Length),
    ("max_completion_tokens", FinishReason::Length),
    ("model_context_window_exceeded", FinishReason::Length),
    ("model_length", FinishReason::Length),
    ("tool_calls", FinishReason::ToolCalls),
    ("tool_call", FinishReason::ToolCalls),
    ("tool_use", FinishReason::ToolCalls),
    ("function_call", FinishReason::ToolCalls),
    ("content_filter", FinishReason::ContentFilter),
    ("content_filtered", FinishReason::ContentFilter),
    ("refusal", FinishReason::ContentFilter),
    ("safety", FinishReason::ContentFilter),
    ("recitation", FinishReason::ContentFilter),
    ("blocklist", FinishReason::ContentFilter),
    ("prohibited_content", FinishReason::ContentFilter),
    ("spii", FinishReason::ContentFilter),
    ("image_safety", FinishReason::ContentFilter),
    ("guardrail_intervened", FinishReason::ContentFilter),
    ("error", FinishReason::Error),
    ("failed", FinishReason::Error),
    ("malformed_function_call", FinishReason::Error),
    ("other", FinishReason::Other),
    ("unknown", FinishReason::Other),
];

/// JavaScript's `\s` (what `trim` removes and `/\s/` matches).
fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | ' '
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

/// The normalized finish reason of a provider's raw value, or `None` when nothing usable
/// was reported (not a string, or blank). A plain stop on a step that requested tool calls
/// is `tool-calls` (Gemini reports `STOP` there).
pub fn normalize_finish_reason(raw: Option<&Value>, has_tool_calls: bool) -> Option<FinishReason> {
    let Some(Value::String(raw)) = raw else {
        return None;
    };
    let text = raw.to_string_lossy();
    let lowered = text.trim_matches(is_js_space).to_lowercase();
    if lowered.is_empty() {
        return None;
    }
    let mut key = String::with_capacity(lowered.len());
    let mut in_run = false;
    for c in lowered.chars() {
        if c == '-' || is_js_space(c) {
            if !in_run {
                key.push('_');
                in_run = true;
            }
        } else {
            key.push(c);
            in_run = false;
        }
    }
    let mapped = FINISH_REASON_MAP
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(FinishReason::Other, |(_, reason)| *reason);
    Some(if mapped == FinishReason::Stop && has_tool_calls {
        FinishReason::ToolCalls
    } else {
        mapped
    })
}

/// `finishReason` (normalized) and `rawFinishReason` (as reported, when a non-empty
/// string), ready to merge into an LLM node's output.
pub fn finish_fields(raw: Option<&Value>, has_tool_calls: bool) -> Map {
    let mut out = Map::with_capacity(2);
    if let Some(reason) = normalize_finish_reason(raw, has_tool_calls) {
        out.push_unique("finishReason".into(), Value::from(reason.as_str()));
    }
    if let Some(Value::String(s)) = raw {
        if !s.is_empty() {
            out.push_unique("rawFinishReason".into(), Value::String(s.clone()));
        }
    }
    out
}

// -- tool calls ------------------------------------------------------------------------

/// One tool call the model requested, as recorded in `output.toolCalls`:
/// `{id?, name, input, inputText?}`, or `None` without a non-empty string name.
///
/// An id is kept only when a non-empty string. `args` that are a string are JSON-parsed
/// (blank -> `{}`; text that does not parse, typically cut by a token limit -> `input: null`
/// plus the raw `inputText`); absent or null args are `{}`; any other value is the input as
/// it is.
pub fn tool_call(id: Option<&Value>, name: Option<&Value>, args: Option<&Value>) -> Option<Value> {
    let Some(Value::String(name)) = name else {
        return None;
    };
    if name.is_empty() {
        return None;
    }
    let mut out = Map::with_capacity(4);
    if let Some(Value::String(id)) = id {
        if !id.is_empty() {
            out.push_unique("id".into(), Value::String(id.clone()));
        }
    }
    out.push_unique("name".into(), Value::String(name.clone()));
    match args {
        None | Some(Value::Null) => out.push_unique("input".into(), Value::Object(Map::new())),
        Some(Value::String(text)) => {
            let blank = text.to_string_lossy().trim_matches(is_js_space).is_empty();
            if blank {
                out.push_unique("input".into(), Value::Object(Map::new()));
            } else {
                match json::parse(text.as_bytes()) {
                    Ok(parsed) => out.push_unique("input".into(), parsed),
                    Err(_) => {
                        out.push_unique("input".into(), Value::Null);
                        out.push_unique("inputText".into(), Value::String(text.clone()));
                    }
                }
            }
        }
        Some(other) => out.push_unique("input".into(), other.clone()),
    }
    Some(Value::Object(out))
}

/// The members of a tool call, as a client library hands it to the app's tool dispatch,
/// that carry the provider's call id, in the order they are read: Responses' `call_id`
/// (its `id` names the output item, not the call), the AI SDK's `toolCallId`, then `id`
/// (a Chat Completions `tool_calls[]` entry, an Anthropic `tool_use` block).
pub const TOOL_CALL_ID_KEYS: [&str; 3] = ["call_id", "toolCallId", "id"];

/// The provider's id of a tool call (see [`TOOL_CALL_ID_KEYS`]): the instance id of the
/// tool execution it asked for, so the debugger correlates the two. `None` when the value
/// carries no non-empty string id (a runner passed as the second argument, say).
pub fn tool_call_instance_id(call: &Value) -> Option<&JsStr> {
    TOOL_CALL_ID_KEYS.iter().find_map(|k| {
        call.get(k)
            .and_then(Value::as_js_str)
            .filter(|s| !s.is_empty())
    })
}

// -- usage -----------------------------------------------------------------------------

/// A token count as reported: a finite number >= 0, rounded half up (JavaScript's
/// `Math.round`); strings, booleans and everything else are not counts.
pub fn token_count(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Number(Number::Int(i)) => u64::try_from(*i).ok(),
        Value::Number(n) => {
            let f = n.as_f64();
            (f.is_finite() && f >= 0.0).then(|| (f + 0.5).floor() as u64)
        }
        _ => None,
    }
}

/// The sum of the parts that were reported; `None` when none was.
pub fn sum_reported(parts: &[Option<u64>]) -> Option<u64> {
    parts.iter().flatten().fold(None, |acc: Option<u64>, p| {
        Some(acc.unwrap_or(0).saturating_add(*p))
    })
}

/// The counts a provider reported, already normalized; `None` = not reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageParts {
    /// TOTAL prompt tokens: cached reads and cache writes included.
    pub input: Option<u64>,
    /// Output tokens.
    pub output: Option<u64>,
    /// Prompt tokens read from the cache.
    pub cache_read: Option<u64>,
    /// Prompt tokens written to the cache.
    pub cache_write: Option<u64>,
    /// Output tokens spent reasoning (a subset of `output`).
    pub reasoning: Option<u64>,
}

/// The wire `TokenUsage` for one step, or `None` when neither the input nor the output
/// count was reported. The wire requires both, so the one left out is 0; the optional
/// counts appear only when reported (a reported 0 stays 0).
pub fn make_usage(parts: UsageParts) -> Option<Value> {
    if parts.input.is_none() && parts.output.is_none() {
        return None;
    }
    let mut m = Map::with_capacity(6);
    m.push_unique("inputTokens".into(), Value::from(parts.input.unwrap_or(0)));
    m.push_unique(
        "outputTokens".into(),
        Value::from(parts.output.unwrap_or(0)),
    );
    m.push_unique("inclusive".into(), Value::Bool(true));
    for (key, v) in [
        ("cacheReadTokens", parts.cache_read),
        ("cacheWriteTokens", parts.cache_write),
        ("reasoningTokens", parts.reasoning),
    ] {
        if let Some(v) = v {
            m.push_unique(key.into(), Value::from(v));
        }
    }
    Some(Value::Object(m))
}

fn get<'a>(v: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    v?.get(key).filter(|v| !v.is_null())
}

fn has(v: &Value, key: &str) -> bool {
    v.as_object().is_some_and(|m| m.contains_key(key))
}

fn count(v: Option<&Value>, key: &str) -> Option<u64> {
    token_count(get(v, key))
}

/// A cache-write count and its 5m/1h split: the reported total, unless it is absent or 0
/// while the split reports more (LangChain's ChatAnthropic zeroes the total).
fn cache_write_with_split(total: Option<u64>, split: Option<&Value>) -> Option<u64> {
    let parts = split.map(|s| {
        sum_reported(&[
            count(Some(s), "ephemeral_5m_input_tokens"),
            count(Some(s), "ephemeral_1h_input_tokens"),
        ])
    });
    match (total, parts.flatten()) {
        (Some(t), Some(s)) if t == 0 && s > 0 => Some(s),
        (Some(t), _) => Some(t),
        (None, s) => s,
    }
}

/// Anthropic `usage`: `input_tokens` is the UNCACHED tail, so the total adds the cache
/// reads and writes (the 5m/1h `cache_creation` split summed when only it was reported);
/// `output_tokens_details.thinking_tokens` is the reasoning count.
pub fn anthropic_usage(usage: &Value) -> Option<Value> {
    let u = Some(usage);
    let cache_read = count(u, "cache_read_input_tokens");
    let cache_write = cache_write_with_split(
        count(u, "cache_creation_input_tokens"),
        get(u, "cache_creation"),
    );
    make_usage(UsageParts {
        input: sum_reported(&[count(u, "input_tokens"), cache_read, cache_write]),
        output: count(u, "output_tokens"),
        cache_read,
        cache_write,
        reasoning: count(get(u, "output_tokens_details"), "thinking_tokens"),
    })
}

/// OpenAI Chat Completions `usage`: `prompt_tokens` is inclusive; cache reads in
/// `prompt_tokens_details.cached_tokens` (`prompt_cache_hit_tokens` on compatible servers),
/// writes in `.cache_write_tokens`, reasoning in `completion_tokens_details`.
pub fn openai_chat_usage(usage: &Value) -> Option<Value> {
    let u = Some(usage);
    let details = get(u, "prompt_tokens_details");
    make_usage(UsageParts {
        input: count(u, "prompt_tokens"),
        output: count(u, "completion_tokens"),
        cache_read: count(details, "cached_tokens").or_else(|| count(u, "prompt_cache_hit_tokens")),
        cache_write: count(details, "cache_write_tokens"),
        reasoning: count(get(u, "completion_tokens_details"), "reasoning_tokens"),
    })
}

/// OpenAI Responses `usage`: `input_tokens` is inclusive; details in
/// `input_tokens_details` / `output_tokens_details`.
pub fn openai_responses_usage(usage: &Value) -> Option<Value> {
    let u = Some(usage);
    let details = get(u, "input_tokens_details");
    make_usage(UsageParts {
        input: count(u, "input_tokens"),
        output: count(u, "output_tokens"),
        cache_read: count(details, "cached_tokens"),
        cache_write: count(details, "cache_write_tokens"),
        reasoning: count(get(u, "output_tokens_details"), "reasoning_tokens"),
    })
}

/// AI SDK usage. V4 reports nested objects (`inputTokens: {total, noCache, cacheRead,
/// cacheWrite}`, `outputTokens: {total, text, reasoning}`; without a total the parts are
/// summed); V2 plain numbers (the number is the total, with `cachedInputTokens` and
/// `reasoningTokens` beside it).
pub fn ai_sdk_usage(usage: &Value) -> Option<Value> {
    let u = Some(usage);
    let (input, cache_read, cache_write) = match get(u, "inputTokens") {
        Some(nested @ Value::Object(_)) => {
            let n = Some(nested);
            let cache_read = count(n, "cacheRead");
            let cache_write = count(n, "cacheWrite");
            let total = count(n, "total")
                .or_else(|| sum_reported(&[count(n, "noCache"), cache_read, cache_write]));
            (total, cache_read, cache_write)
        }
        other => (token_count(other), count(u, "cachedInputTokens"), None),
    };
    let (output, reasoning) = match get(u, "outputTokens") {
        Some(nested @ Value::Object(_)) => {
            let n = Some(nested);
            let reasoning = count(n, "reasoning");
            (
                count(n, "total").or_else(|| sum_reported(&[count(n, "text"), reasoning])),
                reasoning,
            )
        }
        other => (token_count(other), count(u, "reasoningTokens")),
    };
    make_usage(UsageParts {
        input,
        output,
        cache_read,
        cache_write,
        reasoning,
    })
}

/// Anthropic's raw usage names its cache fields.
fn looks_anthropic(usage: &Value) -> bool {
    has(usage, "cache_read_input_tokens")
        || has(usage, "cache_creation_input_tokens")
        || get(Some(usage), "cache_creation").is_some()
}

/// LangChain `usage_metadata` (inclusive by LangChain's definition, details in
/// `input_token_details` / `output_token_details`), or whichever raw provider shape an
/// integration left in `llm_output` / `response_metadata` (see [`usage_of`]). An
/// integration that still reports Anthropic's uncached tail as `input_tokens` is
/// recognisable when the cache counts exceed it; then they are added.
pub fn langchain_usage(usage: &Value) -> Option<Value> {
    if looks_anthropic(usage) {
        return anthropic_usage(usage);
    }
    if has(usage, "input_token_details") || has(usage, "output_token_details") {
        let u = Some(usage);
        let details = get(u, "input_token_details");
        let cache_read = count(details, "cache_read");
        let cache_write = cache_write_with_split(count(details, "cache_creation"), details);
        let mut input = count(u, "input_tokens");
        if let (Some(i), Some(cached)) = (input, sum_reported(&[cache_read, cache_write])) {
            if cached > i {
                input = Some(i.saturating_add(cached));
            }
        }
        return make_usage(UsageParts {
            input,
            output: count(u, "output_tokens"),
            cache_read,
            cache_write,
            reasoning: count(get(u, "output_token_details"), "reasoning"),
        });
    }
    usage_of(usage)
}

/// ruby_llm `Tokens`: `input` is the uncached tail (2.0 `cache_read` / `cache_write`, 1.x
/// `cached` / `cache_creation`), `thinking` the reasoning count.
pub fn ruby_llm_usage(usage: &Value) -> Option<Value> {
    let u = Some(usage);
    let cache_read = count(u, "cache_read").or_else(|| count(u, "cached"));
    let cache_write = count(u, "cache_write").or_else(|| count(u, "cache_creation"));
    make_usage(UsageParts {
        input: sum_reported(&[count(u, "input"), cache_read, cache_write]),
        output: count(u, "output"),
        cache_read,
        cache_write,
        reasoning: count(u, "thinking"),
    })
}

/// Any provider usage object (or an object carrying one as `usage`) mapped by its shape:
/// Anthropic (cache fields), OpenAI Responses (`input_tokens_details`), LangChain
/// (`input_token_details`), plain `input_tokens`, OpenAI chat (`prompt_tokens`), LangChain
/// JS camelCase (`promptTokens`).
pub fn usage_of(obj: &Value) -> Option<Value> {
    const FIELDS: [&str; 5] = [
        "input_tokens",
        "output_tokens",
        "prompt_tokens",
        "completion_tokens",
        "promptTokens",
    ];
    let source = if FIELDS.iter().any(|f| has(obj, f)) {
        obj
    } else {
        get(Some(obj), "usage")?
    };
    if looks_anthropic(source) {
        return anthropic_usage(source);
    }
    if has(source, "input_tokens_details") || has(source, "output_tokens_details") {
        return openai_responses_usage(source);
    }
    if has(source, "input_token_details") || has(source, "output_token_details") {
        return langchain_usage(source);
    }
    let s = Some(source);
    if has(source, "input_tokens") || has(source, "output_tokens") {
        return make_usage(UsageParts {
            input: count(s, "input_tokens"),
            output: count(s, "output_tokens"),
            ..Default::default()
        });
    }
    if has(source, "prompt_tokens") || has(source, "completion_tokens") {
        return openai_chat_usage(source);
    }
    make_usage(UsageParts {
        input: count(s, "promptTokens"),
        output: count(s, "completionTokens"),
        ..Default::default()
    })
}

/// The providers whose usage shape the core maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UsageProvider {
    /// Anthropic Messages (also Bedrock / Vertex Anthropic).
    Anthropic,
    /// OpenAI Chat Completions and compatible servers.
    OpenAiChat,
    /// OpenAI Responses.
    OpenAiResponses,
    /// The Vercel AI SDK (V2 numbers or V4 nested objects).
    AiSdk,
    /// LangChain (`usage_metadata` or a raw provider shape).
    LangChain,
    /// ruby_llm `Tokens`.
    RubyLlm,
}

impl UsageProvider {
    /// The provider for a name as the fixture spells it (`anthropic`, `openai-chat`,
    /// `openai-responses`, `ai-sdk`, `langchain`, `ruby_llm`).
    pub fn from_name(name: &str) -> Option<UsageProvider> {
        Some(match name {
            "anthropic" => UsageProvider::Anthropic,
            "openai-chat" => UsageProvider::OpenAiChat,
            "openai-responses" => UsageProvider::OpenAiResponses,
            "ai-sdk" => UsageProvider::AiSdk,
            "langchain" => UsageProvider::LangChain,
            "ruby_llm" => UsageProvider::RubyLlm,
            _ => return None,
        })
    }
}

/// The wire `TokenUsage` for a provider's reported usage, or `None` when neither input
/// nor output was reported.
pub fn provider_usage(provider: UsageProvider, raw: &Value) -> Option<Value> {
    match provider {
        UsageProvider::Anthropic => anthropic_usage(raw),
        UsageProvider::OpenAiChat => openai_chat_usage(raw),
        UsageProvider::OpenAiResponses => openai_responses_usage(raw),
        UsageProvider::AiSdk => ai_sdk_usage(raw),
        UsageProvider::LangChain => langchain_usage(raw),
        UsageProvider::RubyLlm => ruby_llm_usage(raw),
    }
}

// -- tool definitions ------------------------------------------------------------------

/// Hex characters of the SHA-256 kept as a tool schema hash.
pub const SCHEMA_HASH_HEX_CHARS: usize = 16;
/// Runs whose sent schema hashes a session remembers (least recently used forgotten).
pub const MAX_SCHEMA_RUNS: usize = 256;
/// Hashes remembered per run; past it the run's memory restarts (a re-send is harmless).
pub const MAX_SCHEMA_HASHES_PER_RUN: usize = 1024;
/// Deeper than this (outside a schema), a tool definition's containers are recorded empty.
pub const MAX_TOOL_DEFINITION_DEPTH: usize = 16;

/// Keys of a tool definition that hold its SCHEMA, recorded verbatim: a schema's property
/// names are the tool's parameter names (a tool may well take a `token` argument).
pub const TOOL_SCHEMA_KEYS: [&str; 7] = [
    "parameters",
    "input_schema",
    "inputSchema",
    "output_schema",
    "outputSchema",
    "schema",
    "format",
];

/// Substrings (ASCII case-insensitive) of a key that may carry a credential or transport
/// configuration; such a key outside the schema is never recorded.
const TOOL_SECRET_KEY_PARTS: [&str; 11] = [
    "authorization",
    "authorisation",
    "header",
    "token",
    "secret",
    "password",
    "passwd",
    "key",
    "cookie",
    "credential",
    "bearer",
];

/// Stable hash of a tool definition: SHA-256 of its canonical JSON (keys sorted by UTF-16
/// code units, JavaScript number spelling, nothing ignored), first 16 hex characters.
pub fn schema_hash(definition: &Value) -> String {
    let canonical = canonical_json_with(definition, &[]);
    let digest = Sha256::digest(canonical.as_bytes());
    crate::fingerprint::to_hex(&digest[..SCHEMA_HASH_HEX_CHARS / 2])
}

fn is_secret_key(key: &JsStr) -> bool {
    let lower = key.as_bytes().to_ascii_lowercase();
    TOOL_SECRET_KEY_PARTS
        .iter()
        .any(|part| lower.windows(part.len()).any(|w| w == part.as_bytes()))
}

fn is_url_key(key: &JsStr) -> bool {
    let b = key.as_bytes();
    b.len() >= 3 && b[b.len() - 3..].eq_ignore_ascii_case(b"url")
}

/// A URL without its query, fragment and userinfo: cut before the first `?` or `#`; then,
/// when its first `/` or `\` is followed (tabs and newlines aside) by another, everything
/// after that pair up to the LAST `@` before the next `/` is dropped, so a password
/// holding `@` goes whole. What precedes the pair (a scheme, spaces, nothing) is kept.
pub fn without_url_secrets(url: &JsStr) -> JsStr {
    let bytes = url.as_bytes();
    let cut = bytes
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .unwrap_or(bytes.len());
    let text = &bytes[..cut];
    let is_slash = |b: u8| b == b'/' || b == b'\\';
    let stripped = (|| {
        let first = text.iter().position(|&b| is_slash(b))?;
        let mut j = first + 1;
        while j < text.len() && matches!(text[j], b'\t' | b'\n' | b'\r') {
            j += 1;
        }
        if j >= text.len() || !is_slash(text[j]) {
            return None;
        }
        let host_start = j + 1;
        let host_end = text[host_start..]
            .iter()
            .position(|&b| b == b'/')
            .map_or(text.len(), |p| host_start + p);
        let at = text[host_start..host_end]
            .iter()
            .rposition(|&b| b == b'@')?
            + host_start;
        let mut out = text[..host_start].to_vec();
        out.extend_from_slice(&text[at + 1..]);
        Some(out)
    })();
    let out = stripped.unwrap_or_else(|| text.to_vec());
    JsStr::from_wtf8(&out).unwrap_or_else(|| url.clone())
}

/// A tool definition as it is hashed and recorded: the schema keys
/// ([`TOOL_SCHEMA_KEYS`]) verbatim; outside them, at any depth (objects and arrays walked,
/// at most [`MAX_TOOL_DEFINITION_DEPTH`] levels), a secret-looking key dropped and a string
/// under a key ending in `url` passed through [`without_url_secrets`].
pub fn sanitize_tool_definition(definition: &Value) -> Value {
    sanitize_value(definition, 0)
}

fn sanitize_value(value: &Value, depth: usize) -> Value {
    match value {
        Value::Array(items) => {
            if depth >= MAX_TOOL_DEFINITION_DEPTH {
                return Value::Array(Vec::new());
            }
            Value::Array(items.iter().map(|v| sanitize_value(v, depth + 1)).collect())
        }
        Value::Object(m) => {
            if depth >= MAX_TOOL_DEFINITION_DEPTH {
                return Value::Object(Map::new());
            }
            let mut out = Map::with_capacity(m.len());
            for (key, item) in m.iter() {
                if TOOL_SCHEMA_KEYS.iter().any(|k| key == *k) {
                    out.push_unique(key.clone(), item.clone());
                } else if is_secret_key(key) {
                    continue;
                } else if let (Value::String(s), true) = (item, is_url_key(key)) {
                    out.push_unique(key.clone(), Value::String(without_url_secrets(s)));
                } else {
                    out.push_unique(key.clone(), sanitize_value(item, depth + 1));
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The name of one request tool definition in any provider shape: `function.name` /
/// `custom.name` (OpenAI), `name` (Anthropic, OpenAI Responses, AI SDK), or a built-in's
/// `type`.
pub fn tool_def_name(definition: &Value) -> Option<JsStr> {
    let d = Some(definition);
    [
        get(get(d, "function"), "name"),
        get(get(d, "custom"), "name"),
        get(d, "name"),
        get(d, "type"),
    ]
    .into_iter()
    .flatten()
    .find_map(|v| match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    })
}

/// What one LLM step records about its tools.
#[derive(Clone, Debug, PartialEq)]
pub struct CapturedTools {
    /// `[{name, schemaHash}]`, one per named definition, in request order.
    pub tools: Vec<(JsStr, String)>,
    /// `{hash: definition}` for the definitions this run has not been sent yet.
    pub tool_schemas: Map,
}

impl CapturedTools {
    /// The fields for `node.started.input`: `{tools, toolSchemas?}`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::with_capacity(2);
        let tools = self
            .tools
            .iter()
            .map(|(name, hash)| {
                let mut t = Map::with_capacity(2);
                t.push_unique("name".into(), Value::String(name.clone()));
                t.push_unique("schemaHash".into(), Value::from(hash.as_str()));
                Value::Object(t)
            })
            .collect();
        m.push_unique("tools".into(), Value::Array(tools));
        if !self.tool_schemas.is_empty() {
            m.push_unique(
                "toolSchemas".into(),
                Value::Object(self.tool_schemas.clone()),
            );
        }
        Value::Object(m)
    }
}

/// Which tool schemas each run has been sent, per session (bounded: [`MAX_SCHEMA_RUNS`]
/// runs, least recently used forgotten, [`MAX_SCHEMA_HASHES_PER_RUN`] hashes per run).
#[derive(Debug, Default)]
pub struct ToolSchemaMemory {
    runs: VecDeque<(String, HashSet<String>)>,
}

impl ToolSchemaMemory {
    /// An empty memory.
    pub fn new() -> Self {
        Self::default()
    }

    fn run(&mut self, run_key: &str) -> &mut HashSet<String> {
        let hashes = match self.runs.iter().position(|(k, _)| k == run_key) {
            Some(i) => self.runs.remove(i).map(|(_, h)| h).unwrap_or_default(),
            None => {
                while self.runs.len() >= MAX_SCHEMA_RUNS {
                    self.runs.pop_front();
                }
                HashSet::new()
            }
        };
        self.runs.push_back((run_key.to_owned(), hashes));
        &mut self.runs.back_mut().expect("just pushed").1
    }

    /// `tools` / `toolSchemas` for one LLM step of run `run_key`: every definition with a
    /// name ([`tool_def_name`]) is sanitised ([`sanitize_tool_definition`]) and hashed in
    /// that form, so the hash names exactly what is sent; a definition goes into
    /// `tool_schemas` the first time the run sees its hash. `None` when nothing is named.
    pub fn capture_tools(&mut self, run_key: &str, definitions: &[Value]) -> Option<CapturedTools> {
        if definitions.is_empty() {
            return None;
        }
        let sent = self.run(run_key);
        let mut captured = CapturedTools {
            tools: Vec::new(),
            tool_schemas: Map::new(),
        };
        for definition in definitions {
            let Some(name) = tool_def_name(definition) else {
                continue;
            };
            let plain = sanitize_tool_definition(definition);
            let hash = schema_hash(&plain);
            captured.tools.push((name, hash.clone()));
            if sent.contains(&hash) {
                continue;
            }
            if sent.len() >= MAX_SCHEMA_HASHES_PER_RUN {
                sent.clear();
            }
            sent.insert(hash.clone());
            captured.tool_schemas.insert(hash, plain);
        }
        (!captured.tools.is_empty()).then_some(captured)
    }

    /// The definitions of `captured` did NOT reach the wire whole (the event was shrunk or
    /// dropped): forget that the run was sent them, so its next step sends them again.
    pub fn release(&mut self, run_key: &str, captured: &CapturedTools) {
        if let Some((_, sent)) = self.runs.iter_mut().find(|(k, _)| k == run_key) {
            for hash in captured.tool_schemas.keys() {
                if let Some(h) = hash.as_str() {
                    sent.remove(h);
                }
            }
        }
    }

    /// Forgets every run.
    pub fn clear(&mut self) {
        self.runs.clear();
    }
}

// -- sampling parameters ---------------------------------------------------------------

/// Request parameters recorded on `node.started.input` under the SDK's own names: the AI
/// SDK's call options (camelCase) and the provider bodies / LangChain invocation params
/// (snake_case). An allow-list on purpose: request bodies also carry credentials.
pub const SAMPLING_PARAM_KEYS: [&str; 39] = [
    "maxOutputTokens",
    "maxTokens",
    "temperature",
    "topP",
    "topK",
    "stopSequences",
    "presencePenalty",
    "frequencyPenalty",
    "seed",
    "toolChoice",
    "responseFormat",
    "reasoning",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "top_p",
    "top_k",
    "stop",
    "stop_sequences",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "n",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "reasoning_effort",
    "thinking",
    "service_tier",
    "truncation",
    "text",
    "verbosity",
    "prompt_cache_key",
    "max_tool_calls",
    "context_management",
    "output_config",
    "cache_control",
];

/// The allow-listed keys of `source` that were given (present and not null), in
/// [`SAMPLING_PARAM_KEYS`] order. Not an object: nothing.
pub fn pick_params(source: &Value) -> Map {
    let mut out = Map::new();
    if let Value::Object(m) = source {
        for key in SAMPLING_PARAM_KEYS {
            if let Some(v) = m.get(key).filter(|v| !v.is_null()) {
                out.push_unique(key.into(), v.clone());
            }
        }
    }
    out
}

// -- AI SDK step output -------------------------------------------------------------------

/// What an LLM node records as its output for a Vercel AI SDK `doGenerate` result
/// (`{content: [{type: "text", text} | {type: "tool-call", toolCallId, toolName, input}],
/// finishReason, usage}`): `{text?, toolCalls?, finishReason?, rawFinishReason?, usage?}`.
/// A `finishReason` object (`{unified, raw}`, spec V3+) is read through `unified`. Every
/// SDK binding that wraps an AI SDK model records through this one function.
pub fn ai_sdk_step_output(result: &Value) -> Value {
    let mut out = Map::new();
    let mut text = String::new();
    let mut has_text = false;
    let mut calls = Vec::new();
    let mut builtin = crate::llm_builtin::AiSdkBuiltin::default();
    if let Some(Value::Array(parts)) = result.get("content") {
        for part in parts {
            if builtin.take(part) {
                continue;
            }
            match part.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(t) = part.get("text").and_then(Value::as_str) {
                        text.push_str(t);
                        has_text = true;
                    }
                }
                Some("tool-call") => {
                    if let Some(call) = tool_call(
                        part.get("toolCallId"),
                        part.get("toolName"),
                        part.get("input"),
                    ) {
                        calls.push(call);
                    }
                }
                _ => {}
            }
        }
    }
    if has_text {
        out.insert("text", Value::from(text.as_str()));
    }
    let has_calls = !calls.is_empty();
    if has_calls {
        out.insert("toolCalls", Value::Array(calls));
    }
    builtin.put(&mut out);
    let raw_reason = match result.get("finishReason") {
        Some(obj @ Value::Object(_)) => obj.get("unified"),
        other => other,
    };
    for (k, v) in finish_fields(raw_reason, has_calls).iter() {
        out.insert(k.clone(), v.clone());
    }
    if let Some(usage) = result.get("usage").and_then(ai_sdk_usage) {
        out.insert("usage", usage);
    }
    Value::Object(out)
}

#[cfg(test)]
mod ai_sdk_output_tests {
    use super::*;

    #[test]
    fn text_calls_reason_and_usage() {
        let result = crate::json::parse_str(
            r#"{"content":[{"type":"text","text":"hi "},{"type":"text","text":"there"},{"type":"tool-call","toolCallId":"c1","toolName":"search","input":"{\"q\":1}"}],"finishReason":{"unified":"tool-calls","raw":"tool_use"},"usage":{"inputTokens":3,"outputTokens":4}}"#,
        )
        .unwrap();
        let out = crate::json::to_string(&ai_sdk_step_output(&result));
        assert!(out.starts_with(r#"{"text":"hi there","toolCalls":[{"id":"c1","name":"search","input":{"q":1}}],"finishReason":"tool-calls""#), "{out}");
        assert!(out.contains(r#""usage":"#), "{out}");
    }

    #[test]
    fn a_tool_calls_id_is_read_where_each_provider_puts_it() {
        let id = |text: &str| {
            let v = crate::json::parse_str(text).unwrap();
            tool_call_instance_id(&v).map(|s| s.to_string_lossy().into_owned())
        };
        assert_eq!(
            id(r#"{"id":"call_1","type":"function"}"#).as_deref(),
            Some("call_1")
        );
        assert_eq!(
            id(r#"{"id":"fc_1","call_id":"call_2"}"#).as_deref(),
            Some("call_2")
        );
        assert_eq!(
            id(r#"{"toolCallId":"c3","messages":[]}"#).as_deref(),
            Some("c3")
        );
        assert_eq!(id(r#"{"id":"","other":1}"#), None);
        assert_eq!(id(r#"{"id":7}"#), None);
        assert_eq!(id("[]"), None);
    }
}
