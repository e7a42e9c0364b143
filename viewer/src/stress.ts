// Synthetic runs for `?stress=N` and for the benchmarks: a deterministic agent tree of N
// nodes (agents, steps, tools, retrievers) and about 16 events per node.
import type { Envelope } from './model';

const KINDS = ['llm', 'tool', 'tool', 'retriever', 'chain', 'tool'];
/** The model and provider the synthetic LLM calls name (genai-prices knows both). */
export const LLM_MODEL = 'gpt-4o';
export const LLM_PROVIDER = 'openai';

function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

/** Envelopes of one synthetic run with `nodes` logical nodes and about `events` events. */
export function stressRun(nodes: number, events = nodes * 16, runId = `run_stress${nodes}`, t0 = 1_760_000_000_000): Envelope[] {
  nodes = Math.max(8, Math.min(4000, Math.floor(nodes)));
  const rand = rng(nodes * 7919);
  const out: Envelope[] = [];
  let seq = 0;
  let ts = t0;
  const push = (type: string, payload: unknown) => out.push({ gm: 1, seq: seq++, ts: (ts += 1 + Math.floor(rand() * 30)), runId, type, payload });
  push('run.started', { app: 'stress', sdk: { name: 'viewer-stress', version: '0' } });
  // tree: a root agent, sub-agents every ~25 nodes, each sub-agent with steps and tools
  const ids: { id: string; kind: string; name: string; parentId?: string }[] = [{ id: 'agent:stress', kind: 'agent', name: 'stress' }];
  let currentAgent = 'agent:stress';
  let currentStep = 'agent:stress';
  for (let i = 1; i < nodes; i++) {
    if (i % 25 === 1) {
      const id = `agent:sub${i}`;
      ids.push({ id, kind: 'agent', name: `sub${i}`, parentId: 'agent:stress' });
      currentAgent = currentStep = id;
      continue;
    }
    if (i % 5 === 2) {
      const id = `llm:step${i}`;
      ids.push({ id, kind: 'llm', name: `step${i}`, parentId: currentAgent });
      currentStep = id;
      continue;
    }
    const kind = KINDS[Math.floor(rand() * KINDS.length)];
    ids.push({ id: `${kind}:n${i}`, kind, name: `${kind === 'tool' ? 'call' : kind}${i}`, parentId: currentStep });
  }
  const perNode = Math.max(3, Math.floor(events / nodes));
  const kids = new Map<string, typeof ids>();
  for (const n of ids) if (n.parentId) (kids.get(n.parentId) ?? kids.set(n.parentId, []).get(n.parentId)!).push(n);
  // Depth-first, so a parent's execution spans its children's (a realistic waterfall):
  // start, stream, run the children (first execution only), finish.
  const emit = (n: (typeof ids)[number], k: number) => {
    const instances = Math.max(1, Math.round((perNode - 2) / 6));
    for (let j = 0; j < instances; j++) {
      const instanceId = `${n.id}#${j}`;
      const start = ts + 1;
      // LLM calls carry what a recorded model call carries (model, provider, messages), so
      // the cost panel prices them
      const input = n.kind === 'llm' ? { model: LLM_MODEL, provider: LLM_PROVIDER, messages: [{ role: 'user', content: `query ${k}` }], attempt: j } : { q: `query ${k}`, attempt: j };
      push('node.started', { nodeId: n.id, kind: n.kind, name: n.name, instanceId, parentId: n.parentId, input });
      const tokenEvents = Math.max(0, perNode / instances - 2);
      for (let t = 0; t < tokenEvents; t++) push('node.token', { nodeId: n.id, instanceId, deltas: [{ t: 'text', v: `tok${t} ` }] });
      if (j === 0) for (const c of kids.get(n.id) ?? []) emit(c, ids.indexOf(c));
      const fail = rand() < 0.03;
      if (fail) push('node.error', { nodeId: n.id, instanceId, error: { name: 'Error', message: `synthetic failure in ${n.name}` } });
      else push('node.finished', { nodeId: n.id, instanceId, status: 'ok', durationMs: ts - start, output: { ok: true, n: k }, usage: n.kind === 'llm' ? { inputTokens: 100 + k, outputTokens: 20, cacheReadTokens: j ? 64 : 0 } : undefined });
    }
  };
  emit(ids[0], 0);
  push('run.finished', { status: 'ok' });
  return out;
}
