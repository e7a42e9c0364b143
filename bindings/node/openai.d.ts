// `require('@graphmind/node/openai')`: the npm `openai` facade.
import type { GraphmindBase, GraphmindOptions } from './index';

export type { GraphmindOptions } from './index';
export { isAbortError } from './index';

export interface GraphmindOpenAI extends GraphmindBase {
  /**
   * A Proxy over an `OpenAI` client (never mutated; `instanceof` holds): Chat Completions
   * and Responses requests, direct or through `.stream()` / `.parse()` / `.runTools()`,
   * are gated `llm:step` calls. Identity when disabled, idempotent.
   */
  wrapClient<C>(client: C): C;
}

export function graphmind(options?: GraphmindOptions): GraphmindOpenAI;
