// GraphMind viewer: runs rail, live graph, inspector, timeline, palette, debugging controls.
import './style.css';
import { Socket, authHeaders, captureToken, control, getJson, needsToken, newRequestId, token, tokenRejected } from './conn';
import { el, jsonTree } from './json';
import { whyHeld } from './why';
import { rerunPanel } from './rerun';
import { contextPanel, runCostChip } from './cost';
import { fmtAgo, fmtMs, now } from './format';
import { renderTimeline, toggleTimeline } from './timeline-panel';
import { KINDS, S, invalidate, setRenderer, type Parts, type RunInfo, type Summary } from './store';
import { anchorTo, layout, CARD_H, HELD_H, type Layout } from './layout';
import {
  activePauses,
  apply,
  carriesPlaceholder,
  hiddenBy,
  instanceTimes,
  holdingPause,
  newRun,
  nodeStatus,
  pauseReasonText,
  runHeldMs,
  type Envelope,
  type GNode,
  type Instance,
  type Pause,
  type RunModel,
} from './model';
import { buildTree, initialFolds, isOpen, project, reveal, setOpen, FOLD_THRESHOLD, type FoldState, type Projection } from './project';
import { stressRun } from './stress';
import { fixtureEvents } from './fixtures';
import { p90 } from './timeline';

let socket: Socket | undefined;
const $ = (id: string) => document.getElementById(id)!;

function render(d: Parts): void {
  if (d.bar) renderBar();
  if (d.rail) renderRail();
  if (d.graph) renderGraph();
  if (d.inspector) renderInspector();
  if (d.timeline) renderTimeline((id) => selectNode(id, true));
}
setRenderer(render);

// ---------------------------------------------------------------------------------------
// server messages

function model(runId: string): RunModel {
  let m = S.models.get(runId);
  if (!m) S.models.set(runId, (m = newRun(runId)));
  return m;
}

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
      break;
    case 'replay.end': {
      S.replaying.delete(msg.runId);
      const m = S.models.get(msg.runId);
      if (m && msg.runId === S.selectedRun) for (const p of activePauses(m)) onPaused(m, p.nodeId);
      invalidate();
      break;
    }
    case 'event': {
      const env = msg.envelope as Envelope;
      if (!env || typeof env.runId !== 'string') return;
      const m = model(env.runId);
      if (apply(m, env)) {
        if (env.type === 'exec.resumed' && env.payload?.principal) S.principal.set(env.payload.pauseId, String(env.payload.principal?.name ?? env.payload.principal));
        if (env.runId === S.selectedRun && !S.replaying.has(env.runId)) {
          if (env.type === 'exec.paused') onPaused(m, env.payload.nodeId);
          invalidate({ graph: true, inspector: true, timeline: S.showTimeline, bar: env.type.startsWith('exec.') || env.type.startsWith('run.') || env.type === 'node.finished', rail: env.type === 'node.started' || env.type.startsWith('exec.') });
        }
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

// When a gate holds, focus moves to its Continue button once (after the card is drawn).
let focusedPause: string | undefined;
function focusHeld(m: RunModel): void {
  const p = activePauses(m)[0];
  if (!p || p.pauseId === focusedPause) return;
  // a new hold off screen: bring its card into view
  const box = view?.lay.boxes.get(p.nodeId);
  if (box) {
    const stage = $('stage').getBoundingClientRect();
    const x = box.x * S.cam.k + S.cam.x;
    const y = box.y * S.cam.k + S.cam.y;
    if (x < 0 || y < 0 || x + box.w * S.cam.k > stage.width || y + box.h * S.cam.k > stage.height) centerOn(p.nodeId);
  }
  const btn = document.querySelector<HTMLButtonElement>(`.card[data-id="${CSS.escape(p.nodeId)}"] .act-continue`);
  if (!btn || !$('modal').hidden || !$('palette').hidden) return;
  focusedPause = p.pauseId;
  btn.focus({ preventScroll: true });
}

// Lazy run summaries (nodes, held time) for the rail, from the HTTP API.
let summarizing = false;
function summarizeSoon(): void {
  if (summarizing || S.stress || S.embedded) return;
  summarizing = true;
  setTimeout(async () => {
    try {
      const list = [...S.runs.values()].sort((a, b) => b.startedAt - a.startedAt).slice(0, 30);
      for (const r of list) {
        const have = S.summaries.get(r.id);
        if (have && have.atEvents === r.eventCount) continue;
        const loaded = S.models.get(r.id);
        if (loaded && S.subscribed.has(r.id)) continue;
        if (r.eventCount > 5000) continue;
        try {
          const page = await getJson(`/api/runs/${encodeURIComponent(r.id)}/events?limit=5000`);
          const m = newRun(r.id);
          for (const e of page.events ?? []) apply(m, e);
          S.summaries.set(r.id, { nodes: m.nodes.size, heldMs: runHeldMs(m), atEvents: r.eventCount });
          invalidate({ rail: true });
        } catch {
          /* a summary is optional */
        }
      }
    } finally {
      summarizing = false;
    }
  }, 150);
}

// ---------------------------------------------------------------------------------------
// selection and routing

function selectRun(id: string | undefined, node?: string): void {
  if (S.selectedRun !== id) {
    S.selectedRun = id;
    S.selectedNode = undefined;
    S.selectedInstance = undefined;
    S.cam = { x: 40, y: 40, k: 1 };
    fitPending = true;
    if (id && !S.stress && !S.subscribed.has(id)) {
      S.subscribed.add(id);
      model(id);
      socket?.send({ type: 'subscribe', runId: id });
    }
  }
  if (node) selectNode(node, true);
  writeHash();
  invalidate();
}

function selectNode(id: string | undefined, center: boolean): void {
  S.selectedNode = id;
  S.selectedInstance = undefined;
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (id && m) {
    const f = S.folds.get(m.runId);
    if (f && S.userFolded.has(m.runId)) reveal(f, m, id);
    if (center) pendingCenter = id;
  }
  writeHash();
  invalidate({ graph: true, inspector: true, timeline: S.showTimeline });
}

function writeHash(): void {
  if (S.stress) return;
  let h = '';
  if (S.selectedRun) h = `#/run/${encodeURIComponent(S.selectedRun)}`;
  if (S.selectedRun && S.selectedNode) h += `/node/${encodeURIComponent(S.selectedNode)}`;
  if (location.hash !== h) history.replaceState(null, '', h || location.pathname + location.search);
}

function readHash(): void {
  const m = /^#\/run\/([^/]+)(?:\/node\/(.+))?$/.exec(location.hash);
  if (!m) return;
  const run = decodeURIComponent(m[1]);
  const node = m[2] ? decodeURIComponent(m[2]) : undefined;
  if (S.embedded && !S.runs.has(run)) return;
  selectRun(run);
  if (node) {
    S.selectedNode = node;
    pendingCenter = node;
  }
}

// ---------------------------------------------------------------------------------------
// controls

/** What this tab's credential allows. A server that sends no `control` in `welcome` has no
 * credentials (0.5): everything is allowed. An anonymous viewer may continue, retry and
 * abort, but not inject, edit, or change breakpoints or step mode. */
function may(what: 'inject' | 'edit' | 'debug'): boolean {
  const c = S.control;
  if (!c) return true;
  if (c.principal === 'anonymous') return false;
  if (what === 'edit') return c.editInput !== false;
  return true;
}
const NEEDS_TOKEN = 'Needs the viewer token: run `graphmind open` in a terminal for this viewer’s link with its token';
/** A held card in an exported run: the reason and a note, no row of action buttons. */
const RECORD_HELD_H = 150;
const READ_ONLY = 'An exported run is a record: nothing is executing, so nothing here can be resumed or changed';

function send(type: string, payload: Record<string, unknown>, runId = '*'): void {
  if (S.stress || S.embedded) {
    toast(S.embedded ? READ_ONLY : 'a synthetic run cannot be controlled', 'warn');
    return;
  }
  socket?.send(control(type, payload, runId));
}

function resume(p: Pause, action: string, extra: Record<string, unknown> = {}): void {
  if (!S.selectedRun) return;
  send('exec.resume', { pauseId: p.pauseId, action, requestId: newRequestId(), ...extra }, S.selectedRun);
}

function step(p: Pause): void {
  // arm step mode before releasing, so the next gate is already a step
  send('mode.set', { mode: 'step' });
  resume(p, 'continue');
}

function setMode(mode: 'run' | 'step'): void {
  send('mode.set', { mode });
}

function toggleBreakpoint(matcher: Record<string, unknown>): void {
  const same = S.breakpoints.find((b) => sameMatcher(b, matcher));
  send(same ? 'breakpoint.clear' : 'breakpoint.set', { matcher: same ?? matcher });
}

function sameMatcher(a: any, b: any): boolean {
  const ka = Object.keys(a ?? {}).sort();
  const kb = Object.keys(b ?? {}).sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && a[k] === b[k]);
}

function matches(matcher: any, n: GNode): boolean {
  if (matcher.kind !== undefined && matcher.kind !== n.kind) return false;
  if (matcher.name !== undefined && matcher.name !== n.name) return false;
  return true;
}

function currentPause(): Pause | undefined {
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (!m) return undefined;
  const ps = activePauses(m);
  if (S.selectedNode) {
    const mine = ps.find((p) => p.nodeId === S.selectedNode);
    if (mine) return mine;
  }
  return ps[0];
}

// The JSON editor (inject a value / edit arguments).
function openEditor(p: Pause, mode: 'inject' | 'edit'): void {
  const m = S.models.get(S.selectedRun!);
  const n = m?.nodes.get(p.nodeId);
  const inst = n && p.instanceId ? n.byInstance.get(p.instanceId) : undefined;
  const box = $('modal');
  box.replaceChildren();
  box.hidden = false;
  const card = el('div', 'modal-card');
  card.append(el('h3', '', mode === 'inject' ? `Inject a result for ${n?.name ?? p.nodeId}` : `Edit the arguments of ${n?.name ?? p.nodeId}`));
  card.append(el('p', 'muted', mode === 'inject' ? 'The held call is skipped; this JSON value becomes its output.' : 'The held call runs with this input instead.'));
  const ta = el('textarea', 'editor');
  ta.spellcheck = false;
  ta.value = mode === 'inject' ? JSON.stringify(inst?.output ?? {}, null, 2) : JSON.stringify(inst?.input ?? {}, null, 2);
  const err = el('div', 'editor-error');
  const go = el('button', 'btn primary', mode === 'inject' ? 'Inject ⌘↵' : 'Run with these arguments ⌘↵');
  const cancel = el('button', 'btn', 'Cancel');
  const submit = () => {
    let v: unknown;
    try {
      v = JSON.parse(ta.value);
    } catch (e) {
      err.textContent = `Not valid JSON: ${(e as Error).message}`;
      return;
    }
    const bad = carriesPlaceholder(v);
    if (bad) {
      err.textContent = `Refused: the value ${bad}. Replace it with a real value first.`;
      return;
    }
    if (mode === 'inject') resume(p, 'inject', { output: v });
    else resume(p, 'continue', { input: v });
    closeModal();
  };
  go.onclick = submit;
  cancel.onclick = closeModal;
  ta.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.metaKey || e.ctrlKey)) {
      e.preventDefault();
      submit();
    } else if (e.key === 'Escape') closeModal();
  });
  const row = el('div', 'row');
  row.append(go, cancel);
  card.append(ta, err, row);
  box.append(card);
  ta.focus();
}

