'use strict';
/**
 * The npm `openai` facade: `graphmind({app, ...options})` returns `{session, ready, run,
 * wrapClient, wrapTools, tool, dispose}`.
 *
 * `wrapClient(new OpenAI())` is a `Proxy` over the client (see `client.js`): every Chat
 * Completions and Responses request, made directly (`chat.completions.create`,
 * `responses.create`, `stream: true` included) or through the client's helpers
 * (`chat.completions.stream()` / `.parse()` / `.runTools()`, `responses.stream()` /
 * `.parse()`), is one `llm:step` call of the core's LLM step with the `openai-chat` /
 * `openai-responses` codec. `wrapTools({fn})` gates plain tool functions called as
 * `tools[name](args, toolCall)`; the tool call's id is the execution's instance id.
 */
const { createFacade, packageVersion } = require('./facade.js');
const { clientWrapper, resourceSpec } = require('./client.js');
const { isAbortError } = require('./index.js');

/** `node.started.sdk` of the model calls made through this facade. */
const SDK_NAME = 'openai';

/** The client's model resources, and the helpers that build on their `create`. */
const RESOURCES = Object.freeze([
  resourceSpec(['chat', 'completions'], 'openai-chat', ['stream', 'parse', 'runTools']),
  resourceSpec(['responses'], 'openai-responses', ['stream', 'parse']),
]);

/** The facade over one session (never throws; the identity wrappers when disabled). */
function graphmind(options = {}) {
  const facade = createFacade(options, {
    app: 'openai-app',
    sdk: { name: 'openai', version: packageVersion('openai') },
  });
  return { ...facade, wrapClient: clientWrapper(facade, RESOURCES, SDK_NAME) };
}

module.exports = { graphmind, isAbortError, RESOURCES };
