// The "why it held" panel of the inspector: for a loop hold the repeated calls side by side
// with the keys that made them identical, the lap count and the first and last `seq`; for an
// error hold the error and whether the same arguments failed before; for a smart hold the
// rule and its evidence. Built only from what the run's events carry (`exec.paused.loop`,
// `exec.paused.smart`, the node's executions).
import { el } from './json';
import type { GNode, Instance, Pause } from './model';

/** At most this many repeated calls shown side by side (the newest ones). */
export const MAX_SIDE_BY_SIDE = 4;
/** A value longer than this (as JSON) is shown cut, with an ellipsis. */
export const MAX_VALUE_CHARS = 120;

/** JSON with object keys sorted, so two equal values read the same whatever their key order. */
export function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, x) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x,
  ) ?? 'undefined';
}

/** The top-level keys of the calls' inputs split into those equal in every call and the rest. */
export function identicalKeys(inputs: unknown[]): { same: string[]; differ: string[] } {
  const keys = new Set<string>();
  for (const v of inputs) if (v && typeof v === 'object' && !Array.isArray(v)) for (const k of Object.keys(v)) keys.add(k);
  const same: string[] = [];
  const differ: string[] = [];
  for (const k of [...keys].sort()) {
    const vals = inputs.map((v) => stableJson((v as Record<string, unknown> | undefined)?.[k]));
    (vals.every((x) => x === vals[0]) ? same : differ).push(k);
  }
  return { same, differ };
}

/** Earlier executions of the node that failed with the same input as `inst`. */
export function sameArgsFailures(n: GNode, inst: Instance): Instance[] {
  const key = stableJson(inst.input);
  return n.instances.filter((i) => i !== inst && i.startTs <= inst.startTs && i.status === 'error' && stableJson(i.input) === key);
}

function cut(s: string): string {
  return s.length > MAX_VALUE_CHARS ? `${s.slice(0, MAX_VALUE_CHARS - 1)}…` : s;
}

/** One line of the panel: a label and its value (`testid` names it for the tests). */
export interface WhyRow {
  label: string;
  value: string;
  testid?: string;
}

/** One repeated call shown side by side: which call, its input, and its error if any. */
export interface WhyCall {
  label: string;
  input: string;
  error?: string;
}

/** What the panel says about a pause, as data (the DOM is built from it by `whyHeld`). */
export interface WhyFacts {
  rows: WhyRow[];
  calls?: WhyCall[];
}

/** The facts of a pause (active or not) on node `n`, or undefined when there is nothing to add. */
export function whyFacts(n: GNode, p: Pause): WhyFacts | undefined {
  const rows: WhyRow[] = [];
  const row = (label: string, value: string, testid?: string) => rows.push({ label, value, testid });
  const inst = (p.instanceId && n.byInstance.get(p.instanceId)) || n.instances[n.instances.length - 1];
  if (p.reason === 'loop' || p.loop) {
    const l = p.loop ?? {};
    const kind = l.kind ?? 'repeat';
    row('rule', kind === 'cycle' ? 'loop: a repeated cycle of calls' : kind === 'error-repeat' ? 'loop: the same call failing the same way' : 'loop: the same call with identical arguments', 'why-rule');
    if (kind === 'cycle') row('laps', `${l.laps ?? l.repeats ?? '?'} laps of ${l.period ?? '?'} calls`, 'why-laps');
    else row('repeats', `${l.repeats ?? '?'}×`, 'why-laps');
    row('seq', `first ${l.firstSeq ?? '?'} · last ${l.lastSeq ?? '?'}`, 'why-seq');
    if (kind === 'cycle') return { rows };
    const calls = n.instances.filter((i) => !inst || i.startTs <= inst.startTs).slice(-Math.min(MAX_SIDE_BY_SIDE, Math.max(2, l.repeats ?? 2)));
    const { same, differ } = identicalKeys(calls.map((c) => c.input));
    row('identical keys', same.length ? same.join(', ') : '(the whole value)', 'why-same-keys');
    if (differ.length) row('differing keys', differ.join(', '));
    return {
      rows,
      calls: calls.map((c) => ({
        label: `call ${n.instances.indexOf(c) + 1}${c === inst ? ' (held)' : ''}`,
        input: cut(stableJson(c.input)),
        error: kind === 'error-repeat' && c.error ? cut(`${c.error.name ?? 'Error'}: ${c.error.message ?? ''}`) : undefined,
      })),
    };
  }
  if (p.smart) {
    row('rule', p.smart.rule === 'truncated-tool-call' ? 'smart: a tool call was cut off' : p.smart.rule === 'error-result' ? 'smart: the result reads as an error' : `smart: ${p.smart.rule}`, 'why-rule');
    row('evidence', p.smart.detail ?? 'none given', 'why-evidence');
    return { rows };
  }
  if (p.reason === 'error' || p.point === 'error') {
    row('rule', 'error: the call failed', 'why-rule');
    if (inst?.error) row('error', cut(`${inst.error.name ?? 'Error'}: ${inst.error.message ?? ''}`), 'why-error');
    if (inst) {
      const before = sameArgsFailures(n, inst);
      row('same arguments', before.length ? `failed before: ${before.length}× (call ${before.map((b) => n.instances.indexOf(b) + 1).join(', ')})` : 'first failure with these arguments', 'why-repeat');
    }
    return { rows };
  }
  return undefined;
}

/** The panel for a pause (active or not) on node `n`, or undefined when there is nothing to add. */
export function whyHeld(n: GNode, p: Pause): HTMLElement | undefined {
  const f = whyFacts(n, p);
  if (!f) return undefined;
  const box = el('div', 'why');
  box.dataset.testid = 'why-held';
  box.append(el('h3', '', 'Why it held'));
  for (const r of f.rows) {
    const line = el('div', 'why-row');
    line.append(el('span', 'why-label muted', r.label), el('span', 'why-value mono', r.value));
    if (r.testid) line.dataset.testid = r.testid;
    box.append(line);
  }
  if (f.calls) {
    const grid = el('div', 'why-calls');
    grid.dataset.testid = 'why-calls';
    for (const c of f.calls) {
      const col = el('div', 'why-call');
      col.append(el('div', 'muted', c.label), el('pre', 'mono', c.input));
      if (c.error) col.append(el('div', 'why-err', c.error));
      grid.append(col);
    }
    box.append(grid);
  }
  return box;
}
