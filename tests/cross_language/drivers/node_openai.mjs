// Cross-language driver: the exchange through the npm `openai` client wrapped by the Node
// SDK's `/openai` facade (contract: tests/cross_language/README.md).
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

// The driver runs from the repository root; the SDK and its dev dependency `openai` are
// resolved from bindings/node, where `npm ci` installed them.
const require = createRequire(path.resolve('bindings', 'node', 'package.json'));
const OpenAI = require('openai');
const { graphmind } = require('./openai.js');

const exchange = JSON.parse(readFileSync(process.env.GM_XL_EXCHANGE, 'utf8'));
// The replay phase (README): the recording to answer the run from.
const replay = process.env.GM_XL_REPLAY_FILE ? { file: process.env.GM_XL_REPLAY_FILE } : undefined;
const gm = graphmind({ app: process.env.GM_XL_APP, url: process.env.GRAPHMIND_URL, env: {}, replay });
if (!(await gm.ready({ timeoutMs: 10_000 }))) throw new Error('not attached');
const client = gm.wrapClient(new OpenAI({ apiKey: 'sk-xl', baseURL: process.env.GM_XL_BASE_URL, maxRetries: 0 }));
const tools = gm.wrapTools({ get_weather: async ({ city }) => ({ city, forecast: 'sunny' }) });

const results = [];
let runId;
await gm.run(exchange.run, async (ctx) => {
  runId = ctx.runId;
  for (const call of exchange.calls) {
    const { request } = call;
    if (request.stream) {
      let text = '';
      for await (const chunk of await client.chat.completions.create(request)) {
        if (chunk.choices.length && chunk.choices[0].delta.content) text += chunk.choices[0].delta.content;
      }
      results.push(text);
      continue;
    }
    const answer = await client.chat.completions.create(request);
    const message = answer.choices[0].message;
    results.push(message.content ?? '');
    if (call.tool) {
      const first = message.tool_calls[0];
      await tools[call.tool.name](JSON.parse(first.function.arguments));
    }
  }
});
await gm.dispose();
console.log(JSON.stringify({ runId, results }));
