"""`graphmind init` prints a Python snippet per framework; pasted into a minimal project
(here: `graphmind init --write` in a copy of each golden fixture), each records a run on a
real server. The fixtures and their expected output live in cli/tests/init/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import BIN, ROOT

FIXTURES = ROOT / "cli" / "tests" / "init"
CASES = ["python-plain", "python-openai", "python-anthropic", "python-langchain", "lang-forced"]


@pytest.mark.parametrize("case", CASES)
def test_snippet_records_a_run(case, server, tmp_path):
    project = tmp_path / case
    shutil.copytree(FIXTURES / case, project)
    (project / "expected.txt").unlink()
    extra = (project / "args").read_text().split() if (project / "args").exists() else []
    out = subprocess.run([str(BIN), "init", "--write", *extra], cwd=project, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    snippet = project / "graphmind_snippet.py"
    assert snippet.read_text().startswith("# graphmind init: begin")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMIND_")}
    env.update(GRAPHMIND_URL=server.url, OPENAI_API_KEY="sk-test", ANTHROPIC_API_KEY="sk-ant-test")
    ran = subprocess.run([sys.executable, str(snippet)], cwd=project, env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    deadline = time.monotonic() + 10
    run = None
    while time.monotonic() < deadline and run is None:
        _, body = server.get("/api/runs")
        run = next((r for r in body["runs"] if r["app"] == "my-agent" and r["status"] == "ok"), None)
        time.sleep(0.05)
    assert run is not None, body
    kinds = {(e["type"], e["payload"].get("nodeId")) for e in server.events(run["id"], 4)}
    assert ("node.finished", "tool:lookup") in kinds, kinds
