'use strict';
/**
 * GraphMind for Node.js. Everything here translates JavaScript idioms (promises,
 * AsyncLocalStorage, AbortController) to the Rust core (the prebuilt `graphmind.<platform>.node` that native.js loads); what a
 * debugger action means, when to gate, redaction, shrinking, configuration and the kill
 * switch all live in the core.
 */
const { AsyncLocalStorage } = require('node:async_hooks');

// The prebuilt addon for this platform (napi-rs convention, see native.js).
const native = require('./native.js').loadAddon();
const CONSTANTS = native.constants();

/**
 * What the core's step tells the wrapper to do next: the core's encoding
 * (`graphmind_core::surface::next_code`), read by name from the addon. `stepCall` packs
 * `handle * CODE_SPAN + code`.
 */
const {
  RUN, RUN_EDITED, RETURN_RESULT, RETURN_INJECTED, RERAISE, ABORT, HELD, RAISE, STREAM, CODE_SPAN,
} = native.nextCodes();

/**
 * How long a finishing run waits for the model streams still being recorded in the
 * background (a teed stream's recording branch, one chunk behind the app's, or the rest
 * of a stream the app stopped reading); past it they end with what they carried.
 */
const STREAM_SETTLE_MS = 100;

const CONTINUE_DECISION = Object.freeze({ action: 'continue' });
const CONTINUE_PROMISE = Promise.resolve(CONTINUE_DECISION);
const DEFAULT_READY_TIMEOUT_MS = CONSTANTS.defaultReadyTimeoutMs;

/**
 * Sessions not disposed yet, disposed when the process exits (the 'exit' event allows only
 * synchronous work: the native disposeSync blocks, bounded by the core's exit deadline, so a
 * script that ends without dispose() still delivers what it recorded). Weak: a session the
 * app dropped is not kept alive by this.
 */
const liveNatives = new Set();
let exitHookInstalled = false;
function disposeAtExit() {
  for (const ref of liveNatives) {
    const live = ref.deref();
    if (live) {
      try { live.disposeSync(live.exitDeadlineMs()); } catch { /* never fail the exit */ }
    }
  }
  liveNatives.clear();
}
function registerForExit(nativeSession) {
  const ref = new WeakRef(nativeSession);
  liveNatives.add(ref);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', disposeAtExit);
  }
  return ref;
}

/** The reference's option names the core resolves: the core's option table (`optionNames`). */
const OPTION_KEYS = Object.freeze(native.optionNames());

/** The error a wrapped call throws when its run was aborted (name `AbortError`). */
class GraphMindAbortError extends Error {
  constructor(message = 'aborted from the GraphMind debugger') {
    super(message);
    this.name = 'AbortError';
  }
}

/** Whether `error` is an abort (any error named `AbortError`). */
function isAbortError(error) {
  return error !== null && typeof error === 'object' && error.name === 'AbortError';
}

/**
 * JSON text for the core, or `null` for "absent" (`undefined`, a function). JavaScript's
 * own `JSON.stringify` does the walk (`toJSON`, dropped `undefined` fields, lone
 * surrogates escaped). When it throws, only the values it could not serialize are
 * degraded ([`degradedCopy`]), never the whole input, and never into an exception in the
 * app.
 */
function toJson(value) {
  if (value === undefined) return null;
  try {
    const text = JSON.stringify(value);
    return text === undefined ? null : text;
  } catch {
    return degradedJson(value);
  }
}

/** Tags a BigInt's digits in the degraded copy; the text gets them back as a JSON number. */
const BIGINT_TAG = `\u0000graphmind-bigint-${Math.random().toString(36).slice(2)}:`;
const BIGINT_TAGGED = new RegExp(`"${JSON.stringify(BIGINT_TAG).slice(1, -1).replace(/\\/g, '\\\\')}(-?\\d+)"`, 'g');

/** `toJson` of a value `JSON.stringify` refused. */
function degradedJson(value) {
  try {
    const text = JSON.stringify(degradedCopy(value, '', []));
    if (text === undefined) return null;
    return text.includes('graphmind-bigint-') ? text.replace(BIGINT_TAGGED, '$1') : text;
  } catch {
    return JSON.stringify(CONSTANTS.unserializable);
  }
}

