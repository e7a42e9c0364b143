// Types of @graphmind/node: the reference's TypeScript API over the Rust core.

export type PausePoint = 'before' | 'after' | 'error';
export type ResumeAction = 'continue' | 'retry' | 'inject' | 'abort';
export type NodeKind = 'agent' | 'llm' | 'tool' | 'chain' | 'retriever' | 'custom';

export interface SdkInfo { name: string; version: string }

export interface LoopGuardOptions {
  threshold?: number;
  mode?: 'pause' | 'warn' | 'off';
  allowNodes?: string[];
  ignoreKeys?: string[];
  kinds?: string[];
  /** Opt-in detectors beside the same-call-back-to-back rule: 'cycle', 'error-repeat'.
   *  Off by default (the spec does not hold alternating calls). Replaces GRAPHMIND_LOOP_DETECT. */
  detect?: Array<'repeat' | 'cycle' | 'error-repeat'>;
}

/** Session options: the reference's names and defaults, resolved by the core. */
export interface SessionOptions {
  /** Ingest endpoint. Default: GRAPHMIND_URL or ws://127.0.0.1:4747/ingest. */
  url?: string;
  /** Reported in hello / run.started. Default "node". */
  appName?: string;
  sdk?: SdkInfo;
  /** Merged into every run.started meta. */
  meta?: Record<string, unknown>;
  /** Force on or off; GRAPHMIND_DISABLED=1 still wins, NODE_ENV=production disables unless GRAPHMIND=1. */
  enabled?: boolean;
  /** Default 300. */
  connectTimeoutMs?: number;
  /** Default 1000. */
  handshakeTimeoutMs?: number;
  /** Default 10000. */
  retryIntervalMs?: number;
  /** Replay buffer, events. Default 5000. */
  bufferSize?: number;
  /** Replay buffer, bytes. Default 8 MiB. */
  maxBufferBytes?: number;
  /** Auto-continue a held gate after this long. Default: hold until resumed. */
  pauseTimeoutMs?: number;
  /** Token batch flush interval. Default 34. */
  tokenIntervalMs?: number;
  /** The reference facades' name for tokenIntervalMs. */
  tokenFlushIntervalMs?: number;
  loopGuard?: LoopGuardOptions | false;
  breakOnErrorResult?: boolean;
  breakOnTruncated?: boolean;
  /** Replay a recorded run (docs/replay.md): `"<runId>[@<nodeId>#<n>]"` or `{run?, file?, from?, output?}`. */
  replay?: string | { run?: string; file?: string; source?: string; from?: string; output?: unknown };
  hideInputs?: boolean;
  hideOutputs?: boolean;
  hideToolArgs?: boolean;
  hideToolResults?: boolean;
  /** The environment to read instead of process.env (tests). */
  env?: Record<string, string | undefined>;
  /** Warning sink; default: standard error. Lines start with "[graphmind] ". */
  logger?: (line: string) => void;
  /** Rate-limit window of repeated warnings. Default 60000. */
  warnIntervalMs?: number;
  /** While detached, events that fall out of the replay buffer go to an on-disk spool in this folder (docs/spool.md). Default: GRAPHMIND_SPOOL_DIR, else off. */
  spoolDir?: string;
  /** The spool's byte bound; the oldest segment is dropped, with exact gap markers. Default 64 MiB. */
  spoolMaxBytes?: number;
}

export interface ReadyOptions { timeoutMs?: number }

export interface RunContext {
  readonly runId: string;
  readonly name: string;
  /** Aborted with an AbortError when the debugger aborts the run; abort it to abort the run. */
  readonly abortController: AbortController;
  readonly signal: AbortSignal;
}

export interface GateNode { nodeId: string; kind: NodeKind | string; name?: string }
export interface GateOptions {
  /** Offer the pause as editable: an edit is merged into `liveInput` by the core. */
  editable?: boolean;
  liveInput?: unknown;
  /** The JSON Schema an edit must match after the merge (else `schema`, the gate stays held). */
  inputSchema?: object | null;
  /** The call's result, read by the smart breakpoints (`error-result`, `truncated-tool-call`). */
  result?: unknown;
}
export interface GateDecision { action: ResumeAction; output?: unknown; input?: unknown }

export interface SessionStats {
  enabled: boolean;
  attached: boolean;
  buffered: number;
  dropped: number;
  lost: number;
  pendingGaps: number;
  heldGates: number;
  seq: number;
}

