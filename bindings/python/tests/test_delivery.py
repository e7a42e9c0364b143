"""Every rate and every end of a script, against a real `graphmind serve`: a short script
(no ``ready()``) stores its run whole, disposed, flushed or just ending; a flood of 1 KB
inputs while attached is stored event for event and ends ``ok``; ``stats()`` describes the
events emitted so far. ``GM_FLOOD_CALLS`` lengthens the flood (``make soak``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import graphmind as gm
import pytest

FLOOD_CALLS = int(os.environ.get("GM_FLOOD_CALLS", "20000"))

SHORT = """
import os, graphmind as gm
g = gm.GraphMind(app="short", url=os.environ["GM_URL"], env={{}})

@g.tool
def work(n):
    return n * 2

with g.run("short") as ctx:
    print(ctx.run_id, flush=True)
    for n in range(10):
        work(n)
{end}
"""


def wait_run(server, run_id, pred, timeout=30.0):
    deadline = time.monotonic() + timeout
    run = None
    while time.monotonic() < deadline:
        status, body = server.get("/api/runs")
        run = next((r for r in (body or {}).get("runs", []) if r["id"] == run_id), None)
        if run is not None and pred(run):
            return run
        time.sleep(0.05)
    return run


@pytest.mark.parametrize("end", ["g.dispose()", "", "assert g.session.flush(5)"], ids=["dispose", "plain-exit", "flush"])
def test_a_short_script_without_ready_stores_its_run_whole(server, end):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMIND_")}
    env.update({"GM_URL": server.url, "GRAPHMIND_TELEMETRY": "0"})
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", SHORT.format(end=end)], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        run_id = proc.stdout.split()[0]
        run = wait_run(server, run_id, lambda r: r["status"] != "running")
        # run.started, the agent node, ten tools (started + finished), agent end, run.finished
        assert run is not None and (run["status"], run["eventCount"]) == ("ok", 24), run


def test_a_flood_while_attached_is_stored_event_for_event(server, gm_for):
    g = gm_for()
    assert g.ready(5)
    pad = "x" * 1000

    @g.tool
    def work(v):
        return v["n"]

    started = time.perf_counter()
    with g.run("flood") as ctx:
        for n in range(FLOOD_CALLS):
            work({"n": n, "pad": pad})
    per_call_us = (time.perf_counter() - started) * 1e6 / FLOOD_CALLS
    stats = g.stats()
    g.dispose()
    emitted = 2 * FLOOD_CALLS + 4
    assert (stats.seq, stats.lost) == (emitted, 0), stats
    run = wait_run(server, ctx.run_id, lambda r: r["status"] != "running" and r["eventCount"] >= emitted, timeout=60)
    assert (run["status"], run["eventCount"]) == ("ok", emitted), f"{per_call_us:.1f} us a call"


def test_stats_describe_the_events_emitted_so_far():
    # As graphmind-ai 0.5.1 reports them: right after the calls, not when the worker gets there.
    g = gm.GraphMind(app="stats", url="ws://127.0.0.1:9/ingest", env={}, connect_timeout=0.05, buffer_size=64)
    try:

        @g.tool
        def work(n):
            return n

        work(0)
        stats = g.stats()
        assert (stats.enabled, stats.attached, stats.held_gates) == (True, False, 0)
        assert stats.buffered >= 3 and stats.seq >= 3
        for n in range(200):
            work(n)
        stats = g.stats()
        assert stats.buffered == 64
        assert stats.dropped > 300
        assert stats.seq > 400
    finally:
        g.dispose()
