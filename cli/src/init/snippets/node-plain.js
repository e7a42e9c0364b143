const { createSession } = require('@graphmind/node');

const session = createSession({ appName: 'my-agent' });

// your tool; a gated call: hold it, retry it or inject its result in the viewer
const lookup = (input) => session.wrapCall('tool', 'lookup', async ({ query }) => ({ query, answer: 42 }))(input);

session
  .run('my-first-run', () => lookup({ query: 'hello' }))
  .finally(() => session.dispose());
