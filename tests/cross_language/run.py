"""The cross-language test (tests/cross_language/README.md): every driver in ``drivers/``
runs the scripted exchange against one real ``graphmind serve`` and the fake provider; the
stored events of their runs, normalised, must be identical.

Run with the repo's ``.venv`` Python (``make test-cross``). Exits non-zero with a diff of
the first difference when two drivers disagree."""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "bindings" / "python" / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "fake_provider"))
from conftest import BIN, Debugger, Server  # noqa: E402
from server import FakeProvider  # noqa: E402

#: How long one driver may take.
DRIVER_TIMEOUT_S = 120
#: How long the runner waits for one hold.
HOLD_TIMEOUT_S = 30
#: The stored events compared.
COMPARED = ("graph.hint", "node.started", "node.token", "node.finished", "node.error")
#: Payload fields that are each language's own (see the README).
DROPPED = ("durationMs", "heldMs", "sdk")
DROPPED_ERROR = ("name", "message", "stack")
#: The app name of the replay phase's recording and of every replay of it (a replay only
#: answers the app that recorded it).
REPLAY_APP = "xl-replay"
#: A generated id: `inv_…`, `run_…`, `pause_…` and the like.
ID = re.compile(r"\b(?:[a-z]{2,6}_)[0-9A-Za-z]{8,}\b")


def command(driver: Path) -> list[str]:
    """The interpreter line for a driver, by its extension."""
    if driver.suffix == ".py":
        return [str(ROOT / ".venv" / "bin" / "python"), str(driver)]
    if driver.suffix == ".rb":
        return ["ruby", "-I", str(ROOT / "bindings" / "ruby" / "lib"), str(driver)]
    if driver.suffix in (".mjs", ".js"):
        return ["node", str(driver)]
    raise SystemExit(f"{driver.name}: no interpreter for {driver.suffix}")


def resolve_holds(server: Server, debugger: Debugger, holds: list[dict[str, Any]], failures: list[str]) -> None:
    """Answers the driver's holds in order, each checked against the script."""
    for n, hold in enumerate(holds):
        deadline = time.monotonic() + HOLD_TIMEOUT_S
        pause = None
        while pause is None and time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/pauses?wait=1", timeout=5) as r:
                open_ = [p for p in json.loads(r.read())["pauses"] if p.get("state", "open") == "open"]
            pause = open_[0] if open_ else None
        if pause is None:
            failures.append(f"hold {n} ({hold['point']}): never arrived")
            return
        if pause["point"] != hold["point"] or pause["nodeId"] != "llm:step":
            failures.append(f"hold {n}: expected {hold['point']} at llm:step, got {pause['point']} at {pause['nodeId']}")
        extra = {"output": hold["output"]} if "output" in hold else {}
        debugger.resume(pause["runId"], pause["pauseId"], hold["action"], **extra)
        # The next listing must not see this pause again.
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/pauses", timeout=5) as r:
                ids = [p["pauseId"] for p in json.loads(r.read())["pauses"]]
            if pause["pauseId"] not in ids:
                break
            time.sleep(0.02)


class Ids:
    """Each generated id replaced by a placeholder numbered in order of first appearance."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        return ID.sub(lambda m: self.seen.setdefault(m.group(0), f"<id{len(self.seen)}>"), text)


def scrub(value: Any, ids: Ids) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in DROPPED:
                continue
            if k == "error" and isinstance(v, dict):
                v = {ek: ev for ek, ev in v.items() if ek not in DROPPED_ERROR}
            out[k] = scrub(v, ids)
        return out
    if isinstance(value, list):
        return [scrub(v, ids) for v in value]
    if isinstance(value, str):
        return ids(value)
    return value


def merge_tokens(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive ``node.token`` events of one execution as one, deltas joined per channel."""
    out: list[dict[str, Any]] = []
    for e in events:
        prev = out[-1] if out else None
        same = (
            prev is not None
            and e["type"] == prev["type"] == "node.token"
            and all(e["payload"].get(k) == prev["payload"].get(k) for k in ("nodeId", "instanceId"))
        )
        if not same:
            out.append(json.loads(json.dumps(e)))
            continue
        deltas = prev["payload"]["deltas"]
        for d in e["payload"]["deltas"]:
            if deltas and deltas[-1]["t"] == d["t"]:
                deltas[-1]["v"] += d["v"]
            else:
                deltas.append(dict(d))
    return out


