// Context and cost: tokens per LLM call and per run, a price from `@pydantic/genai-prices`
// (its bundled price data, built into the viewer: no network at run time), the context-window
// fill where the price data knows the window, and the prompt diff against the previous call.
import { calcPrice } from '@pydantic/genai-prices';
import { el } from './json';
import type { GNode, Instance, RunModel } from './model';
import { promptDiff, type PromptDiff } from './prompt-diff';

/** Token counts of one call or a sum of calls; `inputTokens` always counts cached tokens too. */
export interface Tokens {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
}

/** At most this many characters of a changed message shown in the prompt diff. */
export const MAX_DIFF_CHARS = 160;

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);

/**
 * A recorded `usage` (the core's `TokenUsage`) as inclusive counts: when `inclusive` is not
 * set, `inputTokens` left the cache reads and writes out, so they are added back.
 */
export function tokensOf(usage: Record<string, unknown> | undefined): Tokens | undefined {
  if (!usage) return undefined;
  const t: Tokens = {
    inputTokens: num(usage.inputTokens),
    outputTokens: num(usage.outputTokens),
    cacheReadTokens: num(usage.cacheReadTokens),
    cacheWriteTokens: num(usage.cacheWriteTokens),
    reasoningTokens: num(usage.reasoningTokens),
  };
  if (usage.inclusive !== true) t.inputTokens += t.cacheReadTokens + t.cacheWriteTokens;
  return t;
}

/** The model and provider a call asked for (its recorded `input`), else the one it answered with. */
export function modelOf(i: Instance): { model?: string; provider?: string } {
  const inp = (i.input ?? {}) as Record<string, unknown>;
  const out = (i.output ?? {}) as Record<string, unknown>;
  const model = typeof inp.model === 'string' ? inp.model : typeof out.model === 'string' ? out.model : undefined;
  return { model, provider: typeof inp.provider === 'string' ? inp.provider : undefined };
}

/** A call's price in USD, or `undefined` when genai-prices knows no price for the model ("no price known"). */
export interface Price {
  total: number;
  input: number;
  output: number;
  contextWindow?: number;
}

/** Prices `tokens` for `model` with genai-prices (provider first, then any provider matching the model). */
export function priceOf(model: string | undefined, provider: string | undefined, t: Tokens): Price | undefined {
  if (!model) return undefined;
  const usage = {
    input_tokens: t.inputTokens,
    output_tokens: t.outputTokens,
    cache_read_tokens: t.cacheReadTokens,
    cache_write_tokens: t.cacheWriteTokens,
  };
  let r = null;
  try {
    r = (provider ? calcPrice(usage, model, { providerId: provider }) : null) ?? calcPrice(usage, model);
  } catch {
    r = null; // bad counts for the price data (e.g. cache above input): no price rather than a guess
  }
  if (!r) return undefined;
  return { total: r.total_price, input: r.input_price, output: r.output_price, contextWindow: r.model.context_window };
}

/** Sums of one run's LLM calls: tokens, the priced total, and how many calls had no known
 * price; calls a replay answered from the recording are counted apart (nothing was sent). */
export interface RunCost {
  calls: number;
  tokens: Tokens;
  total: number;
  unpriced: number;
  /** Calls answered from the recording (`replayed`): not sent, not charged. */
  replayed: number;
  /** What the replayed calls cost when they were recorded (priced ones only). */
  saved: number;
}

const zero = (): Tokens => ({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 });

/** Adds `b` into `a`. */
function add(a: Tokens, b: Tokens): void {
  a.inputTokens += b.inputTokens;
  a.outputTokens += b.outputTokens;
  a.cacheReadTokens += b.cacheReadTokens;
  a.cacheWriteTokens += b.cacheWriteTokens;
  a.reasoningTokens += b.reasoningTokens;
}

// genai-prices takes ~0.1 ms a call (a model lookup over its data) and the run bar is redrawn
// on every event: a finished call's price is computed once and kept with the call.
const callPrices = new WeakMap<Instance, { key: string; price: Price | undefined }>();

