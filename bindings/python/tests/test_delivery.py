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


def all_events(server, run_id):
    out, after = [], -1
    while True:
        status, body = server.get(f"/api/runs/{run_id}/events?afterSeq={after}&limit=1000")
        page = (body or {}).get("events", []) if status == 200 else []
        if not page:
            return out
        out.extend(page)
        after = page[-1]["seq"]


def test_a_stopped_server_delays_the_app_at_most_the_deadline_and_every_drop_is_marked(server, gm_for):
    import signal

    stop_for = float(os.environ.get("GM_STOP_SECS", "2"))
    g = gm_for()
    assert g.ready(5)
    pad = "x" * 1000

    @g.tool
    def work(v):
        return v["n"]

    slowest, n = 0.0, 0
    with g.run("stopped") as ctx:
        started = time.monotonic()
        stopped_at = resumed_at = None
        while resumed_at is None or time.monotonic() - resumed_at < 1.0:
            now = time.monotonic()
            if stopped_at is None and now - started > 0.3:
                os.kill(server.proc.pid, signal.SIGSTOP)
                stopped_at = now
            if resumed_at is None and stopped_at is not None and now - stopped_at >= stop_for:
                os.kill(server.proc.pid, signal.SIGCONT)
                resumed_at = now
            t = time.perf_counter()
            work({"n": n, "pad": pad})
            slowest = max(slowest, time.perf_counter() - t)
            n += 1
    assert g.session.flush(60)
    stats = g.stats()
    g.dispose()
    # BACKPRESSURE_DEADLINE is 250 ms; a call is two events, plus this loaded machine's slack.
    assert slowest <= 1.0, f"the slowest call took {slowest * 1000:.0f} ms"
    run = wait_run(server, ctx.run_id, lambda r: r["status"] != "running")
    assert run["status"] == "ok", run
    deadline = time.monotonic() + 30
    while True:
        events = all_events(server, ctx.run_id)
        marked = sum(e["payload"].get("gap", {}).get("droppedCount", 0) for e in events if e["type"] == "graph.hint")
        if len(events) + marked >= stats.seq or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(events) + marked == stats.seq, (len(events), marked, stats)
    assert marked == stats.lost
