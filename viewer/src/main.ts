// GraphMind viewer: the entry point. Server messages into the store, the redraw of the dirty
// panels, and the start (live server, exported run, fixture or synthetic run). The panels are
// modules of their own: bar, rail, graph (+ camera, filters, folds), inspector, timeline-panel,
// palette, keys; control holds the debugging controls and routing the selection.
import './style.css';
import { captureToken, needsToken, Socket, token, tokenRejected } from './conn';
import { renderTimeline } from './timeline-panel';
import { noteEvent, replayEnded, replayStarted } from './stream';
import { invalidate, type Parts, type RunInfo, S, setRenderer } from './store';
import { activePauses, apply, type Envelope, newRun, type RunModel } from './model';
import { reveal } from './project';
import { stressRun } from './stress';
import { fixtureEvents } from './fixtures';
import { sameMatcher, wire } from './control';
import { renderBar } from './bar';
import { renderRail, summarizeSoon } from './rail';
import { G, renderGraph } from './graph';
import { centerOn, fit, setupStage } from './camera';
import { renderInspector } from './inspector';
import { renderCompare } from './compare-panel';
import { onKey } from './keys';
import { applyTheme, toast } from './actions';
import { model, readHash, selectNode, selectRun } from './routing';

function render(d: Parts): void {
  if (d.bar) renderBar();
  if (d.rail) renderRail();
  if (d.graph) renderGraph(), renderCompare();
  if (d.inspector) renderInspector();
  if (d.timeline) renderTimeline((id) => selectNode(id, true));
}
setRenderer(render);

function onMessage(msg: any): void {
  switch (msg.type) {
    case 'welcome':
      S.control = msg.control && typeof msg.control === 'object' ? msg.control : undefined;
    // falls through
    case 'state':
      // `welcome` and a refusal's `state` carry the whole list; a change carries only what
      // changed (`set` or `cleared`), so a flood of sets never re-sends the list.
      if (Array.isArray(msg.breakpoints)) S.breakpoints = msg.breakpoints;
      else if (msg.type === 'welcome') S.breakpoints = [];
      if (msg.set && typeof msg.set === 'object' && !S.breakpoints.some((b) => sameMatcher(b, msg.set))) {
        S.breakpoints = [...S.breakpoints, msg.set];
      }
      if (msg.cleared && typeof msg.cleared === 'object') {
        S.breakpoints = S.breakpoints.filter((b) => !sameMatcher(b, msg.cleared));
      }
      S.mode = msg.mode === 'step' ? 'step' : 'run';
      invalidate({ bar: true, graph: true });
      break;
    case 'runs':
      S.runs.clear();
      for (const r of msg.runs ?? []) S.runs.set(r.id, r);
      S.runsLoaded = true;
      summarizeSoon();
      invalidate({ rail: true, graph: true, bar: true });
      if (!S.selectedRun && !S.stress && S.runs.size) {
        const first = [...S.runs.values()].sort((a, b) => b.startedAt - a.startedAt)[0];
        if (first) selectRun(first.id);
      }
      break;
    case 'run.update': {
      const r = msg.run as RunInfo;
      const was = S.runs.get(r.id);
      S.runs.set(r.id, r);
      if (!was || was.status !== r.status) summarizeSoon();
      invalidate({ rail: true, bar: true });
      if (!S.selectedRun && !S.stress) selectRun(r.id);
      else if (!was && S.selectedRun && !S.stress && r.status === 'running') {
        // A new live run: follow it when the one on screen has finished, else say so.
        const current = S.runs.get(S.selectedRun);
        if (current && current.status !== 'running' && !S.selectedNode) selectRun(r.id);
        else toast(`new run: ${r.app} (${r.id}) — it is in the run list`);
      }
      break;
    }
    case 'replay.start':
      S.replaying.add(msg.runId);
      replayStarted(msg.runId, msg.count);
      if (msg.runId === S.selectedRun) invalidate({ bar: true });
      break;
    case 'replay.end': {
      S.replaying.delete(msg.runId);
      replayEnded(msg.runId);
      const m = S.models.get(msg.runId);
      if (m && msg.runId === S.selectedRun) for (const p of activePauses(m)) onPaused(m, p.nodeId);
      invalidate();
      break;
    }
    case 'event': {
      const env = msg.envelope as Envelope;
      if (!env || typeof env.runId !== 'string') return;
      const m = model(env.runId);
      noteEvent(env);
      if (apply(m, env)) {
        if (env.type === 'exec.resumed' && env.payload?.principal) S.principal.set(env.payload.pauseId, String(env.payload.principal?.name ?? env.payload.principal));
        if (env.runId === S.selectedRun && !S.replaying.has(env.runId)) {
          if (env.type === 'exec.paused') onPaused(m, env.payload.nodeId);
          invalidate({ graph: true, inspector: true, timeline: S.showTimeline, bar: true, rail: env.type === 'node.started' || env.type.startsWith('exec.') });
        } else if (env.runId === S.selectedRun || S.compare) invalidate({ bar: env.runId === S.selectedRun, graph: S.compare });
      }
      break;
    }
    case 'resume.result': {
      const o = msg.outcome;
      if (o !== 'resumed') toast(`${o}${msg.code ? ` (${msg.code})` : ''}: ${msg.message ?? ''}`, 'warn');
      break;
    }
    case 'error':
      // 0.6 hubs answer a refused control with {code, pauseId}; `forbidden` means this tab
      // holds no (valid) viewer token.
      if (msg.code === 'forbidden') toast(`refused: this needs the viewer token — open the link \`graphmind serve\` printed (${msg.message ?? ''})`, 'warn');
      else toast(`server: ${msg.code ? `${msg.code}: ` : ''}${msg.message ?? 'error'}`, 'warn');
      break;
  }
}

