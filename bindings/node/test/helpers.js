'use strict';
// A real `graphmind serve` and a viewer on /ws/ui, for the session tests.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const WebSocket = require('ws');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = process.env.GRAPHMIND_BIN || path.join(ROOT, 'target', 'release', 'graphmind');

async function startServer(args = [], env = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gm-node-'));
  // The server's control tokens live in GRAPHMIND_HOME/run: isolate them per server.
  const home = path.join(dir, 'gmhome');
  const childEnv = { ...process.env, GRAPHMIND_HOME: home, GRAPHMIND_TELEMETRY: '0', ...env };
  delete childEnv.GRAPHMIND_PAUSE_ON_ERROR;
  const child = spawn(BIN, ['--port', '0', '--json', '--no-open', '--db', path.join(dir, 'g.db'), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: childEnv,
  });
  const line = await new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout });
    rl.once('line', (l) => { rl.close(); resolve(l); });
    child.once('exit', (code) => reject(new Error(`graphmind exited ${code}`)));
  });
  const { port } = JSON.parse(line);
  // The viewer credential the server minted: its run file links to #token=...
  const opener = path.join(home, 'run', `open-${port}.html`);
  for (let i = 0; i < 100 && !fs.existsSync(opener); i += 1) await sleep(20);
  const viewerToken = /#token=([A-Za-z0-9_]+)/.exec(fs.readFileSync(opener, 'utf8'))[1];
  return {
    port,
    /** The server's process id (the delivery tests stop and continue it). */
    pid: child.pid,
    /** The server's SQLite file. */
    dbPath: path.join(dir, 'g.db'),
    viewerToken,
    url: `ws://127.0.0.1:${port}/ingest`,
    async get(p) {
      const res = await fetch(`http://127.0.0.1:${port}${p}`);
      return { status: res.status, body: res.status === 200 ? await res.json() : null };
    },
    /** The stored events of a run, once there are at least `count`. */
    async events(runId, count) {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const { status, body } = await this.get(`/api/runs/${runId}/events?limit=1000`);
        const events = status === 200 ? body.events : [];
        if (events.length >= count || Date.now() > deadline) return events;
        await sleep(30);
      }
    },
    async run(runId, pred) {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const { body } = await this.get('/api/runs');
        const run = body && body.runs.find((r) => r.id === runId);
        if (run && pred(run)) return run;
        if (Date.now() > deadline) throw new Error(`run ${runId}: ${JSON.stringify(run)}`);
        await sleep(20);
      }
    },
    stop() {
      child.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function frame(run, type, payload) {
  return { gm: 1, seq: 0, ts: Date.now(), runId: run, type, payload };
}

/** A viewer: breakpoints, modes, watching a run, resuming its pauses. */
class Debugger {
  static async open(srv) {
    const ws = new WebSocket(`ws://127.0.0.1:${srv.port}/ws/ui`, ['graphmind.v1', `gm.auth.${srv.viewerToken}`]);
    const d = new Debugger(ws);
    await d.#first('welcome');
    return d;
  }

  #queue = [];
  #wake = null;

  constructor(ws) {
    this.ws = ws;
    ws.on('message', (data) => {
      this.#queue.push(JSON.parse(String(data)));
      if (this.#wake) this.#wake();
    });
  }

  /** The next envelope of `type`, or null when none came within `ms`. */
  async nextWithin(type, ms) {
    try {
      return (await this.#first((x) => x.type === 'event' && x.envelope && x.envelope.type === type, ms)).envelope;
    } catch {
      return null;
    }
  }

  async #first(pred, timeoutMs = 10_000) {
    const match = typeof pred === 'string' ? (m) => m.type === pred : pred;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.#queue.findIndex(match);
      if (i >= 0) return this.#queue.splice(i, 1)[0];
      if (Date.now() > deadline) throw new Error('viewer: nothing matched');
      await new Promise((r) => { this.#wake = r; setTimeout(r, 50); });
    }
  }

  control(run, type, payload) {
    this.ws.send(JSON.stringify({ type: 'control', envelope: frame(run, type, payload) }));
  }

  breakpoint(matcher) { this.control('*', 'breakpoint.set', { matcher }); }
  clear(matcher) { this.control('*', 'breakpoint.clear', { matcher }); }
  mode(mode) { this.control('*', 'mode.set', { mode }); }
  watch(runId) { this.ws.send(JSON.stringify({ type: 'subscribe', runId })); }

  /** The next envelope of `type` on a watched run. */
  async next(type) {
    const m = await this.#first((x) => x.type === 'event' && x.envelope && x.envelope.type === type);
    return m.envelope;
  }

  resume(run, pauseId, action, extra = {}) {
    this.control(run, 'exec.resume', { pauseId, action, ...extra });
  }

  close() { this.ws.close(); }
}

/**
 * tests/fake_provider/server.py in a child process (127.0.0.1, a free port), scripted over
 * HTTP: `script(...answers)`, `requests()`.
 */
async function startFakeProvider() {
  // It serves until its stdin closes.
  const child = spawn('python3', [path.join(ROOT, 'tests', 'fake_provider', 'server.py')], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout });
    rl.once('line', (l) => { rl.close(); resolve(l); });
    child.once('exit', (code) => reject(new Error(`fake provider exited ${code}`)));
  });
  const { port } = JSON.parse(line);
  const root = `http://127.0.0.1:${port}`;
  return {
    baseURL: `${root}/v1`,
    async script(...answers) {
      await fetch(`${root}/__script`, { method: 'POST', body: JSON.stringify(answers), headers: { 'content-type': 'application/json' } });
    },
    async requests() {
      return (await fetch(`${root}/__requests`)).json();
    },
    async reset() {
      await fetch(`${root}/__reset`, { method: 'POST', body: '{}' });
    },
    stop() { child.stdin.end(); child.kill(); },
  };
}