function closeModal(): void {
  $('modal').hidden = true;
  $('modal').replaceChildren();
}

// ---------------------------------------------------------------------------------------
// the bar

function renderBar(): void {
  const bar = $('bar');
  bar.replaceChildren();
  const brand = el('div', 'brand');
  brand.append(el('span', 'logo', '◆'), el('span', '', 'GraphMind'));
  bar.append(brand);
  const conn = el('span', `conn conn-${S.embedded ? 'recorded' : S.stress ? 'synthetic' : S.conn}`, S.embedded ? 'recorded run' : S.stress ? 'synthetic run' : S.conn === 'open' ? 'connected' : S.authNeeded ? 'token needed' : S.conn);
  conn.dataset.testid = 'conn';
  bar.append(conn);
  if (S.embedded) {
    const ro = el('span', 'chip chip-hidden', 'read-only');
    ro.dataset.testid = 'read-only';
    ro.title = READ_ONLY;
    bar.append(ro);
  }
  if (!S.stress && S.conn === 'open' && S.control?.principal === 'anonymous') {
    const w = el('span', 'chip chip-hidden', 'watch-only: run `graphmind open` for control');
    w.dataset.testid = 'watch-only';
    w.title = `${NEEDS_TOKEN}. Without it this tab may continue, retry and abort, but not inject, edit arguments, or change breakpoints and step mode.`;
    bar.append(w);
  }
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (m) {
    const info = S.runs.get(m.runId);
    const t = el('span', 'run-title', `${info?.app ?? m.app ?? ''} · ${m.runId}`);
    bar.append(t);
    const cost = runCostChip(m);
    if (cost) bar.append(cost);
  }
  const spacer = el('div', 'spacer');
  bar.append(spacer);
  if (!S.embedded) debugControls(bar);
  const search = el('button', 'btn', '⌘K');
  search.title = 'Command palette (⌘K or /)';
  search.onclick = () => openPalette('');
  const tl = el('button', `btn${S.showTimeline ? ' on' : ''}`, 'Timeline');
  tl.onclick = () => toggleTimeline();
  const theme = el('button', 'btn', S.theme === 'system' ? '◐' : S.theme === 'dark' ? '☾' : '☀');
  theme.title = `Theme: ${S.theme} (D)`;
  theme.onclick = cycleTheme;
  bar.append(search, tl, theme);
}

/** Run / Step, Pause all and the breakpoint chips (a live server only). */
function debugControls(bar: HTMLElement): void {
  const seg = el('div', 'seg');
  for (const mode of ['run', 'step'] as const) {
    const b = el('button', `seg-btn${S.mode === mode ? ' on' : ''}`, mode === 'run' ? 'Run' : 'Step');
    b.dataset.testid = `mode-${mode}`;
    b.onclick = () => setMode(mode);
    if (!may('debug')) (b.disabled = true), (b.title = NEEDS_TOKEN);
    seg.append(b);
  }
  bar.append(seg);
  const all = S.breakpoints.some((b) => Object.keys(b).length === 0);
  const pauseAll = el('button', `btn${all ? ' on' : ''}`, all ? 'Pausing all' : 'Pause all');
  pauseAll.title = 'Hold before every node (breakpoint {})';
  pauseAll.dataset.testid = 'pause-all';
  pauseAll.onclick = () => toggleBreakpoint({});
  if (!may('debug')) (pauseAll.disabled = true), (pauseAll.title = NEEDS_TOKEN);
  bar.append(pauseAll);
  const chips = el('div', 'bp-chips');
  for (const b of S.breakpoints) {
    const label = Object.keys(b).length === 0 ? 'every node' : [b.point === 'error' ? 'on error' : b.point ?? 'before', b.kind, b.name].filter(Boolean).join(' ');
    const c = el('span', 'chip chip-bp', label);
    c.dataset.testid = 'bp-chip';
    const x = el('button', 'chip-x', '×');
    x.title = 'Remove this breakpoint';
    x.onclick = () => send('breakpoint.clear', { matcher: b });
    if (!may('debug')) (x.disabled = true), (x.title = NEEDS_TOKEN);
    c.append(x);
    chips.append(c);
  }
  bar.append(chips);
}

