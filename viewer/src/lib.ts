// The viewer's pure modules in one entry, bundled for the benchmarks and the tests (Node).
export * from './model';
export * from './project';
export * from './layout';
export * from './timeline';
export * from './stress';
export * from './prompt-diff';
export { runCost, runCostOf, callPrice, priceOf, tokensOf, modelOf } from './cost';
export * from './replay';
export { whyFacts, identicalKeys, sameArgsFailures, stableJson } from './why';
export { streamFacts, gapLines, noteEvent, replayStarted, replayEnded, behindMs } from './stream';
