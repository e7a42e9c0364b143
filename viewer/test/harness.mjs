// Test harness: the real `graphmind serve` on a free port with a temp database, Debian's
// Chromium driven by playwright-core, the reference Python SDK as a real client, and a raw
// WebSocket ingest client.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { mkdtempSync, mkdirSync, existsSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import WebSocket from 'ws';

const here = dirname(fileURLToPath(import.meta.url));
export const viewerDir = resolve(here, '..');
export const outDir = join(viewerDir, 'test-output');
mkdirSync(outDir, { recursive: true });

export const BIN = process.env.GRAPHMIND_BIN ? resolve(viewerDir, process.env.GRAPHMIND_BIN) : resolve(viewerDir, '../target/debug/graphmind');
// The reference Python SDK (graphmind-ai 0.5.1), installed by `make setup` into .venv-ref.
export const PYTHON = process.env.GRAPHMIND_REF_PYTHON ?? [resolve(viewerDir, '../.venv-ref/bin/python')].find((p) => existsSync(p)) ?? 'python3';
// The Node SDK (bindings/node with its built addon): this tree's, else the main checkout's.
export const NODE_SDK = process.env.GM_NODE_SDK ?? [resolve(viewerDir, '../bindings/node')].find((p) => existsSync(join(p, 'graphmind.linux-x64-gnu.node')));
/** How to build the Node SDK the SDK-driven tests need (`make test-viewer` does it). */
export const BUILD_NODE_SDK = 'run `cd bindings/node && npm ci --no-audit --no-fund` (it builds the addon and installs the npm `openai` the tests drive; `make test-viewer` does it first), or set GM_NODE_SDK to a built bindings/node';

/** `require` rooted in the built Node SDK; with `openai`, checks its npm `openai` is there too.
 * Throws, saying how to build what is missing: these tests fail rather than skip. */
export function nodeSdk({ openai = false } = {}) {
  if (!NODE_SDK) throw new Error(`the Node SDK is not built (no bindings/node/graphmind.linux-x64-gnu.node): ${BUILD_NODE_SDK}`);
  const need = createRequire(join(NODE_SDK, 'index.js'));
  if (openai) {
    try {
      need('openai');
    } catch (e) {
      throw new Error(`the npm \`openai\` client is not installed in ${NODE_SDK} (${e.message.split('\n')[0]}): ${BUILD_NODE_SDK}`);
    }
  }
  return need;
}