// ---------------------------------------------------------------------------------------
// the runs rail

function runStatus(r: RunInfo): string {
  return r.status;
}

function renderRail(): void {
  const rail = $('rail');
  rail.hidden = !S.rail;
  if (!S.rail) return;
  rail.replaceChildren();
  rail.append(el('div', 'rail-head', `Runs (${S.runs.size})`));
  const list = el('div', 'rail-list');
  const runs = [...S.runs.values()].sort((a, b) => b.startedAt - a.startedAt);
  for (const r of runs) {
    const item = el('button', `run-item${r.id === S.selectedRun ? ' sel' : ''}`);
    item.dataset.runId = r.id;
    item.dataset.testid = 'run-item';
    const top = el('div', 'run-top');
    top.append(el('span', 'run-app', r.app), el('span', `pill st-${runStatus(r)}`, runStatus(r)));
    const m = S.models.get(r.id);
    const sum = m && S.subscribed.has(r.id) ? { nodes: m.nodes.size, heldMs: runHeldMs(m, now()), events: m.eventCount } : S.summaries.get(r.id);
    const duration = r.durationMs ?? (r.status === 'running' ? now() - r.startedAt : null);
    const meta = el('div', 'run-meta');
    meta.append(
      el('span', '', fmtMs(duration)),
      el('span', 'muted', `held ${sum ? fmtMs(sum.heldMs) : '—'}`),
      el('span', 'muted', `${sum ? sum.nodes : '—'} nodes`),
      el('span', r.errorCount ? 'err' : 'muted', `${r.errorCount} err`),
    );
    const foot = el('div', 'run-foot muted', `${fmtAgo(r.startedAt)} · ${Math.max(r.eventCount, (sum as any)?.events ?? 0)} events${r.live ? ' · live' : ''}`);
    item.append(top, meta, foot);
    item.onclick = () => selectRun(r.id);
    list.append(item);
  }
  rail.append(list);
}

// ---------------------------------------------------------------------------------------
// the graph

interface View {
  runId: string;
  key: string;
  proj: Projection;
  lay: Layout;
}
let view: View | undefined;
let fitPending = true;
/** The card that should stay still in the next layout (the one whose fold was toggled). */
let anchorHint: string | undefined;
let pendingCenter: string | undefined;
const cards = new Map<string, { el: HTMLElement; stamp: string }>();
let cardsRun: string | undefined;

function foldsFor(m: RunModel, tree: ReturnType<typeof buildTree>): FoldState {
  // Until the user folds or unfolds something, the folds follow the run as it grows: all
  // open up to FOLD_THRESHOLD nodes, then the breadth-first budget, with the selected node
  // and every held node revealed.
  let f = S.folds.get(m.runId);
  if (!f || !S.userFolded.has(m.runId)) {
    f = initialFolds(tree, m.nodes.size);
    if (S.selectedNode && m.nodes.has(S.selectedNode)) reveal(f, m, S.selectedNode);
    for (const p of activePauses(m)) reveal(f, m, p.nodeId);
    S.folds.set(m.runId, f);
  }
  return f;
}

function foldKey(f: FoldState): string {
  return `${f.defaultOpen}|${[...f.expanded].join(',')}|${[...f.collapsed].join(',')}`;
}

function computeView(m: RunModel): View {
  const tree = buildTree(m);
  const f = foldsFor(m, tree);
  const key = `${m.runId}|${m.shapeVersion}|${foldKey(f)}`;
  if (view && view.runId === m.runId && view.key === key) return view;
  const proj = project(m, f, tree);
  const lay = layout({ visible: proj.visible, parent: proj.parent, height: (id) => (m.nodes.get(id)?.activePause ? (S.embedded ? RECORD_HELD_H : HELD_H) : CARD_H) });
  if (view && view.runId === m.runId) {
    const hint = anchorHint && view.lay.boxes.has(anchorHint) ? anchorHint : undefined;
    anchorHint = undefined;
    const anchor = hint ?? (S.selectedNode && view.lay.boxes.has(S.selectedNode) ? S.selectedNode : proj.tree.roots.find((r) => view!.lay.boxes.has(r)));
    if (anchor) anchorTo(lay, view.lay, anchor);
  }
  view = { runId: m.runId, key, proj, lay };
  return view;
}

function renderGraph(): void {
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  const empty = $('empty');
  const world = $('world');
  if (!m || m.nodes.size === 0) {
    empty.hidden = false;
    empty.replaceChildren(emptyState(m));
    world.hidden = true;
    ($('minimap') as HTMLCanvasElement).hidden = true;
    $('filters').hidden = true;
    return;
  }
  empty.hidden = true;
  world.hidden = false;
  ($('minimap') as HTMLCanvasElement).hidden = false;
  $('filters').hidden = false;
  const v = computeView(m);
  const layer = $('cards');
  if (cardsRun !== m.runId) {
    // another run: nothing of the previous run's cards may be reused (same node ids)
    for (const c of cards.values()) c.el.remove();
    cards.clear();
    cardsRun = m.runId;
  }
  const seen = new Set<string>();
  const slow = S.filters.slow ? p90(m) : Infinity;
  const anyFilter = S.filters.errored || S.filters.errorPath || S.filters.slow || S.filters.paused || S.filters.kinds.size > 0;
  const onErrorPath = S.filters.errorPath ? errorPath(m) : undefined;
  for (const id of v.proj.visible) {
    const n = m.nodes.get(id)!;
    const box = v.lay.boxes.get(id)!;
    seen.add(id);
    const st = nodeStatus(n);
    const folded = v.proj.folded.get(id);
    const hasKids = (v.proj.tree.children.get(id)?.length ?? 0) > 0;
    const bp = S.breakpoints.some((b) => (b.kind !== undefined || b.name !== undefined) && matches(b, n));
    let dim = false;
    if (anyFilter) {
      let keep = true;
      if (S.filters.errored) keep &&= n.instances.some((i) => i.status === 'error');
      if (onErrorPath) keep &&= onErrorPath.has(id);
      if (S.filters.slow) keep &&= n.instances.some((i) => (i.durationMs ?? 0) >= slow);
      if (S.filters.paused) keep &&= !!n.activePause;
      if (S.filters.kinds.size) keep &&= S.filters.kinds.has(n.kind);
      dim = !keep;
    }
    const stamp = `${n.version}|${st}|${folded ?? -1}|${hasKids}|${bp}|${dim}|${id === S.selectedNode}|${box.h}|${S.mode}`;
    let c = cards.get(id);
    if (!c) {
      const e = el('div', 'card');
      e.dataset.id = id;
      layer.append(e);
      c = { el: e, stamp: '' };
      cards.set(id, c);
    }
    c.el.style.transform = `translate(${box.x}px, ${box.y}px)`;
    c.el.style.height = `${box.h}px`;
    if (c.stamp !== stamp || st === 'running') {
      c.stamp = stamp;
      fillCard(c.el, m, n, st, folded, hasKids, bp, dim);
    } else if (st === 'paused') {
      // tick the hold clock in place (rebuilding would take focus off Continue)
      const p = n.activePause ? m.pauses.get(n.activePause) : undefined;
      const meta = c.el.querySelector('.held-meta');
      if (p && meta) meta.textContent = heldMeta(p);
    }
  }
  for (const [id, c] of cards) {
    if (!seen.has(id)) {
      c.el.remove();
      cards.delete(id);
    }
  }
  // edges
  const svg = $('edges') as unknown as SVGSVGElement;
  const edgesKey = v.key;
  if (svg.dataset.key !== edgesKey) {
    svg.dataset.key = edgesKey;
    svg.setAttribute('width', String(v.lay.width + 40));
    svg.setAttribute('height', String(v.lay.height + 40));
    const parts: string[] = [];
    for (const e of v.lay.edges) {
      const path = 'M' + e.points.map((q) => `${q[0]},${q[1]}`).join(' L');
      parts.push(`<path class="edge" data-from="${attr(e.from)}" data-to="${attr(e.to)}" d="${path}"/>`);
    }
    svg.innerHTML = parts.join('');
  }
  if (pendingCenter && v.lay.boxes.has(pendingCenter)) {
    centerOn(pendingCenter);
    pendingCenter = undefined;
    fitPending = false;
  } else if (fitPending && !pendingCenter) {
    fit();
    fitPending = false;
  } else if (S.follow) {
    const running = v.proj.visible.find((id) => ['running', 'paused'].includes(nodeStatus(m.nodes.get(id)!)));
    if (running) centerOn(running);
  } else if (fitted && fittedLayout !== v.lay) {
    // a run shown whole that grew out of the stage or under the minimap is shown whole again
    fittedLayout = v.lay;
    if (!fitsInView()) fit();
  }
  applyCamera();
  focusHeld(m);
  $('foldinfo').textContent = `${v.proj.visible.length} of ${m.nodes.size} nodes shown${v.proj.folded.size ? ` · ${[...v.proj.folded.values()].reduce((a, b) => a + b, 0)} folded` : ''}`;
  renderFilters();
}

