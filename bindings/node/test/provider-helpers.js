'use strict';
// Scripted answers for tests/fake_provider/server.py in each wire format, and readers of
// what a run stored: shared by the openai and anthropic tests.

/** A Chat Completions answer. */
function chat(content, { toolCalls, finish = 'stop', usage, id = 'chatcmpl-1' } = {}) {
  const message = { role: 'assistant', content: content ?? null };
  if (toolCalls) message.tool_calls = toolCalls;
  const body = {
    id, object: 'chat.completion', created: 1, model: 'gpt-test',
    choices: [{ index: 0, message, finish_reason: finish, logprobs: null }],
  };
  if (usage) body.usage = usage;
  return { status: 200, json: body };
}

/** One Chat Completions stream chunk (an SSE event). */
function chunk(delta, { finish = null, usage } = {}) {
  const c = { id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model: 'gpt-test' };
  c.choices = delta === null ? [] : [{ index: 0, delta, finish_reason: finish }];
  if (usage) c.usage = usage;
  return [null, c];
}

/** A streamed Chat Completions answer: "Sunny" in two pieces, then usage. */
function chatStream() {
  return {
    status: 200,
    sse: [
      chunk({ role: 'assistant', content: 'Sun' }),
      chunk({ content: 'ny' }, { finish: 'stop' }),
      chunk(null, { usage: { prompt_tokens: 20, completion_tokens: 9, total_tokens: 29 } }),
      [null, '[DONE]'],
    ],
  };
}

/** A Responses answer with `text`. */
function response(text, { id = 'resp_1' } = {}) {
  return {
    status: 200,
    json: {
      id, object: 'response', created_at: 1, model: 'gpt-test', status: 'completed',
      output: [{ type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] }],
      usage: { input_tokens: 5, output_tokens: 2, total_tokens: 7 },
    },
  };
}

/** A streamed Responses answer of `text` in two deltas. */
function responseStream(text, { id = 'resp_s' } = {}) {
  const half = Math.ceil(text.length / 2);
  const done = response(text, { id }).json;
  const created = { ...done, status: 'in_progress', output: [], usage: null };
  const ev = (type, data) => [type, { type, ...data }];
  const item = done.output[0];
  const at = { item_id: item.id, output_index: 0, content_index: 0 };
  return {
    status: 200,
    sse: [
      ev('response.created', { response: created, sequence_number: 0 }),
      ev('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] }, sequence_number: 1 }),
      ev('response.content_part.added', { ...at, part: { type: 'output_text', text: '', annotations: [] }, sequence_number: 2 }),
      ev('response.output_text.delta', { ...at, delta: text.slice(0, half), sequence_number: 3 }),
      ev('response.output_text.delta', { ...at, delta: text.slice(half), sequence_number: 4 }),
      ev('response.output_text.done', { ...at, text, sequence_number: 5 }),
      ev('response.content_part.done', { ...at, part: item.content[0], sequence_number: 6 }),
      ev('response.output_item.done', { output_index: 0, item, sequence_number: 7 }),
      ev('response.completed', { response: done, sequence_number: 8 }),
    ],
  };
}

/** An Anthropic Messages answer of content blocks. */
function message(content, { stop = 'end_turn', usage = { input_tokens: 12, output_tokens: 4 }, id = 'msg_1' } = {}) {
  return {
    status: 200,
    json: { id, type: 'message', role: 'assistant', model: 'claude-test', content, stop_reason: stop, stop_sequence: null, usage },
  };
}

/** A streamed Anthropic answer: thinking, text in two deltas, a tool_use block. */
function messageStream() {
  const ev = (type, data) => [type, { type, ...data }];
  return {
    status: 200,
    sse: [
      ev('message_start', { message: { id: 'msg_s', type: 'message', role: 'assistant', model: 'claude-test', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1, cache_read_input_tokens: 3 } } }),
      ev('content_block_start', { index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } }),
      ev('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'Let me think.' } }),
      ev('content_block_delta', { index: 0, delta: { type: 'signature_delta', signature: 'sig' } }),
      ev('content_block_stop', { index: 0 }),
      ev('content_block_start', { index: 1, content_block: { type: 'text', text: '' } }),
      ev('content_block_delta', { index: 1, delta: { type: 'text_delta', text: 'Checking ' } }),
      ev('content_block_delta', { index: 1, delta: { type: 'text_delta', text: 'the weather.' } }),
      ev('content_block_stop', { index: 1 }),
      ev('content_block_start', { index: 2, content_block: { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} } }),
      ev('content_block_delta', { index: 2, delta: { type: 'input_json_delta', partial_json: '{"city":' } }),
      ev('content_block_delta', { index: 2, delta: { type: 'input_json_delta', partial_json: '"Faro"}' } }),
      ev('content_block_stop', { index: 2 }),
      ev('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 15 } }),
      ev('message_stop', {}),
    ],
  };
}

/** The payloads of `type` (of node `nodeId` when given) among stored events. */
function of(events, type, nodeId) {
  return events.filter((e) => e.type === type && (nodeId === undefined || e.payload.nodeId === nodeId)).map((e) => e.payload);
}

/** The stored events of a finished run (waits for its run.finished). */
async function runEvents(srv, gm, runId) {
  gm.session.flushSync(5000);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const events = await srv.events(runId, 1);
    if ((events.length && events[events.length - 1].type === 'run.finished') || Date.now() > deadline) return events;
    await new Promise((r) => setTimeout(r, 30));
  }
}

/** The text the node streamed on `channel` (its node.token batches, joined). */
function streamed(events, channel = 'text', nodeId = 'llm:step') {
  return of(events, 'node.token', nodeId).flatMap((t) => t.deltas).filter((d) => d.t === channel).map((d) => d.v).join('');
}

module.exports = { chat, chunk, chatStream, response, responseStream, message, messageStream, of, runEvents, streamed };
