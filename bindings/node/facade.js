'use strict';
/**
 * What every provider facade (`/openai`, `/anthropic`, `/ai-sdk`) shares:
 * `graphmind({app, sdk, waitForAttach, ...options})` makes one session and returns
 * `{session, ready, run, wrapTools, tool, dispose}`, to which each facade adds its own
 * `wrapClient` / `wrapModel`. Every wrapper is the identity when the session is disabled.
 * The options are the session's (`createSession`, resolved by the core, which also knows
 * `tokenFlushIntervalMs`); `app` is `appName`.
 */
const fs = require('node:fs');
const path = require('node:path');
const { createSession } = require('./index.js');

/** How many directories above a package's entry point its package.json is looked for. */
const MAX_PACKAGE_DEPTH = 4;

/** The version of an installed package (labels the session's `sdk`), or `unknown`. */
function packageVersion(name) {
  try {
    // A package whose `exports` map `./*` into a build folder answers with that folder's
    // package.json, which has no version: then it is read beside the entry point.
    const { version } = require(`${name}/package.json`);
    if (version !== undefined) return String(version);
  } catch { /* not exported: read it beside the package's entry point */ }
  try {
    let dir = path.dirname(require.resolve(name));
    for (let i = 0; i < MAX_PACKAGE_DEPTH; i += 1) {
      const file = path.join(dir, 'package.json');
      if (fs.existsSync(file)) {
        const meta = JSON.parse(fs.readFileSync(file, 'utf8'));
        if (meta.name === name) return String(meta.version);
      }
      dir = path.dirname(dir);
    }
  } catch { /* not installed */ }
  return 'unknown';
}

/** The tool call a dispatch passes as the second argument: `tools[name](args, toolCall)`. */
function secondArgument(args) {
  return args.length > 1 ? args[1] : null;
}

/**
 * A facade's `tool(name, fn)`: one gated tool function `fn(args, toolCall)`, its instance id
 * the call's id. `attached()`: the `waitForAttach` promise (or `null`). `locate()`, when
 * given, says where a call records, `{ctx, parentId}` (the run and the parent node of the
 * framework code calling it) or `null` (the current run, no parent).
 */
function toolWrapper(session, attached, locate) {
  const parentId = locate ? () => { const at = locate(); return at ? at.parentId : null; } : null;
  return (name, fn) => {
    if (!session.enabled || typeof fn !== 'function') return fn;
    const call = session.wrapCall('tool', String(name), fn, { editable: true, toolCall: secondArgument, parentId });
    return function graphmindTool(...args) {
      const at = locate ? locate() : null;
      const go = () => (at ? session.within(at.ctx, () => call.apply(this, args)) : call.apply(this, args));
      const wait = attached();
      return wait ? wait.then(go) : go();
    };
  };
}

/**
 * The shared part of a facade. `defaults`: `{app, sdk}` (the app name and `sdk` label
 * when the options give none).
 */
function createFacade(options, defaults) {
  const { app, sdk, waitForAttach, ...sessionOptions } = options && typeof options === 'object' ? options : {};
  const session = createSession({
    ...sessionOptions,
    appName: app ?? sessionOptions.appName ?? defaults.app,
    sdk: sdk ?? defaults.sdk,
  });

  // waitForAttach: the first run / model call / tool call awaits ready() once.
  let attachWait = waitForAttach ? undefined : null;
  const attached = () => {
    if (attachWait === null) return null;
    if (attachWait === undefined) {
      const timeoutMs = typeof waitForAttach === 'number' ? waitForAttach : undefined;
      attachWait = session.ready({ timeoutMs }).then(() => { attachWait = null; });
    }
    return attachWait;
  };

  const tool = toolWrapper(session, attached, null);

  return {
    session,
    /** The promise a first call waits on under `waitForAttach` (`null`: none). */
    attached,

    /** Connects now; resolves whether a debugger attached (never rejects). */
    ready(opts) {
      return session.ready(opts);
    },

    tool,

    /** A record of tool functions as gated ones (anything not a function passes as is). */
    wrapTools(tools) {
      if (!session.enabled || !tools || typeof tools !== 'object') return tools;
      const out = {};
      for (const [name, value] of Object.entries(tools)) out[name] = tool(name, value);
      return out;
    },

    /** A run: its agent node (recorded, not gated) is the parent of what runs inside. */
    async run(name, fn) {
      const wait = attached();
      if (wait) await wait;
      return session.run(name, (ctx) => session.observe('agent', name, () => fn(ctx)));
    },

    /** Releases held gates, flushes and closes. Idempotent. */
    async dispose() {
      await session.dispose();
    },
  };
}

module.exports = { createFacade, packageVersion, toolWrapper };
