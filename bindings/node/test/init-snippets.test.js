'use strict';
// `graphmind init` prints a Node snippet per framework (cli/tests/init/node-*); written with
// `--write` into a copy of each fixture and run with `@graphmind/node` (this package) and
// the real `ai`, `openai` and `@anthropic-ai/sdk` packages resolvable, each records a run on
// a real server. The snippets make no provider call, so no provider is needed.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');
const { startServer, sleep, ROOT, BIN } = require('./helpers');

const FIXTURES = path.join(ROOT, 'cli', 'tests', 'init');

/** A folder for NODE_PATH holding `@graphmind/node` -> this package. */
function modulesDir(tmp) {
  const dir = path.join(tmp, 'modules');
  fs.mkdirSync(path.join(dir, '@graphmind'), { recursive: true });
  fs.symlinkSync(path.resolve(__dirname, '..'), path.join(dir, '@graphmind', 'node'));
  return dir;
}

for (const name of ['node-plain', 'node-ai', 'node-openai', 'node-anthropic']) {
  test(`the ${name} snippet records a run`, async () => {
    const srv = await startServer();
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gm-init-node-'));
    try {
      const project = path.join(tmp, name);
      fs.cpSync(path.join(FIXTURES, name), project, { recursive: true });
      fs.rmSync(path.join(project, 'expected.txt'));
      execFileSync(BIN, ['init', '--write'], { cwd: project });
      const snippet = path.join(project, 'graphmind-snippet.js');
      assert.match(fs.readFileSync(snippet, 'utf8'), /^\/\/ graphmind init: begin/);
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GRAPHMIND_')));
      const nodePath = [modulesDir(tmp), path.resolve(__dirname, '..', 'node_modules')].join(path.delimiter);
      const ran = spawnSync(process.execPath, [snippet], {
        cwd: project,
        env: { ...env, GRAPHMIND_URL: srv.url, NODE_PATH: nodePath, OPENAI_API_KEY: 'sk-test', ANTHROPIC_API_KEY: 'sk-ant-test' },
        encoding: 'utf8',
        timeout: 60_000,
      });
      assert.equal(ran.status, 0, ran.stderr);
      let run;
      for (let i = 0; i < 200 && !run; i += 1) {
        const { body } = await srv.get('/api/runs');
        run = body.runs.find((r) => r.status === 'ok');
        if (!run) await sleep(50);
      }
      assert.ok(run, 'a finished run');
      const events = await srv.events(run.id, 3);
      assert.ok(events.some((e) => e.type === 'node.finished' && e.payload.nodeId === 'tool:lookup'), JSON.stringify(events.map((e) => e.type)));
    } finally {
      srv.stop();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
}
