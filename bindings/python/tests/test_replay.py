"""Replay (docs/replay.md): the example OpenAI agent (examples/python/openai_agent.py, the
real `openai` client) recorded against the fake provider into a real `graphmind serve`,
then run again in replay mode as a separate process: from the exported file and by run
id with the provider stopped, to a fork point with the provider up, with a changed agent
(a divergence), with an edited output, and with bad input (a warning, a live run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import graphmind as gm
from conftest import BIN, ROOT, Server

sys.path.insert(0, str(ROOT / "tests" / "fake_provider"))
from server import FakeProvider  # noqa: E402

AGENT = ROOT / "examples" / "python" / "openai_agent.py"
#: Seconds one agent process may take.
AGENT_TIMEOUT = 60


def chat(content=None, tool_calls=None, finish="stop"):
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"status": 200, "json": {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }}


def call(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args, indent=1)}}


def summary_stream(text="Booked GM202 for Ada, AMS to LIS."):
    def chunk(delta, finish=None):
        return [None, {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}]
    pieces = [text[i:i + 7] for i in range(0, len(text), 7)]
    return {"status": 200, "sse": [chunk({"role": "assistant", "content": ""}), *[chunk({"content": p}) for p in pieces], chunk({}, "stop"), [None, "[DONE]"]]}


#: The whole exchange: search, book, answer, a streamed summary.
SCRIPT = [
    chat(tool_calls=[call("call_s", "search_flights", {"origin": "AMS", "destination": "LIS"})], finish="tool_calls"),
    chat(tool_calls=[call("call_b", "book", {"flight": "GM202", "passenger": "ada"})], finish="tool_calls"),
    chat(content="Booked: GM202-ADA"),
    summary_stream(),
]
EXPECTED = {"answer": "Booked: GM202-ADA", "summary": "Booked GM202 for Ada, AMS to LIS."}


def run_agent(server_url: str, provider_url: str, agent: Path = AGENT, **env: str) -> tuple[dict[str, Any] | None, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMIND")}
    full.update({
        "GRAPHMIND_URL": server_url, "OPENAI_BASE_URL": provider_url, "OPENAI_API_KEY": "sk-test",
        "OPENAI_MAX_RETRIES": "0", "PYTHONPATH": str(ROOT / "bindings" / "python"),
    })
    full.update(env)
    p = subprocess.run([sys.executable, str(agent)], env=full, capture_output=True, text=True, timeout=AGENT_TIMEOUT)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    return (json.loads(lines[-1]) if p.returncode == 0 and lines else None), p.stderr


def runs(server: Server, app: str) -> list[dict[str, Any]]:
    status, body = server.get("/api/runs")
    assert status == 200
    return [r for r in body["runs"] if r.get("app") == app]


def finished_run(server: Server, known: set[str], timeout: float = 10.0) -> dict[str, Any]:
    """The newest run of the agent not in ``known``, once stored as finished."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fresh = [r for r in runs(server, "openai-agent") if r["id"] not in known]
        if fresh and fresh[0].get("status") not in (None, "running", "live"):
            return fresh[0]
        time.sleep(0.05)
    raise AssertionError("no finished run")


def all_events(server: Server, run_id: str) -> list[dict[str, Any]]:
    status, body = server.get(f"/api/runs/{run_id}/events?limit=5000")
    assert status == 200
    return body["events"]


