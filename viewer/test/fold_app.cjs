'use strict';
// A real app on the Node SDK with sub-agents and chains, for the folding test: a planner
// agent over a researcher sub-agent (a lookup chain of two tools, and a retriever) and a
// finalize chain (one tool), each an observed node around wrapped calls.
const gm = require(process.env.GM_NODE_SDK);
const s = gm.createSession({ appName: 'fold-sdk', url: process.env.GRAPHMIND_URL, env: {}, loopGuard: false });
const search = s.wrapCall('tool', 'search', (q) => ({ hits: [`${q} 1`, `${q} 2`] }));
const fetchPage = s.wrapCall('tool', 'fetch', (url) => ({ url, body: 'text' }));
const docs = s.wrapCall('retriever', 'docs', (q) => [{ id: 'd1', q }]);
const book = s.wrapCall('tool', 'book', (hit) => ({ ok: true, hit }));
(async () => {
  if (!(await s.ready({ timeoutMs: 5000 }))) throw new Error('no server');
  await s.run('fold-sdk', async (ctx) => {
    process.stdout.write(`run ${ctx.runId}\n`);
    await s.observe('agent', 'planner', async () => {
      const found = await s.observe('agent', 'researcher', async () => {
        const hits = await s.observe('chain', 'lookup', async () => {
          const r = await search('flights');
          await fetchPage(r.hits[0]);
          return r.hits;
        });
        await docs('fares');
        return hits;
      });
      await s.observe('chain', 'finalize', () => book(found[0]));
    });
  });
  s.flushSync(10000);
  await s.dispose();
  process.stdout.write('done\n');
})().catch((e) => {
  process.stderr.write(String((e && e.stack) || e));
  process.exit(1);
});
