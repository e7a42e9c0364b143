"""The example agent as an offline, deterministic test (docs/replay.md, "Tests from
recordings"): ``data/openai_agent.ndjson`` is a run of ``openai_agent.py`` recorded against
a model and exported with ``graphmind record RUN_ID --no-redact-secrets``. Replayed, every
model and tool call is answered from it: no model, no network, no server.

Re-record after changing the agent: run it attached to ``graphmind serve`` and export the
run over this file (a changed agent diverges, and ``strict=True`` fails the test saying
where).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the example agents

# graphmind's pytest fixture `graphmind_replay` (in a project: this line in a conftest.py).
pytest_plugins = ["graphmind.testing"]

RECORDING = Path(__file__).parent / "data" / "openai_agent.ndjson"


@pytest.fixture
def offline(monkeypatch):
    """No debugger and no model: a port where nothing listens for both."""
    monkeypatch.setenv("GRAPHMIND_URL", "ws://127.0.0.1:9/ingest")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-offline")
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "0")
    import openai_agent  # configures graphmind (its tools bind to that session) on first import

    return openai_agent


def test_the_agent_books_from_its_recording(offline, graphmind_replay):
    r = graphmind_replay(RECORDING, strict=True)
    assert offline.main() == {"answer": "Booked: GM202-ADA", "summary": "Booked GM202 for Ada, AMS to LIS."}
    assert r.replayed == 6, r.report  # 4 model calls (one streamed) and 2 tool calls
    assert r.live is None


def test_a_changed_agent_diverges_where_it_changed(offline, graphmind_replay, monkeypatch):
    monkeypatch.setattr(offline, "passenger_name", lambda raw: raw.strip().upper())
    r = graphmind_replay(RECORDING)
    with pytest.raises(Exception):  # the live model call after the divergence: nothing listens
        offline.main()
    assert r.live["reason"] == "diverged"
    assert r.live["at"] == "tool:book#1"
    assert r.live["differs"] == ["input.passenger"]
    assert r.replayed == 3