/** The price of one call (`priceOf` on its model, provider and tokens), memoised per call. */
export function callPrice(i: Instance, t: Tokens): Price | undefined {
  const { model, provider } = modelOf(i);
  const key = `${provider}|${model}|${t.inputTokens}|${t.outputTokens}|${t.cacheReadTokens}|${t.cacheWriteTokens}`;
  const hit = callPrices.get(i);
  if (hit && hit.key === key) return hit.price;
  const price = priceOf(model, provider, t);
  callPrices.set(i, { key, price });
  return price;
}

const runCosts = new WeakMap<RunModel, { version: number; cost: RunCost }>();

/** `runCostOf`, memoised per run until its next event. */
export function runCost(m: RunModel): RunCost {
  const hit = runCosts.get(m);
  if (hit && hit.version === m.version) return hit.cost;
  const cost = runCostOf(m);
  runCosts.set(m, { version: m.version, cost });
  return cost;
}

/** Tokens and cost of every finished call with a usage in the run (LLM nodes only). */
export function runCostOf(m: RunModel): RunCost {
  const c: RunCost = { calls: 0, tokens: zero(), total: 0, unpriced: 0, replayed: 0, saved: 0 };
  for (const n of m.nodes.values()) {
    if (n.kind !== 'llm') continue;
    for (const i of n.instances) {
      const t = tokensOf(i.usage);
      if (!t) continue;
      if (i.replayed) {
        c.replayed++;
        c.saved += callPrice(i, t)?.total ?? 0;
        continue;
      }
      c.calls++;
      add(c.tokens, t);
      const p = callPrice(i, t);
      if (p) c.total += p.total;
      else c.unpriced++;
    }
  }
  return c;
}

/** A USD amount: more digits for the small sums one call costs. */
export function fmtUsd(v: number): string {
  return v === 0 ? '$0' : v < 0.01 ? `$${v.toFixed(5)}` : `$${v.toFixed(v < 1 ? 4 : 2)}`;
}

const fmtN = (v: number) => v.toLocaleString('en-US');

/** The token line of a sum or a call. */
export function tokenLine(t: Tokens): string {
  const parts = [`in ${fmtN(t.inputTokens)}`, `out ${fmtN(t.outputTokens)}`];
  if (t.cacheReadTokens) parts.push(`cached ${fmtN(t.cacheReadTokens)}`);
  if (t.cacheWriteTokens) parts.push(`cache write ${fmtN(t.cacheWriteTokens)}`);
  if (t.reasoningTokens) parts.push(`reasoning ${fmtN(t.reasoningTokens)}`);
  return parts.join(' · ');
}

/** The run bar's chip: the run's tokens and cost (nothing for a run with no LLM usage). */
export function runCostChip(m: RunModel): HTMLElement | undefined {
  const c = runCost(m);
  if (!c.calls && !c.replayed) return undefined;
  const priced = c.calls - c.unpriced;
  const money = !c.calls ? fmtUsd(0) : priced ? `${fmtUsd(c.total)}${c.unpriced ? ` + ${c.unpriced} unpriced` : ''}` : 'no price known';
  const replayed = c.replayed ? ` · ${c.replayed} replayed, not charged` : '';
  const chip = el('span', 'chip run-cost', `${c.calls} LLM call${c.calls === 1 ? '' : 's'} · ${fmtN(c.tokens.inputTokens + c.tokens.outputTokens)} tok · ${money}${replayed}`);
  chip.dataset.testid = 'run-cost';
  chip.dataset.usd = String(c.total);
  chip.title = `${tokenLine(c.tokens)} (inclusive). Prices: @pydantic/genai-prices, bundled at build time.${c.replayed ? ` ${c.replayed} call${c.replayed === 1 ? ' was' : 's were'} answered from the recording: nothing sent, nothing charged (they cost ${fmtUsd(c.saved)} when recorded).` : ''}`;
  return chip;
}

const short = (v: unknown) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v) ?? '';
  return s.length > MAX_DIFF_CHARS ? `${s.slice(0, MAX_DIFF_CHARS)}…` : s;
};
const contentOf = (m: unknown) => (m && typeof m === 'object' && 'content' in m ? (m as { content: unknown }).content : m);

