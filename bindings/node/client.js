'use strict';
/**
 * `wrapClient` for the Stainless-generated provider clients (npm `openai`,
 * `@anthropic-ai/sdk`): a tree of `Proxy`s over the app's client that never touches the
 * client itself. Only each model resource's `create` is intercepted: it becomes one model
 * call of the core's LLM step (`Session.callModel`). The client's helpers (`.stream()`,
 * `.parse()`, `.runTools()`) are called against a view of their resource whose `create`
 * is the intercepted one and whose `_client` is the wrapped client, so the requests they
 * make internally are the same model calls, recorded once. Everything else is the real
 * object's, methods bound to it (the clients keep `#private` fields, which a `Proxy` as
 * `this` cannot reach).
 *
 * What a provider's calls record, what an injected reply looks like, and what each gate
 * decision means are the core's; this module only reads the client's objects: whether an
 * answer is a stream (it iterates and can `tee()`), and the stream's chunks.
 */

/** Marks a wrapped client (`wrapClient` of one returns it as it is). */
const WRAPPED = Symbol.for('graphmind.node.wrappedClient');

/** Whether `value` is a client this module wrapped. */
function isWrapped(value) {
  try {
    return value !== null && typeof value === 'object' && value[WRAPPED] === true;
  } catch {
    return false;
  }
}

/** A provider stream: async-iterable with a `tee()` (the Stainless clients' `Stream`). */
function isClientStream(value) {
  return value !== null && typeof value === 'object'
    && typeof value[Symbol.asyncIterator] === 'function' && typeof value.tee === 'function';
}

/**
 * The answer for the app when it is a stream, else `undefined` (the `stream` hook of
 * `callModel`): the stream is teed, the app gets one branch and GraphMind drains the other
 * in the background, so both see the same chunks and the call is recorded to its end
 * even when the app stops reading half-way.
 */
function teeForRecording(result, recorder) {
  if (!isClientStream(result)) return undefined;
  const [forApp, forRecord] = result.tee();
  recorder.background(drain(forRecord, recorder, result.controller));
  return forApp;
}

async function drain(stream, recorder, controller) {
  try {
    for await (const chunk of stream) recorder.chunk(chunk);
    // The clients end an aborted stream quietly: the controller tells it apart.
    recorder.end(null, Boolean(controller && controller.signal && controller.signal.aborted));
  } catch (error) {
    recorder.end(error);
  }
}

/**
 * What a wrapped `create` returns: a promise of the answer with the parts of the client's
 * `APIPromise` the app and the client's own helpers use (`withResponse()`,
 * `asResponse()`, `_thenUnwrap()`), reached through the client's promise once the request
 * was sent. `run(track)` makes the gated call and hands `track` that promise.
 */
function gatedPromise(run) {
  let sent = null;
  const settled = run((promise) => { sent = promise; });
  // Like the client's own promise, an answer nobody awaits is not an unhandled rejection.
  settled.catch(() => {});
  const response = async () => {
    await settled;
    if (!sent || typeof sent.asResponse !== 'function') {
      throw new Error('graphmind: no HTTP response (the answer was injected by the debugger)');
    }
    return sent.asResponse();
  };
  return Object.assign(settled, {
    asResponse: response,
    async withResponse() {
      const data = await settled;
      const raw = await response();
      const requestId = raw && raw.headers && typeof raw.headers.get === 'function' ? raw.headers.get('x-request-id') : null;
      return { data, response: raw, request_id: requestId };
    },
    _thenUnwrap(transform) {
      return gatedPromise(async (track) => {
        const data = await settled;
        if (sent) track(sent);
        let raw;
        try { raw = await response(); } catch { raw = undefined; }
        return transform(data, { response: raw });
      });
    },
  });
}

/**
 * A method table entry: the resource at `path` (from the client) speaks `api` (the
 * core's codec name) through its `create`; its `helpers` build on that `create`.
 */
