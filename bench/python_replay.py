"""Replay figures, one run, side by side (docs/replay.md): a 500-step run (500 @gm.tool calls,
~1 KB in and out) recorded into a real `graphmind serve`, then replayed end to end by run
id (the recording fetched from the server included), and the cost of one replayed call
next to one live call of the same tool with the same 1 KB, both attached to that server.

Usage: python bench/python_replay.py bench/sample-1k.json   (GRAPHMIND_BIN: the server)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import graphmind as gm
from graphmind.testing import replay

ROOT = Path(__file__).resolve().parents[1]
BIN = os.environ.get("GRAPHMIND_BIN", str(ROOT / "target" / "release" / "graphmind"))
STEPS = 500
ROUNDS = 5


def start_server(tmp: str) -> tuple[subprocess.Popen, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMIND_")}
    env.update({"GRAPHMIND_HOME": os.path.join(tmp, "home"), "GRAPHMIND_TELEMETRY": "0", "GRAPHMIND_PAUSE_ON_ERROR": "off"})
    p = subprocess.Popen([BIN, "--port", "0", "--json", "--no-open", "--db", os.path.join(tmp, "g.db")], stdout=subprocess.PIPE, env=env)
    return p, json.loads(p.stdout.readline())["port"]


def stored(port: int, run_id: str, count: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs/{run_id}/events?limit=1") as r:
            if json.loads(r.read())["total"] >= count:
                return
        time.sleep(0.05)
    raise SystemExit("the run was not stored")


def main() -> None:
    sample = json.loads(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "bench" / "sample-1k.json").read_text())
    import tempfile

    tmp = tempfile.mkdtemp(prefix="gm-bench-replay-")
    server, port = start_server(tmp)
    try:
        gm.configure(app="bench-replay", url=f"ws://127.0.0.1:{port}/ingest", loop_guard=False)
        assert gm.ready(5.0), "no server"

        @gm.tool
        def work(payload: dict, i: int) -> dict:
            return {"echo": payload, "i": i}

        def one_run(name: str) -> tuple[float, list[float], str]:
            per_call = []
            t0 = time.perf_counter()
            with gm.run(name) as run:
                for i in range(STEPS):
                    c = time.thread_time_ns()
                    work(sample, i)
                    per_call.append((time.thread_time_ns() - c) / 1000.0)
            return time.perf_counter() - t0, per_call, run.run_id

        _, _, warm = one_run("warm-up")
        live_s, live_calls, recorded = one_run("five-hundred")
        gm.instance().session.flush(10.0)
        stored(port, recorded, 2 * STEPS + 2)

        rows = []
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            with replay(recorded, strict=True) as r:
                run_s, calls, _ = one_run("five-hundred")
            end_to_end = time.perf_counter() - t0
            assert r.replayed == STEPS, r.report
            rows.append((end_to_end, run_s, statistics.median(calls)))
            # a live run of the same size right after, for the side-by-side figure
            live_s2, live_calls2, _ = one_run("five-hundred-live")
            rows[-1] += (live_s2, statistics.median(live_calls2))
        print(f"{STEPS}-step run, 1 KB in and out per step, attached to graphmind serve, {ROUNDS} rounds")
        print("round | replay end to end (fetch + run) | replayed run | live run | replayed call (CPU) | live call (CPU)")
        for k, (e2e, run_s, rc, ls, lc) in enumerate(rows, 1):
            print(f"{k:5} | {e2e * 1000:8.1f} ms | {run_s * 1000:8.1f} ms | {ls * 1000:8.1f} ms | {rc:7.1f} us | {lc:7.1f} us")
        med = lambda i: statistics.median(r[i] for r in rows)  # noqa: E731
        print(f"median | {med(0) * 1000:8.1f} ms | {med(1) * 1000:8.1f} ms | {med(3) * 1000:8.1f} ms | {med(2):7.1f} us | {med(4):7.1f} us")
        gm.dispose()
    finally:
        server.terminate()
        server.wait(5)


if __name__ == "__main__":
    main()
