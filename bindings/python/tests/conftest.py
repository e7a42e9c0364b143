"""Fixtures: a real `graphmind serve` (target/release/graphmind) and a viewer client."""

from __future__ import annotations

import json
import re
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(os.environ.get("GRAPHMIND_BIN", ROOT / "target" / "release" / "graphmind"))
VECTORS = ROOT / "tests" / "vectors"


class Server:
    def __init__(self, env: dict[str, str] | None = None, port: int = 0) -> None:
        self.dir = tempfile.mkdtemp(prefix="gm-py-")
        run_env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMIND_")}
        run_env["GRAPHMIND_PAUSE_ON_ERROR"] = "off"
        # The server's control tokens live in GRAPHMIND_HOME/run: isolate them per test.
        self.home = os.path.join(self.dir, "gmhome")
        run_env["GRAPHMIND_HOME"] = self.home
        run_env["GRAPHMIND_TELEMETRY"] = "0"
        run_env.update(env or {})
        self.proc = subprocess.Popen(
            [str(BIN), "--port", str(port), "--json", "--no-open", "--db", os.path.join(self.dir, "g.db")],
            stdout=subprocess.PIPE,
            env=run_env,
        )
        line = self.proc.stdout.readline()
        self.port = json.loads(line)["port"]
        self.url = f"ws://127.0.0.1:{self.port}/ingest"
        # The viewer credential the server minted: its run file links to #token=...
        opener = os.path.join(self.home, "run", f"open-{self.port}.html")
        for _ in range(100):
            if os.path.exists(opener):
                break
            time.sleep(0.02)
        with open(opener, encoding="utf-8") as f:
            self.viewer_token = re.search(r"#token=([A-Za-z0-9_]+)", f.read()).group(1)

    def get(self, path: str) -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, None

    def events(self, run_id: str, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        events: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            status, body = self.get(f"/api/runs/{run_id}/events?limit=1000")
            events = body.get("events", []) if status == 200 and body else []
            if len(events) >= count:
                return events
            time.sleep(0.03)
        return events

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        # The database and GRAPHMIND_HOME were this server's alone (every test reads them
        # before stop()); a full suite otherwise leaves ~4 GB of them in /tmp.
        shutil.rmtree(self.dir, ignore_errors=True)


class Debugger:
    """A viewer on /ws/ui: breakpoints, modes, subscriptions and resumes."""

    def __init__(self, server: Server) -> None:
        from websockets.sync.client import connect

        self.ws = connect(
            f"ws://127.0.0.1:{server.port}/ws/ui",
            max_size=None,
            subprotocols=["graphmind.v1", f"gm.auth.{server.viewer_token}"],
        )
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.next_message("welcome")

    def _read(self) -> None:
        try:
            for raw in self.ws:
                self.inbox.put(json.loads(raw))
        except Exception:
            pass

    def _next(self, wanted: Any, what: str, timeout: float) -> Any:
        """The first message ``wanted`` picks something out of (it returns ``None`` for the
        others, which are dropped), within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                m = self.inbox.get(timeout=0.1)
            except queue.Empty:
                continue
            picked = wanted(m)
            if picked is not None:
                return picked
        raise AssertionError(f"no {what} arrived")

    def next_message(self, kind: str, timeout: float = 10.0) -> dict[str, Any]:
        return self._next(lambda m: m if m.get("type") == kind else None, kind, timeout)

    def control(self, run: str, kind: str, payload: dict[str, Any]) -> None:
        env = {"gm": 1, "seq": 0, "ts": int(time.time() * 1000), "runId": run, "type": kind, "payload": payload}
        self.ws.send(json.dumps({"type": "control", "envelope": env}))

    def breakpoint(self, matcher: dict[str, Any]) -> None:
        self.control("*", "breakpoint.set", {"matcher": matcher})
        time.sleep(0.15)

    def mode(self, mode: str) -> None:
        self.control("*", "mode.set", {"mode": mode})
        time.sleep(0.15)

    def watch(self, run_id: str) -> None:
        self.ws.send(json.dumps({"type": "subscribe", "runId": run_id}))

    def next_event(self, kind: str, timeout: float = 10.0) -> dict[str, Any]:
        def wanted(m: dict[str, Any]) -> Any:
            if m.get("type") == "event" and m["envelope"].get("type") == kind:
                return m["envelope"]
            return None

        return self._next(wanted, f"{kind} event", timeout)

    def resume(self, run_id: str, pause_id: str, action: str, **extra: Any) -> None:
        self.control(run_id, "exec.resume", {"pauseId": pause_id, "action": action, **extra})

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.stop()


@pytest.fixture
def debugger(server):
    d = Debugger(server)
    yield d
    d.close()


@pytest.fixture
def gm_for(server):
    """A GraphMind instance attached to the test server."""
    import graphmind as gm

    made: list[Any] = []

    def make(**options: Any) -> Any:
        options.setdefault("env", {})
        inst = gm.GraphMind(url=server.url, app="py-test", **options)
        made.append(inst)
        return inst

    yield make
    for inst in made:
        inst.dispose()


def paused_in_thread(debugger: Debugger, target: Any, result: dict, go: threading.Event) -> tuple[threading.Thread, dict]:
    """Runs ``target`` on a thread: it opens a run, puts its context in ``result["ctx"]`` and
    waits for ``go`` before the call that pauses. The debugger watches that run first, then
    ``go`` lets the call reach its gate; returns the thread and the ``exec.paused`` event."""
    t = threading.Thread(target=target)
    t.start()
    deadline = time.monotonic() + 10
    while "ctx" not in result and time.monotonic() < deadline:
        time.sleep(0.01)
    debugger.watch(result["ctx"].run_id)
    time.sleep(0.1)
    go.set()
    return t, debugger.next_event("exec.paused")


def load_vectors(path: str) -> Any:
    from graphmind import _native

    return _native.parse_json((VECTORS / path).read_text(encoding="utf-8"))
