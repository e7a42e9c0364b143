'use strict';
// A trip agent on the Node SDK for the replay tests: two searches, a quote, a booking and a
// mail, each a wrapped tool (the calls a replay answers). PASSENGER changes the booking's
// arguments (a divergence); GRAPHMIND_REPLAY / GRAPHMIND_REPLAY_FROM come from the
// environment, as `graphmind replay --exec` sets them. Prints `result: <json>`.
const { graphmind } = require(process.env.GM_NODE_SDK);
const gm = graphmind({ app: 'viewer-replay' });
const tools = gm.wrapTools({
  search: { async execute({ to }) { return { flights: [{ to, price: to === 'LIS' ? 120 : 95 }] }; } },
  quote: { async execute({ flight }) { return { total: flight.price + 10 }; } },
  book: { async execute({ passenger, total }) { return { ref: `GM-${passenger}-${total}` }; } },
  mail: { async execute({ ref }) { return { sent: ref }; } },
});
(async () => {
  if (!(await gm.ready({ timeoutMs: 5000 }))) throw new Error('no server');
  const result = await gm.run('trip', async () => {
    const a = await tools.search.execute({ to: 'LIS' });
    const b = await tools.search.execute({ to: 'OPO' });
    const flight = [...a.flights, ...b.flights].reduce((x, y) => (x.price <= y.price ? x : y));
    const { total } = await tools.quote.execute({ flight });
    const { ref } = await tools.book.execute({ passenger: process.env.PASSENGER ?? 'Ada', total });
    return tools.mail.execute({ ref });
  });
  console.log(`result: ${JSON.stringify(result)}`);
  await gm.dispose();
})().catch((e) => {
  process.stderr.write(String((e && e.stack) || e));
  process.exit(1);
});
