// `require('@graphmind/node/langgraph')`: the LangGraph.js / LangChain.js facade
// (`@langchain/langgraph`, `@langchain/core` >= 1).
import type { GraphmindBase, GraphmindOptions } from './index';

export { isAbortError } from './index';

/** LangGraph tags its internal runs with this; they are never drawn. */
export const HIDDEN_TAG: 'langsmith:hidden';

export interface GraphmindLangGraphOptions extends GraphmindOptions {
  /** The app name (default "langgraph-app"). */
  app?: string;
  /**
   * Which chain runs are drawn: `all` (default), `langgraph` (graph nodes only, runs with
   * `metadata.langgraph_node`), `none` (no chains: models, tools and retrievers hang off the
   * agent node).
   */
  chains?: 'all' | 'langgraph' | 'none';
  /**
   * Node inputs and outputs longer than this many characters of JSON are recorded as a
   * preview `{__graphmind: 'truncated', preview, chars}`; the graph's own values are never
   * touched. Default: no cap (the session shrinks events to the wire budget anyway).
   */
  maxPayloadChars?: number;
  /** A root invocation outside `gm.run` opens its own run (default true). */
  autoRun?: boolean;
  /**
   * What a debugger's `abort` does at a callback gate: `throw` (default) throws an
   * AbortError out of the callback (LangChain rethrows it) and aborts `handler.signal`;
   * `signal` only aborts the signal (pass it as the config's `signal`, `gm.config()` does):
   * `invoke` rejects with the AbortError, but the held node's body still starts (LangGraph
   * does not check the signal before calling it).
   */
  abortMode?: 'throw' | 'signal';
}

export interface HandlerOptions {
  /** The run's and the agent node's name (default: the root runnable's name, `LangGraph`). */
  runName?: string;
}

/** A LangChain `BaseCallbackHandler` (LangChain awaits it before the work it announces). */
export interface GraphmindCallbackHandler {
  readonly name: 'graphmind';
  /** Aborted when the debugger aborts the run. */
  readonly signal: AbortSignal;
}

export interface GraphmindLangGraph extends GraphmindBase {
  /** A fresh handler (one per invocation: it carries that invocation's signal). */
  handler(options?: HandlerOptions): GraphmindCallbackHandler;
  /** `[gm.handler()]`, or `[]` when disabled. */
  callbacks(options?: HandlerOptions): GraphmindCallbackHandler[];
  /**
   * `base` with a fresh handler added to its callbacks and its abort signal merged in. When
   * `base.signal` (the caller's) aborts, a run this invocation opened ends aborted, a gate
   * held in it is released, and `invoke` rejects with the caller's reason.
   */
  config<C extends Record<string, unknown>>(base?: C, options?: HandlerOptions): C & { callbacks: unknown; signal?: AbortSignal };
  /**
   * A LangChain tool (`StructuredTool`, `tool()`) whose body is one gated call: every
   * debugger action works (the injected value is what the graph gets, retry runs the body
   * again, edits change its input). A clone; the tool given is never mutated.
   */
  wrapStructuredTool<T>(tool: T): T;
  /** A record or array of LangChain tools and plain functions, each gated. */
  wrapTools<T>(tools: T): T;
  /**
   * Remembers a compiled graph's nodes and edges (`getGraph()`): each run opened after this
   * starts with their `graph.hint`; inside `gm.run` it is sent at once.
   */
  hintGraph(graph: { getGraph(): unknown }): void;
}

export function graphmind(options?: GraphmindLangGraphOptions): GraphmindLangGraph;
