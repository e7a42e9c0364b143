// `require('@graphmind/node/ai-sdk')`: the Vercel AI SDK facade.
import type { Graphmind, GraphmindOptions } from './index';

export type { Graphmind, GraphmindOptions } from './index';
export { isAbortError } from './index';
export function graphmind(options?: GraphmindOptions): Graphmind;
