'use strict';
/**
 * The MCP server facade (`@graphmind/node/mcp`): `graphmind({app, ...options})` returns
 * `{session, ready, run, wrapServer, wrapTools, tool, dispose}`.
 *
 * `wrapServer(new McpServer(...))` is a `Proxy` over the server; the server itself is never
 * mutated. Every `tools/call`, `resources/read` and `prompts/get` that reaches a callback
 * registered through the Proxy (`registerTool` / `registerResource` / `registerPrompt` and
 * the older `tool` / `resource` / `prompt`) is one run named `<method>:<name>`: a
 * `server:<server name>` node with the gated `tool:` / `resource:` / `prompt:` node under
 * it, driven by the core's Step (before / after / error; `retry`, `inject`, `abort`). The
 * gate sits after the SDK has validated the request and before the handler body runs.
 * `connect(transport)` records a `graph.hint` of the registered surface (a short run
 * `mcp:connect <server name>`). A handler asking the client to sample
 * (`server.server.createMessage(params)`, or `extra.sendRequest` with `sampling/createMessage`)
 * is a gated `llm:sampling` node under the handler's node, in the request's run. A low-level
 * `Server` (no `McpServer`) is wrapped the same way: the handlers it is given through
 * `setRequestHandler` for `tools/call`, `resources/read` and `prompts/get` are gated
 * (`resource:<uri>` names a resource: there is no registration), every other method passes
 * untouched, and its own `createMessage` is `llm:sampling`. An injected value that is not already a result is lifted
 * into one (`liftInjected`). Nothing is written to stdout (warnings go to the session's
 * logger, standard error by default). A gate held past `HOLD_WARN_MS` warns once: the MCP
 * client has its own request timeout.
 */
const { AsyncLocalStorage } = require('node:async_hooks');
const { createFacade, packageVersion } = require('./facade.js');
const { isAbortError, native, toJson } = require('./index.js');

/** Marks a Proxy made here, so wrapping twice is the identity. */
const WRAPPED = Symbol.for('graphmind.node.mcp.wrapped');
/** A held request warns once after this long (the MCP SDK's client times out at 60 s). */
const HOLD_WARN_MS = 1000;
/** The session's warning key for the hold warning. */
const HOLD_WARN_KEY = 'mcp-hold';
/** The registration methods of `McpServer`, and the node kind of what each registers. */
const REGISTRARS = Object.freeze({
  registerTool: 'tool',
  tool: 'tool',
  registerResource: 'resource',
  resource: 'resource',
  registerPrompt: 'prompt',
  prompt: 'prompt',
});
/** The MCP method each node kind answers. */
const METHODS = Object.freeze({ tool: 'tools/call', resource: 'resources/read', prompt: 'prompts/get' });
/** The method a server asks its client to sample with (a gated `llm:sampling` node). */
const SAMPLING = 'sampling/createMessage';
/** No result yet (a handler's result can be anything, `undefined` included). */
const NONE = Symbol('none');

function isObject(value) {
  return value !== null && typeof value === 'object';
}

/** The `RequestHandlerExtra` the SDK passes last to every callback. */
function isExtra(value) {
  return isObject(value) && 'requestId' in value && typeof value.sendRequest === 'function';
}

/**
 * An injected `value` as the result `kind`'s method answers with (`CallToolResult`,
 * `ReadResourceResult`, `GetPromptResult`): the core's rule, the one `graphmind mcp-proxy`
 * applies (a string is one text block, an object a text block plus `structuredContent`, a
 * value already of the result's shape passes unchanged; docs/node.md, "/mcp").
 */
function liftInjected(kind, value, uri) {
  const method = kind === 'sampling' ? SAMPLING : METHODS[kind];
  if (!method) return value;
  const params = uri ? JSON.stringify({ uri }) : undefined;
  return JSON.parse(native.mcpLiftInjected(method, params, toJson(value) ?? 'null'));
}

/** What a callback's arguments (the extra taken off) record as the node's input. */
function describeInput(kind, args) {
  if (kind === 'resource') {
    const uri = args[0] instanceof URL ? args[0].href : String(args[0]);
    return args.length > 1 && isObject(args[1]) ? { uri, variables: args[1] } : { uri };
  }
  return args.length > 0 ? args[0] : {};
}

/** The name and version the server was made with (read defensively off the SDK object). */
function serverInfo(server, fallback) {
  try {
    const info = (server.server && server.server._serverInfo) || server._serverInfo;
    if (info && typeof info.name === 'string') return { name: info.name, version: info.version };
  } catch { /* an SDK that keeps it elsewhere */ }
  return { name: fallback, version: undefined };
}

