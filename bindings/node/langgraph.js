'use strict';
/**
 * The LangGraph.js / LangChain.js facade (`@graphmind/node/langgraph`):
 * `graphmind({app, chains, autoRun, abortMode, waitForAttach, ...options})` returns
 * `{session, ready, run, handler, callbacks, config, tool, wrapTools, wrapStructuredTool,
 * hintGraph, dispose}`.
 *
 * The handler is a LangChain `BaseCallbackHandler` that LangChain awaits before the work it
 * announces: a root invocation is one run with its `agent:<name>` node, LangGraph nodes are
 * `chain:<node>`, chat models the core's LLM step (`llm:step`, the `langchain` codec),
 * tools `tool:<name>`, retrievers `retriever:<name>`; parentage follows `parentRunId`.
 * LangGraph's hidden internals (`__start__`, channel writes, branches: the
 * `langsmith:hidden` tag) and the inner run LangGraph wraps a node body in (same task) are
 * not drawn; their children hang off the nearest drawn ancestor. Callback gates only watch
 * (`Session.watchNode`): `abort` ends the run, `inject` / `retry` continue with the core's
 * warning. The tool wrappers are real gated calls (`Session.wrapCall`): every action works.
 */
const { createFacade, packageVersion, toolWrapper } = require('./facade.js');
const { isAbortError, GraphMindAbortError } = require('./index.js');

/** LangGraph tags its internal runs with this. */
const HIDDEN_TAG = 'langsmith:hidden';
/** LangGraph's entry and exit pseudo-nodes, never drawn. */
const PSEUDO_NODES = new Set(['__start__', '__end__']);
/** What a callback gate says when asked for what it cannot deliver: `[key, label, hint]`. */
const WATCH = Object.freeze(['langgraph', 'LangGraph', 'Wrap the tool with gm.wrapStructuredTool() or gm.tool() for inject and retry.']);
/** The `chains` option's values. */
const CHAIN_POLICIES = new Set(['all', 'langgraph', 'none']);
/** At most this many LangChain runs in progress are remembered (oldest forgotten first). */
const MAX_TRACKED_RUNS = 4096;

