"""The on-disk spool from Python (docs/spool.md), against a real `graphmind serve`:
``spool_dir`` reaches the core (a detached app with a small ring writes segments there and
loses nothing: the next attach stores every call); a forked child writes its own spool; a
script that ends with no server leaves its spool to the next ``graphmind serve``;
``GRAPHMIND_DISABLED`` writes no file."""

from __future__ import annotations

import os
import socket
import time

import graphmind as gm

from conftest import Server
from test_session import wait_child


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spool_folders(base) -> list[str]:
    return sorted(os.listdir(base)) if os.path.isdir(base) else []


def segment_count(folder) -> int:
    return sum(1 for f in os.listdir(folder) if f.endswith(".seg"))


def stored(srv, run_id, count, timeout=30.0):
    """Every stored event of the run (paged), once `count` are there or `timeout` passed."""
    deadline = time.monotonic() + timeout
    while True:
        events, after = [], -1
        while True:
            status, body = srv.get(f"/api/runs/{run_id}/events?afterSeq={after}&limit=1000")
            page = body.get("events", []) if status == 200 and body else []
            if not page:
                break
            events += page
            after = page[-1]["seq"]
        if len(events) >= count or time.monotonic() > deadline:
            return events
        time.sleep(0.05)


def record(g, calls, name="spooled"):
    @g.tool
    def work(n):
        return n * 2

    with g.run(name) as ctx:
        for n in range(calls):
            work(n)
    return ctx.run_id


def test_spool_dir_reaches_the_core_and_nothing_is_lost(tmp_path):
    base = tmp_path / "spool"
    port = free_port()
    g = gm.GraphMind(app="py-spool", url=f"ws://127.0.0.1:{port}/ingest", env={}, buffer_size=50,
                     retry_interval=0.2, spool_dir=base)
    assert g.session._native.config()["spoolDir"] == str(base)
    run_id = record(g, 2_000)
    deadline = time.monotonic() + 10
    while not spool_folders(base) and time.monotonic() < deadline:
        time.sleep(0.02)
    (folder,) = spool_folders(base)
    assert folder.startswith(f"py_spool-{os.getpid()}-")  # "-" separates the fields
    srv = Server(port=port)
    try:
        assert g.ready(10)
        assert g.session.flush(30)
        events = stored(srv, run_id, 4_004)
        # run.started, the agent node, 2,000 tools (started + finished), agent end, run.finished
        assert len(events) == 4_004
        assert not any("gap" in (e.get("payload") or {}) for e in events)
        assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    finally:
        g.dispose()
        srv.stop()
    assert spool_folders(base) == [], "replayed, then removed"


def test_a_forked_child_writes_its_own_spool_and_serve_stores_both(tmp_path):
    base = tmp_path / "spool"
    port = free_port()
    g = gm.GraphMind(app="py-fork", url=f"ws://127.0.0.1:{port}/ingest", env={}, buffer_size=20,
                     spool_dir=str(base))
    parent_run = record(g, 200, "parent")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            child_run = record(g, 300, "child")
            g.dispose()  # no server: the rest of the ring goes to the child's spool
            os.write(w, child_run.encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    assert os.WEXITSTATUS(wait_child(pid, 30)) == 0
    child_run = os.read(r, 100).decode()
    os.close(r)
    g.dispose()
    folders = spool_folders(base)
    owners = sorted(int(f.split("-")[1]) for f in folders)
    assert owners == sorted([os.getpid(), pid]), folders
    assert all(segment_count(base / f) > 0 for f in folders)
    # Both ended: the next serve stores each, whole.
    srv = Server(env={"GRAPHMIND_SPOOL_DIR": str(base)})
    try:
        assert len(stored(srv, parent_run, 404, timeout=10)) == 404
        assert len(stored(srv, child_run, 604, timeout=10)) == 604
    finally:
        srv.stop()
    assert spool_folders(base) == []


def test_the_kill_switch_writes_no_spool(tmp_path):
    base = tmp_path / "spool"
    g = gm.GraphMind(app="py-off", url=f"ws://127.0.0.1:{free_port()}/ingest",
                     env={"GRAPHMIND_DISABLED": "1", "GRAPHMIND_SPOOL_DIR": str(base)}, buffer_size=10,
                     spool_dir=str(base))
    record(g, 500)
    g.dispose()
    assert not base.exists()
