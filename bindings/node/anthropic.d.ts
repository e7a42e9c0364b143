// `require('@graphmind/node/anthropic')`: the npm `@anthropic-ai/sdk` facade.
import type { GraphmindBase, GraphmindOptions } from './index';

export type { GraphmindOptions } from './index';
export { isAbortError } from './index';

export interface GraphmindAnthropic extends GraphmindBase {
  /**
   * A Proxy over an `Anthropic` client (never mutated; `instanceof` holds):
   * `messages.create` (stream included), `messages.stream()`, `messages.parse()` and the
   * same under `beta.messages` are gated `llm:step` calls. Identity when disabled, idempotent.
   */
  wrapClient<C>(client: C): C;
}

export function graphmind(options?: GraphmindOptions): GraphmindAnthropic;
