const { createSession } = require('@graphmind/node');
const { Anthropic } = require('@anthropic-ai/sdk');

const session = createSession({ appName: 'my-agent' });
const client = new Anthropic();

// one model call through GraphMind: recorded, and held / retried / injected like a tool
const ask = (request) => session.callModel('anthropic', request, () => client.messages.create(request));
const lookup = (input) => session.wrapCall('tool', 'lookup', async ({ query }) => ({ query, answer: 42 }))(input);

session
  .run('my-first-run', async () => {
    // your usual tool-use loop: await ask({ model, max_tokens, messages }), then call your tools
    return lookup({ query: 'hello' });
  })
  .finally(() => session.dispose());
