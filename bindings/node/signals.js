'use strict';
/**
 * Abort signals while a debugger is attached. A held gate can last longer than the app's
 * timeout: an `AbortSignal.timeout()` (or the AI SDK's `timeout` option, which makes one)
 * would then kill the request the debugger is holding. While attached, the signal the app
 * passed is chained with the run's signal (the debugger's `abort` still reaches the call),
 * and an abort whose reason is a `TimeoutError` is not passed on (the first one warns);
 * every other abort (the app's own `controller.abort()`) passes through unchanged. Detached,
 * signals are not touched.
 */

/** Whether an abort reason is a timeout (`AbortSignal.timeout()`'s DOMException). */
function isTimeoutReason(reason) {
  return reason !== null && typeof reason === 'object' && reason.name === 'TimeoutError';
}

/**
 * A signal that aborts when `appSignal` aborts for any reason but a timeout, or when
 * `runSignal` aborts. `onTimeout()` is called for each timeout held back. `appSignal`
 * itself when there is nothing to chain or filter (no signal given).
 */
function chainSignals(appSignal, runSignal, onTimeout) {
  if (!appSignal) return appSignal;
  const controller = new AbortController();
  const relay = (signal, filter) => {
    const pass = () => {
      if (filter && isTimeoutReason(signal.reason)) {
        try { onTimeout(); } catch { /* never into the app */ }
        return;
      }
      controller.abort(signal.reason);
    };
    if (signal.aborted) pass();
    else signal.addEventListener('abort', pass, { once: true });
  };
  relay(appSignal, true);
  if (runSignal && runSignal !== appSignal) relay(runSignal, false);
  return controller.signal;
}

/**
 * What a facade uses: `held(signal)` returns the signal to hand the call (chained and
 * filtered while `session` is attached, else `signal` itself), warning once per facade
 * through the session's logger when a timeout is held back.
 */
function signalFilter(session) {
  let warned = false;
  const onTimeout = () => {
    if (warned) return;
    warned = true;
    session.warn('timeout-neutralized', 'graphmind: a timeout abort of the app\'s AbortSignal was ignored while a debugger is attached (a held gate would otherwise time the request out)');
  };
  return function held(signal) {
    if (!signal || typeof signal.addEventListener !== 'function' || !session.attached) return signal;
    const run = session.currentRun();
    return chainSignals(signal, run && run.signal, onTimeout);
  };
}

module.exports = { chainSignals, isTimeoutReason, signalFilter };
