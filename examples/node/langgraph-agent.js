'use strict';
// A LangGraph.js agent, instrumented: graph nodes, the chat model and the tool on the canvas.
//   target/release/graphmind &            (the debugger; the viewer at http://127.0.0.1:4747)
//   (cd bindings/node && npm install) && node examples/node/langgraph-agent.js Lisbon
// The chat model is OpenAI's (`@langchain/openai`) when OPENAI_API_KEY is set (OPENAI_BASE_URL
// and OPENAI_MODEL are honoured), else a scripted model from @langchain/core, so the example
// runs offline. In the viewer: a breakpoint on tool "weather" holds the call before its body
// runs; inject "snowing" and the respond node gets it. A breakpoint on chain "plan" holds the
// node; `abort` there ends the run and `invoke` throws an AbortError.
const path = require('node:path');

/** A module of the app's node_modules, or of bindings/node's in a checkout. */
function dep(name) {
  try {
    return require(name);
  } catch (error) {
    if (error.code !== 'MODULE_NOT_FOUND') throw error;
    return require(require.resolve(name, { paths: [path.resolve(__dirname, '..', '..', 'bindings', 'node')] }));
  }
}
/** The installed `@graphmind/node/langgraph`, or bindings/node's in a checkout. */
function graphmindLangGraph() {
  try {
    return require('@graphmind/node/langgraph');
  } catch (error) {
    if (error.code !== 'MODULE_NOT_FOUND' || !String(error.message).includes('@graphmind/node')) throw error;
    return require(path.resolve(__dirname, '..', '..', 'bindings', 'node', 'langgraph.js'));
  }
}

const { StateGraph, Annotation, START, END } = dep('@langchain/langgraph');
const { tool } = dep('@langchain/core/tools');
const { z } = dep('zod');
const { graphmind, isAbortError } = graphmindLangGraph();

const FORECASTS = { Lisbon: 'sunny, 21 C', Oslo: 'cloudy, 4 C' };

/** OpenAI's chat model when a key is set, else a scripted one (no network). */
function chatModel() {
  if (process.env.OPENAI_API_KEY) {
    const { ChatOpenAI } = dep('@langchain/openai');
    return new ChatOpenAI({ model: process.env.OPENAI_MODEL || 'gpt-4o-mini', maxRetries: 1 });
  }
  const { FakeListChatModel } = dep('@langchain/core/utils/testing');
  return new FakeListChatModel({ responses: ['Pack for the weather above; enjoy the trip.'] });
}

// waitForAttach: the first invocation waits (at most 2 s) for the debugger, so breakpoints
// set in the viewer hold it too.
const gm = graphmind({ app: 'langgraph-weather', waitForAttach: true });

// A wrapped tool: every debugger action works on it (inject, retry, edited arguments).
const weather = gm.wrapStructuredTool(tool(async ({ city }) => FORECASTS[city] ?? 'unknown', {
  name: 'weather',
  description: 'The forecast for a city',
  schema: z.object({ city: z.string() }),
}));
const model = chatModel();

const State = Annotation.Root({
  city: Annotation(),
  forecast: Annotation(),
  advice: Annotation(),
});

const graph = new StateGraph(State)
  .addNode('plan', async (s) => ({ city: String(s.city || '').trim() }))
  .addNode('lookup', async (s, config) => ({ forecast: await weather.invoke({ city: s.city }, config) }))
  .addNode('respond', async (s, config) => {
    const reply = await model.invoke([
      { role: 'system', content: 'You are a terse travel assistant.' },
      { role: 'user', content: `The forecast for ${s.city || 'somewhere'} is ${s.forecast ?? 'unknown'}. One line of advice.` },
    ], config);
    return { advice: String(reply.content) };
  })
  .addEdge(START, 'plan')
  .addConditionalEdges('plan', (s) => (s.city ? 'lookup' : 'respond'))
  .addEdge('lookup', 'respond')
  .addEdge('respond', END)
  .compile();
// The graph's nodes and edges drawn before the first one runs.
gm.hintGraph(graph);

async function main() {
  const city = process.argv[2] || 'Lisbon';
  try {
    const out = await graph.invoke({ city }, gm.config());
    process.stdout.write(`${out.city}: ${out.forecast} - ${out.advice}\n`);
  } catch (error) {
    if (!isAbortError(error)) throw error;
    process.stdout.write('aborted from the debugger\n');
  } finally {
    await gm.dispose();
  }
}

main().catch((error) => {
  process.stderr.write(`langgraph-weather: ${error.message}\n`);
  process.exitCode = 1;
});