function onPaused(m: RunModel, nodeId: string): void {
  const f = S.folds.get(m.runId);
  if (f && S.userFolded.has(m.runId)) reveal(f, m, nodeId);
  // the inspector follows a new hold unless it already shows a held node
  const sel = S.selectedNode ? m.nodes.get(S.selectedNode) : undefined;
  if (!sel || !sel.activePause) selectNode(nodeId, false);
}

function startStress(n: number, events: number | undefined): void {
  S.stress = true;
  const envs = stressRun(n, events);
  const m = newRun(envs[0].runId);
  for (const e of envs) apply(m, e);
  S.models.set(m.runId, m);
  S.runs.set(m.runId, { id: m.runId, app: 'stress', startedAt: m.startTs ?? Date.now(), finishedAt: m.endTs ?? null, status: m.status, eventCount: m.eventCount, errorCount: m.errorCount, live: false, durationMs: (m.endTs ?? 0) - (m.startTs ?? 0), source: 'synthetic' });
  S.subscribed.add(m.runId);
  S.selectedRun = m.runId;
}

/** The run a `graphmind record --html` page carries, in
 * `<script type="application/json" id="graphmind-run">{"run": RunInfo, "events": [...]}`;
 * `undefined` on a page without one (served by `graphmind serve`). */
const RUN_ELEMENT_ID = 'graphmind-run';

function embeddedRun(): { run: Partial<RunInfo>; events: Envelope[] } | string | undefined {
  const node = document.getElementById(RUN_ELEMENT_ID);
  if (!node || node.tagName !== 'SCRIPT' || (node as HTMLScriptElement).type !== 'application/json') return undefined;
  try {
    const data = JSON.parse(node.textContent ?? '');
    if (!data || typeof data !== 'object' || !Array.isArray(data.events)) return 'the embedded run has no "events" list';
    return { run: data.run && typeof data.run === 'object' ? data.run : {}, events: data.events };
  } catch (e) {
    return `the embedded run is not valid JSON (${e instanceof Error ? e.message : String(e)})`;
  }
}

/** `?fixture=<name>`: a recorded run shipped in the viewer, shown like an exported one. */
function fixtureRun(name: string): { run: Partial<RunInfo>; events: Envelope[] } | string {
  const f = fixtureEvents(name);
  return typeof f === 'string' ? f : { run: { source: `fixture ${name}` }, events: f.events as Envelope[] };
}

/** Opens an exported run: every event applied at once, the clocks frozen at its last
 * event, no wire.socket, no HTTP, no controls. */
