'use strict';
// The reference client's tool-edit helpers over the core: validateInput against every
// merge, placeholder and pollution case of edit-input-fixture.json; toolSchemaCheck with a
// plain JSON Schema, real zod 4 and a Standard Schema; toolGateOptions / resultGateOptions /
// editedArgs; then the options on a real `graphmind serve`: a held gate refuses an edit
// that breaks the schema and stays held, runs a valid one, and an error-shaped result at
// the `after` gate holds as the smart breakpoint.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { z } = require('zod');
const gm = require('..');
const { validateInput, toolGateOptions, editedArgs, toolSchemaCheck, resultGateOptions, createSession } = gm;
const { startServer, Debugger, sleep } = require('./helpers');

const VECTORS = path.resolve(__dirname, '..', '..', '..', 'tests', 'vectors');
const fixture = JSON.parse(fs.readFileSync(path.join(VECTORS, 'reference', 'edit-input-fixture.json'), 'utf8'));
const SECRET = 'SECRET-VALUE-9f3';

const SCHEMA = {
  type: 'object',
  properties: {
    query: { type: 'string', minLength: 2 },
    limit: { type: 'integer', minimum: 1, maximum: 50 },
    mode: { enum: ['fast', 'slow'] },
  },
  required: ['query'],
  additionalProperties: false,
};

test('validateInput: every mergeToolInput case of the fixture, and its placeholder and pollution refusals', () => {
  assert.ok(fixture.mergeToolInput.length > 10);
  for (const c of fixture.mergeToolInput) {
    assert.deepEqual(validateInput(c.live, c.proposed, { inputHidden: !!c.inputHidden }), c.expected, c.name);
  }
  let refused = 0;
  for (const c of fixture.proposedValue) {
    if (!c.refusal) continue;
    const verdict = validateInput({ q: 1 }, { edited: c.value });
    assert.equal(verdict.ok, false, c.name);
    assert.equal(verdict.code, c.refusal, c.name);
    refused += 1;
  }
  assert.ok(refused > 10);
  for (const c of fixture.prototypeKeys) {
    if (!c.refused || !c.value || typeof c.value !== 'object' || Array.isArray(c.value)) continue;
    assert.equal(validateInput({}, c.value).code, 'shape', c.name);
  }
});

test('validateInput with a schema: the core\'s JSON Schema check after the merge; a hidden input is not merged', async () => {
  assert.deepEqual(validateInput({ query: 'ams', limit: 3 }, { limit: 4 }, { schema: SCHEMA }), { ok: true, value: { query: 'ams', limit: 4 } });
  const bad = validateInput({ query: 'ams' }, { limit: SECRET }, { schema: SCHEMA });
  assert.equal(bad.code, 'schema');
  assert.match(bad.message, /\/limit/);
  assert.doesNotMatch(bad.message, new RegExp(SECRET));
  // Hidden: the live query does not complete the edit, so `required` refuses it.
  assert.equal(validateInput({ query: 'ams' }, { limit: 4 }, { schema: SCHEMA, inputHidden: true }).code, 'schema');
  // A host check (zod): the merge in the core, then zod's parse (its defaults applied).
  const check = toolSchemaCheck(z.object({ query: z.string(), limit: z.number().default(10) }).strict().transform((v) => v));
  assert.ok(check);
  const verdict = await validateInput({ query: 'ams' }, { query: 'lis' }, { schema: check });
  assert.deepEqual(verdict, { ok: true, value: { query: 'lis', limit: 10 } });
  assert.deepEqual(validateInput(1n, {}), { ok: false, code: 'shape', message: 'the edited arguments could not be read as JSON' });
});

test('toolSchemaCheck: a plain JSON Schema, zod 4 (safeParseAsync), a Standard Schema; nothing usable is undefined', async () => {
  const json = toolSchemaCheck(SCHEMA);
  assert.deepEqual(json({ query: 'ok' }), { ok: true, value: { query: 'ok' } });
  for (const value of [{ limit: 3 }, { query: 42 }, { query: 'a' }, { query: 'ok', limit: 0 }, { query: 'ok', mode: SECRET }, { query: 'ok', [SECRET]: 1 }]) {
    const v = json(value);
    assert.equal(v.ok, false, JSON.stringify(value));
    assert.equal(v.code, 'schema');
    assert.doesNotMatch(v.message, new RegExp(SECRET), 'never quotes the value');
  }
  assert.equal(json.jsonSchema, SCHEMA);

  const zod = toolSchemaCheck(z.object({ city: z.string().min(2), days: z.number().int().default(3) }));
  assert.deepEqual(await zod({ city: 'Faro' }), { ok: true, value: { city: 'Faro', days: 3 } }, 'zod\'s parsed value');
  const cases = [
    [{ city: 5 }, '(at /city: expected string, got integer)'],
    [{}, '(at /city: missing (expected string))'],
    [{ city: 'F' }, '(at /city: too short (at least 2 characters))'],
    [{ city: 'Faro', days: 1.5 }, '(at /days: expected int, got number)'],
  ];
  for (const [value, tail] of cases) {
    const v = await zod(value);
    assert.equal(v.code, 'schema');
    assert.ok(v.message.endsWith(tail), `${JSON.stringify(value)}: ${v.message}`);
  }
  const secret = await toolSchemaCheck(z.object({ mode: z.enum(['a', 'b']) }))({ mode: SECRET });
  assert.doesNotMatch(secret.message, new RegExp(SECRET));
  assert.equal(zod.jsonSchema.properties.city.minLength, 2, 'zod\'s Standard JSON Schema form, for the core at a held gate');

  const standard = toolSchemaCheck({
    '~standard': {
      version: 1,
      vendor: 'x',
      validate: async (v) => (v.ok === true ? { value: { ok: true, extra: 1 } } : { issues: [{ message: SECRET, path: [{ key: 'ok' }] }] }),
    },
  });
  assert.deepEqual(await standard({ ok: true }), { ok: true, value: { ok: true, extra: 1 } });
  const no = await standard({ ok: false });
  assert.equal(no.code, 'schema');
  assert.ok(no.message.endsWith('(at /ok: invalid)'), no.message);
  assert.equal(standard.jsonSchema, null, 'no JSON Schema form');

  for (const value of [undefined, null, 1, 'x', {}, { a: { anything: 1 } }, () => {}, { type: 12 }]) {
    assert.equal(toolSchemaCheck(value), undefined, String(value));
  }
  const throwing = toolSchemaCheck({ safeParseAsync: async () => { throw new Error('boom'); } });
  await assert.rejects(throwing({}), /boom/);
});