function resourceSpec(path, api, helpers) {
  return Object.freeze({ path: Object.freeze(path), api, helpers: Object.freeze(helpers) });
}

/**
 * The wrapped client. `specs`: the resources to intercept; `callModel(api, request, send)`:
 * the facade's model call (the session's, with the attach wait and the stream hook).
 */
function wrapClient(client, specs, callModel) {
  if (client === null || typeof client !== 'object' || isWrapped(client)) return client;
  let root;
  const getRoot = () => root;
  root = proxyNode(client, specs, 0, callModel, getRoot);
  return root;
}

/**
 * A proxy of `target` whose properties are looked up once each: `pick(obj, prop, value)`
 * gives what a property reads as (a method bound, a deeper proxy...); `own(prop)`, when
 * it is not `undefined`, answers first and is never cached. Setting a property forgets it.
 */
function cachedProxy(target, pick, own = () => undefined) {
  const cache = new Map();
  return new Proxy(target, {
    get(obj, prop) {
      const answer = own(prop);
      if (answer !== undefined) return answer;
      if (cache.has(prop)) return cache.get(prop);
      const out = pick(obj, prop, Reflect.get(obj, prop));
      cache.set(prop, out);
      return out;
    },
    set(obj, prop, value) {
      cache.delete(prop);
      return Reflect.set(obj, prop, value);
    },
  });
}

/** The proxy of the object reached at `depth` along the specs' paths. */
function proxyNode(target, specs, depth, callModel, getRoot) {
  const here = specs.filter((s) => s.path.length === depth);
  if (here.length > 0) return proxyResource(target, here[0], callModel, getRoot);
  const own = (prop) => (prop === WRAPPED && depth === 0 ? true : undefined);
  return cachedProxy(target, (obj, prop, value) => {
    const below = specs.filter((s) => s.path[depth] === prop);
    if (below.length > 0 && value !== null && typeof value === 'object') {
      return proxyNode(value, below, depth + 1, callModel, getRoot);
    }
    return typeof value === 'function' ? value.bind(obj) : value;
  }, own);
}

/** A model resource: `create` gated, its helpers run against a view that uses it. */
function proxyResource(resource, spec, callModel, getRoot) {
  const original = resource.create;
  const create = typeof original === 'function'
    ? function create(body, options) {
      return gatedPromise((track) => callModel(spec.api, body, () => {
        const promise = original.call(resource, body, options);
        track(promise);
        return promise;
      }));
    }
    : undefined;
  const view = new Proxy(resource, {
    get(obj, prop) {
      if (prop === 'create' && create) return create;
      if (prop === '_client') return getRoot();
      return Reflect.get(obj, prop);
    },
  });
  return cachedProxy(resource, (obj, prop, value) => {
    if (prop === 'create' && create) return create;
    if (typeof value === 'function' && spec.helpers.includes(prop)) {
      return (...args) => value.apply(view, args);
    }
    return typeof value === 'function' ? value.bind(obj) : value;
  });
}

/**
 * The `wrapClient` a facade exposes: identity when the session is disabled or the value
 * is not an object; else the proxy, its model calls through `facade.session.callModel`
 * with `sdk` as the integration's name.
 */
function clientWrapper(facade, specs, sdk) {
  const { session, attached } = facade;
  const callModel = (api, request, send) => {
    const call = () => session.callModel(api, request, send, { sdk, stream: teeForRecording });
    const wait = attached();
    return wait ? wait.then(call) : call();
  };
  return function wrap(client) {
    if (!session.enabled) return client;
    try {
      return wrapClient(client, specs, callModel);
    } catch (error) {
      session.warn('wrap-client-failed', `wrapClient failed; the client runs uninstrumented (${error && error.message})`);
      return client;
    }
  };
}

module.exports = { clientWrapper, gatedPromise, isClientStream, isWrapped, resourceSpec, teeForRecording, wrapClient, WRAPPED };
