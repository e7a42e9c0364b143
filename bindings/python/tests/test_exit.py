"""Every exit path: the app's status is its own, and a warning the SDK decided to print is
printed, even with stderr on a file (the log thread used to race interpreter finalization:
`Fatal Python error: PyGILState_Release`, status 134, or the line lost)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

# A script that triggers a warning right before it ends: three identical tool calls with
# GRAPHMIND_ON_LOOP=warn, then dispose(), no server listening.
WARN_AT_EXIT = """
import graphmind as gm
gm.configure(app="exit", url="ws://127.0.0.1:9/ingest")

@gm.tool
def same(x):
    return x

for _ in range(3):
    same(1)
{end}
"""

RUNS = int(os.environ.get("GM_EXIT_RUNS", "120"))


def env_for_exit() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMIND_")}
    env.update({"GRAPHMIND_ON_LOOP": "warn", "GRAPHMIND_LOOP_THRESHOLD": "3", "GRAPHMIND_TELEMETRY": "0"})
    return env


def run_once(script: str) -> tuple[int, str]:
    with tempfile.TemporaryFile() as err:
        proc = subprocess.run([sys.executable, "-c", script], stderr=err, stdout=subprocess.DEVNULL, env=env_for_exit(), timeout=60)
        err.seek(0)
        return proc.returncode, err.read().decode("utf-8", "replace")


@pytest.mark.parametrize("end", ["gm.dispose()", "", "import os, sys; sys.stderr.flush(); sys.exit(3)"], ids=["dispose", "plain-exit", "sys-exit-3"])
def test_a_warning_pending_at_exit_is_printed_and_the_status_is_the_apps(end):
    script = WARN_AT_EXIT.format(end=end)
    expected = 3 if "exit(3)" in end else 0
    runs = RUNS if end == "gm.dispose()" else max(RUNS // 6, 10)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda _: run_once(script), range(runs)))
    bad_status = [(code, err[-300:]) for code, err in results if code != expected]
    missing = [err[-300:] for code, err in results if "possible loop" not in err]
    assert not bad_status, f"{len(bad_status)} of {runs} runs exited otherwise: {bad_status[:3]}"
    assert not missing, f"{len(missing)} of {runs} runs lost the warning: {missing[:3]}"
