// The pure rules behind the viewer's replay views (Node, no browser): the reducer keeps the
// replay fields (docs/protocol.md), each execution's mark, the runs that replay a run, and
// the original and its replay aligned per node and per-node order with the fork point,
// the divergence and the output differences.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { buildLib } from '../bench/build-lib.mjs';

let L;
before(async () => {
  L = await import(await buildLib());
});

/** A run from [type, payload] pairs, seq and ts counting up. */
function run(id, envs, meta) {
  const m = L.newRun(id);
  let seq = 0;
  L.apply(m, { gm: 1, seq: seq++, ts: 1, runId: id, type: 'run.started', payload: { app: 'trip', meta } });
  for (const [type, payload] of envs) L.apply(m, { gm: 1, seq, ts: 1 + seq++, runId: id, type, payload });
  return m;
}
const call = (nodeId, k, input, output, extra = {}, fin = {}) => [
  ['node.started', { nodeId, kind: nodeId.split(':')[0], name: nodeId.split(':')[1], instanceId: `${nodeId}@${k}`, parentId: 'agent:trip', input, ...extra }],
  ['node.finished', { nodeId, instanceId: `${nodeId}@${k}`, status: 'ok', durationMs: 1, output, ...fin }],
];
const agent = (inner) => [['node.started', { nodeId: 'agent:trip', kind: 'agent', name: 'trip', instanceId: 'a1' }], ...inner, ['node.finished', { nodeId: 'agent:trip', instanceId: 'a1', status: 'ok', durationMs: 5 }]];

const original = () =>
  run('run_orig', agent([...call('tool:search', 1, { to: 'LIS' }, { flights: [120, 95] }), ...call('tool:search', 2, { to: 'OPO' }, { flights: [80] }), ...call('tool:book', 1, { passenger: 'Ada' }, { ok: true, ref: 'GM-95' })]));
const replay = () =>
  run(
    'run_rep',
    agent([
      ...call('tool:search', 1, { to: 'LIS' }, { flights: [120, 95] }, { replayed: true }, { replayed: true }),
      ...call('tool:search', 2, { to: 'OPO' }, { flights: [70] }, { replayed: true }, { replayed: true, replayEdited: true }),
      ...call('tool:book', 1, { passenger: 'Grace' }, { ok: true, ref: 'GM-70' }, { replayLive: { reason: 'diverged', at: 'tool:book#1', differs: ['input.passenger'] } }),
      ...call('tool:mail', 1, { to: 'Grace' }, { sent: true }),
    ]),
    { replayOf: 'run_orig', from: 'tool:book#1' },
  );

test('the reducer keeps replayOf, from, replayed, replayEdited and replayLive', () => {
  const m = replay();
  assert.equal(m.replayOf, 'run_orig');
  assert.equal(m.replayFrom, 'tool:book#1');
  const [s1, s2] = m.nodes.get('tool:search').instances;
  assert.equal(s1.replayed, true);
  assert.equal(s2.replayEdited, true);
  assert.deepEqual(m.nodes.get('tool:book').instances[0].replayLive, { reason: 'diverged', at: 'tool:book#1', differs: ['input.passenger'] });
  assert.equal(original().replayOf, undefined);
  // the match keys a divergence carries (docs/protocol.md), and a malformed record ignored
  const k = run('run_k', [['node.started', { nodeId: 'tool:x', kind: 'tool', name: 'x', instanceId: 'i', replayLive: { reason: 'diverged', at: 'tool:x#1', differs: ['input.a', 7], recordedKey: 'ab'.repeat(16), liveKey: 'cd'.repeat(16) } }], ['node.started', { nodeId: 'tool:y', kind: 'tool', name: 'y', instanceId: 'j', replayLive: 'live' }]]);
  const live = k.nodes.get('tool:x').instances[0].replayLive;
  assert.deepEqual(live, { reason: 'diverged', at: 'tool:x#1', differs: ['input.a'], recordedKey: 'ab'.repeat(16), liveKey: 'cd'.repeat(16) });
  assert.equal(L.keysText(live), `match key recorded ${'ab'.repeat(16)} · live ${'cd'.repeat(16)}`);
  assert.equal(k.nodes.get('tool:y').instances[0].replayLive, undefined);
});