/**
 * A copy of `value` that `JSON.stringify` can write, read as it would read it: a BigInt
 * becomes its decimal digits (a JSON number, as Python and Ruby record a big integer), a
 * reference back to an enclosing object the core's `[circular]` marker, and a getter or
 * `toJSON` that throws the `[unserializable]` marker (the core's loop guard then takes the
 * input as equal to no other).
 */
function degradedCopy(value, key, ancestors) {
  if (typeof value === 'bigint') return BIGINT_TAG + value.toString();
  if (value === null || typeof value !== 'object') return value;
  if (typeof value.toJSON === 'function') {
    let replaced;
    try { replaced = value.toJSON(key); } catch { return CONSTANTS.unserializable; }
    if (replaced === value || replaced === null || typeof replaced !== 'object') {
      return replaced === value ? copyMembers(value, ancestors) : degradedCopy(replaced, key, ancestors);
    }
    value = replaced;
  }
  if (value instanceof Number || value instanceof String || value instanceof Boolean) return value.valueOf();
  return copyMembers(value, ancestors);
}

function copyMembers(value, ancestors) {
  if (ancestors.includes(value)) return CONSTANTS.circular;
  ancestors.push(value);
  let out;
  if (Array.isArray(value)) {
    out = new Array(value.length);
    for (let i = 0; i < value.length; i += 1) {
      let item;
      try { item = value[i]; } catch { item = CONSTANTS.unserializable; }
      out[i] = degradedCopy(item, String(i), ancestors);
    }
  } else {
    out = {};
    for (const k of Object.keys(value)) {
      let item;
      try { item = value[k]; } catch { item = CONSTANTS.unserializable; }
      out[k] = degradedCopy(item, k, ancestors);
    }
  }
  ancestors.pop();
  return out;
}

function fromJson(text) {
  return text == null ? undefined : JSON.parse(text);
}

/**
 * A stream part as a value: an `Error` it carries (an AI SDK `{type: 'error', error}`
 * part) becomes `{name, message, stack}`, which `JSON.stringify` would drop (its fields are
 * not enumerable); the core decides what the part means.
 */
function readablePart(part) {
  if (!part || !(part.error instanceof Error)) return part;
  const [name, message, stack] = errorParts(part.error);
  return { ...part, error: { name, message, ...(stack === null ? {} : { stack }) } };
}

function errorParts(error) {
  if (error instanceof Error) {
    return [error.name || 'Error', String(error.message), typeof error.stack === 'string' ? error.stack : null];
  }
  let message;
  try { message = String(error); } catch { message = CONSTANTS.unserializable; }
  return ['Error', message, null];
}

/** Each thrown object's number for the core (`failure_once`): the same at every level. */
const failureIds = new WeakMap();
let lastFailureId = 0;

/** The number naming the thrown value `error` (`0`: a primitive, which cannot be named). */
function failureOf(error) {
  if (error === null || (typeof error !== 'object' && typeof error !== 'function')) return 0;
  let id = failureIds.get(error);
  if (id === undefined) {
    id = ++lastFailureId;
    failureIds.set(error, id);
  }
  return id;
}

function abortReason(signal) {
  const reason = signal && signal.reason;
  return isAbortError(reason) ? reason : new GraphMindAbortError();
}

function safeWarn(line) {
  try { console.warn(line); } catch { /* never into the app */ }
}

/** A session that does nothing, for when even the core could not be set up. */
function inertNative() {
  return new native.NativeSession(JSON.stringify({ enabled: false }), '{}', 'node', () => {}, null);
}

class Session {
  #native;
  /** `ready` and `dispose`, on their own native object (see `NativeWaits` in src/lib.rs). */
  #waits;
  /** The kill switch's verdict, fixed for the session's life (read once, not per call). */
  #enabled = false;
  #als = new AsyncLocalStorage();
  #waiters = new Map();
  #disposed = null;
  #exitRef = null;
  /** Per run id: the background stream recordings not ended yet. */
  #recordings = new Map();