function attr(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

function fillCard(e: HTMLElement, m: RunModel, n: GNode, st: string, folded: number | undefined, hasKids: boolean, bp: boolean, dim: boolean): void {
  e.className = `card kind-${KINDS.includes(n.kind) ? n.kind : 'custom'} st-${st}${dim ? ' dim' : ''}${n.id === S.selectedNode ? ' sel' : ''}`;
  e.replaceChildren();
  const head = el('div', 'card-head');
  head.append(el('span', 'kind-badge', n.kind));
  const name = el('span', 'card-name', n.name);
  name.title = n.id;
  head.append(name);
  if (bp) {
    const dot = el('span', 'bp-dot');
    dot.title = 'a breakpoint matches this node';
    head.append(dot);
  }
  if (n.instances.length > 1) head.append(el('span', 'count', `×${n.instances.length}`));
  e.append(head);
  const last = n.instances[n.instances.length - 1];
  const sub = el('div', 'card-sub');
  const stLabel = el('span', `st-text st-${st}`, st);
  sub.append(stLabel);
  if (last) {
    const t = instanceTimes(last, m.endTs ?? now(), m);
    sub.append(el('span', 'muted', last.status === 'running' ? fmtMs(t.total) : `ran ${fmtMs(t.ran)}${t.held ? ` · held ${fmtMs(t.held)}` : ''}`));
    if (last.usage) sub.append(el('span', 'muted', `${(last.usage.inputTokens ?? 0) + (last.usage.outputTokens ?? 0)} tok`));
  }
  e.append(sub);
  if (last && last.status === 'running' && (last.text || last.reasoning)) {
    const prev = el('div', 'card-preview', (last.text || last.reasoning).slice(-90));
    prev.dataset.testid = 'token-preview';
    e.append(prev);
  } else if (last && last.status === 'running' && last.hiddenChars > 0) {
    const prev = el('div', 'card-preview');
    prev.dataset.testid = 'token-preview';
    prev.append(el('span', 'chip chip-hidden', `hidden by ${hiddenBy(n.kind, 'deltas')}`), document.createTextNode(` ${last.hiddenChars} chars`));
    e.append(prev);
  } else if (last?.status === 'error' && last.error) {
    e.append(el('div', 'card-preview err', `${last.error.name ?? 'Error'}: ${last.error.message ?? ''}`.slice(0, 90)));
  }
  if (hasKids) {
    const fb = el('button', 'fold-btn', folded !== undefined ? `▸ ${folded} folded` : '▾');
    fb.title = folded !== undefined ? 'Expand' : 'Fold the nodes under this one';
    fb.dataset.testid = folded !== undefined ? 'fold-expander' : 'fold-toggle';
    fb.onclick = (ev) => {
      ev.stopPropagation();
      const f = S.folds.get(m.runId)!;
      setOpen(f, n.id, folded !== undefined);
      S.userFolded.add(m.runId);
      anchorHint = n.id;
      invalidate({ graph: true });
    };
    e.append(fb);
  }
  const pause = n.activePause ? m.pauses.get(n.activePause) : undefined;
  if (pause && pause.active) e.append(heldBanner(m, n, pause));
  e.onclick = () => selectNode(n.id, false);
}

function heldBanner(m: RunModel, n: GNode, p: Pause): HTMLElement {
  const b = el('div', 'held');
  b.dataset.testid = 'held';
  b.append(el('div', 'held-reason', pauseReasonText(p, n)));
  if (p.refused) b.append(el('div', 'held-refused', `refused: ${p.refused.code}${p.refused.message ? ` — ${p.refused.message}` : ''}`));
  if (S.embedded) {
    // A record: the gate was held when the run was exported; there is nothing to release.
    const note = el('div', 'held-meta muted', `${heldMeta(p)} when exported · read-only record`);
    note.dataset.testid = 'held-readonly';
    note.title = READ_ONLY;
    b.append(note);
    return b;
  }
  const row = el('div', 'held-actions');
  const mk = (label: string, key: string, cls: string, fn: () => void) => {
    const btn = el('button', `btn act ${cls}`);
    btn.append(document.createTextNode(label));
    if (key) btn.append(el('kbd', '', key));
    btn.onclick = (ev) => {
      ev.stopPropagation();
      fn();
    };
    row.append(btn);
    return btn;
  };
  mk('Continue', 'C', 'act-continue primary', () => resume(p, 'continue'));
  const st = mk('Step', 'S', 'act-step', () => step(p));
  if (!may('debug')) (st.disabled = true), (st.title = `${NEEDS_TOKEN} (Step arms step mode)`);
  mk('Retry', 'R', 'act-retry', () => resume(p, 'retry'));
  const inj = mk('Inject', 'I', 'act-inject', () => openEditor(p, 'inject'));
  if (!may('inject')) (inj.disabled = true), (inj.title = NEEDS_TOKEN);
  if (p.editable && S.control?.editInput !== false) {
    const ed = mk('Edit args', '', 'act-edit', () => openEditor(p, 'edit'));
    if (!may('edit')) (ed.disabled = true), (ed.title = NEEDS_TOKEN);
  }
  mk('Abort', '', 'act-abort danger', () => resume(p, 'abort'));
  b.append(row);
  b.append(el('div', 'held-meta muted', heldMeta(p)));
  return b;
}

function heldMeta(p: Pause): string {
  return `${p.point} gate · held ${fmtMs(Math.max(0, now() - p.ts))}`;
}

function emptyState(m: RunModel | undefined): HTMLElement {
  const box = el('div', 'empty-card');
  if (S.embeddedError !== undefined) {
    box.dataset.testid = 'empty';
    box.append(el('h2', '', 'This exported run cannot be read'), el('p', 'muted', S.embeddedError));
    return box;
  }
  if (m && S.selectedRun) {
    box.append(el('h2', '', S.embedded ? 'No nodes recorded' : 'Waiting for events…'), el('p', 'muted', S.embedded ? `The exported run ${m.runId} has no node events.` : `Run ${m.runId} has no nodes yet.`));
    return box;
  }
  box.dataset.testid = 'empty';
  if (S.authNeeded) {
    box.append(el('h2', '', 'This server needs the viewer token'));
    box.append(el('p', '', 'Get this viewer’s link with its token: in a terminal on this machine, run'));
    box.append(el('pre', 'cmd', 'graphmind open'));
    box.append(el('p', 'muted', 'It prints the link (it ends in #token=…) and opens it. The token changes at every server start and is kept for this tab only.'));
    return box;
  }
  box.append(el('h2', '', 'No runs yet'));
  box.append(el('p', '', 'See one first: a demo agent that loops on a tool and fails once, held at both for you to Continue, Inject or Retry.'));
  box.append(startDemoButton());
  box.append(el('p', 'muted', 'Or in a terminal: graphmind demo (make demo in the repository).'));
  box.append(el('p', 'muted', `Or point an instrumented app at this server: GRAPHMIND_URL=ws://${location.host}/ingest${location.port === '4747' ? ' (the default)' : ''}.`));
  const a = el('a', 'btn', 'Try a synthetic 300-node run');
  a.href = '?stress=300';
  box.append(a);
  return box;
}

/** "Start the demo": `POST /api/demo/start` with the viewer token, then opens the run. */
function startDemoButton(): HTMLElement {
  const b = el('button', 'btn primary', 'Start the demo') as HTMLButtonElement;
  b.dataset.testid = 'start-demo';
  if (!token() && S.control) {
    b.disabled = true;
    b.title = NEEDS_TOKEN;
    const wrap = el('div', '');
    wrap.append(b, el('p', 'muted', NEEDS_TOKEN));
    return wrap;
  }
  b.onclick = async () => {
    b.disabled = true;
    try {
      const r = await fetch('/api/demo/start', { method: 'POST', headers: authHeaders() });
      const body = await r.json().catch(() => ({}));
      if (r.ok && typeof body.runId === 'string') location.hash = `#/run/${body.runId}`;
      else toast(`cannot start the demo: ${body.message ?? `HTTP ${r.status}`}`, 'warn');
    } catch (e) {
      toast(`cannot start the demo: ${e instanceof Error ? e.message : String(e)}`, 'warn');
    } finally {
      b.disabled = false;
    }
  };
  return b;
}

// camera
function applyCamera(): void {
  const w = $('world');
  w.style.transform = `translate(${S.cam.x}px, ${S.cam.y}px) scale(${S.cam.k})`;
  drawMinimap();
}

/** True while the camera shows the whole run as fit() placed it (no pan, zoom or centring since). */
let fitted = false;

/** The minimap's rectangle in stage coordinates, with a margin, or undefined when hidden. */
function minimapZone(stage: DOMRect): { x: number; y: number; w: number; h: number } | undefined {
  const mm = $('minimap') as HTMLCanvasElement;
  if (mm.hidden) return undefined;
  const r = mm.getBoundingClientRect();
  const m = 10;
  return { x: r.left - stage.left - m, y: r.top - stage.top - m, w: r.width + 2 * m, h: r.height + 2 * m };
}

/** Whether any card, under camera `cam`, would lie under the rectangle `z` (so the minimap would take its clicks). */
function cardsUnder(z: { x: number; y: number; w: number; h: number }, cam: { k: number; x: number; y: number }): boolean {
  for (const [id, b] of view!.lay.boxes) {
    // a card's content (a token preview, long names) can make it taller than its layout box
    const h = Math.max(b.h, cards.get(id)?.el.offsetHeight ?? 0);
    const x = b.x * cam.k + cam.x;
    const y = b.y * cam.k + cam.y;
    if (x < z.x + z.w && x + b.w * cam.k > z.x && y < z.y + z.h && y + h * cam.k > z.y) return true;
  }
  return false;
}

/** Shows the whole run, scaled to the stage and kept clear of the minimap's corner. */
function fit(): void {
  if (!view) return;
  const stage = $('stage').getBoundingClientRect();
  const { width, height, x0, y0 } = view.lay;
  const place = (w: number, h: number) => {
    const k = Math.max(0.45, Math.min(1, (w - 80) / Math.max(1, width), (h - 100) / Math.max(1, height)));
    const x = width * k <= w - 40 ? (w - width * k) / 2 : 40;
    return { k, x: x - x0 * k, y: Math.max(56, (h - height * k) / 2) - y0 * k };
  };
  let cam = place(stage.width, stage.height);
  const zone = minimapZone(stage);
  if (zone && cardsUnder(zone, cam)) {
    // the minimap would cover a card and take its clicks: fit into the band above it, or
    // the one left of it, whichever keeps the run larger and clear
    const options = [place(stage.width, zone.y), place(zone.x, stage.height)].filter((c) => !cardsUnder(zone, c));
    if (options.length) cam = options.reduce((a, b) => (b.k > a.k ? b : a));
  }
  S.cam = cam;
  applyCamera();
  fitted = true;
  fittedLayout = view.lay;
}

/** The layout fit() last placed (a new one means the run changed shape since). */
let fittedLayout: Layout | undefined;

/** Whether every card lies inside the stage and clear of the minimap under the current camera. */
function fitsInView(): boolean {
  if (!view) return true;
  const stage = $('stage').getBoundingClientRect();
  const zone = minimapZone(stage);
  if (zone && cardsUnder(zone, S.cam)) return false;
  const { width, height, x0, y0 } = view.lay;
  const k = S.cam.k;
  const left = x0 * k + S.cam.x;
  const top = y0 * k + S.cam.y;
  return left >= 0 && top >= 0 && left + width * k <= stage.width && top + height * k <= stage.height;
}

function centerOn(id: string): void {
  const box = view?.lay.boxes.get(id);
  if (!box) return;
  const stage = $('stage').getBoundingClientRect();
  const k = Math.max(S.cam.k, 0.6);
  S.cam = { k, x: stage.width / 2 - (box.x + box.w / 2) * k, y: stage.height / 2 - (box.y + box.h / 2) * k };
  fitted = false;
  applyCamera();
}

function drawMinimap(): void {
  const c = $('minimap') as HTMLCanvasElement;
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (!view || !m || c.hidden) return;
  const W = c.width;
  const H = c.height;
  const ctx = c.getContext('2d')!;
  const cs = getComputedStyle(document.body);
  ctx.fillStyle = cs.getPropertyValue('--panel').trim() || '#222';
  ctx.fillRect(0, 0, W, H);
  const pad = 6;
  const sc = Math.min(0.12, (W - pad * 2) / Math.max(1, view.lay.width), (H - pad * 2) / Math.max(1, view.lay.height));
  mini = { sc, pad };
  const { x0, y0 } = view.lay;
  for (const [id, b] of view.lay.boxes) {
    const n = m.nodes.get(id);
    if (!n) continue;
    ctx.fillStyle = cs.getPropertyValue(`--st-${nodeStatus(n)}`).trim() || '#888';
    ctx.fillRect(pad + (b.x - x0) * sc, pad + (b.y - y0) * sc, Math.max(2, b.w * sc), Math.max(2, b.h * sc));
  }
  const stage = $('stage').getBoundingClientRect();
  ctx.strokeStyle = cs.getPropertyValue('--accent').trim() || '#4af';
  ctx.lineWidth = 1.5;
  ctx.strokeRect(pad + (-S.cam.x / S.cam.k - x0) * sc, pad + (-S.cam.y / S.cam.k - y0) * sc, (stage.width / S.cam.k) * sc, (stage.height / S.cam.k) * sc);
}
let mini = { sc: 1, pad: 6 };

function minimapPan(ev: PointerEvent): void {
  const c = $('minimap') as HTMLCanvasElement;
  const r = c.getBoundingClientRect();
  const wx = (ev.clientX - r.left - mini.pad) / mini.sc + (view?.lay.x0 ?? 0);
  const wy = (ev.clientY - r.top - mini.pad) / mini.sc + (view?.lay.y0 ?? 0);
  const stage = $('stage').getBoundingClientRect();
  S.cam.x = stage.width / 2 - wx * S.cam.k;
  S.cam.y = stage.height / 2 - wy * S.cam.k;
  S.follow = false;
  fitted = false;
  applyCamera();
}

function renderFilters(): void {
  const f = $('filters');
  f.replaceChildren();
  const mk = (label: string, on: boolean, fn: () => void, testid: string) => {
    const b = el('button', `chip chip-filter${on ? ' on' : ''}`, label);
    b.dataset.testid = testid;
    b.onclick = fn;
    f.append(b);
  };
  mk('errored', S.filters.errored, () => toggleFilter('errored'), 'filter-errored');
  mk('error path', S.filters.errorPath, () => toggleFilter('errorPath'), 'filter-error-path');
  mk('slow (p90)', S.filters.slow, () => toggleFilter('slow'), 'filter-slow');
  mk('paused', S.filters.paused, () => toggleFilter('paused'), 'filter-paused');
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  const kinds = new Set<string>();
  if (m) for (const n of m.nodes.values()) kinds.add(n.kind);
  for (const k of [...kinds].sort()) mk(k, S.filters.kinds.has(k), () => toggleKind(k), `filter-kind-${k}`);
  const info = el('span', 'muted foldinfo-inline');
  f.append(info);
}

/** Failed nodes and every ancestor of one: "what led here". */
function errorPath(m: RunModel): Set<string> {
  const keep = new Set<string>();
  for (const n of m.nodes.values()) {
    if (!n.instances.some((i) => i.status === 'error')) continue;
    let id: string | undefined = n.id;
    let hops = 0;
    while (id && !keep.has(id) && hops++ < 10000) {
      keep.add(id);
      id = m.nodes.get(id)?.parentId;
    }
  }
  return keep;
}

function toggleFilter(k: 'errored' | 'errorPath' | 'slow' | 'paused'): void {
  S.filters[k] = !S.filters[k];
  invalidate({ graph: true });
}
function toggleKind(k: string): void {
  S.filters.kinds.has(k) ? S.filters.kinds.delete(k) : S.filters.kinds.add(k);
  invalidate({ graph: true });
}
function clearFilters(): void {
  S.filters = { errored: false, errorPath: false, slow: false, paused: false, kinds: new Set() };
  invalidate({ graph: true });
}

// ---------------------------------------------------------------------------------------
// the inspector

let inspStamp = '';
function renderInspector(): void {
  const box = $('inspector');
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  const n = m && S.selectedNode ? m.nodes.get(S.selectedNode) : undefined;
  box.hidden = !n;
  if (!m || !n) {
    inspStamp = '';
    return;
  }
  // Rebuild only when something this panel shows changed (keeps scroll and open JSON
  // branches while other nodes stream); live clocks tick once a second.
  const live = n.instances.some((i) => i.status === 'running') || !!n.activePause;
  const stamp = `${m.runId}|${n.id}|${n.version}|${S.selectedInstance}|${n.activePause}|${JSON.stringify(S.breakpoints)}|${live ? Math.floor(Date.now() / 1000) : ''}`;
  if (stamp === inspStamp) return;
  inspStamp = stamp;
  const scroll = box.scrollTop;
  box.replaceChildren();
  requestAnimationFrame(() => (box.scrollTop = scroll));
  const head = el('div', 'insp-head');
  const close = el('button', 'btn close', '×');
  close.onclick = () => selectNode(undefined, false);
  head.append(el('span', `kind-badge kind-${n.kind}`, n.kind), el('h2', '', n.name), close);
  box.append(head, el('div', 'muted mono', n.id));
  const bpOn = S.breakpoints.some((b) => sameMatcher(b, { kind: n.kind, name: n.name }));
  const bp = el('button', `btn small${bpOn ? ' on' : ''}`, bpOn ? '● Breakpoint before this node' : '○ Break before this node');
  bp.onclick = () => toggleBreakpoint({ kind: n.kind, name: n.name });
  if (!may('debug')) (bp.disabled = true), (bp.title = NEEDS_TOKEN);
  if (!S.embedded) box.append(bp);
  const pause = n.activePause ? m.pauses.get(n.activePause) : undefined;
  if (pause?.active) {
    box.append(heldBanner(m, n, pause));
    const why = whyHeld(m, n, pause);
    if (why) box.append(why);
  }
  if (n.instances.length === 0) {
    box.append(el('p', 'muted', 'Announced by a graph hint; it has not run yet.'));
    return;
  }
  const inst = (S.selectedInstance && n.byInstance.get(S.selectedInstance)) || n.instances[n.instances.length - 1];
  if (n.instances.length > 1) {
    const list = el('div', 'inst-list');
    [...n.instances].reverse().forEach((i, k) => {
      const b = el('button', `chip${i === inst ? ' on' : ''} st-${i.status}`, `#${n.instances.length - k} ${i.status}`);
      b.onclick = () => {
        S.selectedInstance = i.instanceId;
        invalidate({ inspector: true });
      };
      list.append(b);
    });
    box.append(list);
  }
  box.append(instanceView(m, n, inst));
}

function instanceView(m: RunModel, n: GNode, i: Instance): HTMLElement {
  const v = el('div', 'inst');
  const t = instanceTimes(i, m.endTs ?? now(), m);
  const times = el('div', 'times');
  times.dataset.testid = 'times';
  // an `error` gate holds after node.error: held first, whatever the status says
  const holding = holdingPause(m, i);
  times.textContent = holding
    ? `held ${fmtMs(now() - holding.ts)} at the ${holding.point} gate · started ${fmtMs(t.total)} ago`
    : i.status !== 'running'
      ? `ran ${fmtMs(t.ran)} · held ${fmtMs(t.held)}`
      : `running ${fmtMs(t.total)}`;
  v.append(times);
  const marks = el('div', 'marks');
  if (i.injected) marks.append(el('span', 'chip chip-mark', 'injected'));
  if (i.recovered) marks.append(el('span', 'chip chip-mark', 'recovered from error'));
  if (i.edited !== undefined) marks.append(el('span', 'chip chip-mark', 'edited arguments'));
  for (const p of m.pauses.values()) {
    if (p.nodeId !== n.id || p.instanceId !== i.instanceId || !p.resumed) continue;
    const who = p.resumed.principal ?? S.principal.get(p.pauseId);
    marks.append(el('span', 'chip chip-mark', `${p.reason ?? p.point} → ${p.resumed.action}${who ? ` by ${who}` : ''}`));
  }
  if (marks.childElementCount) v.append(marks);
  if (!S.embedded) {
    const rerun = rerunPanel(m.runId, n.id, n.kind, n.instances.indexOf(i) + 1, Number(location.port) || 80);
    if (rerun) v.append(rerun);
  }
  const ctx = contextPanel(n, i);
  if (ctx) v.append(ctx);
  else if (i.usage) {
    const u = i.usage;
    const parts = [`in ${u.inputTokens ?? 0}`, `out ${u.outputTokens ?? 0}`];
    if (u.cacheReadTokens) parts.push(`cache read ${u.cacheReadTokens}`);
    if (u.cacheWriteTokens) parts.push(`cache write ${u.cacheWriteTokens}`);
    if (u.reasoningTokens) parts.push(`reasoning ${u.reasoningTokens}`);
    v.append(el('div', 'usage', `tokens: ${parts.join(' · ')}${u.inclusive ? ' (inclusive)' : ''}`));
  }
  const section = (title: string, value: unknown, redaction: { keys: string[] } | undefined, field: string) => {
    v.append(el('h4', '', title));
    const hb = (path: string[]) => {
      const key = [field, ...path].join('.');
      const listed = redaction?.keys.find((k) => k === key || key.startsWith(k + '.') || k === field);
      return hiddenBy(n.kind, listed ?? field);
    };
    v.append(jsonTree(value, hb));
  };
  section('Input', i.input, i.startRedaction, 'input');
  if (i.edited !== undefined) section('Edited input (what ran)', i.edited, undefined, 'input');
  if (i.status !== 'running' || i.output !== undefined) section('Output', i.output, i.finishRedaction, 'output');
  if (i.text && i.status === 'running') {
    v.append(el('h4', '', 'Streaming'));
    v.append(el('pre', 'stream', i.text.slice(-2000)));
  }
  if (i.error) {
    v.append(el('h4', 'err', 'Error'));
    v.append(jsonTree(i.error, () => 'a redaction switch'));
    if (i.error.stack) v.append(el('pre', 'stack', String(i.error.stack)));
  }
  return v;
}

// ---------------------------------------------------------------------------------------
// palette

interface Item {
  label: string;
  hint: string;
  run: () => void;
}

function actions(): Item[] {
  const a: Item[] = [
    { label: 'Fit the graph', hint: '⇧F', run: fit },
    { label: 'Follow the active node', hint: 'F', run: () => (S.follow = !S.follow) },
    { label: 'Toggle the timeline', hint: '⇧T', run: toggleTimeline },
    { label: 'Filter: errored nodes', hint: '', run: () => toggleFilter('errored') },
    { label: 'Filter: error path (failures and what led to them)', hint: '⇧E', run: () => toggleFilter('errorPath') },
    { label: 'Re-arrange the layout and fit', hint: '⇧A', run: rearrange },
    { label: 'Filter: slow nodes (p90)', hint: '', run: () => toggleFilter('slow') },
    { label: 'Filter: paused nodes', hint: '', run: () => toggleFilter('paused') },
    { label: 'Clear all filters', hint: '', run: clearFilters },
    { label: 'Collapse / expand all', hint: '⇧C', run: toggleAllFolds },
    { label: 'Copy a deep link to this view', hint: '⇧L', run: copyLink },
    { label: 'Toggle the run list', hint: 'B', run: toggleRail },
    { label: 'Cycle the theme', hint: 'D', run: cycleTheme },
  ];
  if (!S.embedded)
    a.push(
      { label: 'Mode: run', hint: '', run: () => setMode('run') },
      { label: 'Mode: step', hint: '', run: () => setMode('step') },
      { label: 'Pause all (hold before every node)', hint: '', run: () => toggleBreakpoint({}) },
    );
  for (const k of KINDS) a.push({ label: `Filter: kind ${k}`, hint: '', run: () => toggleKind(k) });
  return a;
}

function score(q: string, s: string): number {
  if (!q) return 1;
  const t = s.toLowerCase();
  const at = t.indexOf(q);
  if (at >= 0) return 1000 - at - t.length / 100;
  let i = 0;
  let gaps = 0;
  let last = -1;
  for (const ch of q) {
    const j = t.indexOf(ch, i);
    if (j < 0) return 0;
    if (last >= 0) gaps += j - last - 1;
    last = j;
    i = j + 1;
  }
  return 100 - gaps - t.length / 100;
}

let palSel = 0;
let palItems: Item[] = [];
function openPalette(initial: string): void {
  const p = $('palette');
  p.hidden = false;
  const input = $('pal-input') as HTMLInputElement;
  input.value = initial;
  input.focus();
  palSel = 0;
  refreshPalette();
}
function closePalette(): void {
  $('palette').hidden = true;
  // Give the keyboard back at once: a hidden input keeps focus until the browser's next
  // focus fixup, and a shortcut typed right after closing (B, T, ...) went into it.
  const focused = document.activeElement as HTMLElement | null;
  if (focused && $('palette').contains(focused)) focused.blur();
}
function refreshPalette(): void {
  const q = ($('pal-input') as HTMLInputElement).value;
  const actionsOnly = q.startsWith('>');
  const query = (actionsOnly ? q.slice(1) : q).trim().toLowerCase();
  const items: [number, Item][] = [];
  if (!actionsOnly) {
    const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
    if (m)
      for (const n of m.nodes.values()) {
        const s = score(query, `${n.name} ${n.id}`);
        if (s > 0) items.push([s + 5, { label: n.name, hint: `${n.kind} · ${nodeStatus(n)} · ${n.id}`, run: () => selectNode(n.id, true) }]);
      }
    for (const r of S.runs.values()) {
      const s = score(query, `${r.app} ${r.id}`);
      if (s > 0) items.push([s, { label: `run ${r.app}`, hint: `${r.status} · ${r.id}`, run: () => selectRun(r.id) }]);
    }
  }
  for (const a of actions()) {
    const s = score(query, a.label);
    if (s > 0) items.push([s - (actionsOnly ? 0 : 50), { ...a, label: `> ${a.label}` }]);
  }
  items.sort((a, b) => b[0] - a[0]);
  palItems = items.slice(0, 50).map((x) => x[1]);
  palSel = Math.min(palSel, Math.max(0, palItems.length - 1));
  const list = $('pal-list');
  list.replaceChildren();
  palItems.forEach((it, i) => {
    const row = el('div', `pal-item${i === palSel ? ' sel' : ''}`);
    row.append(el('span', '', it.label), el('span', 'muted', it.hint));
    row.onmousedown = (e) => {
      e.preventDefault();
      closePalette();
      it.run();
    };
    list.append(row);
  });
  if (!palItems.length) list.append(el('div', 'muted pal-none', 'Nothing matches'));
}

// ---------------------------------------------------------------------------------------
// misc actions

function toggleAllFolds(): void {
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (!m) return;
  const tree = buildTree(m);
  const f = S.folds.get(m.runId) ?? initialFolds(tree, m.nodes.size);
  const anyFolded = [...tree.children.keys()].some((id) => !isOpen(f, id));
  S.folds.set(m.runId, anyFolded ? { defaultOpen: true, expanded: new Set(), collapsed: new Set() } : { defaultOpen: false, expanded: new Set(tree.roots), collapsed: new Set() });
  S.userFolded.add(m.runId);
  fitPending = true;
  invalidate({ graph: true });
}

function rearrange(): void {
  view = undefined;
  const svg = $('edges');
  svg.dataset.key = '';
  fitPending = true;
  invalidate({ graph: true });
}

function copyLink(): void {
  writeHash();
  const url = location.href;
  navigator.clipboard?.writeText(url).then(
    () => toast('link copied'),
    () => toast(url),
  );
}

function toggleRail(): void {
  S.rail = !S.rail;
  invalidate({ rail: true });
}

function cycleTheme(): void {
  S.theme = S.theme === 'system' ? 'dark' : S.theme === 'dark' ? 'light' : 'system';
  try {
    localStorage.setItem('graphmind.theme', S.theme);
  } catch {
    /* fine */
  }
  applyTheme();
  invalidate({ bar: true, graph: true });
}

function applyTheme(): void {
  const dark = S.theme === 'dark' || (S.theme === 'system' && matchMedia('(prefers-color-scheme: dark)').matches);
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
  drawMinimap();
}

function toast(text: string, kind = 'info'): void {
  const t = el('div', `toast toast-${kind}`, text);
  $('toasts').append(t);
  setTimeout(() => t.remove(), 5000);
}

// ---------------------------------------------------------------------------------------
// keyboard

function typing(e: KeyboardEvent): boolean {
  const t = e.target as HTMLElement | null;
  return !!t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.isContentEditable);
}

