// The viewer's pure modules in one entry, bundled for the benchmarks and the tests (Node).
export * from './model';
export * from './project';
export * from './layout';
export * from './timeline';
export * from './stress';
export * from './prompt-diff';