test('toolGateOptions, resultGateOptions and editedArgs', () => {
  const detached = { attached: false };
  const attached = { attached: true };
  assert.equal(toolGateOptions(detached, { args: { a: 1 } }, { result: 1 }), undefined);
  let calls = 0;
  const lazy = () => { calls += 1; return { args: { a: 1 }, check: toolSchemaCheck(SCHEMA) }; };
  assert.equal(toolGateOptions(detached, lazy), undefined);
  assert.equal(calls, 0, 'a lazy edit is evaluated only while attached');
  assert.deepEqual(toolGateOptions(attached, lazy), { editable: true, liveInput: { a: 1 }, inputSchema: SCHEMA });
  assert.equal(calls, 1);
  assert.deepEqual(toolGateOptions(attached, { args: { a: 1 }, check: SCHEMA }), { editable: true, liveInput: { a: 1 }, inputSchema: SCHEMA });
  const after = toolGateOptions(attached, undefined, { result: undefined });
  assert.ok('result' in after);
  assert.equal(toolGateOptions(attached, undefined), undefined);
  assert.equal(toolGateOptions(attached, () => undefined), undefined);
  const warned = [];
  const hostOnly = toolGateOptions({ attached: true, warn: (k) => warned.push(k) }, { args: {}, check: async () => ({ ok: true, value: {} }) });
  assert.deepEqual(hostOnly, { editable: true, liveInput: {} });
  assert.deepEqual(warned, ['tool-check-host-only']);

  assert.equal(resultGateOptions(detached, { isError: true }), undefined);
  assert.deepEqual(resultGateOptions(attached, { isError: true }), { result: { isError: true } });

  assert.equal(editedArgs({ action: 'continue' }), undefined);
  assert.equal(editedArgs({ action: 'retry' }), undefined);
  assert.deepEqual(editedArgs({ action: 'continue', input: { a: 1 } }), { args: { a: 1 } });
  assert.deepEqual(editedArgs({ action: 'retry', input: null }), { args: null });
  assert.equal(editedArgs({ action: 'inject', output: { a: 1 }, input: { a: 2 } }), undefined);
  assert.equal(editedArgs({ action: 'abort' }), undefined);
  assert.equal(editedArgs(null), undefined);
});

test('on a real serve: session.gate with toolGateOptions holds an edit to the schema, and resultGateOptions feeds the smart hold', async () => {
  const srv = await startServer(['--pause-on-error', 'off']);
  const dbg = await Debugger.open(srv);
  try {
    dbg.breakpoint({ name: 'search', point: 'before' });
    await sleep(150);
    const session = createSession({ url: srv.url, env: {}, appName: 'gate-helpers' });
    assert.equal(await session.ready({ timeoutMs: 3000 }), true);
    const node = { nodeId: 'tool:search', kind: 'tool', name: 'search' };
    let runId;
    let args = { query: 'ams', limit: 3 };
    const done = session.run('helpers-agent', async (ctx) => {
      runId = ctx.runId;
      dbg.watch(ctx.runId);
      const check = toolSchemaCheck(z.object({ query: z.string().min(2), limit: z.number().int().max(50) }));
      const decision = await session.gate('before', node, toolGateOptions(session, () => ({ args, check })));
      const edited = editedArgs(decision);
      if (edited) args = edited.args;
      const result = { isError: true, content: [{ type: 'text', text: `no results for ${args.query}` }] };
      const after = await session.gate('after', node, resultGateOptions(session, result));
      return { args, after: after.action };
    });
    const paused = await dbg.next('exec.paused');
    assert.equal(paused.payload.editable, true);
    dbg.resume(runId, paused.payload.pauseId, 'continue', { input: { limit: 500 } });
    const refused = await dbg.nextWithin('exec.refused', 3000);
    assert.ok(refused, 'the edit was refused');
    assert.equal(refused.payload.code, 'schema');
    assert.match(refused.payload.message, /\/limit/);
    dbg.resume(runId, paused.payload.pauseId, 'continue', { input: { limit: 5 } });
    // The error-shaped result holds the `after` gate with no breakpoint set there.
    const smart = await dbg.next('exec.paused');
    assert.equal(smart.payload.point, 'after');
    assert.equal(smart.payload.reason, 'breakpoint');
    assert.equal(smart.payload.smart.rule, 'error-result');
    dbg.resume(runId, smart.payload.pauseId, 'continue');
    assert.deepEqual(await done, { args: { query: 'ams', limit: 5 }, after: 'continue' });
    dbg.clear({ name: 'search', point: 'before' });
    await session.dispose();
  } finally {
    dbg.close();
    srv.stop();
  }
});
