'use strict';
/**
 * The Vercel AI SDK facade: `graphmind({app, ...options})` returns `{session, ready, run,
 * wrapTools, wrapModel, dispose}`. Each wrapper is the identity when the session is
 * disabled. Tools are gated calls driven by the core's `Step`, model calls by its LLM step.
 */
const { createSession, isAbortError } = require('./index.js');

/** `node.started.sdk` of a model call made through `wrapModel`. */
const SDK_NAME = 'ai-sdk';

function aiVersion() {
  try {
    return String(require('ai/package.json').version);
  } catch {
    return 'unknown';
  }
}

/** `wrapLanguageModel` from the app's own `ai` package. */
function loadAi() {
  return require('ai');
}

function graphmind(options = {}) {
  const { app, sdk, waitForAttach, ...sessionOptions } = options || {};
  const session = createSession({
    ...sessionOptions,
    appName: app ?? 'ai-app',
    sdk: sdk ?? { name: 'ai', version: aiVersion() },
  });

  // waitForAttach: the first run / model step / tool call awaits ready() once.
  let attachWait = waitForAttach ? undefined : null;
  const maybeWait = () => {
    if (attachWait === null) return null;
    if (attachWait === undefined) {
      const timeoutMs = typeof waitForAttach === 'number' ? waitForAttach : undefined;
      attachWait = session.ready({ timeoutMs }).then(() => { attachWait = null; });
    }
    return attachWait;
  };

  const wrapTool = (name, tool) => {
    if (!tool || typeof tool.execute !== 'function') return tool; // provider-executed: observed, not gated
    const call = session.wrapCall('tool', name, tool.execute.bind(tool), { editable: true });
    return {
      ...tool,
      async execute(input, callOptions) {
        const wait = maybeWait();
        if (wait) await wait;
        return call(input, callOptions);
      },
    };
  };

  // Model calls are the core's LLM step with the AI SDK codec (`ai-sdk`): this only turns
  // the call's options into the request value and the stream into its parts.
  const request = (params, model, stream) => ({
    ...params,
    model: model && model.modelId,
    ...(stream ? { stream: true } : {}),
  });
  const withRecordedStream = (result, record) => ({ ...result, stream: record(result.stream) });
  const middleware = {
    specificationVersion: 'v3',
    async wrapGenerate({ doGenerate, params, model }) {
      const wait = maybeWait();
      if (wait) await wait;
      return session.callModel('ai-sdk', request(params, model, false), () => doGenerate(), { sdk: SDK_NAME });
    },
    async wrapStream({ doStream, params, model }) {
      const wait = maybeWait();
      if (wait) await wait;
      return session.callModel('ai-sdk', request(params, model, true), () => doStream(), {
        sdk: SDK_NAME,
        stream: withRecordedStream,
      });
    },
  };

  return {
    session,

    ready(opts) {
      return session.ready(opts);
    },

    wrapModel(model) {
      if (!session.enabled) return model;
      try {
        return loadAi().wrapLanguageModel({ model, middleware });
      } catch (error) {
        console.warn(`[graphmind] wrapModel failed; the model runs uninstrumented (${error && error.message})`);
        return model;
      }
    },

    wrapTools(tools) {
      if (!session.enabled || !tools || typeof tools !== 'object') return tools;
      const out = {};
      for (const [name, tool] of Object.entries(tools)) out[name] = wrapTool(name, tool);
      return out;
    },

    async run(name, fn) {
      const wait = maybeWait();
      if (wait) await wait;
      // The run's agent node is recorded, not gated.
      return session.run(name, (ctx) => session.observe('agent', name, () => fn(ctx)));
    },

    async dispose() {
      await session.dispose();
    },
  };
}

module.exports = { graphmind, isAbortError };
