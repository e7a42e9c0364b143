// The run bar: connection, the run's title, cost and stream chips, control levels, Run/Step,
// Pause all, breakpoint chips, palette, timeline and theme buttons.
import { el } from './json';
import { runCostChip } from './cost';
import { toggleTimeline } from './timeline-panel';
import { gapNotices, streamChips } from './stream';
import { controlLevelChips } from './control-level';
import { S } from './store';
import { may, NEEDS_TOKEN, READ_ONLY, send, setMode, toggleBreakpoint } from './control';
import { openPalette } from './palette';
import { cycleTheme } from './actions';
import { replayChips } from './compare-panel';

const $ = (id: string) => document.getElementById(id)!;

/** Draws the run bar and the gap notices over the graph. */
export function renderBar(): void {
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
    bar.append(...streamChips(m, info), ...replayChips(m));
  }
  const notices = gapNotices(m);
  const strip = $('stream');
  strip.hidden = notices.length === 0;
  strip.replaceChildren(...notices);
  const spacer = el('div', 'spacer');
  bar.append(spacer);
  if (!S.embedded && !S.stress && S.conn === 'open') bar.append(...controlLevelChips(S.control));
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