function startEmbedded(data: { run: Partial<RunInfo>; events: Envelope[] }): void {
  S.embedded = true;
  S.conn = 'recorded';
  const first = data.events.find((e) => e && typeof e.runId === 'string');
  const id = typeof data.run.id === 'string' ? data.run.id : first?.runId;
  if (!id) {
    S.embeddedError = 'the embedded run names no run id';
    return;
  }
  const m = newRun(id);
  for (const e of data.events) if (e && e.runId === id) apply(m, e);
  S.models.set(id, m);
  S.frozenAt = m.endTs ?? m.lastTs ?? m.startTs;
  const r = data.run;
  S.runs.set(id, {
    id,
    app: typeof r.app === 'string' ? r.app : m.app ?? '',
    startedAt: typeof r.startedAt === 'number' ? r.startedAt : m.startTs ?? 0,
    finishedAt: typeof r.finishedAt === 'number' ? r.finishedAt : m.endTs ?? null,
    status: typeof r.status === 'string' ? r.status : m.status,
    eventCount: m.eventCount,
    errorCount: typeof r.errorCount === 'number' ? r.errorCount : m.errorCount,
    live: false,
    durationMs: typeof r.durationMs === 'number' ? r.durationMs : null,
    source: typeof r.source === 'string' ? r.source : undefined,
  });
  S.subscribed.add(id);
  S.selectedRun = id;
  const held = activePauses(m)[0];
  if (held) S.selectedNode = held.nodeId;
  document.title = `${S.runs.get(id)!.app} · GraphMind run ${id}`;
}

let lastAuthCheck = 0;
const connLog: string[] = [];

function main(): void {
  const params = new URLSearchParams(location.search);
  const fixture = params.get('fixture');
  const embedded = fixture !== null ? fixtureRun(fixture) : embeddedRun();
  if (embedded === undefined) captureToken();
  try {
    const t = localStorage.getItem('graphmind.theme');
    if (t === 'dark' || t === 'light' || t === 'system') S.theme = t;
  } catch {
    /* fine */
  }
  applyTheme();
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', applyTheme);
  setupStage();
  document.addEventListener('keydown', onKey);
  const stress = params.get('stress');
  if (embedded !== undefined) {
    if (typeof embedded === 'string') {
      S.embedded = true;
      S.conn = 'recorded';
      S.embeddedError = embedded;
    } else startEmbedded(embedded);
    readHash();
    window.addEventListener('hashchange', readHash);
  } else if (stress !== null) {
    const n = Math.max(8, Math.min(4000, Number(stress) || 300));
    const ev = params.get('events');
    startStress(n, ev ? Math.max(n, Number(ev) || n * 16) : undefined);
  } else {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    wire.socket = new Socket(
      `${proto}//${location.host}/ws/ui`,
      onMessage,
      (st) => {
        S.conn = st;
        connLog.push(`${Math.round(performance.now())}:${st}`);
        if (connLog.length > 50) connLog.shift();
        if (st === 'open') S.authNeeded = false;
        if (st === 'closed' && token()) {
          // a token from an earlier server start is refused at the upgrade: drop it, watch
          tokenRejected().then((stale) => stale && toast('This tab’s viewer token is not valid for this server (it changes at every start). Watching without it; run `graphmind open` for the current link.', 'warn'));
        } else if (st === 'closed' && Date.now() - lastAuthCheck > 5000) {
          lastAuthCheck = Date.now();
          needsToken().then((need) => {
            S.authNeeded = need && S.conn !== 'open';
            invalidate({ bar: true, graph: true });
          });
        }
        invalidate({ bar: true });
      },
      () => {
        wire.socket!.send({ type: 'subscribe', runId: '*' });
        for (const id of S.subscribed) wire.socket!.send({ type: 'subscribe', runId: id });
      },
    );
    readHash();
    window.addEventListener('hashchange', readHash);
  }
  // live clocks (running durations, held timers)
  setInterval(() => {
    const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
    if (m && !S.embedded && (m.status === 'running' || activePauses(m).length)) invalidate({ graph: true, inspector: !!S.selectedNode, rail: true });
  }, 1000);
  invalidate();
  (window as any).__gm = { S, connLog, fit, centerOn, get view() { return G.view; } };
}

main();