/** tests/fake_provider/server.py, scripted over HTTP (it serves until its stdin closes). */
export async function startFakeProvider() {
  const child = spawn('python3', [resolve(viewerDir, '../tests/fake_provider/server.py')], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise((res, rej) => {
    const rl = createInterface({ input: child.stdout });
    rl.once('line', (l) => (rl.close(), res(l)));
    child.once('exit', (c) => rej(new Error(`fake provider exited ${c}`)));
  });
  const root = `http://127.0.0.1:${JSON.parse(line).port}`;
  return {
    baseURL: `${root}/v1`,
    root,
    script: (...answers) => fetch(`${root}/__script`, { method: 'POST', body: JSON.stringify(answers), headers: { 'content-type': 'application/json' } }),
    stop: () => (child.stdin.end(), child.kill()),
  };
}

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export function requireTools() {
  for (const [what, path] of [['server binary (cargo build -p graphmind-cli, or set GRAPHMIND_BIN)', BIN], ['chromium (apt-get install chromium)', CHROMIUM], ['built viewer (make viewer)', join(viewerDir, 'dist/index.html')]]) {
    if (!existsSync(path)) throw new Error(`missing ${what}: ${path}`);
  }
}

/** Starts the server; resolves {port, url, viewerUrl, stop, logs}. `viewerUrl` is the link
 * the server's redirect file opens (`/#token=<viewer token>`), or `url` when this server
 * writes none (no control tokens). */
export async function startServer(env = {}, { port = 0, args = [] } = {}) {
  requireTools();
  const dir = mkdtempSync(join(tmpdir(), 'gm-viewer-'));
  const home = join(dir, 'home');
  const proc = spawn(BIN, ['serve', '--port', String(port), '--json', '--db', join(dir, 'test.db'), ...args], {
    env: { ...process.env, GRAPHMIND_HOME: home, GRAPHMIND_TELEMETRY: '0', GRAPHMIND_VIEWER_DIST: join(viewerDir, 'dist'), GRAPHMIND_ABANDON_GRACE_MS: '60000', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let logs = '';
  proc.stderr.on('data', (d) => (logs += d));
  const info = await new Promise((res, rej) => {
    let buf = '';
    const t = setTimeout(() => rej(new Error(`server did not start: ${logs}`)), 15000);
    proc.stdout.on('data', (d) => {
      buf += d;
      const line = buf.split('\n').find((l) => l.startsWith('{'));
      if (line) {
        clearTimeout(t);
        res(JSON.parse(line));
      }
    });
    proc.on('exit', (c) => rej(new Error(`server exited ${c}: ${logs}`)));
  });
  const url = `http://127.0.0.1:${info.port}`;
  let viewerUrl = url + '/';
  const opener = join(home, 'run', `open-${info.port}.html`);
  for (let i = 0; i < 50 && !existsSync(opener); i++) await new Promise((r) => setTimeout(r, 20));
  if (existsSync(opener)) {
    const m = /location\.replace\("([^"]+)"\)/.exec(readFileSync(opener, 'utf8'));
    if (m) viewerUrl = m[1];
  }
  return {
    port: info.port,
    db: join(dir, 'test.db'),
    home,
    url,
    viewerUrl,
    token: /#token=([^&]+)/.exec(viewerUrl)?.[1],
    logs: () => logs,
    async stop() {
      proc.kill('SIGTERM');
      await new Promise((r) => (proc.exitCode !== null ? r() : proc.on('exit', r)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function launch() {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
  return browser;
}

const contexts = new Set();
/** Closes every page opened by newPage (so no page keeps reconnecting to a stopped server). */
export async function closePages() {
  for (const c of contexts) await c.close().catch(() => {});
  contexts.clear();
}

export async function newPage(browser, opts = {}) {
  const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 }, colorScheme: opts.colorScheme ?? 'dark' });
  contexts.add(ctx);
  const page = await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.errors = errors;
  return page;
}

export async function shot(page, name) {
  const path = join(outDir, `${name}.png`);
  await page.screenshot({ path });
  return path;
}

/** Runs a Python script with the reference SDK against the server; returns the child. */
export function runPython(script, port, env = {}) {
  const proc = spawn(PYTHON, [join(here, script)], {
    env: { ...process.env, GRAPHMIND_URL: `ws://127.0.0.1:${port}/ingest`, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.out = '';
  proc.err = '';
  proc.stdout.on('data', (d) => (proc.out += d));
  proc.stderr.on('data', (d) => (proc.err += d));
  proc.done = new Promise((r) => proc.on('exit', (code) => r(code)));
  return proc;
}

/** Writes envelopes straight to /ingest as an app would (hello first). */
export async function ingest(port, envelopes, app = 'ingest-test', capabilities = []) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/ingest`);
  await new Promise((res, rej) => {
    ws.on('open', res);
    ws.on('error', rej);
  });
  const acked = new Promise((res) => ws.on('message', (m) => JSON.parse(String(m)).type === 'hello.ack' && res()));
  ws.send(JSON.stringify({ gm: 1, seq: 0, ts: Date.now(), runId: '*', type: 'hello', payload: { versions: { protocol: 1, client: 'test' }, capabilities, app } }));
  await acked;
  for (const e of envelopes) ws.send(JSON.stringify(e));
  return ws;
}

export async function waitFor(fn, timeout = 15000, what = 'condition') {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

/** Geometry of the graph from the DOM: card boxes and edge polylines, in world coordinates. */
export async function geometry(page) {
  return page.evaluate(() => {
    const cards = [...document.querySelectorAll('#cards .card')].map((c) => {
      const m = /translate\(([-\d.]+)px, ([-\d.]+)px\)/.exec(c.style.transform);
      return { id: c.dataset.id, x: Number(m[1]), y: Number(m[2]), w: c.offsetWidth, h: c.offsetHeight };
    });
    const edges = [...document.querySelectorAll('#edges path')].map((p) => {
      const len = p.getTotalLength();
      const pts = [];
      for (let s = 0; s <= len; s += 4) {
        const q = p.getPointAtLength(s);
        pts.push([q.x, q.y]);
      }
      return { from: p.dataset.from, to: p.dataset.to, pts };
    });
    return { cards, edges };
  });
}

export function overlaps(cards) {
  const bad = [];
  for (let i = 0; i < cards.length; i++)
    for (let j = i + 1; j < cards.length; j++) {
      const a = cards[i];
      const b = cards[j];
      if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h) bad.push([a.id, b.id]);
    }
  return bad;
}

/** Edges with a sample point strictly inside a card that is not one of their ends. */
export function edgesThroughCards(geo) {
  const bad = [];
  for (const e of geo.edges)
    for (const c of geo.cards) {
      if (c.id === e.from || c.id === e.to) continue;
      if (e.pts.some(([x, y]) => x > c.x + 1 && x < c.x + c.w - 1 && y > c.y + 1 && y < c.y + c.h - 1)) {
        bad.push([e.from, e.to, c.id]);
        break;
      }
    }
  return bad;
}
