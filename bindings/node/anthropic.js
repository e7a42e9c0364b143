'use strict';
/**
 * The npm `@anthropic-ai/sdk` facade: `graphmind({app, ...options})` returns `{session,
 * ready, run, wrapClient, wrapTools, tool, dispose}`.
 *
 * `wrapClient(new Anthropic())` is a `Proxy` over the client (see `client.js`): every
 * `messages.create` (`stream: true` included), `messages.stream()` and `messages.parse()`,
 * and the same under `beta.messages`, is one `llm:step` call of the core's LLM step with
 * the `anthropic` codec: text, `tool_use` blocks (calls and their streamed input on the
 * `tool-args` channel), thinking deltas on the `reasoning` channel, inclusive usage.
 */
const { createFacade, packageVersion } = require('./facade.js');
const { clientWrapper, resourceSpec } = require('./client.js');
const { isAbortError } = require('./index.js');

/** `node.started.sdk` of the model calls made through this facade. */
const SDK_NAME = 'anthropic';

/** The client's model resources, and the helpers that build on their `create`. */
const RESOURCES = Object.freeze([
  resourceSpec(['messages'], 'anthropic', ['stream', 'parse']),
  resourceSpec(['beta', 'messages'], 'anthropic', ['stream', 'parse']),
]);

/** The facade over one session (never throws; the identity wrappers when disabled). */
function graphmind(options = {}) {
  const facade = createFacade(options, {
    app: 'anthropic-app',
    sdk: { name: '@anthropic-ai/sdk', version: packageVersion('@anthropic-ai/sdk') },
  });
  return { ...facade, wrapClient: clientWrapper(facade, RESOURCES, SDK_NAME) };
}

module.exports = { graphmind, isAbortError, RESOURCES };
