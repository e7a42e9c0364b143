'use strict';
/**
 * The Vercel AI SDK facade: `graphmind({app, ...options})` returns `{session, ready, run,
 * wrapTools, wrapModel, dispose}`. Each wrapper is the identity when the session is
 * disabled. Tools are gated calls driven by the core's `Step`, model calls by its LLM step.
 */
const { isAbortError } = require('./index.js');
const { createFacade, packageVersion } = require('./facade.js');
const { signalFilter } = require('./signals.js');

/** `node.started.sdk` of a model call made through `wrapModel`. */
const SDK_NAME = 'ai-sdk';

/** `wrapLanguageModel` from the app's own `ai` package. */
function loadAi() {
  return require('ai');
}

/**
 * The JSON Schema of a tool's `inputSchema` (zod, Standard Schema or the AI SDK's
 * `jsonSchema()`), through the app's own `ai` (`asSchema`): a promise, or `null` when the
 * tool declares none. The core re-checks an edited argument against it.
 */
function toolJsonSchema(tool) {
  if (!tool || tool.inputSchema === undefined || tool.inputSchema === null) return null;
  return Promise.resolve().then(() => loadAi().asSchema(tool.inputSchema).jsonSchema);
}

/** The AI SDK passes the call's options (`toolCallId`, ...) second: the tool call. */
function callOptions(args) {
  return args.length > 1 ? args[1] : null;
}

function graphmind(options = {}) {
  const facade = createFacade(options, { app: 'ai-app', sdk: { name: 'ai', version: packageVersion('ai') } });
  const { session, attached } = facade;
  const maybeWait = attached;
  // While attached, the app's abortSignal is chained with the run's, its timeouts held back.
  const held = signalFilter(session);
  const withHeldSignal = (options) => (options && options.abortSignal && session.attached
    ? { ...options, abortSignal: held(options.abortSignal) }
    : options);

  const wrapTool = (name, tool) => {
    if (!tool || typeof tool.execute !== 'function') return tool; // provider-executed: observed, not gated
    const call = session.wrapCall('tool', name, tool.execute.bind(tool), {
      editable: true,
      toolCall: callOptions,
      inputSchema: toolJsonSchema(tool),
    });
    return {
      ...tool,
      async execute(input, callOpts) {
        const wait = maybeWait();
        if (wait) await wait;
        return call(input, withHeldSignal(callOpts));
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
  const withRecordedStream = (result, recorder) => ({ ...result, stream: recorder.readable(result.stream) });
  const middleware = {
    specificationVersion: 'v3',
    async transformParams({ params }) {
      return withHeldSignal(params);
    },
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
    ...facade,

    wrapModel(model) {
      if (!session.enabled) return model;
      try {
        return loadAi().wrapLanguageModel({ model, middleware });
      } catch (error) {
        session.warn('wrap-model-failed', `wrapModel failed; the model runs uninstrumented (${error && error.message})`);
        return model;
      }
    },

    wrapTools(tools) {
      if (!session.enabled || !tools || typeof tools !== 'object') return tools;
      const out = {};
      for (const [name, tool] of Object.entries(tools)) out[name] = wrapTool(name, tool);
      return out;
    },
  };
}

module.exports = { graphmind, isAbortError };