function onKey(e: KeyboardEvent): void {
  if ((e.metaKey || e.ctrlKey) && e.key.toLowerCase() === 'k') {
    e.preventDefault();
    $('palette').hidden ? openPalette('') : closePalette();
    return;
  }
  if (!$('palette').hidden) {
    if (e.key === 'Escape') closePalette();
    else if (e.key === 'ArrowDown') {
      palSel = Math.min(palItems.length - 1, palSel + 1);
      refreshPalette();
      e.preventDefault();
    } else if (e.key === 'ArrowUp') {
      palSel = Math.max(0, palSel - 1);
      refreshPalette();
      e.preventDefault();
    } else if (e.key === 'Enter') {
      const it = palItems[palSel];
      closePalette();
      it?.run();
      e.preventDefault();
    }
    return;
  }
  if (!$('modal').hidden || typing(e)) return;
  if (e.metaKey || e.ctrlKey || e.altKey) return;
  const pause = currentPause();
  switch (e.key) {
    case '/':
      e.preventDefault();
      openPalette('');
      return;
    case '>':
      e.preventDefault();
      openPalette('>');
      return;
    case 'Escape':
      selectNode(undefined, false);
      return;
    case 'f':
      S.follow = !S.follow;
      toast(S.follow ? 'following the active node' : 'follow off');
      invalidate({ graph: true });
      return;
    case 'F':
      fit();
      return;
    case 'T':
      toggleTimeline();
      return;
    case 'E':
      toggleFilter('errorPath');
      return;
    case 'A':
      rearrange();
      return;
    case 'C':
      toggleAllFolds();
      return;
    case 'L':
      copyLink();
      return;
    case 'b':
      toggleRail();
      return;
    case 'd':
      cycleTheme();
      return;
  }
  if (!pause || S.embedded) return;
  switch (e.key) {
    case 'c':
      resume(pause, 'continue');
      break;
    case 's':
      if (may('debug')) step(pause);
      else toast(NEEDS_TOKEN, 'warn');
      break;
    case 'r':
      resume(pause, 'retry');
      break;
    case 'i':
      e.preventDefault();
      if (may('inject')) openEditor(pause, 'inject');
      else toast(NEEDS_TOKEN, 'warn');
      break;
  }
}

