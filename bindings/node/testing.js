'use strict';
// Recorded runs as offline tests (docs/replay.md): `require('@graphmind/node/testing')`.
//
//   const { replay } = require('@graphmind/node/testing');
//   test('books offline', async () => {
//     const r = await replay('test/data/booking.ndjson', () => main(), { session: gm.session, strict: true });
//     assert.equal(r.replayed, 6);
//   });
//
// While `fn` runs, the next run `session` starts (a run with the recorded run's name) has
// its tool and model calls answered from the recording, by the core: no tool runs, no
// request reaches the provider, until the fork point or the first call whose input
// differs, after which the run is live.
const { fileURLToPath } = require('node:url');
const { Session } = require('./index.js');

/** Thrown by `replay(..., {strict: true})` when the run went live anywhere but at `from`. */
class ReplayDiverged extends Error {
  constructor(message) {
    super(message);
    this.name = 'ReplayDiverged';
  }
}

/** The session of a `createSession()` Session or of a facade (`graphmind(...)`, `{session}`). */
function sessionOf(given) {
  const session = given instanceof Session ? given : given && given.session;
  if (!(session instanceof Session)) {
    throw new TypeError('replay(): pass {session}: the Session (or the graphmind() facade) the app records with');
  }
  return session;
}

/** The `replay` option's value for `source` (the core reads it as a file when one exists there, else as a run reference). */
function specOf(source, from, output) {
  const spec = { source: source instanceof URL ? fileURLToPath(source) : String(source) };
  if (from != null) spec.from = from;
  if (output !== undefined) spec.output = output;
  return spec;
}

/**
 * A replay's report: `replayed` (calls answered from the recording), `live` (where it went
 * live: `{reason, at, differs?, recordedKey?, liveKey?}`), `error` (why nothing was
 * replayed), `replayOf` (the recorded run), `runId` (the run it answered), `result` (what
 * `fn` returned).
 */
function reportOf(raw, result) {
  const r = raw || {};
  return {
    replayed: Number(r.replayed || 0),
    live: r.live ?? null,
    error: r.error ?? null,
    replayOf: r.replayOf ?? null,
    runId: r.runId ?? null,
    result,
  };
}

/** The reason a strict replay fails, or null. */
function divergence(report) {
  if (report.error) return `nothing replayed: ${report.error}`;
  const { live } = report;
  if (live && live.reason !== 'fork') {
    return `the run went live at ${live.at}: ${live.reason}${live.differs ? ` ${JSON.stringify(live.differs)}` : ''}`;
  }
  return null;
}

/**
 * Replays `source` while `fn` runs (awaited) and resolves to the report. `source`: an
 * exported run (`graphmind record RUN_ID --no-redact-secrets`) or a run id on the server
 * the session attaches to. Options: `session` (required: the Session or the facade the
 * app records with), `from` (`'<nodeId>#<n>'`: live from that call), `output` (the output
 * of the call just before `from`), `strict` (reject with `ReplayDiverged` when the run went
 * live anywhere but at `from`). An error `fn` throws is passed on, after the replay ends.
 */
async function replay(source, fn, options = {}) {
  const session = sessionOf(options.session);
  const begun = session.replayBegin(specOf(source, options.from, options.output));
  let result;
  let last;
  try {
    result = await fn();
  } finally {
    last = session.replayEnd() ?? begun;
  }
  const report = reportOf(last, result);
  const why = options.strict ? divergence(report) : null;
  if (why) throw new ReplayDiverged(why);
  return report;
}

module.exports = { replay, ReplayDiverged };