function text(value) {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/** A serialized runnable's name (`name`, else the last part of its `id`). */
function serializedName(serialized) {
  if (!serialized || typeof serialized !== 'object') return undefined;
  if (text(serialized.name)) return serialized.name;
  const id = Array.isArray(serialized.id) ? serialized.id : [];
  return text(id[id.length - 1]);
}

/** The task a LangGraph run belongs to (its inner body run shares it). */
function taskOf(metadata) {
  if (!metadata) return undefined;
  return text(metadata.langgraph_checkpoint_ns) ?? (metadata.langgraph_node !== undefined ? `${metadata.langgraph_node}:${metadata.langgraph_step}` : undefined);
}

function parseInput(input) {
  if (typeof input !== 'string') return input;
  try { return JSON.parse(input); } catch { return input; }
}

/** LangChain's AsyncLocalStorage of the running runnable's config (the app's own @langchain/core). */
let Storage;
function langChainStorage() {
  if (!Storage) Storage = require('@langchain/core/singletons').AsyncLocalStorageProviderSingleton;
  return Storage;
}

/** The handler class, made on first use (it extends the app's own @langchain/core). */
let HandlerClass;
function handlerClass() {
  if (HandlerClass) return HandlerClass;
  const { BaseCallbackHandler } = require('@langchain/core/callbacks/base');
  HandlerClass = class GraphMindCallbackHandler extends BaseCallbackHandler {
    constructor(shared, options = {}) {
      super({ _awaitHandler: true, raiseError: shared.abortMode === 'throw' });
      this.name = 'graphmind';
      this.abortController = new AbortController();
      this.shared = shared;
      this.options = options;
      /** LangChain run id -> {nodeId, step, root, task, ctx}. */
      this.records = new Map();
      /** The caller's own abort signal, when `gm.config(base)` had one. */
      this.callerSignal = null;
    }

    /** Aborted when the debugger aborts: pass it as the config's `signal` (`gm.config()` does). */
    get signal() { return this.abortController.signal; }

    async guard(body) {
      const { session } = this.shared;
      if (!session.enabled) return;
      try {
        await body();
      } catch (error) {
        if (error instanceof GraphMindAbortError || (this.callerSignal && this.callerSignal.aborted && error === this.callerSignal.reason)) throw error;
        session.warn('langgraph-handler', `the LangGraph handler failed on one event; observe-only for it (${error && error.message})`);
      }
    }

    remember(runId, record) {
      this.records.set(runId, record);
      if (this.records.size > MAX_TRACKED_RUNS) this.records.delete(this.records.keys().next().value);
      return record;
    }

    /** A root run: its GraphMind run (unless inside `gm.run` or `autoRun: false`) and agent node. */
    async openRoot(runId, name, input) {
      const { session, facade } = this.shared;
      const wait = facade.attached();
      if (wait) await wait;
      const ambient = session.currentRun();
      const root = { ctx: ambient, settle: null, done: null };
      if (!ambient && this.shared.autoRun) {
        let settle;
        const ended = new Promise((resolve, reject) => { settle = { resolve, reject }; });
        ended.catch(() => {});
        root.done = session.run(this.options.runName ?? name, (ctx) => { root.ctx = ctx; return ended; }).catch(() => {});
        root.settle = settle;
      }
      if (root.ctx) {
        root.ctx.signal.addEventListener('abort', () => {
          if (!this.abortController.signal.aborted) this.abortController.abort(new GraphMindAbortError());
        }, { once: true });
      }
      // The caller's own signal (given to `gm.config`) ends a run we opened as aborted, which
      // releases a gate held in it (the graph has stopped waiting for it).
      const caller = this.callerSignal;
      if (caller && root.settle && root.ctx) {
        const ctx = root.ctx;
        const stop = () => {
          if (!this.abortController.signal.aborted) this.abortController.abort(caller.reason);
          if (!ctx.signal.aborted) ctx.abortController.abort(new GraphMindAbortError());
        };
        if (caller.aborted) stop();
        else caller.addEventListener('abort', stop, { once: true });
      }
      const agentName = this.options.runName ?? name;
      return session.within(root.ctx, async () => {
        this.shared.replayHint(agentName);
        const parentId = ambient ? `agent:${ambient.name}` : null;
        const step = session.watchNode('agent', agentName, { parentId, input, watch: WATCH });
        const record = this.remember(runId, { nodeId: `agent:${agentName}`, step, root, rootRunId: runId, runIdSelf: runId });
        await this.gate(record, step && step.before());
        return record;
      });
    }

    async closeRoot(record, error) {
      const { root } = record;
      if (!root.settle) return;
      if (error === undefined) root.settle.resolve();
      else root.settle.reject(isAbortError(error) || this.signal.aborted ? new GraphMindAbortError() : error);
      await root.done;
    }

    /** What a gate's outcome means here: an abort ends the graph (abortMode `throw`). */
    async gate(record, pending) {
      if (!pending) return;
      const aborted = await pending;
      if (!aborted) return;
      if (!this.abortController.signal.aborted) this.abortController.abort(new GraphMindAbortError());
      if (record.root && record.rootRunId === record.runIdSelf) await this.closeRoot(record, new GraphMindAbortError());
      if (this.shared.abortMode === 'throw') throw this.abortReason();
    }

    /** What an abort throws: the caller's own reason when its signal ended the run. */
    abortReason() {
      const caller = this.callerSignal;
      return caller && caller.aborted && caller.reason !== undefined ? caller.reason : new GraphMindAbortError();
    }

    /** The drawn node a run hangs under, and its root (`null`: a run we do not know). */
    parentOf(parentRunId) {
      const parent = parentRunId === undefined ? undefined : this.records.get(parentRunId);
      return parent ?? null;
    }

    /** A run not drawn: its children hang off its parent's node. */
    passthrough(runId, parent, task) {
      this.remember(runId, { nodeId: parent.nodeId, step: null, root: parent.root, rootRunId: parent.rootRunId, task: task ?? parent.task });
    }

    async start(runId, parentRunId, kind, name, input, { tags, metadata, model } = {}) {
      if (parentRunId === undefined) {
        await this.openRoot(runId, name, input);
        return;
      }
      const parent = this.parentOf(parentRunId);
      if (!parent) return;
      const task = taskOf(metadata);
      if (kind === 'chain') {
        const node = metadata && text(metadata.langgraph_node);
        const hidden = (Array.isArray(tags) && tags.includes(HIDDEN_TAG)) || (node !== undefined && PSEUDO_NODES.has(node));
        const policy = this.shared.chains;
        const skipped = hidden || policy === 'none' || (policy === 'langgraph' && node === undefined)
          || (task !== undefined && parent.task === task && parent.step !== null);
        if (skipped) {
          this.passthrough(runId, parent, task);
          return;
        }
      }
      if (kind === 'tool' && this.shared.wrapped.has(name)) {
        // The wrapper gates this call itself (every action works there): it finds its run here.
        this.shared.toolRuns.set(runId, { ctx: parent.root.ctx, parentId: parent.nodeId });
        this.passthrough(runId, parent, task);
        return;
      }
      const { session } = this.shared;
      await session.within(parent.root.ctx, async () => {
        const step = kind === 'llm'
          ? session.watchModel('langchain', model, { parentId: parent.nodeId, sdk: 'langchain', watch: WATCH })
          : session.watchNode(kind, name, { parentId: parent.nodeId, input, watch: WATCH });
        const record = this.remember(runId, { nodeId: `${kind === 'llm' ? 'llm:step' : `${kind}:${name}`}`, step, root: parent.root, rootRunId: parent.rootRunId, task });
        await this.gate(record, step && step.before());
      });
    }

    async end(runId, output) {
      const record = this.records.get(runId);
      this.shared.toolRuns.delete(runId);
      if (!record) return;
      this.records.delete(runId);
      if (record.step) await this.shared.session.within(record.root.ctx, () => this.gate(record, record.step.after(output)));
      if (record.runIdSelf === runId) await this.closeRoot(record);
    }

    async fail(runId, error) {
      const record = this.records.get(runId);
      this.shared.toolRuns.delete(runId);
      if (!record) return;
      this.records.delete(runId);
      const { step } = record;
      if (step) {
        if (isAbortError(error) || this.signal.aborted) {
          step.ungated(true);
        } else {
          // The core offers the error gate at the first level reporting this failure only
          // (one pause per failure): a wrapped tool or an inner node already held it.
          try {
            await this.shared.session.within(record.root.ctx, () => this.gate(record, step.error(error)));
          } catch (abort) {
            if (record.runIdSelf === runId) await this.closeRoot(record, abort);
            throw abort;
          }
        }
      }
      if (record.runIdSelf === runId) await this.closeRoot(record, error);
    }

    // -- LangChain's callbacks (the runtime argument order of @langchain/core 1.x) ---------

    handleChainStart(chain, inputs, runId, parentRunId, tags, metadata, runType, runName) {
      return this.guard(() => {
        const name = (metadata && text(metadata.langgraph_node)) ?? text(runName) ?? serializedName(chain) ?? 'chain';
        return this.start(runId, parentRunId, 'chain', name, inputs, { tags, metadata });
      });
    }
    handleChainEnd(outputs, runId) { return this.guard(() => this.end(runId, outputs)); }
    handleChainError(error, runId) { return this.guard(() => this.fail(runId, error)); }

    handleChatModelStart(llm, messages, runId, parentRunId, extraParams, tags, metadata, runName) {
      return this.guard(() => {
        const params = extraParams && typeof extraParams.invocation_params === 'object' ? extraParams.invocation_params : {};
        const model = (metadata && text(metadata.ls_model_name)) ?? params.model ?? serializedName(llm);
        const request = { ...params, model, messages };
        return this.start(runId, parentRunId, 'llm', text(runName) ?? model ?? 'llm', { messages }, { tags, metadata, model: request });
      });
    }
    handleLLMStart(llm, prompts, runId, parentRunId, extraParams, tags, metadata, runName) {
      return this.guard(() => {
        const params = extraParams && typeof extraParams.invocation_params === 'object' ? extraParams.invocation_params : {};
        const model = (metadata && text(metadata.ls_model_name)) ?? params.model ?? serializedName(llm);
        return this.start(runId, parentRunId, 'llm', text(runName) ?? model ?? 'llm', { prompts }, { tags, metadata, model: { ...params, model, prompts } });
      });
    }
    /** A streamed token: the chunk (text and tool-call chunks) goes to the core's stream reader. */
    handleLLMNewToken(token, idx, runId, parentRunId, tags, fields) {
      const record = this.records.get(runId);
      if (!record || !record.step) return;
      record.step.chunk(fields && fields.chunk ? fields.chunk : token);
    }
    handleLLMEnd(output, runId) { return this.guard(() => this.end(runId, output)); }
    handleLLMError(error, runId) { return this.guard(() => this.fail(runId, error)); }

    handleToolStart(tool, input, runId, parentRunId, tags, metadata, runName) {
      return this.guard(() => this.start(runId, parentRunId, 'tool', text(runName) ?? serializedName(tool) ?? 'tool', parseInput(input), { tags, metadata }));
    }
    handleToolEnd(output, runId) {
      return this.guard(() => this.end(runId, output && typeof output === 'object' && 'content' in output ? output.content : output));
    }
    handleToolError(error, runId) { return this.guard(() => this.fail(runId, error)); }

    handleRetrieverStart(retriever, query, runId, parentRunId, tags, metadata, runName) {
      return this.guard(() => this.start(runId, parentRunId, 'retriever', text(runName) ?? serializedName(retriever) ?? 'retriever', { query }, { tags, metadata }));
    }
    handleRetrieverEnd(documents, runId) { return this.guard(() => this.end(runId, documents)); }
    handleRetrieverError(error, runId) { return this.guard(() => this.fail(runId, error)); }
  };
  return HandlerClass;
}

/** `compiledGraph.getGraph()`'s nodes and edges as hint entries (pseudo-nodes left out). */
function readGraph(graph) {
  const drawable = graph.getGraph();
  const nodes = Object.values(drawable.nodes || {});
  const edges = Array.isArray(drawable.edges) ? drawable.edges : [];
  const out = [];
  for (const node of nodes) {
    const name = text(node && (node.name ?? node.id));
    if (!name || PSEUDO_NODES.has(name)) continue;
    const next = edges.filter((e) => e.source === node.id && !PSEUDO_NODES.has(e.target)).map((e) => `chain:${e.target}`);
    out.push({ name, next });
  }
  return out;
}

/** The facade over one session (never throws; every wrapper is the identity when disabled). */
function graphmind(options = {}) {
  const { chains, autoRun, abortMode, maxPayloadChars, ...rest } = options && typeof options === 'object' ? options : {};
  const facade = createFacade(rest, {
    app: 'langgraph-app',
    sdk: { name: '@langchain/langgraph', version: packageVersion('@langchain/langgraph') },
  });
  const { session } = facade;
  let roster = null;
  const shared = {
    session,
    facade,
    chains: CHAIN_POLICIES.has(chains) ? chains : 'all',
    autoRun: autoRun !== false,
    abortMode: abortMode === 'signal' ? 'signal' : 'throw',
    /** Names of the tools the wrappers gate (the handler does not gate them twice). */
    wrapped: new Set(),
    /** LangChain tool run id -> the run and parent a wrapper records under. */
    toolRuns: new Map(),
    /** Ships the `hintGraph` roster into the current run, under its agent node. */
    replayHint(agentName) {
      if (!roster) return;
      const agentId = `agent:${agentName}`;
      const nodes = [{ nodeId: agentId, kind: 'agent', name: agentName }];
      for (const { name, next } of roster) nodes.push({ nodeId: `chain:${name}`, kind: 'chain', name, parentId: agentId, next });
      session.emit('graph.hint', { nodes });
    },
  };
  if (maxPayloadChars !== undefined) session.capPayloads(maxPayloadChars);

  /**
   * Where a gated function called from inside a LangChain runnable records: the run and
   * drawn node of the runnable running now (read from LangChain's own AsyncLocalStorage:
   * the current config's callback manager names its run, which this facade's handler
   * tracks), or `null` outside any (then the current `gm.run`, no parent).
   */
  const locate = () => {
    let manager;
    try {
      const config = langChainStorage().getRunnableConfig();
      manager = config && config.callbacks;
    } catch {
      return null;
    }
    if (!manager || typeof manager.getParentRunId !== 'function' || !Array.isArray(manager.handlers)) return null;
    const runId = manager.getParentRunId();
    for (const h of manager.handlers) {
      if (!h || h.shared !== shared || !(h.records instanceof Map)) continue;
      const record = h.records.get(runId);
      if (record) return { ctx: record.root.ctx, parentId: record.nodeId };
    }
    return null;
  };
  const tool = toolWrapper(session, facade.attached, locate);

  function wrapStructuredTool(lcTool) {
    if (!session.enabled || !lcTool || typeof lcTool._call !== 'function') return lcTool;
    try {
      const name = String(lcTool.name);
      const clone = Object.create(Object.getPrototypeOf(lcTool), Object.getOwnPropertyDescriptors(lcTool));
      const original = lcTool._call;
      const link = (args) => (args[1] && args[1].runId !== undefined ? shared.toolRuns.get(args[1].runId) : undefined);
      const gated = session.wrapCall('tool', name, function body(input, runManager, config) {
        return original.call(clone, input, runManager, config);
      }, {
        editable: true,
        toolCall: (args) => (args[2] && args[2].toolCall && typeof args[2].toolCall === 'object' ? args[2].toolCall : null),
        parentId: (args) => { const l = link(args); return l ? l.parentId : null; },
      });
      clone._call = function graphmindCall(input, runManager, config) {
        const l = link([input, runManager]);
        const wait = facade.attached();
        const go = () => session.within(l ? l.ctx : session.currentRun(), () => gated(input, runManager, config));
        return wait ? wait.then(go) : go();
      };
      shared.wrapped.add(name);
      return clone;
    } catch (error) {
      session.warn('langgraph-wrap-tool', `wrapStructuredTool failed; the tool runs uninstrumented (${error && error.message})`);
      return lcTool;
    }
  }

  const wrapOne = (key, value) => {
    if (typeof value === 'function') return tool(key ?? (value.name || 'tool'), value);
    if (value && typeof value === 'object' && typeof value._call === 'function') return wrapStructuredTool(value);
    return value;
  };

  const handler = (handlerOptions) => new (handlerClass())(shared, handlerOptions || {});

  return {
    ...facade,
    tool,
    wrapStructuredTool,

    /** A record or array of LangChain tools and plain functions, each gated. */
    wrapTools(tools) {
      if (!session.enabled || !tools || typeof tools !== 'object') return tools;
      if (Array.isArray(tools)) return tools.map((t) => wrapOne(undefined, t));
      const out = {};
      for (const [key, value] of Object.entries(tools)) out[key] = wrapOne(key, value);
      return out;
    },

    /** A fresh callback handler (one per invocation: it carries that invocation's signal). */
    handler,

    /** `[gm.handler()]`. */
    callbacks(handlerOptions) {
      return session.enabled ? [handler(handlerOptions)] : [];
    },

    /**
     * `base` with a fresh handler added to its callbacks and its abort signal merged in
     * (the caller's own signal, when aborted, also ends a run the invocation opened).
     */
    config(base = {}, handlerOptions) {
      const merged = { ...(base || {}) };
      if (!session.enabled) return merged;
      const h = handler(handlerOptions);
      if (merged.signal) h.callerSignal = merged.signal;
      const existing = merged.callbacks;
      if (existing === undefined || existing === null) merged.callbacks = [h];
      else if (Array.isArray(existing)) merged.callbacks = [...existing, h];
      else if (typeof existing.copy === 'function' && typeof existing.addHandler === 'function') {
        merged.callbacks = existing.copy();
        merged.callbacks.addHandler(h, true);
      } else {
        session.warn('langgraph-config', 'gm.config(): the `callbacks` given are neither a list nor a CallbackManager; left as they are');
      }
      merged.signal = merged.signal ? AbortSignal.any([merged.signal, h.signal]) : h.signal;
      return merged;
    },

    /**
     * Remembers a compiled graph's nodes and edges (`getGraph()`): each run opened after
     * this starts with their `graph.hint`; inside `gm.run` it is sent at once.
     */
    hintGraph(graph) {
      if (!session.enabled || !graph || typeof graph.getGraph !== 'function') return;
      try {
        roster = readGraph(graph);
        const ctx = session.currentRun();
        if (ctx) shared.replayHint(ctx.name);
      } catch (error) {
        session.warn('langgraph-hint', `hintGraph could not read the graph; no hint (${error && error.message})`);
      }
    },
  };
}

module.exports = { graphmind, isAbortError, HIDDEN_TAG };