/**
 * Registers the test file's hooks for one `graphmind serve` (started with `args`) and one
 * fake provider, reset before each test: returns `{srv, fake}`, filled in by `before`.
 */
function serverAndProvider(test, args = ['--pause-on-error', 'off']) {
  const env = { srv: null, fake: null };
  test.before(async () => {
    env.srv = await startServer(args);
    env.fake = await startFakeProvider();
  });
  test.after(() => { env.fake.stop(); env.srv.stop(); });
  test.beforeEach(() => env.fake.reset());
  return env;
}

/**
 * Registers the test file's hooks for one `graphmind serve` (started with `args`) and one
 * debugger attached to its viewer socket: returns `{srv, dbg}`, filled in by `before`.
 */
function serverAndDebugger(test, args = ['--pause-on-error', 'off']) {
  const env = { srv: null, dbg: null };
  test.before(async () => {
    env.srv = await startServer(args);
    env.dbg = await Debugger.open(env.srv);
  });
  test.after(() => { env.dbg.close(); env.srv.stop(); });
  return env;
}

/**
 * Connects the MCP `client` over stdio to `node script`, which reaches `srv` through
 * GRAPHMIND_URL (its stderr piped): returns the list the client's errors are collected in
 * (a stdout line that is not JSON-RPC is one).
 */
async function connectStdio(client, script, srv) {
  const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [script],
    env: { ...process.env, GRAPHMIND_URL: srv.url },
    stderr: 'pipe',
  });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  return errors;
}

/**
 * Serves the MCP `server` over Streamable HTTP on 127.0.0.1 (a free port) and connects
 * `client` to it: returns the function that closes the listener.
 */
async function connectHttp(server, client) {
  const http = require('node:http');
  const { randomUUID } = require('node:crypto');
  const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
  const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
  await server.connect(transport);
  const listener = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => transport.handleRequest(req, res, body ? JSON.parse(body) : undefined));
  });
  await new Promise((r) => listener.listen(0, '127.0.0.1', r));
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${listener.address().port}/mcp`)));
  return () => new Promise((r) => listener.close(r));
}

/** How long the server takes to apply a viewer's breakpoint to the attached apps. */
const BREAKPOINT_SETTLE_MS = 150;

/** A debugger on `srv`'s viewer socket with one breakpoint (`matcher`) set and applied. */
async function armedDebugger(srv, matcher) {
  const dbg = await Debugger.open(srv);
  dbg.breakpoint(matcher);
  await sleep(BREAKPOINT_SETTLE_MS);
  return dbg;
}

module.exports = { startServer, startFakeProvider, serverAndProvider, serverAndDebugger, connectStdio, connectHttp, armedDebugger, Debugger, sleep, ROOT, BIN };
