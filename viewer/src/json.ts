// A collapsible JSON tree with GraphMind's markers: "hidden by …" chips for redacted values
// and a truncation chip for the shrinker's `__graphmindTruncated` objects.
import { REDACTED, TRUNCATED_KEY } from './model';

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

const MAX_CHILDREN = 200;

/** `hiddenBy(path)` names the switch that hid a value at `path` (top key first). */
export function jsonTree(value: unknown, hiddenBy: (path: string[]) => string, open = 2): HTMLElement {
  const root = el('div', 'json');
  root.append(node(value, [], hiddenBy, open));
  return root;
}

function scalar(v: unknown, path: string[], hiddenBy: (path: string[]) => string): HTMLElement {
  if (v === REDACTED) {
    const chip = el('span', 'chip chip-hidden', `hidden by ${hiddenBy(path)}`);
    chip.title = 'This value was replaced by "__REDACTED__" in the app before it was sent';
    return chip;
  }
  if (typeof v === 'string') return el('span', 'j-str', JSON.stringify(v));
  if (typeof v === 'number') return el('span', 'j-num', String(v));
  if (typeof v === 'boolean') return el('span', 'j-bool', String(v));
  if (v === null) return el('span', 'j-null', 'null');
  if (v === undefined) return el('span', 'j-null', '—');
  return el('span', '', String(v));
}

function node(v: unknown, path: string[], hiddenBy: (path: string[]) => string, open: number): HTMLElement {
  if (v === null || typeof v !== 'object') return scalar(v, path, hiddenBy);
  const isArr = Array.isArray(v);
  const truncated = !isArr && (v as any)[TRUNCATED_KEY] === true;
  const marker = (k: string) => truncated && (k === TRUNCATED_KEY || k === 'bytes' || k === 'keysDropped');
  const entries = isArr ? (v as unknown[]).map((x, i) => [String(i), x] as [string, unknown]) : Object.entries(v as object).filter(([k]) => !marker(k));
  const d = el('details', 'j-obj');
  if (open > 0) d.open = true;
  const s = el('summary');
  s.append(el('span', 'j-brace', isArr ? `[ ${entries.length} ]` : `{ ${entries.length} }`));
  if (truncated) {
    const o = v as any;
    const parts = ['truncated'];
    if (typeof o.bytes === 'number' && o.bytes > 0) parts.push(`${o.bytes.toLocaleString()} bytes`);
    if (typeof o.keysDropped === 'number') parts.push(`${o.keysDropped} keys dropped`);
    s.append(el('span', 'chip chip-trunc', parts.join(' · ')));
  }
  d.append(s);
  const body = el('div', 'j-body');
  let shown = 0;
  for (const [k, x] of entries) {
    if (shown++ >= MAX_CHILDREN) {
      body.append(el('div', 'j-more', `… ${entries.length - MAX_CHILDREN} more`));
      break;
    }
    const row = el('div', 'j-row');
    row.append(el('span', 'j-key', isArr ? `${k}:` : `${JSON.stringify(k)}:`), document.createTextNode(' '));
    if (truncated && k === 'preview' && typeof x === 'string') row.append(el('span', 'j-preview', x));
    else row.append(node(x, [...path, k], hiddenBy, open - 1));
    body.append(row);
  }
  d.append(body);
  return d;
}