def normalised(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kept = [{"type": e["type"], "payload": e["payload"]} for e in events if e["type"] in COMPARED]
    ids = Ids()
    return [scrub(e, ids) for e in merge_tokens(kept)]


def run_driver(
    driver: Path, server: Server, provider: FakeProvider, exchange: dict[str, Any], app: str | None = None, replay: Path | None = None
) -> dict[str, Any]:
    """One driver's run: scripted and held as the exchange says, or (``replay``) answered
    from that exported recording with nothing scripted and no breakpoint."""
    provider.reset()
    if replay is None:
        provider.script(*[a for call in exchange["calls"] for a in call["answers"]])
    debugger = Debugger(server)
    points = () if replay is not None else ("before", "error")
    for point in points:
        debugger.breakpoint({"point": point, "kind": "llm"})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHMIND_", "GM_"))}
    env.update(
        GRAPHMIND_URL=server.url,
        GM_XL_BASE_URL=provider.base_url,
        GM_XL_EXCHANGE=str(HERE / "exchange.json"),
        GM_XL_APP=app or driver.stem,
        GRAPHMIND_TELEMETRY="0",
        NODE_PATH=str(ROOT / "bindings" / "node" / "node_modules"),
    )
    if replay is not None:
        env["GM_XL_REPLAY_FILE"] = str(replay)
    failures: list[str] = []
    proc = subprocess.Popen(command(driver), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    holds = [] if replay is not None else exchange["holds"]
    resolver = threading.Thread(target=resolve_holds, args=(server, debugger, holds, failures), daemon=True)
    resolver.start()
    try:
        out, err = proc.communicate(timeout=DRIVER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        failures.append(f"timed out after {DRIVER_TIMEOUT_S} s")
    resolver.join(HOLD_TIMEOUT_S)
    for point in points:
        debugger.control("*", "breakpoint.clear", {"matcher": {"point": point, "kind": "llm"}})
    debugger.close()
    if proc.returncode != 0:
        failures.append(f"exit status {proc.returncode}")
    lines = [line for line in out.splitlines() if line.strip()]
    report: dict[str, Any] = {}
    try:
        report = json.loads(lines[-1])
    except (IndexError, ValueError):
        failures.append("no JSON report on the last line of stdout")
    if failures:
        raise SystemExit(f"{driver.name}: " + "; ".join(failures) + f"\n--- stdout\n{out}\n--- stderr\n{err}")
    run_id = report["runId"]
    deadline = time.monotonic() + 10
    events: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        events = server.events(run_id, 1, timeout=1)
        if events and events[-1]["type"] == "run.finished":
            break
        time.sleep(0.05)
    started = next((e["payload"] for e in events if e["type"] == "run.started"), {})
    return {"report": report, "events": normalised(events), "requests": provider.bodies(), "meta": started.get("meta") or {}}


def diff(a_name: str, a: Any, b_name: str, b: Any) -> str:
    dump = lambda v: json.dumps(v, indent=1, sort_keys=True).splitlines()  # noqa: E731
    return "\n".join(list(difflib.unified_diff(dump(a), dump(b), a_name, b_name, lineterm=""))[:80])


def export(server: Server, run_id: str, path: Path) -> None:
    """``graphmind record`` of a stored run into ``path``, secrets kept (for replay)."""
    db = os.path.join(server.dir, "g.db")
    p = subprocess.run([str(BIN), "record", run_id, "--db", db, "--no-redact-secrets", "--out", str(path)], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise SystemExit(f"cross-language replay: graphmind record failed: {p.stderr}")


def replay_phase(drivers: list[Path], server: Server, provider: FakeProvider, exchange: dict[str, Any], tmp: Path) -> bool:
    """The exchange recorded once (the first driver, app ``REPLAY_APP``), exported, then
    replayed through every driver with nothing scripted at the provider: each driver gets
    the expected results, the provider sees no request, every model and tool node is
    ``replayed``, and the replayed runs' stored events are the same in every language."""
    recorded = run_driver(drivers[0], server, provider, exchange, app=REPLAY_APP)
    path = tmp / "exchange.ndjson"
    if os.environ.get("GM_XL_KEEP"):
        path = Path(os.environ["GM_XL_KEEP"])
    export(server, recorded["report"]["runId"], path)
    seen: dict[str, dict[str, Any]] = {}
    for driver in drivers:
        got = run_driver(driver, server, provider, exchange, app=REPLAY_APP, replay=path)
        seen[driver.name] = got
        name = f"cross-language replay: {driver.name}"
        if got["report"]["results"] != exchange["expected"]:
            raise SystemExit(f"{name}: results {got['report']['results']} != expected {exchange['expected']}")
        if got["requests"]:
            raise SystemExit(f"{name}: the provider saw {len(got['requests'])} request(s)")
        if got["meta"].get("replayOf") != recorded["report"]["runId"]:
            raise SystemExit(f"{name}: run.started.meta {got['meta']} is not a replay of {recorded['report']['runId']}")
        started = [e["payload"] for e in got["events"] if e["type"] == "node.started" and e["payload"]["nodeId"].startswith(("llm:", "tool:"))]
        if len(started) != len(exchange["calls"]) + 1 or not all(p.get("replayed") is True for p in started):
            raise SystemExit(f"{name}: not every call was replayed: {started}")
        print(f"{name}: {len(got['events'])} events, every one of {len(started)} calls replayed, no request")
    (first, base), *rest = seen.items()
    same = True
    for name, other in rest:
        if other["events"] != base["events"]:
            same = False
            print(f"cross-language replay: {name} differs from {first}:\n{diff(first, base['events'], name, other['events'])}")
    if same:
        print(f"cross-language replay: {len(seen)} drivers replayed the same {len(base['events'])} events")
    return same


def main() -> int:
    exchange = json.loads((HERE / "exchange.json").read_text(encoding="utf-8"))
    drivers = sorted(p for p in (HERE / "drivers").iterdir() if p.suffix in (".py", ".rb", ".mjs", ".js"))
    if len(drivers) < 2:
        raise SystemExit(f"cross-language: {len(drivers)} driver(s) in drivers/, nothing to compare")
    server = Server()
    provider = FakeProvider()
    tmp = Path(tempfile.mkdtemp(prefix="gm-xl-"))
    try:
        replayed_alike = replay_phase(drivers, server, provider, exchange, tmp)
        seen: dict[str, dict[str, Any]] = {}
        for driver in drivers:
            started = time.monotonic()
            seen[driver.name] = run_driver(driver, server, provider, exchange)
            got = seen[driver.name]
            print(f"cross-language: {driver.name}: {len(got['events'])} events, {time.monotonic() - started:.1f} s")
            if got["report"]["results"] != exchange["expected"]:
                raise SystemExit(f"{driver.name}: results {got['report']['results']} != expected {exchange['expected']}")
    finally:
        provider.stop()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    (first, base), *rest = seen.items()
    if not any(e["type"] == "node.error" for e in base["events"]):
        raise SystemExit(f"{first}: no node.error recorded")
    bad = False
    for name, other in rest:
        for part in ("events", "requests"):
            if other[part] != base[part]:
                bad = True
                print(f"cross-language: {name} differs from {first} in its {part}:\n{diff(first, base[part], name, other[part])}")
    if bad or not replayed_alike:
        return 1
    print(f"cross-language: {len(seen)} drivers ({', '.join(seen)}) stored the same {len(base['events'])} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
