'use strict';
// A small instrumented agent: two tools and a run, recorded by `graphmind serve`.
//   cargo build -p graphmind-cli --release && target/release/graphmind &
//   (cd bindings/node && npm install) && node examples/node/agent.js
// or, installed: npm install @graphmind/node && npx graphmind serve & node agent.js
// Set a breakpoint on tool "search" in the viewer to hold the call; inject, retry or abort it.
const path = require('node:path');
// The installed package (`npm install @graphmind/node`), or bindings/node in a checkout.
const { graphmind } = (() => {
  try {
    return require('@graphmind/node');
  } catch (error) {
    if (error.code !== 'MODULE_NOT_FOUND' || !String(error.message).includes('@graphmind/node')) throw error;
    return require(path.resolve(__dirname, '..', '..', 'bindings', 'node'));
  }
})();

const gm = graphmind({ app: 'node-example-agent' });

const tools = gm.wrapTools({
  search: {
    description: 'Search flights',
    async execute({ from, to }) {
      return { flights: [{ from, to, price: 120 }, { from, to, price: 95 }] };
    },
  },
  book: {
    description: 'Book the cheapest flight',
    async execute({ flight }) {
      return { booked: true, confirmation: `GM-${flight.price}` };
    },
  },
});

async function main() {
  const attached = await gm.ready();
  console.log(attached ? 'attached to the debugger' : 'no debugger: running detached');
  const result = await gm.run('book-trip', async (ctx) => {
    const { flights } = await tools.search.execute({ from: 'AMS', to: 'LIS' }, { signal: ctx.signal });
    const cheapest = flights.reduce((a, b) => (a.price <= b.price ? a : b));
    return tools.book.execute({ flight: cheapest }, { signal: ctx.signal });
  });
  console.log('result:', JSON.stringify(result));
  await gm.dispose();
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
