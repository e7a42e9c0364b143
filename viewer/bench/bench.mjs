// `npm run bench`: warm timings of the viewer's pure pipeline (not a pass/fail test).
// reducer (envelopes -> run model), projection (tree + folds -> visible cards), layout
// (cards -> boxes + edges, every node open: the worst case), timeline (instances -> bars),
// on a 300-node / ~5,000-event synthetic run; then a layout sweep from 100 to 1,600 nodes.
import { buildLib } from './build-lib.mjs';

const lib = await import(await buildLib());
const { stressRun, newRun, apply, buildTree, initialFolds, project, layout, timeline, promptDiff, foldSummary } = lib;

function measure(fn, { warm = 10, runs = 30 } = {}) {
  for (let i = 0; i < warm; i++) fn();
  const t = [];
  for (let i = 0; i < runs; i++) {
    const a = performance.now();
    fn();
    t.push(performance.now() - a);
  }
  t.sort((a, b) => a - b);
  return { median: t[Math.floor(t.length / 2)], p90: t[Math.floor(t.length * 0.9)], min: t[0] };
}
const f = (x) => x.toFixed(2).padStart(8);
const allOpen = { defaultOpen: true, expanded: new Set(), collapsed: new Set() };

function modelOf(envs) {
  const m = newRun(envs[0].runId);
  for (const e of envs) apply(m, e);
  return m;
}

console.log('GraphMind viewer pipeline, warm (ms; median / p90 / min of 30 after 10 warm-up runs)');
console.log(`node ${process.version}, ${new Date().toISOString()}\n`);
const envs = stressRun(300, 5000);
const m = modelOf(envs);
const tree = buildTree(m);
const folds = initialFolds(tree, m.nodes.size);
const projAll = project(m, allOpen, tree);
const projFolded = project(m, folds, tree);
console.log(`run: ${m.nodes.size} nodes, ${envs.length} events; folded view ${projFolded.visible.length} cards\n`);
// two consecutive 50-message chat prompts: one message edited, one added, the system prompt changed
const chat = (sys, n) => ({ model: 'gpt-4o', tools: [{ name: 'search', schemaHash: 'h1' }], messages: [{ role: 'system', content: sys },
  ...Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i}: ${'lorem ipsum '.repeat(20)}` }))] });
const promptA = chat('You are a travel agent.', 50);
const promptB = chat('You are a careful travel agent.', 51);
promptB.messages[25].content = 'edited';
// a gap marker stored after the run's events (as the server replays it, in seq order): it is
// placed among all 5,000 events already seen
const lastSeq = envs[envs.length - 1].seq;
const withGap = [...envs, { gm: 1, seq: lastSeq + 1, ts: envs[envs.length - 1].ts, runId: envs[0].runId, type: 'graph.hint', payload: { nodes: [], gap: { droppedCount: 100, fromSeq: 2000, toSeq: 2099, reason: 'buffer-overflow' } } }];
const foldedIds = [...projFolded.folded.keys()];
const rows = [
  ['reducer (all events)', () => modelOf(envs)],
  ['reducer + a gap marker placed', () => modelOf(withGap)],
  ['projection (tree + folds + project)', () => { const t = buildTree(m); project(m, initialFolds(t, m.nodes.size), t); }],
  ['layout, 300 cards (all open)', () => layout({ visible: projAll.visible, parent: projAll.parent })],
  [`layout, ${projFolded.visible.length} cards (folded)`, () => layout({ visible: projFolded.visible, parent: projFolded.parent })],
  ['timeline (all instances)', () => timeline(m, m.endTs)],
  [`fold summaries, ${foldedIds.length} folded cards`, () => { for (const id of foldedIds) foldSummary(tree, m, id); }],
  ['prompt diff, 2 x 50 messages', () => promptDiff(promptA, promptB)],
];
console.log('step'.padEnd(40) + '  median       p90       min   budget');
for (const [name, fn] of rows) {
  const r = measure(fn);
  console.log(`${name.padEnd(40)}${f(r.median)}  ${f(r.p90)}  ${f(r.min)}   < 16 ${r.median < 16 ? 'ok' : 'OVER'}`);
}
console.log('\nlayout sweep (every node open)');
console.log('nodes'.padEnd(8) + '  median       p90   budget');
for (const n of [100, 200, 400, 800, 1600]) {
  const mm = modelOf(stressRun(n, n * 4));
  const p = project(mm, allOpen);
  const r = measure(() => layout({ visible: p.visible, parent: p.parent }));
  const budget = n <= 800 ? '< 50' : '';
  console.log(`${String(mm.nodes.size).padEnd(8)}${f(r.median)}  ${f(r.p90)}   ${budget} ${budget ? (r.median < 50 ? 'ok' : 'OVER') : ''}`);
}