/** The prompt diff as lines of text (what the panel lists, one change a line). */
export function diffLines(d: PromptDiff): string[] {
  if (d.same) return ['same prompt as the previous call'];
  const out: string[] = [];
  if (d.model) out.push(`model changed: ${d.model.before ?? '—'} → ${d.model.after ?? '—'}`);
  if (d.system) out.push(`system prompt changed: “${short(d.system.before ?? '')}” → “${short(d.system.after ?? '')}”`);
  out.push(`${d.kept} message${d.kept === 1 ? '' : 's'} unchanged`);
  for (const c of d.changed) out.push(`~ message ${c.index}${c.role ? ` (${c.role})` : ''} changed: ${short(contentOf(c.after))}`);
  for (const c of d.added) out.push(`+ message ${c.index}${c.role ? ` (${c.role})` : ''}: ${short(contentOf(c.after))}`);
  for (const c of d.removed) out.push(`− message ${c.index}${c.role ? ` (${c.role})` : ''} removed`);
  if (d.tools.added.length) out.push(`tools added: ${d.tools.added.join(', ')}`);
  if (d.tools.removed.length) out.push(`tools removed: ${d.tools.removed.join(', ')}`);
  if (d.tools.changed.length) out.push(`tools changed (schema): ${d.tools.changed.join(', ')}`);
  return out;
}

/** The inspector's "context and cost" section for one call of an LLM node. */
export function contextPanel(n: GNode, i: Instance): HTMLElement | undefined {
  if (n.kind !== 'llm') return undefined;
  const box = el('div', 'context-cost');
  box.dataset.testid = 'context-cost';
  box.append(el('h4', '', 'Context and cost'));
  const t = tokensOf(i.usage);
  const { model } = modelOf(i);
  if (t) {
    const line = el('div', 'mono', `tokens: ${tokenLine(t)}`);
    line.dataset.testid = 'call-tokens';
    box.append(line);
    const p = callPrice(i, t);
    const priced = p ? `${fmtUsd(p.total)} (input ${fmtUsd(p.input)}, output ${fmtUsd(p.output)}) · ${model}` : `no price known for ${model ?? 'an unnamed model'}`;
    // a replayed call was answered from the recording: nothing was sent or charged
    const cost = el('div', '', i.replayed ? `cost: $0, answered from the recording (recorded: ${priced})` : `cost: ${priced}`);
    cost.dataset.testid = 'call-cost';
    if (p) cost.dataset.usd = String(i.replayed ? 0 : p.total);
    box.append(cost);
    if (p?.contextWindow) {
      const pct = (100 * t.inputTokens) / p.contextWindow;
      const fill = el('div', 'ctx-fill');
      fill.dataset.testid = 'context-fill';
      fill.title = `${fmtN(t.inputTokens)} of ${fmtN(p.contextWindow)} tokens`;
      const bar = el('span', 'ctx-bar');
      const inner = el('span', 'ctx-bar-in');
      inner.style.width = `${Math.min(100, pct).toFixed(1)}%`;
      bar.append(inner);
      fill.append(el('span', '', `context ${pct < 1 ? pct.toFixed(2) : pct.toFixed(0)}% of ${fmtN(p.contextWindow)}`), bar);
      box.append(fill);
    }
  } else if (i.status !== 'running') box.append(el('div', 'muted', 'no usage recorded'));
  const k = n.instances.indexOf(i);
  if (k > 0) {
    const prev = n.instances[k - 1];
    const d = promptDiff(prev.input, i.input, { before: prev.usage, after: i.usage });
    const list = el('div', 'prompt-diff');
    list.dataset.testid = 'prompt-diff';
    list.append(el('div', 'muted', `prompt diff against call ${k} of ${n.instances.length}`));
    for (const line of diffLines(d)) list.append(el('div', 'mono', line));
    if (d.cacheMiss) {
      const miss = el('div', 'cache-miss', `cache miss: cached tokens dropped from ${fmtN(d.cacheMiss.before)} to ${fmtN(d.cacheMiss.after)}`);
      miss.dataset.testid = 'cache-miss';
      list.append(miss);
    }
    box.append(list);
  }
  return box;
}
