'use strict';
// Credential-leak audit through the Node skin (the core-level audit is cli/tests/leaks.rs,
// Python's bindings/python/tests/test_leaks.py, Ruby's test_leaks.rb): keys planted where a
// Node app carries them (an env-looking string and a bearer header as a wrapped call's
// arguments, a token in a thrown error's message and stack), then searched for in the
// SQLite file, the HTTP API and the `record` exports. It asserts the table of
// docs/security.md ("Where a credential can end up"), so a new leak fails it.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { spawnSync } = require('node:child_process');
const gm = require('..');
const { startServer, BIN } = require('./helpers');

const KEYS = {
  'env-string': 'sk-gmleak-jsenv-2Qd9',
  'bearer-args': 'gmleak-jsbearer-6Ry1',
  exception: 'gmleak-jsexc-3Km5',
};
const RECORDED_BY_DESIGN = ['bearer-args', 'env-string', 'exception'];
const EXPORTED = ['env-string', 'exception'];

const foundIn = (text) => Object.keys(KEYS).filter((k) => text.includes(KEYS[k])).sort();

test('every planted credential is redacted or recorded by design, and nowhere else', async () => {
  const srv = await startServer(['--pause-on-error', 'off']);
  try {
    const session = gm.createSession({ url: srv.url, appName: 'js-leaks', env: {} });
    assert.equal(await session.ready({ timeoutMs: 3000 }), true);
    const deploy = session.wrapCall('tool', 'deploy', async () => {
      throw new Error(`401 from upstream: invalid token ${KEYS.exception}`);
    });
    let runId;
    await assert.rejects(session.run('leaky', async (ctx) => {
      runId = ctx.runId;
      await deploy({ note: `OPENAI_API_KEY=${KEYS['env-string']}`, headers: { Authorization: `Bearer ${KEYS['bearer-args']}` } });
    }));
    await session.dispose();
    await srv.run(runId, (r) => r.status !== 'running');

    const places = {};
    places.sqlite = ['', '-wal'].map((s) => (fs.existsSync(srv.dbPath + s) ? fs.readFileSync(srv.dbPath + s).toString('latin1') : '')).join('');
    let api = '';
    for (const p of ['/api/runs', `/api/runs/${runId}/events?limit=5000`, '/health']) {
      const res = await fetch(`http://127.0.0.1:${srv.port}${p}`);
      api += await res.text();
    }
    places['http-api'] = api;
    for (const [place, extra] of [['record-ndjson', []], ['record-otlp', ['--format', 'otlp']]]) {
      const out = spawnSync(BIN, ['record', runId, '--db', srv.dbPath, '--out', '-', ...extra], {
        env: { ...process.env, GRAPHMIND_TELEMETRY: '0' }, encoding: 'utf8',
      });
      assert.equal(out.status, 0, `${place}: ${out.stderr}`);
      places[place] = out.stdout;
    }
    const actual = Object.fromEntries(Object.entries(places).map(([p, text]) => [p, foundIn(text)]));
    const expected = Object.fromEntries(Object.keys(places).map((p) => [p, p.startsWith('record-') ? EXPORTED : RECORDED_BY_DESIGN]));
    assert.deepEqual(actual, expected);
  } finally {
    srv.stop();
  }
});