  constructor(options) {
    const picked = {};
    for (const key of OPTION_KEYS) {
      if (options[key] !== undefined) picked[key] = options[key];
    }
    // toJson: a value JSON.stringify refuses (a BigInt in `meta`) is degraded, not fatal.
    const env = options.env === undefined ? null : toJson(options.env);
    const logger = typeof options.logger === 'function'
      ? (line) => { try { options.logger(line); } catch { /* a throwing logger is ignored */ } }
      : null;
    const dispatch = (token) => this.#dispatch(token);
    try {
      this.#native = new native.NativeSession(toJson(picked), env, 'node', dispatch, logger);
    } catch (error) {
      safeWarn(`[graphmind] session disabled: ${error && error.message}`);
      this.#native = inertNative();
    }
    this.#waits = this.#native.waits();
    this.#enabled = this.#native.enabled;
    if (this.#enabled) this.#exitRef = registerForExit(this.#native);
  }

  /** Whether this session records (the kill switch's verdict). */
  get enabled() { return this.#native.enabled; }

  /** Whether a debugger is attached now. */
  get attached() { return this.#native.attached; }

  /** The resolved configuration (as the core reports it). */
  config() { return JSON.parse(this.#native.configJson()); }

  /** Connects now; resolves whether a debugger attached in time. Never rejects. */
  ready(opts) {
    if (!this.#native.enabled || this.#disposed) return Promise.resolve(false);
    const timeout = opts && Number.isFinite(opts.timeoutMs) ? opts.timeoutMs : DEFAULT_READY_TIMEOUT_MS;
    try {
      return this.#waits.ready(timeout).catch(() => false);
    } catch {
      return Promise.resolve(false);
    }
  }

  /** Runs `fn` in a new run (its context through AsyncLocalStorage). `fn`'s errors propagate. */
  async run(name, fn) {
    const n = this.#native;
    const runName = String(name);
    const runId = n.startRun(runName, null);
    const abortController = new AbortController();
    const ctx = Object.freeze({ runId, name: runName, abortController, signal: abortController.signal });
    abortController.signal.addEventListener('abort', () => {
      const reason = abortController.signal.reason;
      n.abortRun(runId, reason instanceof Error ? reason.message : String(reason));
    }, { once: true });
    try {
      const result = await this.#als.run(ctx, () => fn(ctx));
      await this.#recordingsEnded(runId);
      n.finishRun(runId, 'ok');
      return result;
    } catch (error) {
      await this.#recordingsEnded(runId);
      if (isAbortError(error)) {
        n.finishRun(runId, 'aborted');
      } else {
        const [errName, message, stack] = errorParts(error);
        n.finishRun(runId, 'error', errName, message, stack);
      }
      throw error;
    }
  }

  /** Waits (at most STREAM_SETTLE_MS) for the run's background stream recordings. */
  async #recordingsEnded(runId) {
    const pending = this.#recordings.get(runId);
    this.#recordings.delete(runId);
    if (!pending || pending.size === 0) return;
    let timer;
    const bound = new Promise((resolve) => { timer = setTimeout(resolve, STREAM_SETTLE_MS); });
    await Promise.race([Promise.allSettled([...pending]), bound]);
    clearTimeout(timer);
  }

  /** The active run context, if any. */
  currentRun() { return this.#als.getStore(); }

  /** Emits one event into the current run (or the implicit one). Never throws. */
  emit(type, payload) {
    try {
      const ctx = this.#als.getStore();
      this.#native.emit(ctx ? ctx.runId : null, String(type), toJson(payload) ?? '{}');
    } catch { /* never into the app */ }
  }

  /** The gate at `point` of `node`: `{action: 'continue'}` at once unless a debugger holds it. */
  gate(point, node, options) {
    const ctx = this.#als.getStore();
    let token = 0;
    try {
      const args = [ctx ? ctx.runId : null, String(point), String(node.nodeId), String(node.kind), String(node.name ?? ''),
        Boolean(options && options.editable), options && options.editable ? toJson(options.liveInput) : null];
      // `inputSchema` (edits) and `result` (smart breakpoints): see gate-helpers.js.
      token = this.#native.gateWith(...args, options && options.editable ? toJson(options.inputSchema) : null,
        options ? toJson(options.result) : null);
    } catch { /* fail open */ }
    if (token === 0) return CONTINUE_PROMISE;
    return this.#wait(token, ctx).then(() => {
      const decision = fromJson(this.#native.takeDecision(token)) ?? CONTINUE_DECISION;
      this.#afterDecision(ctx);
      return decision;
    });
  }

  /** Runs `fn` in the run `ctx` (a context `run` made, or `undefined`: the implicit run). */
  within(ctx, fn) {
    return ctx ? this.#als.run(ctx, fn) : fn();
  }

  /**
   * One node recorded from a framework's callbacks (LangGraph's): `node.started` now, then
   * `before()`, `after(output)`, `error(error)` or `ungated(aborted)` as the callbacks
   * arrive (`chunk(value)`: a streamed piece, for a model call). Each gate resolves to whether the run was aborted there (the core's watching
   * gate: `inject` and `retry` cannot be delivered by a callback, so they continue with
   * a warning keyed `<integration>-<action>`). `watch`: `[integration, label, hint]`.
   * Returns `null` when nothing is recorded (disabled, or the core refused).
   */
  watchNode(kind, name, { parentId = null, input, watch }) {
    if (!this.#enabled) return null;
    const ctx = this.#als.getStore();
    let handle;
    try {
      handle = this.#native.stepStart(ctx ? ctx.runId : null, String(kind), String(name), null, parentId, toJson(input), false);
    } catch {
      return null;
    }
    return this.#watched(WATCHED_STEP, handle, ctx, watch, null);
  }

  /**
   * [`watchNode`] for a model call through the core's LLM step: `request` recorded
   * through the codec of `api` (`langchain`), `before()` offered at once; `after(response)`
   * records the answer through the same codec.
   */
  watchModel(api, request, { parentId = null, sdk = null, watch }) {
    if (!this.#enabled) return null;
    const ctx = this.#als.getStore();
    let packed;
    try {
      packed = this.#native.llmCall(ctx ? ctx.runId : null, ctx ? ctx.name : null, String(api), toJson(request) ?? '{}', sdk, parentId);
    } catch {
      return null;
    }
    const handle = Math.floor(packed / CODE_SPAN);
    return this.#watched(WATCHED_MODEL, handle, ctx, watch, packed - handle * CODE_SPAN);
  }

  #watched(driver, handle, ctx, watch, firstCode) {
    const n = this.#native;
    let done = false;
    /** Waits out a held gate; resolves whether the run was aborted. */
    const settle = async (code) => {
      try {
        if (code === HELD) {
          try {
            await this.#wait(handle, ctx);
          } catch {
            driver.ungated(n, handle, true);
            done = true;
            return true;
          }
          code = driver.resume(n, handle, watch);
          this.#afterDecision(ctx);
        }
      } catch {
        return false;
      }
      if (code !== RUN) done = true;
      if (code !== ABORT) return false;
      if (ctx && !ctx.signal.aborted) ctx.abortController.abort(new GraphMindAbortError());
      return true;
    };
    return {
      before: () => settle(firstCode !== null ? firstCode : (() => { try { return n.stepBefore(handle); } catch { return RUN; } })()),
      after: (output) => {
        if (done) return Promise.resolve(false);
        let code;
        try { code = driver.after(n, handle, toJson(output)); } catch { return Promise.resolve(false); }
        return settle(code);
      },
      error: (error) => {
        if (done) return Promise.resolve(false);
        const [errName, message, stack] = errorParts(error);
        let code;
        try { code = driver.error(n, handle, errName, message, stack, failureOf(error)); } catch { return Promise.resolve(false); }
        return settle(code);
      },
      ungated: (aborted) => {
        if (done) return;
        done = true;
        try { driver.ungated(n, handle, Boolean(aborted)); } catch { /* fail open */ }
      },
      /** One streamed piece (a model's token or chunk): the core batches it into `node.token`. */
      chunk: (value) => {
        if (done) return;
        try { driver.chunk(n, handle, toJson(value) ?? 'null'); } catch { /* fail open */ }
      },
    };
  }

  /**
   * Records node inputs and outputs longer than `maxChars` characters of JSON as a preview
   * (`{__graphmind: 'truncated', preview, chars}`, the core's `payload_cap`); `null`: no
   * cap. What the app's code sees is never changed. Never throws.
   */
  capPayloads(maxChars) {
    try { this.#native.setMaxPayloadChars(typeof maxChars === 'number' ? maxChars : null); } catch { /* fail open */ }
  }

  /** A diagnostics snapshot. */
  stats() { return this.#native.stats(); }

  /**
   * Replays a recorded run from now on (`spec`: the `replay` option's value); the next run
   * started is answered from it (docs/replay.md). The core's report; `/testing` builds on it.
   */
  replayBegin(spec) { return fromJson(this.#native.replayBegin(toJson(spec) ?? 'null')); }

  /** Stops replaying: later calls run live. The last report (`null` when not replaying). */
  replayEnd() { return fromJson(this.#native.replayEnd() ?? 'null'); }

  /** What the replay has done so far (`null` when not replaying). */
  replayReport() { return fromJson(this.#native.replayReport() ?? 'null'); }

  /** One rate-limited warning (by `key`) through the session's logger. Never throws. */
  warn(key, message) {
    try { this.#native.warn(String(key), String(message)); } catch { /* never into the app */ }
  }

  /**
   * Waits (blocking, up to `timeoutMs`; default the core's exit deadline) until every event
   * so far reached the socket, a connection never tried being tried first.
   */
  flushSync(timeoutMs = this.#native.exitDeadlineMs()) { return this.#native.flushSync(timeoutMs); }

  /**
   * Releases held gates, flushes and closes, off the event loop, within the core's exit
   * deadline (connect + handshake timeouts, then the ring's delivery). Idempotent.
   */
  dispose() {
    if (!this.#disposed) {
      if (this.#exitRef) liveNatives.delete(this.#exitRef);
      this.#disposed = this.#waits.dispose(this.#native.exitDeadlineMs()).catch(() => {});
    }
    return this.#disposed;
  }

  /**
   * Wraps `fn` as one gated call of node `kind:name` (the core's `Step`): the wrapper
   * records the first argument as the input and the result as the output, and does what
   * the debugger decides at each gate. `toolCall(args)`: the provider's tool call this
   * execution answers (an object; its id becomes the instance id, read by the core).
   * `parentId(args)`: the node id to record as the call's parent (`null`: none).
   * `inputSchema`: the JSON Schema (or a promise of it) an edited input must match after
   * the merge; the core refuses an edit that does not (`schema`) and keeps the gate held.
   */
  wrapCall(kind, name, fn, { editable = kind === 'tool', input = (args) => args[0], output = (v) => v, toolCall = null, parentId = null, inputSchema = null } = {}) {
    const session = this;
    const nodeName = String(name);
    // The node is registered with the core on the first call (`null`: it could not be).
    let site;
    let schemaText = null;
    const applySchema = () => {
      if (site === undefined || site === null || schemaText === null) return;
      session.#siteSchema(site, schemaText, nodeName);
    };
    Promise.resolve(inputSchema).then((schema) => {
      if (schema === null || schema === undefined) return;
      schemaText = JSON.stringify(schema);
      applySchema();
    }, () => session.#warnSchema(nodeName, 'its schema could not be read'));
    return function graphmindWrapped(...args) {
      if (site === undefined) {
        site = session.#callSite(kind, nodeName, editable);
        applySchema();
      }
      const parent = parentId === null ? null : parentId(args);
      return session.#callStep(parent === null ? site : null, kind, nodeName, fn, this, args, editable, input, output, toolCall, parent);
    };
  }

  #siteSchema(site, text, name) {
    try {
      const problem = this.#native.siteInputSchema(site, text);
      if (problem) this.#warnSchema(name, problem);
    } catch (error) {
      this.#warnSchema(name, error && error.message);
    }
  }

  #warnSchema(name, why) {
    this.warn(`input-schema:${name}`, `graphmind: edits of ${name} are not checked against its input schema (${why})`);
  }

  #callSite(kind, name, editable) {
    if (!this.#enabled) return null;
    try {
      return this.#native.callSite(kind, name, Boolean(editable));
    } catch {
      return null;
    }
  }

  /** Runs `fn` as an ungated node `kind:name` (`node.started`, then `node.finished` ok/error/aborted). */
  async observe(kind, name, fn) {
    const n = this.#native;
    const ctx = this.#als.getStore();
    let handle = null;
    try { handle = n.nodeStart(ctx ? ctx.runId : null, String(kind), String(name), null); } catch { /* fail open */ }
    try {
      const result = await fn();
      if (handle !== null) n.nodeFinish(handle, ctx && ctx.signal.aborted ? 'aborted' : 'ok');
      return result;
    } catch (error) {
      if (handle !== null) {
        if (isAbortError(error) || (ctx && ctx.signal.aborted)) {
          n.nodeFinish(handle, 'aborted');
        } else {
          const [errName, message] = errorParts(error);
          n.nodeFinish(handle, 'error', errName, message);
        }
      }
      throw error;
    }
  }

  #dispatch(token) {
    const waiter = this.#waiters.get(token);
    if (waiter) {
      this.#waiters.delete(token);
      waiter();
    } else {
      // Its waiter went away (an aborted run): take the decision so the count stays right.
      try { this.#native.takeDecision(token); } catch { /* nothing held */ }
    }
  }

  #wait(token, ctx) {
    return new Promise((resolve, reject) => {
      const signal = ctx && ctx.signal;
      const discard = () => {
        this.#waiters.delete(token);
        this.#native.discardGate(token);
        reject(abortReason(signal));
      };
      if (signal && signal.aborted) {
        discard();
        return;
      }
      if (signal) signal.addEventListener('abort', discard, { once: true });
      this.#waiters.set(token, () => {
        if (signal) signal.removeEventListener('abort', discard);
        resolve();
      });
    });
  }

  /** The core aborts a run's signal on an `abort` decision; mirror it on the run's controller. */
  #afterDecision(ctx) {
    if (ctx && !ctx.signal.aborted && this.#native.runAborted(ctx.runId)) {
      ctx.abortController.abort(new GraphMindAbortError());
    }
  }

  /**
   * Starts a wrapped call: the promise of `#drive` itself, not an async function around it
   * (which would add a promise and two microtask hops to every call). A throw before the
   * loop starts becomes a rejection, as it would in an async function.
   */
  #callStep(site, kind, name, fn, thisArg, args, editable, inputOf, outputOf, toolCallOf, parent = null) {
    try {
      if (!this.#enabled) return unrecorded(fn, thisArg, args);
      const n = this.#native;
      const ctx = this.#als.getStore();
      let handle;
      let code;
      if (site !== null) {
        // node.started and the `before` gate in one crossing: `handle * CODE_SPAN + code`.
        let packed;
        try {
          const call = toolCallOf === null ? null : toolCallOf(args);
          packed = call !== null && typeof call === 'object'
            ? n.stepCallFor(site, ctx ? ctx.runId : null, toJson(inputOf(args)), call)
            : n.stepCall(site, ctx ? ctx.runId : null, toJson(inputOf(args)));
        } catch {
          return unrecorded(fn, thisArg, args);
        }
        handle = Math.floor(packed / CODE_SPAN);
        code = packed - handle * CODE_SPAN;
      } else {
        try {
          handle = n.stepStart(ctx ? ctx.runId : null, kind, name, null, parent, toJson(inputOf(args)), editable);
        } catch {
          return unrecorded(fn, thisArg, args);
        }
        code = n.stepBefore(handle);
      }
      return this.#drive(TOOL_STEP, handle, code, ctx, fn, thisArg, args, outputOf, null);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * One model call through the core's LLM step (`graphmind_core::llm_step`): `request`
   * (the provider request as a plain value) is recorded through the codec of `api`
   * (`ai-sdk`, `openai-chat`, ...), `send()` makes the call, and its answer is recorded
   * the same way and gated. With `stream`, `stream(result, recorder)` says whether the
   * answer is a stream: it returns what the app gets instead (having arranged for each
   * chunk to reach `recorder.chunk(value)` and the end `recorder.end(error, aborted)`;
   * `recorder.readable(source)` does both for a `ReadableStream`), or `undefined` for a
   * complete answer, which then meets the `after` gate. Returns what `send` returned, or
   * the injected reply in the codec's shape. Fails open: whatever the core cannot record,
   * the call still runs.
   */
  async callModel(api, request, send, { sdk = null, stream = null } = {}) {
    if (!this.#enabled) return send();
    const n = this.#native;
    const ctx = this.#als.getStore();
    let packed;
    try {
      packed = n.llmCall(ctx ? ctx.runId : null, ctx ? ctx.name : null, String(api), toJson(request) ?? '{}', sdk);
    } catch {
      return send();
    }
    const handle = Math.floor(packed / CODE_SPAN);
    const streamOf = stream ? (result) => stream(result, this.#recorder(handle, ctx)) : null;
    return this.#drive(MODEL_CALL, handle, packed - handle * CODE_SPAN, ctx, send, undefined, [], identity, streamOf);
  }

  /** What a model call's stream reports to the core: each chunk, then its end, once. */
  #recorder(handle, ctx) {
    const n = this.#native;
    const recordings = this.#recordings;
    let ended = false;
    const recorder = {
      /** A recording that goes on in the background (`promise` settles when it ends). */
      background(promise) {
        if (!ctx) return;
        let pending = recordings.get(ctx.runId);
        if (!pending) recordings.set(ctx.runId, (pending = new Set()));
        pending.add(promise);
        promise.finally(() => pending.delete(promise)).catch(() => {});
      },
      chunk(value) {
        if (ended) return;
        try { n.llmStreamChunk(handle, toJson(readablePart(value)) ?? 'null'); } catch { /* fail open */ }
      },
      end(error = null, aborted = false) {
        if (ended) return;
        ended = true;
        const stopped = Boolean(aborted) || Boolean(ctx && ctx.signal.aborted) || (error !== null && isAbortError(error));
        try {
          if (error === null || stopped) n.llmStreamEnd(handle, stopped);
          else n.llmStreamEnd(handle, false, ...errorParts(error));
        } catch { /* fail open */ }
      },
      readable(source) { return recordedReadable(source, recorder); },
    };
    return recorder;
  }

  /**
   * The gated-call loop every wrapped call runs (a tool step or a model call: `driver`
   * says which native step answers): call `fn`, hand its result or error to the core, do
   * what the code says, wait on the event loop while a debugger holds a gate.
   */
  async #drive(driver, handle, code, ctx, fn, thisArg, args, outputOf, streamOf) {
    const n = this.#native;
    let callArgs = args;
    let result;
    let failure;
    // What the call does if the core cannot answer after a held gate (fail open): the
    // gate is passed as `continue` would pass it.
    let onFailure = RUN;
    for (;;) {
      if (code === HELD) {
        try {
          await this.#wait(handle, ctx);
        } catch (error) {
          driver.ungated(n, handle, true);
          throw error;
        }
        try {
          code = driver.resume(n, handle);
        } catch {
          code = onFailure;
        }
        this.#afterDecision(ctx);
        continue;
      }
      switch (code) {
        case RUN_EDITED:
          callArgs = [fromJson(n.stepValue(handle)), ...args.slice(1)];
        // falls through
        case RUN:
          try {
            result = await fn.apply(thisArg, callArgs);
          } catch (error) {
            if (isAbortError(error) || (ctx && ctx.signal.aborted)) {
              driver.ungated(n, handle, true);
              throw error;
            }
            failure = error;
            onFailure = RERAISE;
            const [errName, message, stack] = errorParts(error);
            try {
              code = driver.error(n, handle, errName, message, stack, failureOf(error));
            } catch {
              code = RERAISE;
            }
            continue;
          }
          onFailure = RETURN_RESULT;
          if (streamOf) {
            let streamed;
            try {
              streamed = streamOf(result);
            } catch {
              streamed = null;
            }
            if (streamed === null) {
              // A stream it could not read: the call returns as it came, its node ends here.
              try { n.llmStreamEnd(handle, false); } catch { /* fail open */ }
              code = RETURN_RESULT;
              continue;
            }
            if (streamed !== undefined) {
              try { code = n.llmStreamStarted(handle); } catch { code = RETURN_RESULT; }
              result = streamed;
              continue;
            }
          }
          try {
            code = driver.after(n, handle, toJson(outputOf(result)));
          } catch {
            code = RETURN_RESULT;
          }
          continue;
        case RETURN_RESULT:
          return result;
        case RETURN_INJECTED:
          return fromJson(n.stepValue(handle));
        case RERAISE:
          throw failure;
        case RAISE:
          throw replayedError(fromJson(n.stepValue(handle)));
        case STREAM:
          return replayedStream(fromJson(n.stepValue(handle)));
        case ABORT:
        default:
          if (ctx && !ctx.signal.aborted) ctx.abortController.abort(new GraphMindAbortError());
          throw ctx ? abortReason(ctx.signal) : new GraphMindAbortError();
      }
    }
  }
}

/** `fn` called as the app called it, its result as a promise (a wrapped call is async). */
async function unrecorded(fn, thisArg, args) {
  return fn.apply(thisArg, args);
}

/**
 * A replayed call's recorded error, raised as a tool's error: an `Error` with the recorded
 * `name`, `message` and `stack`, marked `replayed` (docs/replay.md).
 */
function replayedError(info) {
  const error = new Error(info && typeof info.message === 'string' ? info.message : '');
  error.name = info && typeof info.name === 'string' ? info.name : 'Error';
  if (info && typeof info.stack === 'string') error.stack = info.stack;
  error.replayed = true;
  return error;
}

/**
 * A replayed stream: the chunks the core rebuilt from the recording, read with
 * `for await` (and `controller.abort()`, as the clients' streams offer).
 */
function replayedStream(chunks) {
  const items = Array.isArray(chunks) ? chunks : [];
  const controller = new AbortController();
  return {
    controller,
    async *[Symbol.asyncIterator]() {
      for (const chunk of items) {
        if (controller.signal.aborted) return;
        yield chunk;
      }
    },
  };
}

function identity(value) {
  return value;
}

/** `source` (a ReadableStream) as the app reads it, each part reported to `recorder`. */
function recordedReadable(source, recorder) {
  const reader = source.getReader();
  return new ReadableStream({
    async pull(controller) {
      let next;
      try {
        next = await reader.read();
      } catch (error) {
        recorder.end(error);
        controller.error(error);
        return;
      }
      if (next.done) {
        recorder.end(null);
        controller.close();
        return;
      }
      recorder.chunk(next.value);
      controller.enqueue(next.value);
    },
    cancel(reason) {
      recorder.end(null);
      return reader.cancel(reason);
    },
  });
}

/** The native calls the loop makes for a tool step (`Step`). */
const TOOL_STEP = Object.freeze({
  resume: (n, handle) => n.stepResume(handle),
  after: (n, handle, json) => n.stepAfter(handle, json),
  error: (n, handle, name, message, stack, failure) => n.stepError(handle, name, message, stack, failure),
  ungated: (n, handle, aborted) => n.stepUngated(handle, aborted),
});

/** The native calls the loop makes for a model call (`LlmStep`). */
const MODEL_CALL = Object.freeze({
  resume: (n, handle) => n.llmResume(handle),
  after: (n, handle, json) => n.llmAfter(handle, json ?? 'null'),
  error: (n, handle, name, message, stack, failure) => n.llmError(handle, name, message, stack, failure),
  ungated: (n, handle, aborted) => n.llmUngated(handle, aborted),
});

/** The native calls a watched node makes (`Step`, its gates only watching). */
const WATCHED_STEP = Object.freeze({
  resume: (n, handle, watch) => n.stepResumeWatching(handle, ...watch),
  after: (n, handle, json) => n.stepAfter(handle, json),
  error: (n, handle, name, message, stack, failure) => n.stepError(handle, name, message, stack, failure),
  ungated: (n, handle, aborted) => n.stepUngated(handle, aborted),
  chunk: () => {},
});

/** The native calls a watched model call makes (`LlmStep`, its gates only watching). */
const WATCHED_MODEL = Object.freeze({
  resume: (n, handle, watch) => n.llmResumeWatching(handle, ...watch),
  after: (n, handle, json) => n.llmAfter(handle, json ?? 'null'),
  error: (n, handle, name, message, stack, failure) => n.llmError(handle, name, message, stack, failure),
  ungated: (n, handle, aborted) => n.llmUngated(handle, aborted),
  chunk: (n, handle, json) => n.llmStreamChunk(handle, json),
});

/**
 * Creates a session from the reference's options (url, appName, sdk, meta, enabled,
 * connectTimeoutMs, handshakeTimeoutMs, retryIntervalMs, bufferSize, maxBufferBytes,
 * pauseTimeoutMs, loopGuard, the four hide switches, breakOnErrorResult, breakOnTruncated,
 * replay (docs/replay.md), env, logger, warnIntervalMs). Never throws.
 */
function createSession(options = {}) {
  return new Session(options && typeof options === 'object' ? options : {});
}

/** The canonical JSON text of a value (sorted keys, `_meta` ignored), as the loop guard sees it. */
function canonicalJson(value, ignoreKeys) {
  return native.canonicalJson(toJson(value) ?? 'null', ignoreKeys);
}

/** The fingerprint of a call of `nodeId` with `input` (32 hex characters). */
function fingerprint(nodeId, input, ignoreKeys) {
  return native.fingerprint(JSON.stringify(String(nodeId)), toJson(input), ignoreKeys);
}

module.exports = {
  createSession,
  canonicalJson,
  fingerprint,
  GraphMindAbortError,
  isAbortError,
  CONTINUE_DECISION,
  MAX_PAYLOAD_BYTES: CONSTANTS.maxPayloadBytes,
  REDACTED: CONSTANTS.redacted,
  Session,
  native,
  toJson,
};

// The reference client's tool-edit helpers, over the core (gate-helpers.js builds on this module).
Object.assign(module.exports, require('./gate-helpers.js'));

// The Vercel AI SDK facade (`graphmind({app, ...options})`, also `/ai-sdk`), loaded on
// first use: it builds on this module, which must be complete first.
Object.defineProperty(module.exports, 'graphmind', {
  enumerable: true,
  get: () => require('./ai-sdk.js').graphmind,
});