/** The facade over one session (never throws; `wrapServer` is the identity when disabled). */
function graphmind(options = {}) {
  const { server: serverLabel, ...rest } = isObject(options) ? options : {};
  const facade = createFacade(rest, {
    app: 'mcp-server',
    sdk: { name: '@modelcontextprotocol/sdk', version: packageVersion('@modelcontextprotocol/sdk') },
  });
  const { session } = facade;
  let holdWarned = false;

  /** Arms the hold warning while a debugger is attached (a detached gate never holds). */
  const holdTimer = (what) => {
    if (holdWarned || !session.attached) return null;
    const timer = setTimeout(() => {
      if (holdWarned) return;
      holdWarned = true;
      session.warn(HOLD_WARN_KEY, `${what} has been held for over ${HOLD_WARN_MS} ms; the MCP client may time the request out (its own timeout, 60 s in the SDK)`);
    }, HOLD_WARN_MS);
    if (typeof timer.unref === 'function') timer.unref();
    return timer;
  };

  function wrapServer(server) {
    if (!session.enabled || !isObject(server)) return server;
    if (server[WRAPPED] === true) return server;
    /** A low-level `Server` (requests answered by its own `setRequestHandler`). */
    const lowLevel = typeof server.registerTool !== 'function' && typeof server.tool !== 'function';
    if (lowLevel && typeof server.setRequestHandler !== 'function') {
      session.warn('mcp-unknown-server', 'wrapServer: neither an McpServer nor a Server (no registerTool, no setRequestHandler); returned uninstrumented');
      return server;
    }
    let labelled;
    /** The server node's name and version (read once, on first use). */
    const label = () => {
      if (labelled === undefined) {
        const info = serverInfo(server, rest.app ?? rest.appName ?? 'mcp-server');
        labelled = { name: (serverLabel && serverLabel.name) || info.name, version: (serverLabel && serverLabel.version) || info.version };
      }
      return labelled;
    };
    const serverNodeId = () => `server:${label().name}`;
    /** The registered surface, in registration order: `nodeId -> {kind, name}`. */
    const surface = new Map();

    /** The node of the handler running now (what a sampling request hangs under). */
    const handlerNode = new AsyncLocalStorage();
    const sampling = session.wrapCall('llm', 'sampling', function gatedSampling(params, send) { return send(params); }, {
      editable: true,
      parentId: () => handlerNode.getStore() ?? serverNodeId(),
    });
    /** `send(params)` (the real sampling request) as the gated `llm:sampling` node. */
    const sample = async (params, send) => {
      let real = NONE;
      const value = await sampling(params, async (edited) => { real = await send(edited); return real; });
      return value === real && real !== NONE ? value : liftInjected('sampling', value);
    };
    /** The low-level Server with `createMessage` gated (read through `server.server`). */
    let innerView;
    const inner = () => {
      const real = server.server;
      if (!isObject(real) || typeof real.createMessage !== 'function') return real;
      if (innerView === undefined || innerView.target !== real) {
        const createMessage = real.createMessage;
        const gated = (params, ...more) => sample(params, (edited) => createMessage.call(real, edited, ...more));
        innerView = {
          target: real,
          proxy: new Proxy(real, {
            get(target, prop) {
              if (prop === 'createMessage') return gated;
              const value = Reflect.get(target, prop, target);
              return typeof value === 'function' ? value.bind(target) : value;
            },
          }),
        };
      }
      return innerView.proxy;
    };
    /** The handler's `extra` with `sendRequest` gating a sampling request. */
    const extraWith = (extra, signal) => {
      const sendRequest = extra.sendRequest;
      return {
        ...extra,
        signal,
        sendRequest: (req, ...more) => (isObject(req) && req.method === SAMPLING
          ? sample(req.params, (edited) => sendRequest.call(extra, { ...req, params: edited }, ...more))
          : sendRequest.call(extra, req, ...more)),
      };
    };

    /** One incoming request: a run, the server node, the gated node. */
    const request = (kind, name, step, original, thisArg, args) => {
      const last = args.length > 0 ? args[args.length - 1] : undefined;
      const extra = isExtra(last) ? last : undefined;
      const handlerArgs = extra === undefined ? args : args.slice(0, -1);
      let input;
      try { input = describeInput(kind, handlerArgs); } catch { return original.apply(thisArg, args); }
      const uri = kind === 'resource' ? input.uri : undefined;
      const { name: serverName } = label();
      const call = async () => {
        const wait = facade.attached();
        if (wait) await wait;
        return session.run(`${METHODS[kind]}:${name}`, (ctx) => session.observe('server', serverName, async () => {
          // The handler's signal also aborts when the debugger aborts the run.
          const nextExtra = extra === undefined ? undefined : extraWith(extra, AbortSignal.any([extra.signal, ctx.signal]));
          const state = { result: NONE, timer: holdTimer(`${METHODS[kind]} ${name}`) };
          const invoke = async (edited) => {
            clearTimeout(state.timer);
            const callArgs = [...handlerArgs];
            if (kind !== 'resource' && handlerArgs.length > 0) callArgs[0] = edited;
            if (nextExtra !== undefined) callArgs.push(nextExtra);
            try {
              state.result = await handlerNode.run(`${kind}:${name}`, () => original.apply(thisArg, callArgs));
              return state.result;
            } finally {
              state.timer = holdTimer(`${METHODS[kind]} ${name}`);
            }
          };
          try {
            const value = await step.call(invoke, input);
            // Not the handler's own result: the debugger injected it.
            return value === state.result && state.result !== NONE ? value : liftInjected(kind, value, uri);
          } finally {
            clearTimeout(state.timer);
          }
        }));
      };
      return call();
    };

    /**
     * A low-level `Server`'s `setRequestHandler`: the handler of a work method (the core's
     * `gated_request`: tools/call, resources/read, prompts/get) is one run with the gated
     * node under the server node, as a registered callback is; other methods pass untouched.
     */
    const handlerSetter = (method) => function graphmindSetRequestHandler(schema, handler) {
      if (typeof handler !== 'function') return method.call(server, schema, handler);
      const gatedHandler = function graphmindRequestHandler(req, extra) {
        let gated = null;
        try {
          const view = native.mcpGatedRequest(String(req && req.method), isObject(req) && req.params !== undefined ? toJson(req.params) : null);
          gated = view === null ? null : JSON.parse(view);
        } catch { /* fail open: the request runs unrecorded */ }
        if (gated === null) return handler.call(this, req, extra);
        return answer(gated, req, extra, (edited, nextExtra) => handler.call(this, edited === gated.input ? req : { ...req, params: { ...req.params, arguments: edited } }, nextExtra));
      };
      return method.call(server, schema, gatedHandler);
    };

    /** One request of a low-level `Server`: a run, the server node, the gated node. */
    const answer = (gated, req, extra, run) => {
      const { name: serverName } = label();
      const step = session.wrapCall(gated.kind, gated.name, function gatedRequest(edited) { return this(edited); }, {
        editable: gated.editable,
        parentId: serverNodeId,
      });
      const call = async () => {
        const wait = facade.attached();
        if (wait) await wait;
        return session.run(`${req.method}:${gated.name}`, (ctx) => session.observe('server', serverName, async () => {
          // The handler's signal also aborts when the debugger aborts the run.
          const nextExtra = isObject(extra) ? extraWith(extra, AbortSignal.any([extra.signal, ctx.signal])) : extra;
          const state = { result: NONE, timer: holdTimer(`${req.method} ${gated.name}`) };
          const invoke = async (edited) => {
            clearTimeout(state.timer);
            try {
              state.result = await handlerNode.run(gated.nodeId, () => run(edited, nextExtra));
              return state.result;
            } finally {
              state.timer = holdTimer(`${req.method} ${gated.name}`);
            }
          };
          try {
            const value = await step.call(invoke, gated.input);
            return value === state.result && state.result !== NONE ? value : JSON.parse(native.mcpLiftInjected(req.method, toJson(req.params) ?? null, toJson(value) ?? 'null'));
          } finally {
            clearTimeout(state.timer);
          }
        }));
      };
      return call();
    };

    /** The gated step of one registration's node (its name is the node's). */
    const gatedStep = (kind, name) => session.wrapCall(kind, name, function gated(edited) { return this(edited); }, {
      editable: kind !== 'resource',
      parentId: serverNodeId,
    });

    /**
     * One registration: the callback the SDK holds is `entry.handler`, which runs the
     * current `entry.original` as the gated node `kind:entry.name`; `update()` changes the
     * body and the name, never what the SDK holds.
     */
    const gatedEntry = (kind, name, original) => {
      const entry = { kind, name, original, step: gatedStep(kind, name) };
      surface.set(`${kind}:${name}`, { kind, name });
      entry.handler = function graphmindHandler(...handlerArgs) {
        return request(entry.kind, entry.name, entry.step, entry.original, this, handlerArgs);
      };
      return entry;
    };

    /** After the SDK applied an `update()` (or `remove()`): the entry follows it. */
    const applied = (entry, updates) => {
      if (typeof updates.callback === 'function') entry.original = updates.callback;
      const removed = updates.name === null || (entry.kind === 'resource' && updates.uri === null);
      if (removed) {
        surface.delete(`${entry.kind}:${entry.name}`);
      } else if (typeof updates.name === 'string' && updates.name !== entry.name) {
        surface.delete(`${entry.kind}:${entry.name}`);
        entry.name = updates.name;
        entry.step = gatedStep(entry.kind, entry.name);
        surface.set(`${entry.kind}:${entry.name}`, { kind: entry.kind, name: entry.name });
      }
    };

    /**
     * The `RegisteredTool` / `RegisteredResource` / `RegisteredPrompt` the SDK returned, seen
     * through a Proxy whose `update({callback})` hands the SDK the gated handler again (the
     * new callback runs gated) and whose `update({name})` renames the node; `remove()`
     * drops it from the connect hint. The SDK's object is never written by us.
     */
    const registeredView = (registered, entry) => {
      if (!isObject(registered) || typeof registered.update !== 'function') return registered;
      const update = registered.update;
      const remove = registered.remove;
      const gatedUpdate = function graphmindUpdate(updates, ...more) {
        if (!isObject(updates)) return update.call(registered, updates, ...more);
        const given = typeof updates.callback === 'function' ? { ...updates, callback: entry.handler } : updates;
        const result = update.call(registered, given, ...more);
        applied(entry, updates);
        return result;
      };
      const gatedRemove = typeof remove === 'function'
        ? function graphmindRemove(...more) {
          const result = remove.apply(registered, more);
          applied(entry, { name: null });
          return result;
        }
        : remove;
      return new Proxy(registered, {
        get(target, prop) {
          if (prop === 'update') return gatedUpdate;
          if (prop === 'remove') return gatedRemove;
          return Reflect.get(target, prop, target);
        },
      });
    };

    /** A registration method whose last function argument (the callback) is gated. */
    const registrar = (method, kind) => function graphmindRegister(...args) {
      let callArgs = args;
      let entry = null;
      try {
        const name = typeof args[0] === 'string' ? args[0] : null;
        let at = -1;
        for (let i = args.length - 1; i > 0; i -= 1) {
          if (typeof args[i] === 'function') { at = i; break; }
        }
        if (name !== null && at > 0) {
          entry = gatedEntry(kind, name, args[at]);
          callArgs = [...args];
          callArgs[at] = entry.handler;
        }
      } catch {
        callArgs = args;
        entry = null;
      }
      // The SDK's own errors (a duplicate name, a bad schema) are the app's, raised once.
      const registered = method.apply(server, callArgs);
      if (entry === null) return registered;
      try {
        return registeredView(registered, entry);
      } catch {
        return registered;
      }
    };

    /** `connect`: waits for the debugger under `waitForAttach`, then the graph hint. */
    const connect = (method) => async function graphmindConnect(...args) {
      const wait = facade.attached();
      if (wait) await wait;
      const result = await method.apply(server, args);
      try {
        const { name: serverName } = label();
        const serverId = serverNodeId();
        const nodes = [{ nodeId: serverId, kind: 'server', name: serverName }];
        for (const [nodeId, { kind, name }] of surface) nodes.push({ nodeId, kind, name, parentId: serverId });
        await session.run(`mcp:connect ${serverName}`, () => session.emit('graph.hint', { nodes }));
      } catch { /* fail open */ }
      return result;
    };

    const views = new Map();
    const bound = new Map();
    return new Proxy(server, {
      get(target, prop) {
        if (prop === WRAPPED) return true;
        if (prop === 'server' && !lowLevel) return inner();
        const value = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        if (!views.has(prop)) {
          if (lowLevel && prop === 'setRequestHandler') views.set(prop, handlerSetter(value));
          else if (lowLevel && prop === 'createMessage') views.set(prop, (params, ...more) => sample(params, (edited) => value.call(target, edited, ...more)));
          else if (!lowLevel && typeof prop === 'string' && Object.hasOwn(REGISTRARS, prop)) views.set(prop, registrar(value, REGISTRARS[prop]));
          else if (prop === 'connect') views.set(prop, connect(value));
          else {
            // The SDK's classes keep private fields: their methods run on the real object.
            if (!bound.has(prop)) bound.set(prop, value.bind(target));
            return bound.get(prop);
          }
        }
        return views.get(prop);
      },
      set(target, prop, value) {
        return Reflect.set(target, prop, value, target);
      },
    });
  }

  return { ...facade, wrapServer };
}

module.exports = { graphmind, isAbortError, liftInjected, HOLD_WARN_MS };
