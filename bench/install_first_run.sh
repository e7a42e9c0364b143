#!/usr/bin/env bash
# Install-to-first-run, as a user would do it (docs/install.md, Figures): a fresh venv,
# `pip install`, then the example agent's run recorded by a `graphmind serve` and listed by
# `graphmind runs`. Run as a whole process by a benchmark harness, two modes side by side:
#   ours <wheel>        pip install the wheel (offline); the server comes from the wheel
#   reference <port>    pip install graphmind-ai==0.5.1 (PyPI, pip's cache warm after the
#                       first run); it brings no server, so the run goes to the server
#                       already listening on <port> (not counted: a favour to the reference)
# Each run uses a new temporary venv and database and removes them at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?usage: install_first_run.sh ours <wheel> | reference <port>}
PYTHON=${PYTHON:-python3}
tmp=$(mktemp -d /tmp/gm-install-bench.XXXXXX)
server=
trap '[ -n "$server" ] && { kill $server; wait $server; } 2>/dev/null; rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
case $mode in
  ours)
    "$tmp/venv/bin/pip" install -q --no-index --disable-pip-version-check "${2:?wheel}"
    "$tmp/venv/bin/graphmind" serve --port 0 --db "$tmp/gm.db" --json --no-open >"$tmp/server.json" 2>/dev/null &
    server=$!
    for _ in $(seq 200); do [ -s "$tmp/server.json" ] && break; sleep 0.01; done
    port=$(sed -nE 's/.*"port":([0-9]+).*/\1/p' "$tmp/server.json")
    runs=("$tmp/venv/bin/graphmind" runs --db "$tmp/gm.db") ;;
  reference)
    "$tmp/venv/bin/pip" install -q --disable-pip-version-check graphmind-ai==0.5.1
    port=${2:?port}
    runs=(curl -sf "http://127.0.0.1:$port/api/runs") ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
GRAPHMIND_URL="ws://127.0.0.1:$port/ingest" "$tmp/venv/bin/python" "$root/examples/python/agent.py" >/dev/null
"${runs[@]}" | grep example-agent >/dev/null  # not -q: an early close of the pipe would fail the lister