export interface WrapCallOptions<A extends unknown[], R> {
  /** Offer the pauses as editable (default: for tools). */
  editable?: boolean;
  /** What to record as the input (default: the first argument). */
  input?: (args: A) => unknown;
  /** What to record as the output (default: the result). */
  output?: (result: Awaited<R>) => unknown;
  /** The provider's tool call this execution answers: its id is the instance id. */
  toolCall?: (args: A) => unknown;
  /** The node id to record as the call's parent (`null`: none). */
  parentId?: ((args: A) => string | null) | null;
  /** The JSON Schema (or a promise of it) an edited input must match; else the edit is refused (`schema`) and the gate stays held. */
  inputSchema?: object | PromiseLike<object> | null;
}

/** What a model call's stream reports (see Session.callModel). */
export interface StreamRecorder {
  /** One chunk / event, as the app receives it. */
  chunk(value: unknown): void;
  /** The stream ended: `error` when it broke, `aborted` when it was stopped. Once. */
  end(error?: unknown, aborted?: boolean): void;
  /** A recording going on in the background: the run waits (briefly) for it before it ends. */
  background(promise: Promise<unknown>): void;
  /** `source` with each part reported as the app reads it, and its end. */
  readable<T>(source: ReadableStream<T>): ReadableStream<T>;
}

/** The core's report of a replay (docs/replay.md); `live` is the `replayLive` field where it went live. */
export interface ReplayState {
  replayed: number;
  live: { reason: string; at: string; differs?: string[]; recordedKey?: string; liveKey?: string } | null;
  error: string | null;
  replayOf: string | null;
  runId: string | null;
}

export interface Session {
  readonly enabled: boolean;
  readonly attached: boolean;
  /** The configuration as the core resolved it. */
  config(): Record<string, unknown>;
  /** Connects now; true once attached, false on timeout (default 2000 ms) or when disabled. Never rejects. */
  ready(opts?: ReadyOptions): Promise<boolean>;
  run<T>(name: string, fn: (ctx: RunContext) => T | Promise<T>): Promise<T>;
  currentRun(): RunContext | undefined;
  emit(type: string, payload: unknown): void;
  gate(point: PausePoint, node: GateNode, options?: GateOptions): Promise<GateDecision>;
  stats(): SessionStats;
  /** Replays a recorded run from now on (the `replay` option's value); `/testing`'s `replay` builds on it (docs/replay.md). */
  replayBegin(spec: NonNullable<SessionOptions['replay']>): ReplayState;
  /** Stops replaying; the last report, null when not replaying. */
  replayEnd(): ReplayState | null;
  /** What the replay has done so far, null when not replaying. */
  replayReport(): ReplayState | null;
  /** Blocks up to timeoutMs until everything emitted reached the socket or the buffer. */
  flushSync(timeoutMs?: number): boolean;
  dispose(): Promise<void>;
  /** `fn` as one gated call of node `kind:name`, driven by the core's Step. */
  wrapCall<A extends unknown[], R>(kind: NodeKind | string, name: string, fn: (...args: A) => R, options?: WrapCallOptions<A, R>): (...args: A) => Promise<Awaited<R>>;
  /** Runs `fn` as an ungated node (node.started / node.finished). */
  observe<T>(kind: NodeKind | string, name: string, fn: () => T | Promise<T>): Promise<T>;
  /**
   * One model call through the core's LLM step: `request` recorded through the codec of
   * `api` (`ai-sdk`, `openai-chat`, `openai-responses`, `anthropic`, ...), `send()` makes
   * the call. With `stream`, `stream(result, recorder)` returns what the app gets when the
   * answer is a stream (reporting its chunks to `recorder`), or undefined for a complete
   * answer (then gated `after`). Resolves to what `send` returned, or the injected reply.
   */
  callModel<R>(api: string, request: unknown, send: () => R | Promise<R>, options?: {
    sdk?: string | null;
    stream?: ((result: Awaited<R>, recorder: StreamRecorder) => Awaited<R> | undefined) | null;
  }): Promise<Awaited<R>>;
  /** One rate-limited warning through the session's logger. */
  warn(key: string, message: string): void;
  /** Runs `fn` in the run `ctx` (`undefined`: the implicit run). */
  within<T>(ctx: RunContext | undefined, fn: () => T): T;
  /**
   * Records node inputs and outputs longer than `maxChars` characters of JSON as a preview
   * (`{__graphmind: 'truncated', preview, chars}`); `null`: no cap. The app's values are
   * never changed.
   */
  capPayloads(maxChars: number | null): void;
}

export function createSession(options?: SessionOptions): Session;

// -- the reference client's tool-edit helpers (gate-helpers.js, rules in core::tool_edit) ---

