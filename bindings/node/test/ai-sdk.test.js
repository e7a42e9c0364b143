'use strict';
// The graphmind() facade with the real `ai` package: a mock provider (ai/test's
// MockLanguageModelV3) calls a wrapped tool through generateText; both are recorded as
// gated steps and the debugger can inject the tool's result. Also runs examples/node/agent.js.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { generateText, tool, jsonSchema, stepCountIs } = require('ai');
const { MockLanguageModelV3 } = require('ai/test');
const { graphmind } = require('..');
const { startServer, Debugger, sleep, ROOT } = require('./helpers');

let srv;
test.before(async () => { srv = await startServer(['--pause-on-error', 'off']); });
test.after(() => srv.stop());

function mockModel() {
  let step = 0;
  const usage = { inputTokens: { total: 10, noCache: 10 }, outputTokens: { total: 5, text: 5 } };
  return new MockLanguageModelV3({
    modelId: 'mock-model',
    doGenerate: async () => {
      step += 1;
      if (step === 1) {
        return {
          content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'weather', input: JSON.stringify({ city: 'Lisbon' }) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_use' },
          usage,
          warnings: [],
        };
      }
      return { content: [{ type: 'text', text: 'It is sunny.' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
    },
  });
}

test('generateText with a wrapped model and tools: recorded, and an injected tool result reaches the model', async () => {
  const dbg = await Debugger.open(srv);
  dbg.breakpoint({ name: 'weather', point: 'after' });
  await sleep(150);
  const gm = graphmind({ app: 'ai-test', url: srv.url, env: {} });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  const tools = gm.wrapTools({
    weather: tool({
      description: 'Weather for a city',
      inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
      execute: async ({ city }) => ({ city, sky: 'rain' }),
    }),
  });
  const model = gm.wrapModel(mockModel());
  let runId;
  const done = gm.run('weather-agent', async (ctx) => {
    runId = ctx.runId;
    dbg.watch(ctx.runId);
    return generateText({ model, tools, prompt: 'Weather in Lisbon?', stopWhen: stepCountIs(3), abortSignal: ctx.signal });
  });
  const paused = await dbg.next('exec.paused');
  assert.equal(paused.payload.nodeId, 'tool:weather');
  dbg.resume(runId, paused.payload.pauseId, 'inject', { output: { city: 'Lisbon', sky: 'sunny' } });
  const result = await done;
  assert.equal(result.text, 'It is sunny.');
  assert.deepEqual(result.steps[0].toolResults[0].output, { city: 'Lisbon', sky: 'sunny' });
  const events = await srv.events(runId, 10);
  const started = events.filter((e) => e.type === 'node.started').map((e) => e.payload.nodeId);
  assert.deepEqual(started, ['agent:weather-agent', 'llm:mock-model', 'tool:weather', 'llm:mock-model']);
  const llmDone = events.find((e) => e.type === 'node.finished' && e.payload.nodeId === 'llm:mock-model');
  assert.deepEqual(llmDone.payload.output.toolCalls, [{ id: 'c1', name: 'weather', input: { city: 'Lisbon' } }]);
  assert.equal(llmDone.payload.output.finishReason, 'tool-calls');
  const toolDone = events.find((e) => e.type === 'node.finished' && e.payload.nodeId === 'tool:weather');
  assert.equal(toolDone.payload.injected, true);
  await srv.run(runId, (r) => r.status === 'ok');
  dbg.close();
  await gm.dispose();
});

test('examples/node/agent.js runs against the server and exits', () => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'examples', 'node', 'agent.js')], {
    encoding: 'utf8',
    timeout: 20_000,
    env: { ...process.env, GRAPHMIND_URL: srv.url, NODE_ENV: 'development' },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /attached to the debugger/);
  assert.match(r.stdout, /"booked":true/);
});
