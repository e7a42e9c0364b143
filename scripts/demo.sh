#!/usr/bin/env bash
# `make demo`: starts `graphmind serve`, runs the instrumented example agent against it,
# then prints where to look and what was recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release/graphmind
AGENT=target/release/example-agent
PORT=${GRAPHMIND_DEMO_PORT:-4747}
DIR=$(mktemp -d /tmp/graphmind-demo.XXXXXX)
DB="$DIR/demo.db"
export GRAPHMIND_HOME="$DIR"   # the server's control tokens live here; `graphmind resume` reads them

# Port 4747 may be taken (a server you already run): then use a free one.
if (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; then PORT=0; fi
"$BIN" serve --port "$PORT" --db "$DB" --allow-control inject --json --no-open >"$DIR/server.json" 2>"$DIR/server.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 600); do [ -s "$DIR/server.json" ] && break; sleep 0.05; done
PORT=$(sed -E 's/.*"port":([0-9]+).*/\1/' "$DIR/server.json")
echo "demo: graphmind serve is listening on http://127.0.0.1:$PORT (database $DB)"
echo "demo: running the example agent (examples/rust): it loops on searchFlights and its booking tool fails once."
echo "demo: this script plays the developer at the debugger, with \`graphmind wait\` and \`graphmind resume\`."
GRAPHMIND_URL="ws://127.0.0.1:$PORT/ingest" GRAPHMIND_DEMO_PAUSE_TIMEOUT_MS=30000 "$AGENT" &
AGENT_PID=$!

# Each hold: show it, then decide. The pause's fields come from `graphmind wait --json`.
field() { sed -E "s/.*\"$1\":\"([^\"]+)\".*/\1/"; }
decide() {
  local action=$1; shift
  local held
  held=$("$BIN" wait --port "$PORT" --timeout 20 --json) || { echo "demo: no hold arrived"; return 1; }
  local pause run node reason
  pause=$(printf '%s' "$held" | field pauseId); run=$(printf '%s' "$held" | field runId)
  node=$(printf '%s' "$held" | field nodeId); reason=$(printf '%s' "$held" | field reason)
  echo "demo: held: $node ($reason) -> $action $*"
  "$BIN" resume "$pause" --run "$run" --action "$action" --port "$PORT" "$@" >/dev/null
}
decide inject --output '[{"flight":"GM101","to":"Oslo","price":129.5,"note":"same result as before: stop searching"}]'
decide retry
wait $AGENT_PID

echo
echo "demo: what was recorded"
"$BIN" runs --db "$DB"
RUN=$("$BIN" runs --db "$DB" | awk 'NR>1 && $1 ~ /^run_/ {print $1; exit}')
"$BIN" record "$RUN" --db "$DB" --out "$DIR/run.ndjson"
echo "demo: events of $RUN by type:"
sed -E 's/.*"type":"([a-z.]+)".*/\1/' "$DIR/run.ndjson" | sort | uniq -c | sed 's/^/  /'
echo "demo: holds:"
grep '"exec.paused"' "$DIR/run.ndjson" | sed -E 's/.*"nodeId":"([^"]+)".*"point":"([a-z]+)".*"reason":"([a-z]+)".*/  \1 held at \2 (\3)/'
echo
echo "demo: the whole run as NDJSON: $DIR/run.ndjson"
echo "demo: viewer: http://127.0.0.1:$PORT/#/run/$RUN"
if [ -t 0 ] && [ -z "${CI:-}" ]; then
  echo "demo: the server keeps running so you can look; press Ctrl-C to stop it."
  wait $SERVER
fi