def nodes(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in events if e["type"] == kind and e["payload"].get("nodeId", "").split(":")[0] in ("tool", "llm")]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One server, and the agent's run recorded into it and exported."""
    server = Server()
    provider = FakeProvider()
    provider.script(*SCRIPT)
    out, err = run_agent(server.url, provider.base_url)
    assert out == EXPECTED, err
    assert len(provider.requests) == 4
    run = finished_run(server, set())
    path = tmp_path_factory.mktemp("replay") / "run.ndjson"
    db = os.path.join(server.dir, "g.db")
    p = subprocess.run([str(BIN), "record", run["id"], "--db", db, "--no-redact-secrets", "--out", str(path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    provider.stop()
    yield {"server": server, "run": run["id"], "file": path, "known": {run["id"]}}
    server.stop()


def check_replayed_run(server: Server, original: str, known: set[str]) -> list[dict[str, Any]]:
    run = finished_run(server, known)
    known.add(run["id"])
    events = all_events(server, run["id"])
    started = next(e for e in events if e["type"] == "run.started")["payload"]
    assert started["meta"]["replayOf"] == original
    return events


def test_a_whole_run_replays_from_the_exported_file_with_the_provider_stopped(recorded):
    dead = FakeProvider()
    dead.stop()  # a port where nothing answers: any request would fail the agent
    out, err = run_agent(recorded["server"].url, dead.base_url, GRAPHMIND_REPLAY_FILE=str(recorded["file"]))
    assert out == EXPECTED, err
    assert dead.requests == []
    events = check_replayed_run(recorded["server"], recorded["run"], recorded["known"])
    started = nodes(events, "node.started")
    assert [n["nodeId"] for n in started] == ["llm:step", "tool:search_flights", "llm:step", "tool:book", "llm:step", "llm:step"]
    assert all(n.get("replayed") is True for n in started), started
    assert all(n.get("replayed") is True for n in nodes(events, "node.finished"))
    original = nodes(all_events(recorded["server"], recorded["run"]), "node.finished")
    replayed = nodes(events, "node.finished")
    assert [n.get("output") for n in replayed] == [n.get("output") for n in original]
    assert replayed[-1].get("streaming") is True


def test_a_whole_run_replays_by_run_id_from_the_server(recorded):
    dead = FakeProvider()
    dead.stop()
    out, err = run_agent(recorded["server"].url, dead.base_url, GRAPHMIND_REPLAY=recorded["run"])
    assert out == EXPECTED, err
    check_replayed_run(recorded["server"], recorded["run"], recorded["known"])


def test_a_replay_from_a_file_needs_no_server(recorded):
    dead = FakeProvider()
    dead.stop()
    out, err = run_agent("ws://127.0.0.1:1/ingest", dead.base_url, GRAPHMIND_REPLAY_FILE=str(recorded["file"]))
    assert out == EXPECTED, err


def test_replay_to_a_fork_point_then_live(recorded):
    provider = FakeProvider()
    try:
        provider.script(SCRIPT[2], SCRIPT[3])
        out, err = run_agent(recorded["server"].url, provider.base_url, GRAPHMIND_REPLAY=f"{recorded['run']}@llm:step#3")
        assert out == EXPECTED, err
        assert len(provider.requests) == 2, "steps from llm:step#3 on reach the provider"
        events = check_replayed_run(recorded["server"], recorded["run"], recorded["known"])
        started = nodes(events, "node.started")
        assert [bool(n.get("replayed")) for n in started] == [True, True, True, True, False, False]
        assert started[4]["replayLive"] == {"reason": "fork", "at": "llm:step#3"}
        meta = next(e for e in events if e["type"] == "run.started")["payload"]["meta"]
        assert meta["from"] == "llm:step#3"
    finally:
        provider.stop()


def test_an_edited_output_before_the_fork_reaches_the_app(recorded):
    provider = FakeProvider()
    try:
        provider.script(SCRIPT[2], SCRIPT[3])
        edited = {"confirmation": "EDITED-1", "status": "booked"}
        out, err = run_agent(recorded["server"].url, provider.base_url, GRAPHMIND_REPLAY=f"{recorded['run']}@llm:step#3", GRAPHMIND_REPLAY_OUTPUT=json.dumps(edited))
        assert out == EXPECTED, err
        tool_message = provider.bodies()[0]["messages"][-1]
        assert json.loads(tool_message["content"]) == edited
        events = check_replayed_run(recorded["server"], recorded["run"], recorded["known"])
        book = [n for n in nodes(events, "node.finished") if n["nodeId"] == "tool:book"][0]
        assert book["output"] == edited and book.get("replayEdited") is True
    finally:
        provider.stop()


def test_a_changed_tool_argument_diverges_and_runs_live(recorded, tmp_path):
    changed = tmp_path / "changed_agent.py"
    source = AGENT.read_text()
    assert "return raw.strip().title()" in source
    changed.write_text(source.replace("return raw.strip().title()", "return raw.strip().upper()"))
    provider = FakeProvider()
    try:
        provider.script(SCRIPT[2], SCRIPT[3])
        out, err = run_agent(recorded["server"].url, provider.base_url, agent=changed, GRAPHMIND_REPLAY_FILE=str(recorded["file"]))
        assert out == EXPECTED, err
        assert "tool:book#1 diverged" in err
        assert len(provider.requests) == 2, "live from the divergence on"
        events = check_replayed_run(recorded["server"], recorded["run"], recorded["known"])
        started = nodes(events, "node.started")
        book = started[3]
        assert book["nodeId"] == "tool:book" and not book.get("replayed")
        live = dict(book["replayLive"])
        keys = live.pop("recordedKey"), live.pop("liveKey")
        assert live == {"reason": "diverged", "at": "tool:book#1", "differs": ["input.passenger"]}
        assert keys[0] != keys[1] and all(len(k) == 32 for k in keys), keys
        assert book["input"]["passenger"] == "ADA"
    finally:
        provider.stop()


@pytest.mark.parametrize("env", [
    {"GRAPHMIND_REPLAY": "run_000000000000"},
    {"GRAPHMIND_REPLAY_FILE": "/nonexistent/run.ndjson"},
    {"GRAPHMIND_REPLAY": "not a run id!"},
])
def test_bad_input_warns_and_runs_live(recorded, env):
    provider = FakeProvider()
    try:
        provider.script(*SCRIPT)
        out, err = run_agent(recorded["server"].url, provider.base_url, **env)
        assert out == EXPECTED, err
        assert "replay" in err and "running live" in err, err
        assert len(provider.requests) == 4
        run = finished_run(recorded["server"], recorded["known"])
        recorded["known"].add(run["id"])
    finally:
        provider.stop()


def test_a_file_that_is_not_an_export_warns_and_runs_live(recorded, tmp_path):
    bogus = tmp_path / "bogus.ndjson"
    bogus.write_text("hello\n{\"a\": 1}\n")
    provider = FakeProvider()
    try:
        provider.script(*SCRIPT)
        out, err = run_agent(recorded["server"].url, provider.base_url, GRAPHMIND_REPLAY_FILE=str(bogus))
        assert out == EXPECTED, err
        assert "not an exported GraphMind run" in err
        run = finished_run(recorded["server"], recorded["known"])
        recorded["known"].add(run["id"])
    finally:
        provider.stop()


# -- the test helper, in this process ----------------------------------------------------------


def make_lookup():
    """A tool of the session configured now (``gm.tool`` binds the instance it sees)."""

    @gm.tool
    def lookup(city: str) -> dict:
        raise AssertionError("a replayed tool never runs")

    return lookup


def test_the_context_manager_replays_in_process(tmp_path):
    path = tmp_path / "rec.ndjson"
    lines = [
        {"gm": 1, "seq": 0, "ts": 1, "runId": "run_r", "type": "run.started", "payload": {"app": "python-app", "sdk": {"name": "python", "version": "0"}, "meta": {"name": "trip"}}},
        {"gm": 1, "seq": 1, "ts": 1, "runId": "run_r", "type": "node.started", "payload": {"nodeId": "tool:lookup", "kind": "tool", "name": "lookup", "instanceId": "a", "input": {"city": "Lisbon"}}},
        {"gm": 1, "seq": 2, "ts": 1, "runId": "run_r", "type": "node.finished", "payload": {"nodeId": "tool:lookup", "instanceId": "a", "output": {"temp": 21}, "durationMs": 1, "status": "ok"}},
        {"gm": 1, "seq": 3, "ts": 1, "runId": "run_r", "type": "node.started", "payload": {"nodeId": "tool:lookup", "kind": "tool", "name": "lookup", "instanceId": "b", "input": {"city": "Porto"}}},
        {"gm": 1, "seq": 4, "ts": 1, "runId": "run_r", "type": "node.error", "payload": {"nodeId": "tool:lookup", "instanceId": "b", "error": {"name": "TimeoutError", "message": "slow"}}},
        {"gm": 1, "seq": 5, "ts": 1, "runId": "run_r", "type": "node.finished", "payload": {"nodeId": "tool:lookup", "instanceId": "b", "durationMs": 1, "status": "error"}},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    from graphmind.errors import ReplayedError
    from graphmind.testing import replay

    gm.configure(url="ws://127.0.0.1:1/ingest")
    lookup = make_lookup()
    try:
        with replay(path, strict=True) as r:
            with gm.run("trip"):
                assert lookup("Lisbon") == {"temp": 21}
                with pytest.raises(ReplayedError) as raised:
                    lookup("Porto")
        assert type(raised.value).__name__ == "TimeoutError" and str(raised.value) == "slow"
        assert (r.replayed, r.live, r.replay_of) == (2, None, "run_r")
    finally:
        gm.reset()


pytest_plugins = ["graphmind.testing"]


def test_the_pytest_fixture(graphmind_replay, tmp_path):
    path = tmp_path / "rec.ndjson"
    path.write_text("\n".join(json.dumps(x) for x in [
        {"gm": 1, "seq": 0, "ts": 1, "runId": "run_f", "type": "run.started", "payload": {"app": "python-app", "sdk": {"name": "python", "version": "0"}, "meta": {"name": "trip"}}},
        {"gm": 1, "seq": 1, "ts": 1, "runId": "run_f", "type": "node.started", "payload": {"nodeId": "tool:lookup", "kind": "tool", "name": "lookup", "instanceId": "a", "input": {"city": "Faro"}}},
        {"gm": 1, "seq": 2, "ts": 1, "runId": "run_f", "type": "node.finished", "payload": {"nodeId": "tool:lookup", "instanceId": "a", "output": {"temp": 25}, "durationMs": 1, "status": "ok"}},
    ]) + "\n")
    gm.configure(url="ws://127.0.0.1:1/ingest")
    lookup = make_lookup()
    try:
        r = graphmind_replay(path)
        with gm.run("trip"):
            assert lookup("Faro") == {"temp": 25}
        assert r.replayed == 1
    finally:
        gm.reset()


# -- graphmind replay ---------------------------------------------------------------------------


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMIND")}
    full["GRAPHMIND_TELEMETRY"] = "0"
    full.update(env or {})
    return subprocess.run([str(BIN), "replay", *args], capture_output=True, text=True, timeout=AGENT_TIMEOUT, env=full)


def test_the_cli_prints_the_line_and_runs_it(recorded):
    server = recorded["server"]
    p = cli(recorded["run"], "--from", "llm:step#3", "--port", str(server.port))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"GRAPHMIND_URL={server.url} GRAPHMIND_REPLAY={recorded['run']}@llm:step#3 <the command that starts your app>"
    provider = FakeProvider()
    try:
        provider.script(SCRIPT[2], SCRIPT[3])
        env = {"OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "sk-test", "OPENAI_MAX_RETRIES": "0", "PYTHONPATH": str(ROOT / "bindings" / "python")}
        p = cli(recorded["run"], "--from", "llm:step#3", "--port", str(server.port), "--exec", f"{sys.executable} {AGENT}", env=env)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout.splitlines()[-1]) == EXPECTED
        assert len(provider.requests) == 2
        check_replayed_run(server, recorded["run"], recorded["known"])
    finally:
        provider.stop()


def test_the_cli_refuses_what_it_cannot_replay(recorded):
    port = str(recorded["server"].port)
    assert cli("run_000000000000", "--port", port).returncode == 4
    p = cli(recorded["run"], "--from", "tool:book#9", "--port", port)
    assert p.returncode == 4 and "has no call tool:book#9" in p.stderr
    assert cli(recorded["run"], "--from", "tool:book", "--port", port).returncode == 2
    assert cli(recorded["run"], "--output", "{}", "--port", port).returncode == 2
    assert cli(recorded["run"], "--port", "1").returncode == 3