test('marks: replayed, edited, diverged, live after it, own code for the agent; the card marker', () => {
  const m = replay();
  const mark = (id, k = 0) => L.markOf(m.nodes.get(id), m.nodes.get(id).instances[k]);
  assert.deepEqual([mark('tool:search'), mark('tool:search', 1), mark('tool:book'), mark('tool:mail'), mark('agent:trip')], ['replayed', 'edited', 'diverged', 'live', 'own-code']);
  assert.deepEqual(L.cardMark(m, m.nodes.get('tool:book')), { mark: 'diverged', text: '⚡ diverged', title: 'diverged: live from here: went live at tool:book#1 (diverged) · differs: input.passenger' });
  assert.equal(L.cardMark(m, m.nodes.get('tool:search')).text, '↺ edited', 'the last execution’s mark');
  assert.equal(L.cardMark(m, m.nodes.get('tool:mail')), undefined);
  assert.equal(L.cardMark(original(), original().nodes.get('tool:search')), undefined, 'no marker on a run that is no replay');
  assert.equal(L.liveText({ reason: 'diverged', at: 'tool:book#1', differs: ['input.passenger'] }), 'went live at tool:book#1 (diverged) · differs: input.passenger');
});

test('the runs that replay a run, newest first', () => {
  const known = [
    { runId: 'run_a', replayOf: 'run_orig', startedAt: 10 },
    { runId: 'run_b', replayOf: 'run_orig', startedAt: 30 },
    { runId: 'run_c', replayOf: 'run_other', startedAt: 20 },
    { runId: 'run_orig' },
    { runId: 'run_a', replayOf: 'run_orig', startedAt: 10 },
  ];
  assert.deepEqual(L.replaysOf('run_orig', known), ['run_b', 'run_a']);
  assert.deepEqual(L.replaysOf('run_none', known), []);
});

test('compareRuns aligns per node and per-node order, from the fork point on, with the output differences', () => {
  const c = L.compareRuns(original(), replay());
  assert.deepEqual(
    c.rows.map((r) => [r.key, r.mark, r.same]),
    [
      ['agent:trip#1', 'own-code', true],
      ['tool:search#1', 'replayed', true],
      ['tool:search#2', 'edited', false],
      ['tool:book#1', 'diverged', false],
      ['tool:mail#1', 'live', undefined],
    ],
  );
  assert.equal(c.rows[c.forkIndex].key, 'tool:book#1');
  assert.deepEqual(c.live, { reason: 'diverged', at: 'tool:book#1', differs: ['input.passenger'] });
  assert.deepEqual(c.rows[2].outputDiffers, ['output.flights[0]']);
  assert.deepEqual(c.rows[3].outputDiffers, ['output.ref']);
  assert.deepEqual(c.rows[3].inputDiffers, ['input.passenger']);
  assert.equal(c.rows[4].original, undefined);
  assert.deepEqual([c.replayed, c.liveCalls, c.changedOutputs], [2, 2, 2]);
});

test('an execution only the original has comes last as not run; an error compares by name and message', () => {
  const o = run('run_o', [...call('tool:a', 1, {}, 1), ...call('tool:b', 1, {}, 2)]);
  const r = run('run_r', [['node.started', { nodeId: 'tool:a', kind: 'tool', name: 'a', instanceId: 'x', replayed: true }], ['node.error', { nodeId: 'tool:a', instanceId: 'x', replayed: true, error: { name: 'TimeoutError', message: 'slow' } }]], { replayOf: 'run_o' });
  const c = L.compareRuns(o, r);
  assert.deepEqual(c.rows.map((x) => [x.key, x.mark]), [['tool:a#1', 'replayed'], ['tool:b#1', 'not-run']]);
  assert.equal(c.rows[0].same, false);
  assert.equal(c.forkIndex, 2, 'never went live: the fork index is past the end');
  assert.equal(c.live, undefined);
  assert.deepEqual(L.diffPaths({ a: [1, { b: 2 }] }, { a: [1, { b: 3 }, 4] }), ['a[1].b', 'a[2]']);
  assert.deepEqual(L.diffPaths(1, 1), []);
});

test('cost: a replayed model call is not charged; the run counts it apart with what it cost when recorded', () => {
  const usage = { inputTokens: 1000, outputTokens: 100 };
  const llm = (k, extra, fin) => call('llm:step', k, { model: 'gpt-4o', provider: 'openai', messages: [{ role: 'user', content: `q${k}` }] }, { text: 'a' }, extra, { usage, ...fin });
  const m = run('run_cost', [...llm(1, { replayed: true }, { replayed: true }), ...llm(2, { replayLive: { reason: 'fork', at: 'llm:step#2' } }, {})], { replayOf: 'run_x', from: 'llm:step#2' });
  const c = L.runCostOf(m);
  const one = L.priceOf('gpt-4o', 'openai', L.tokensOf(usage)).total;
  assert.ok(one > 0);
  assert.deepEqual([c.calls, c.replayed, c.unpriced, c.tokens.inputTokens], [1, 1, 0, 1000]);
  assert.equal(c.total, one, 'only the live call is charged');
  assert.equal(c.saved, one, 'the replayed call cost this when it was recorded');
});
