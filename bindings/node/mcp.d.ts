// `require('@graphmind/node/mcp')`: the MCP server facade (`@modelcontextprotocol/sdk`).
import type { GraphmindBase, GraphmindOptions } from './index';

export { isAbortError } from './index';

export interface GraphmindMcpOptions extends GraphmindOptions {
  /** The app name (default "mcp-server"). */
  app?: string;
  /** The `server:<name>` node's label (default: the name the McpServer was made with). */
  server?: { name?: string; version?: string };
}

export interface GraphmindMcp extends GraphmindBase {
  /**
   * A Proxy over an `McpServer` (never mutated; `instanceof` holds): callbacks registered
   * through it (`registerTool` / `registerResource` / `registerPrompt`, and `tool` /
   * `resource` / `prompt`) are gated `tool:` / `resource:` / `prompt:` nodes under a
   * `server:<name>` node, one run per request; `connect` records a `graph.hint` of the
   * registered surface. `server.server.createMessage(...)` and a handler's
   * `extra.sendRequest` of `sampling/createMessage` are a gated `llm:sampling` node under
   * the handler's node. Identity when disabled, idempotent.
   */
  wrapServer<S>(server: S): S;
}

export function graphmind(options?: GraphmindMcpOptions): GraphmindMcp;

/**
 * An injected value as the result of `kind`'s method: a result passes unchanged; for a
 * tool a string is one text block, an object a text block plus `structuredContent`,
 * nothing `{content: []}`; a resource's value one `contents` item for `uri`; a prompt's
 * one user message.
 */
export function liftInjected(kind: 'tool' | 'resource' | 'prompt' | 'sampling', value: unknown, uri?: string): unknown;

/** A held request warns once after this many milliseconds. */
export const HOLD_WARN_MS: number;
