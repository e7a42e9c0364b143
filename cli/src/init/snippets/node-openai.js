const { createSession } = require('@graphmind/node');
const { OpenAI } = require('openai');

const session = createSession({ appName: 'my-agent' });
const client = new OpenAI();

// one model call through GraphMind: recorded, and held / retried / injected like a tool
const chat = (request) => session.callModel('openai-chat', request, () => client.chat.completions.create(request));
const lookup = (input) => session.wrapCall('tool', 'lookup', async ({ query }) => ({ query, answer: 42 }))(input);

session
  .run('my-first-run', async () => {
    // your usual loop: await chat({ model: 'gpt-4o-mini', messages }), then call your tools
    return lookup({ query: 'hello' });
  })
  .finally(() => session.dispose());
