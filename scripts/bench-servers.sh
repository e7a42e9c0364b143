#!/usr/bin/env bash
# Compares two `graphmind` server binaries with the cli crate's benches (ingest, session,
# mcp_proxy), run alternately against each (BASE, NEW, BASE, NEW, ...), ROUNDS rounds each
# (default 3), through the benches' GRAPHMIND_BENCH_BIN override. Prints, for every figure
# the benches print, the median over the rounds of each binary and NEW/BASE side by side.
#
#   scripts/bench-servers.sh /tmp/base/graphmind target/release/graphmind
#
# Figures on a shared machine are noisy: compare the ratios, in one sitting.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BASE_BINARY NEW_BINARY" >&2
  exit 2
fi
base=$(realpath "$1")
new=$(realpath "$2")
rounds=${ROUNDS:-3}
benches=${BENCHES:-"ingest session mcp_proxy"}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$(dirname "$0")/.."
cargo bench -p graphmind-cli --no-run >/dev/null 2>&1
for round in $(seq 1 "$rounds"); do
  for bench in $benches; do
    for side in base new; do
      bin=$base
      [ "$side" = new ] && bin=$new
      echo "round $round/$rounds: $bench against $side" >&2
      GRAPHMIND_BENCH_BIN=$bin cargo bench -q -p graphmind-cli --bench "$bench" \
        >"$out/$bench.$side.$round" 2>/dev/null
    done
  done
done
python3 - "$out" "$rounds" $benches <<'PY'
import re, statistics, sys
out, rounds, benches = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
num = re.compile(r"\d[\d,]*\.?\d*")
def figures(path):
    rows = []
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip()
        template = num.sub("#", line)
        values = [float(v.replace(",", "")) for v in num.findall(line)]
        if values:
            rows.append((template, values, line))
    return rows
print(f"{'figure':<72} {'BASE':>12} {'NEW':>12} {'NEW/BASE':>9}")
for bench in benches:
    runs = {s: [figures(f"{out}/{bench}.{s}.{r}") for r in range(1, rounds + 1)] for s in ("base", "new")}
    ref = runs["base"][0]
    for i, (template, values, line) in enumerate(ref):
        same = all(len(r) > i and r[i][0] == template and len(r[i][1]) == len(values)
                   for side in runs.values() for r in side)
        if not same:
            continue
        spans = list(num.finditer(line))
        for j, m in enumerate(spans):
            label = line[max(0, m.start() - 50):m.start()].strip() + " # " + line[m.end():m.end() + 12].split(",")[0].strip()
            b = statistics.median(r[i][1][j] for r in runs["base"])
            n = statistics.median(r[i][1][j] for r in runs["new"])
            ratio = f"{n / b:.2f}" if b else "-"
            print(f"{bench + ': ' + label[-64:]:<72} {b:>12.2f} {n:>12.2f} {ratio:>9}")
PY
