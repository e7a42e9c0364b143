// The prompt diff as a pure function (Node, no browser): messages, system prompt, tools, cache miss,
// and the < 16 ms figure for two 50-message prompts.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { buildLib } from '../bench/build-lib.mjs';

let lib;
before(async () => { lib = await import(await buildLib()); });

/** A chat input of `n` messages after a system message, with two tools. */
function chat(n, { system = 'You are a travel agent.', tools = [['search', 'h1'], ['book', 'h2']], edit } = {}) {
  const messages = [{ role: 'system', content: system }];
  for (let i = 0; i < n; i++)
    messages.push({ role: i % 2 ? 'assistant' : 'user', content: `message ${i}: ${'lorem ipsum '.repeat(20)}` });
  if (edit) edit(messages);
  return { provider: 'openai', model: 'gpt-4o', messages, tools: tools.map(([name, schemaHash]) => ({ name, schemaHash })) };
}

test('an identical prompt (keys in another order) is the same', () => {
  const a = chat(4);
  const b = JSON.parse(JSON.stringify(a));
  b.messages[1] = { content: b.messages[1].content, role: b.messages[1].role };
  const d = lib.promptDiff(a, b);
  assert.equal(d.same, true);
  assert.equal(d.kept, 4);
});

test('messages added, changed and removed; system prompt, model and tools changed', () => {
  const a = chat(4);
  const b = chat(6, {
    system: 'You are a careful travel agent.',
    tools: [['search', 'h1'], ['book', 'h2b'], ['cancel', 'h3']],
    edit: (m) => { m[2].content = 'edited'; },
  });
  b.model = 'gpt-4o-mini';
  const d = lib.promptDiff(a, b);
  assert.equal(d.same, false);
  assert.equal(d.kept, 1);
  assert.deepEqual(d.changed.map((c) => [c.index, c.role, c.after.content]), [[1, 'assistant', 'edited']]);
  assert.deepEqual(d.added.map((c) => c.index), [4, 5]);
  assert.deepEqual(d.removed, []);
  assert.deepEqual(d.system, { before: 'You are a travel agent.', after: 'You are a careful travel agent.' });
  assert.deepEqual(d.model, { before: 'gpt-4o', after: 'gpt-4o-mini' });
  assert.deepEqual(d.tools, { added: ['cancel'], removed: [], changed: ['book'] });
  const back = lib.promptDiff(b, a);
  assert.deepEqual(back.removed.map((c) => c.index), [4, 5]);
  assert.deepEqual(back.tools.removed, ['cancel']);
});

test('Anthropic system and Responses instructions/input are read too', () => {
  const d = lib.promptDiff(
    { system: [{ type: 'text', text: 'A' }], messages: [{ role: 'user', content: 'hi' }] },
    { system: [{ type: 'text', text: 'B' }], messages: [{ role: 'user', content: 'hi' }] },
  );
  assert.deepEqual(d.system, { before: 'A', after: 'B' });
  assert.equal(d.kept, 1);
  const r = lib.promptDiff({ instructions: 'X', input: 'one' }, { instructions: 'X', input: [{ role: 'user', content: 'one' }, { type: 'function_call_output', output: '4' }] });
  assert.equal(r.system, undefined);
  assert.equal(r.kept, 1);
  assert.deepEqual(r.added.map((c) => c.role), ['function_call_output']);
});

test('cached tokens that drop between calls are a cache miss', () => {
  const a = chat(2);
  const b = chat(3);
  assert.deepEqual(lib.promptDiff(a, b, { before: { cacheReadTokens: 1200 }, after: { cacheReadTokens: 0 } }).cacheMiss, { before: 1200, after: 0 });
  assert.equal(lib.promptDiff(a, b, { before: { cacheReadTokens: 0 }, after: { cacheReadTokens: 1200 } }).cacheMiss, undefined);
  assert.equal(lib.promptDiff(a, b).cacheMiss, undefined);
});

test('figure: the diff of two 50-message prompts takes < 16 ms warm', () => {
  const a = chat(50);
  const b = chat(50, { system: 'changed', edit: (m) => { m[25].content = 'edited'; m.push({ role: 'user', content: 'new' }); } });
  for (let i = 0; i < 10; i++) lib.promptDiff(a, b);
  const t = [];
  for (let i = 0; i < 30; i++) { const s = performance.now(); lib.promptDiff(a, b); t.push(performance.now() - s); }
  t.sort((x, y) => x - y);
  const median = t[15];
  console.log(`prompt diff, 2 x 50 messages: median ${median.toFixed(3)} ms, p90 ${t[27].toFixed(3)} ms`);
  assert.ok(median < 16, `median ${median} ms`);
  const d = lib.promptDiff(a, b);
  assert.equal(d.kept, 24);
  assert.equal(d.changed.length, 1);
  assert.equal(d.added.length, 1);
});
