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

# Port 4747 may be taken (a server you already run): then use a free one.
if (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; then PORT=0; fi
"$BIN" serve --port "$PORT" --db "$DB" --json --no-open >"$DIR/server.json" 2>"$DIR/server.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$DIR/server.json" ] && break; sleep 0.05; done
PORT=$(sed -E 's/.*"port":([0-9]+).*/\1/' "$DIR/server.json")
echo "demo: graphmind serve is listening on http://127.0.0.1:$PORT (database $DB)"
echo "demo: running the example agent (examples/rust): it loops on searchFlights and its booking tool fails once;"
echo "demo: each hold continues by itself after 1.5 s here, so the demo never waits for you."
GRAPHMIND_URL="ws://127.0.0.1:$PORT/ingest" GRAPHMIND_DEMO_PAUSE_TIMEOUT_MS=1500 "$AGENT"

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
