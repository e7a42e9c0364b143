'use strict';
// A real app on the Node SDK that loses events: it runs 60 tool calls (120 events) with a
// 20-event replay buffer while no server listens, says "emitted", then waits for the server
// the test starts, runs 3 more calls live and finishes. The SDK sends one gap marker.
const gm = require(process.env.GM_NODE_SDK);
const s = gm.createSession({ appName: 'gappy', url: process.env.GRAPHMIND_URL, env: {}, bufferSize: 20, retryIntervalMs: 200, loopGuard: false });
const work = s.wrapCall('tool', 'work', (v) => v.n * 2);
(async () => {
  await s.run('gappy', async (ctx) => {
    process.stdout.write(`run ${ctx.runId}\n`);
    for (let n = 0; n < 60; n++) await work({ n });
    process.stdout.write('emitted\n');
    const ok = await s.ready({ timeoutMs: 20000 });
    if (!ok) throw new Error('no server');
    for (let n = 60; n < 63; n++) await work({ n });
  });
  s.flushSync(10000);
  await s.dispose();
  process.stdout.write('done\n');
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e));
  process.exit(1);
});