/** Why an edit was refused (`exec.refused.code`). */
export type RefusalCode = 'schema' | 'shape' | 'placeholder' | 'truncated' | 'disabled' | 'unsupported';
/** A verdict on a proposed input: `value` is what the call runs with. */
export type InputValidation = { ok: true; value: unknown } | { ok: false; code: RefusalCode; message?: string };
/** A check of merged tool arguments; `jsonSchema`: its JSON Schema form, run by the core at a held gate. */
export interface SchemaCheck {
  (value: unknown): InputValidation | Promise<InputValidation>;
  readonly jsonSchema?: object | null;
}
/** What a tool gate can do with an edit: the live arguments and how to check an edit of them. */
export interface ToolEdit { args: unknown; check?: SchemaCheck | object | null }
/**
 * The check a held gate runs on an edit (placeholder guard, pollution paths, merge into
 * `live`, then `schema`: a JSON Schema, or a SchemaCheck whose verdict may be a promise).
 */
export function validateInput(live: unknown, proposed: unknown, options?: { schema?: object | SchemaCheck | null; inputHidden?: boolean }): InputValidation | Promise<InputValidation>;
/** A check for a zod, Standard Schema, AI SDK `jsonSchema()` or plain JSON Schema; undefined for anything else. */
export function toolSchemaCheck(schema: unknown): SchemaCheck | undefined;
/** Gate options for a tool gate (editable + schema, and the result at `after`); undefined while detached. */
export function toolGateOptions(session: { readonly attached: boolean }, edit: ToolEdit | (() => ToolEdit | undefined) | undefined, after?: { result: unknown }): GateOptions | undefined;
/** `{result}` for an `after` gate while attached, else undefined. */
export function resultGateOptions(session: { readonly attached: boolean }, result: unknown): GateOptions | undefined;
/** The arguments an accepted edit hands the call (`continue` / `retry` with `input`), else undefined. */
export function editedArgs(decision: GateDecision): { args: unknown } | undefined;
/** Canonical JSON (keys sorted by UTF-16 code units, `_meta` ignored unless ignoreKeys says otherwise). */
export function canonicalJson(value: unknown, ignoreKeys?: string[]): string;
/** 32 hex characters identifying a call of `nodeId` with `input`. */
export function fingerprint(nodeId: string, input: unknown, ignoreKeys?: string[]): string;

export class GraphMindAbortError extends Error { name: 'AbortError' }
export function isAbortError(error: unknown): boolean;
export const CONTINUE_DECISION: Readonly<GateDecision>;
export const MAX_PAYLOAD_BYTES: number;
export const REDACTED: string;

// -- the provider facades (`/openai`, `/anthropic`, `/ai-sdk`) ----------------------------

export interface GraphmindOptions extends Omit<SessionOptions, 'appName' | 'sdk'> {
  /** The app name (default: "openai-app", "anthropic-app" or "ai-app"). */
  app?: string;
  /** Default: the provider package's name and installed version. */
  sdk?: SdkInfo;
  /** The first run / model call / tool call awaits ready() (true: 2000 ms, or a number of ms). */
  waitForAttach?: boolean | number;
}

/** What every facade returns. */
export interface GraphmindBase {
  readonly session: Session;
  /** Connects now; true once attached. Never rejects. */
  ready(opts?: ReadyOptions): Promise<boolean>;
  /** Tool functions gated (before/after/error), called as `tools[name](args, toolCall)`; identity when disabled. */
  wrapTools<T extends Record<string, unknown>>(tools: T): T;
  /** One gated tool function. */
  tool<F extends (...args: any[]) => unknown>(name: string, fn: F): (...args: Parameters<F>) => Promise<Awaited<ReturnType<F>>>;
  /** An explicit run: its agent node parents what runs inside, its signal carries `abort`. */
  run<T>(name: string, fn: (ctx: RunContext) => T | Promise<T>): Promise<T>;
  /** Releases held gates, flushes and closes. Idempotent. */
  dispose(): Promise<void>;
}

/** The Vercel AI SDK facade (also `require('@graphmind/node/ai-sdk')`). */
export interface Graphmind extends GraphmindBase {
  /** wrapLanguageModel with the debug middleware; identity when disabled. */
  wrapModel<M>(model: M): M;
  /** Every tool's execute gated (before/after/error); identity when disabled. */
  wrapTools<T extends Record<string, unknown>>(tools: T): T;
}

export function graphmind(options?: GraphmindOptions): Graphmind;

/** The addon itself (pure functions of the core, for conformance runners). */
export const native: Record<string, any>;