// ---------------------------------------------------------------------------------------
// pan and zoom

function setupStage(): void {
  const stage = $('stage');
  let drag: { x: number; y: number; cx: number; cy: number } | undefined;
  stage.addEventListener('pointerdown', (e) => {
    if ((e.target as HTMLElement).closest('.card, #minimap, #filters, button')) return;
    drag = { x: e.clientX, y: e.clientY, cx: S.cam.x, cy: S.cam.y };
    stage.setPointerCapture(e.pointerId);
    S.follow = false;
  });
  stage.addEventListener('pointermove', (e) => {
    if (!drag) return;
    S.cam.x = drag.cx + e.clientX - drag.x;
    S.cam.y = drag.cy + e.clientY - drag.y;
    fitted = false;
    applyCamera();
  });
  stage.addEventListener('pointerup', () => (drag = undefined));
  stage.addEventListener(
    'wheel',
    (e) => {
      if ((e.target as HTMLElement).closest('#minimap')) return;
      e.preventDefault();
      const r = stage.getBoundingClientRect();
      const px = e.clientX - r.left;
      const py = e.clientY - r.top;
      if (e.ctrlKey || e.metaKey || Math.abs(e.deltaY) > 0) {
        const k = Math.max(0.1, Math.min(2.5, S.cam.k * Math.exp(-e.deltaY * 0.0015)));
        S.cam.x = px - ((px - S.cam.x) * k) / S.cam.k;
        S.cam.y = py - ((py - S.cam.y) * k) / S.cam.k;
        S.cam.k = k;
      }
      fitted = false;
      applyCamera();
    },
    { passive: false },
  );
  // the inspector opening or closing, or the window resizing, changes the stage: a run shown
  // whole stays whole (and clear of the minimap); a camera the user placed stays put
  new ResizeObserver(() => (fitted ? fit() : drawMinimap())).observe(stage);
  const mm = $('minimap');
  let mmDrag = false;
  mm.addEventListener('pointerdown', (e) => {
    mmDrag = true;
    mm.setPointerCapture(e.pointerId);
    minimapPan(e);
  });
  mm.addEventListener('pointermove', (e) => mmDrag && minimapPan(e));
  mm.addEventListener('pointerup', () => (mmDrag = false));
  $('tl-scroll').addEventListener('scroll', () => invalidate({ timeline: true }));
  $('tl-scroll').addEventListener(
    'wheel',
    (e) => {
      if (!(e.ctrlKey || e.metaKey)) return;
      e.preventDefault();
      const sc = $('tl-scroll');
      const px = e.clientX - sc.getBoundingClientRect().left - 200;
      const before = S.tlZoom;
      S.tlZoom = Math.max(1, Math.min(500, S.tlZoom * Math.exp(-e.deltaY * 0.002)));
      // keep the time under the pointer in place
      sc.scrollLeft = Math.max(0, ((sc.scrollLeft + px) * S.tlZoom) / before - px);
      invalidate({ timeline: true });
    },
    { passive: false },
  );
  $('tl-zoom-in').onclick = () => ((S.tlZoom *= 1.5), invalidate({ timeline: true }));
  $('tl-zoom-out').onclick = () => ((S.tlZoom = Math.max(1, S.tlZoom / 1.5)), invalidate({ timeline: true }));
  $('tl-fit').onclick = () => ((S.tlZoom = 1), invalidate({ timeline: true }));
  ($('pal-input') as HTMLInputElement).addEventListener('input', () => {
    palSel = 0;
    refreshPalette();
  });
  $('palette').addEventListener('mousedown', (e) => {
    if (e.target === $('palette')) closePalette();
  });
  window.addEventListener('resize', () => invalidate({ graph: true, timeline: true }));
}

// ---------------------------------------------------------------------------------------
// start

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
 * event, no socket, no HTTP, no controls. */
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
    socket = new Socket(
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
        socket!.send({ type: 'subscribe', runId: '*' });
        for (const id of S.subscribed) socket!.send({ type: 'subscribe', runId: id });
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
  (window as any).__gm = { S, connLog, fit, centerOn, get view() { return view; } };
}

main();
