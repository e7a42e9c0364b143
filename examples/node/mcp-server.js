'use strict';
// A small MCP server over stdio, instrumented: every tools/call is a gated node.
//   target/release/graphmind &            (the debugger; the viewer at http://127.0.0.1:4747)
//   (cd bindings/node && npm install)
//   point an MCP client at: node examples/node/mcp-server.js
// Set a breakpoint on tool "weather" in the viewer, call it from the client, then inject
// a different answer ("snowing") and the client receives it. Nothing is written to
// stdout but JSON-RPC: GraphMind's warnings go to standard error.
const path = require('node:path');

/** A module of the installed package, or of bindings/node in a checkout. */
function load(name) {
  const installed = `@graphmind/node/${name}`;
  try {
    return require(installed);
  } catch (error) {
    if (error.code !== 'MODULE_NOT_FOUND' || !String(error.message).includes('@graphmind/node')) throw error;
    return require(path.resolve(__dirname, '..', '..', 'bindings', 'node', `${name}.js`));
  }
}
/** The MCP SDK: the app's own, or the one bindings/node installs for its tests. */
function sdk(sub) {
  try {
    return require(`@modelcontextprotocol/sdk/${sub}`);
  } catch {
    return require(path.resolve(__dirname, '..', '..', 'bindings', 'node', 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'cjs', sub));
  }
}

const { graphmind } = load('mcp');
const { McpServer } = sdk('server/mcp.js');
const { StdioServerTransport } = sdk('server/stdio.js');
const { z } = (() => {
  try {
    return require('zod');
  } catch {
    return require(path.resolve(__dirname, '..', '..', 'bindings', 'node', 'node_modules', 'zod'));
  }
})();

const FORECASTS = { Lisbon: 'sunny, 21 C', Oslo: 'cloudy, 4 C' };

// waitForAttach: connect() waits (at most 2 s) for the debugger, so breakpoints set in the
// viewer hold the first request too.
const gm = graphmind({ app: 'mcp-weather', waitForAttach: true });
const server = gm.wrapServer(new McpServer({ name: 'weather', version: '1.0.0' }));

server.registerTool('weather', {
  description: 'The forecast for a city',
  inputSchema: { city: z.string() },
}, async ({ city }) => ({ content: [{ type: 'text', text: `${city}: ${FORECASTS[city] ?? 'unknown'}` }] }));

server.registerTool('lookup', {
  description: 'The cities with a forecast',
}, async () => ({ content: [{ type: 'text', text: Object.keys(FORECASTS).join(', ') }], structuredContent: { cities: Object.keys(FORECASTS) } }));

server.connect(new StdioServerTransport()).catch((error) => {
  process.stderr.write(`mcp-weather: ${error.message}\n`);
  process.exitCode = 1;
});
