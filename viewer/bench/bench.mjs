// `npm run bench`: warm timings of the viewer's pure pipeline, held to their frame budgets.
// reducer (envelopes -> run model), projection (tree + folds -> visible cards), layout
// (cards -> boxes + edges, every node open: the worst case), timeline (instances -> bars),
// and the panels' own work: the run's cost (every LLM call priced by genai-prices), why it
// held, the stream chips, the replay comparison (the run against a replay of it); on a 300-node / ~5,000-event synthetic run whose LLM calls carry a
// model, a provider and a usage; then a layout sweep from 100 to 1,600 nodes. A median over
// its budget prints OVER and the process exits 1 after printing every figure.
import { buildLib } from './build-lib.mjs';

const lib = await import(await buildLib());
const { stressRun, newRun, apply, buildTree, initialFolds, project, layout, timeline, promptDiff, foldSummary, runCost, runCostOf, priceOf, tokensOf, modelOf: callModel, whyFacts, streamFacts, gapLines, noteEvent, compareRuns } = lib;

/** Every budgeted step must take less than this (ms, median, warm): one frame. */
const FRAME_MS = 16;
/** The layout sweep's budget up to ~800 nodes (ms). */
const SWEEP_MS = 50;
let over = 0;

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
// two holds on the run: a loop hold on an LLM node (its calls side by side) and an error
// hold on a node whose call failed
const llm = [...m.nodes.values()].find((n) => n.kind === 'llm' && n.instances.length > 1);
const failed = [...m.nodes.values()].find((n) => n.instances.some((i) => i.status === 'error')) ?? llm;
const loopPause = { pauseId: 'p1', nodeId: llm.id, point: 'before', reason: 'loop', loop: { repeats: 3, firstSeq: 10, lastSeq: 90 }, active: true, ts: 0, instanceId: llm.instances.at(-1).instanceId };
const errorPause = { pauseId: 'p2', nodeId: failed.id, point: 'error', reason: 'error', active: true, ts: 0, instanceId: failed.instances.find((i) => i.status === 'error')?.instanceId };
const mGap = modelOf(withGap);
const info = { id: m.runId, app: 'stress', startedAt: 0, finishedAt: null, status: 'ok', eventCount: envs.length, errorCount: 0, live: false, durationMs: 0, source: 'import' };
// pricing every call afresh: what the bar cost on every redraw before prices were kept per call
const priceAll = () => {
  let total = 0;
  for (const n of m.nodes.values()) if (n.kind === 'llm') for (const i of n.instances) {
    const t = tokensOf(i.usage);
    const { model, provider } = callModel(i);
    if (t) total += priceOf(model, provider, t)?.total ?? 0;
  }
  return total;
};
// a replay of the run: the same events under another run id, the first half of the calls
// answered from the recording, the call at the middle where it went live, outputs changed after
const half = Math.floor(envs.length / 2);
const replayEnvs = envs.map((e, k) => {
  const payload = { ...e.payload };
  if (e.type === 'run.started') payload.meta = { replayOf: e.runId, from: 'tool:x#1' };
  if ((e.type === 'node.started' || e.type === 'node.finished') && k < half) payload.replayed = true;
  if (e.type === 'node.finished' && k >= half) payload.output = { ...payload.output, changed: true };
  return { ...e, runId: 'run_replay', payload };
});
const live = replayEnvs.findIndex((e, k) => k >= half && e.type === 'node.started');
replayEnvs[live].payload.replayLive = { reason: 'diverged', at: `${replayEnvs[live].payload.nodeId}#1`, differs: ['input.q'] };
const mReplay = modelOf(replayEnvs);
const cmp = compareRuns(m, mReplay);
console.log(`compare: ${cmp.rows.length} executions aligned, fork at row ${cmp.forkIndex}, ${cmp.changedOutputs} outputs differ`);
const cold = performance.now();
const cost = runCostOf(m);
const coldMs = performance.now() - cold;
if (!cost.calls || cost.unpriced) throw new Error(`the synthetic run's LLM calls must all be priced: ${JSON.stringify(cost)}`);
console.log(`cost: ${cost.calls} LLM calls, $${cost.total.toFixed(4)}, ${cost.unpriced} unpriced; first pricing (cold, genai-prices loads its data) ${coldMs.toFixed(1)} ms\n`);
const rows = [
  ['reducer (all events)', () => modelOf(envs)],
  ['reducer + a gap marker placed', () => modelOf(withGap)],
  ['projection (tree + folds + project)', () => { const t = buildTree(m); project(m, initialFolds(t, m.nodes.size), t); }],
  ['layout, 300 cards (all open)', () => layout({ visible: projAll.visible, parent: projAll.parent })],
  [`layout, ${projFolded.visible.length} cards (folded)`, () => layout({ visible: projFolded.visible, parent: projFolded.parent })],
  ['timeline (all instances)', () => timeline(m, m.endTs)],
  [`fold summaries, ${foldedIds.length} folded cards`, () => { for (const id of foldedIds) foldSummary(tree, m, id); }],
  ['prompt diff, 2 x 50 messages', () => promptDiff(promptA, promptB)],
  [`cost: run total, ${cost.calls} calls (bar, per event)`, () => runCostOf(m)],
  ['why: a loop hold and an error hold', () => (whyFacts(llm, loopPause), whyFacts(failed, errorPause))],
  [`compare: ${cmp.rows.length} executions, original vs replay`, () => compareRuns(m, mReplay)],
  [`stream: ${withGap.length} events noted + chips`, () => { for (const e of withGap) noteEvent(e, e.ts + 10); streamFacts(mGap, info); gapLines(mGap); }],
];
console.log('step'.padEnd(44) + '  median       p90       min   budget');
for (const [name, fn] of rows) {
  const r = measure(fn);
  const ok = r.median < FRAME_MS;
  if (!ok) over++;
  console.log(`${name.padEnd(44)}${f(r.median)}  ${f(r.p90)}  ${f(r.min)}   < ${FRAME_MS} ${ok ? 'ok' : 'OVER'}`);
}
// not budgeted: the price of every call computed afresh (what `runCost` spares the bar), and
// the first pricing of the run in a fresh page (genai-prices loads its data on first use)
const afresh = measure(priceAll, { warm: 3, runs: 10 });
console.log(`${`cost: every call priced afresh (no memo)`.padEnd(44)}${f(afresh.median)}  ${f(afresh.p90)}  ${f(afresh.min)}   (informative)`);
console.log('\nlayout sweep (every node open)');
console.log('nodes'.padEnd(8) + '  median       p90   budget');
for (const n of [100, 200, 400, 800, 1600]) {
  const mm = modelOf(stressRun(n, n * 4));
  const p = project(mm, allOpen);
  const r = measure(() => layout({ visible: p.visible, parent: p.parent }));
  const budget = n <= 800 ? `< ${SWEEP_MS}` : '';
  if (budget && r.median >= SWEEP_MS) over++;
  console.log(`${String(mm.nodes.size).padEnd(8)}${f(r.median)}  ${f(r.p90)}   ${budget} ${budget ? (r.median < SWEEP_MS ? 'ok' : 'OVER') : ''}`);
}
if (over) {
  console.error(`\n${over} step(s) over budget`);
  process.exit(1);
}
console.log('\nevery step within its budget');
