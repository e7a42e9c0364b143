'use strict';
// `make bench-node`: what the LangGraph facade adds per graph node. One compiled StateGraph
// of NODES nodes in a line (each returns a small state update) is invoked bare and with
// `gm.config()` (a fresh GraphMind callback handler; a detached session, as an app runs with
// no debugger), interleaved in rounds of INVOKES_PER_BLOCK. Added per node =
// (instrumented - bare) / NODES, in wall time and in the process's CPU time
// (process.cpuUsage: the JavaScript thread and the core's worker). Medians of ROUNDS rounds.
// A third row runs the graph with an awaited no-op LangChain handler: what LangChain itself
// spends once any callback handler is attached (run managers, run ids, awaited dispatch),
// the floor of every callback-based integration.
const { performance } = require('node:perf_hooks');
const { StateGraph, Annotation, START, END } = require('@langchain/langgraph');
const { graphmind } = require('../langgraph.js');

const NODES = 10;
const ROUNDS = 10;
const INVOKES_PER_BLOCK = 50;
const WARMUP = 30;
/** Nothing listens here: the session stays detached, as with no debugger running. */
const DETACHED_URL = 'ws://127.0.0.1:9/ingest';

function graph() {
  const State = Annotation.Root({ n: Annotation(), trail: Annotation() });
  let g = new StateGraph(State);
  for (let i = 0; i < NODES; i += 1) g = g.addNode(`step${i}`, async (s) => ({ n: s.n + 1, trail: `step${i}` }));
  g = g.addEdge(START, 'step0');
  for (let i = 1; i < NODES; i += 1) g = g.addEdge(`step${i - 1}`, `step${i}`);
  return g.addEdge(`step${NODES - 1}`, END).compile();
}

async function block(invoke, n) {
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i += 1) {
    const out = await invoke({ n: 0, trail: '' });
    if (out.n !== NODES) throw new Error(`the graph ran ${out.n} nodes`);
  }
  const wallUs = ((performance.now() - t0) * 1000) / n;
  const used = process.cpuUsage(cpu);
  return { wallUs, cpuUs: (used.user + used.system) / n };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const gm = graphmind({ app: 'langgraph-bench', url: DETACHED_URL, env: {}, logger: () => {} });
  const compiled = graph();
  const bare = (input) => compiled.invoke(input);
  const instrumented = (input) => compiled.invoke(input, gm.config());
  const { BaseCallbackHandler } = require('@langchain/core/callbacks/base');
  class Noop extends BaseCallbackHandler {
    constructor() { super({ _awaitHandler: true }); this.name = 'noop'; }
    async handleChainStart() {}
    async handleChainEnd() {}
  }
  const noop = (input) => compiled.invoke(input, { callbacks: [new Noop()] });
  await block(bare, WARMUP);
  await block(noop, WARMUP);
  await block(instrumented, WARMUP);
  const rows = { bare: [], noop: [], instrumented: [] };
  for (let r = 0; r < ROUNDS; r += 1) {
    rows.bare.push(await block(bare, INVOKES_PER_BLOCK));
    rows.noop.push(await block(noop, INVOKES_PER_BLOCK));
    rows.instrumented.push(await block(instrumented, INVOKES_PER_BLOCK));
  }
  const m = (k, f) => median(rows[k].map((x) => x[f]));
  const fmt = (x) => x.toFixed(1).padStart(9);
  console.log(`LangGraph StateGraph of ${NODES} nodes, ${ROUNDS} x ${INVOKES_PER_BLOCK} invokes each, medians (µs):`);
  console.log(`                 wall/invoke  cpu/invoke   wall/node  cpu/node`);
  const row = (label, k, note = '') => console.log(`  ${label.padEnd(13)} ${fmt(m(k, 'wallUs'))} ${fmt(m(k, 'cpuUs'))}   ${fmt(m(k, 'wallUs') / NODES)} ${fmt(m(k, 'cpuUs') / NODES)}${note}`);
  row('bare', 'bare');
  row('noop handler', 'noop', '   (an awaited no-op LangChain handler)');
  row('instrumented', 'instrumented', '   (gm.config(), detached session)');
  const addedWall = m('instrumented', 'wallUs') - m('bare', 'wallUs');
  const addedCpu = m('instrumented', 'cpuUs') - m('bare', 'cpuUs');
  console.log(`  added         ${fmt(addedWall)} ${fmt(addedCpu)}   ${fmt(addedWall / NODES)} ${fmt(addedCpu / NODES)}   (instrumented - bare; an invoke adds its run and agent node)`);
  const ownWall = m('instrumented', 'wallUs') - m('noop', 'wallUs');
  const ownCpu = m('instrumented', 'cpuUs') - m('noop', 'cpuUs');
  console.log(`  of which ours ${fmt(ownWall)} ${fmt(ownCpu)}   ${fmt(ownWall / NODES)} ${fmt(ownCpu / NODES)}   (instrumented - noop handler)`);
  await gm.dispose();
}

main().then(() => process.exit(0), (error) => { console.error(error); process.exit(1); });
