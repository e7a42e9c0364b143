const { graphmind } = require('@graphmind/node');
const { generateText, tool } = require('ai');

const gm = graphmind({ app: 'my-agent' });
const tools = gm.wrapTools({
  lookup: tool({ description: 'Look something up', execute: async ({ query }) => ({ query, answer: 42 }) }),
});

gm.run('my-first-run', () =>
  // model: gm.wrapModel(yourModel) records every step, prompt and streamed token
  tools.lookup.execute({ query: 'hello' }, { toolCallId: 'call_1', messages: [] }),
).finally(() => gm.dispose());
// in your code: generateText({ model: gm.wrapModel(model), tools, prompt })
