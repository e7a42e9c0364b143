// The inspector: the selected node, its executions, and the chosen execution's times,
// markers, why it held, context and cost, input, output and error.
import { el, jsonTree } from './json';
import { whyHeld } from './why';
import { contextPanel } from './cost';
import { rerunPanel } from './rerun';
import { keysText, liveText, markOf, markText } from './replay';
import { fmtMs, now } from './format';
import { invalidate, S } from './store';
import { type GNode, hiddenBy, holdingPause, type Instance, instanceTimes, type RunModel } from './model';
import { may, NEEDS_TOKEN, sameMatcher, toggleBreakpoint } from './control';
import { heldBanner } from './gate-card';
import { selectNode } from './routing';

const $ = (id: string) => document.getElementById(id)!;

let inspStamp = '';

/** Draws the inspector of the selected node (rebuilt only when what it shows changed). */
export function renderInspector(): void {
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
    const why = whyHeld(n, pause);
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

/** The replay marker of an execution: replayed (nothing ran), the edited output, or where
 * the replay went live and what differed. */
function replayMarker(m: RunModel, n: GNode, i: Instance): HTMLElement {
  const mark = markOf(n, i);
  const c = el('span', `chip chip-replay mark-${mark}`, i.replayLive ? `${markText(mark)} · ${liveText(i.replayLive)}` : `${markText(mark)} from ${m.replayOf ?? 'the recording'}`);
  c.dataset.testid = 'replay-marker';
  c.dataset.mark = mark;
  if (i.replayLive) c.title = keysText(i.replayLive) ?? '';
  return c;
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
  if (i.replayed || i.replayLive) marks.append(replayMarker(m, n, i));
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
