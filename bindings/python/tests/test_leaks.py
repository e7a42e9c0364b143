"""Credential-leak audit through the Python SDK (the core-level audit is cli/tests/leaks.rs).

Keys are planted where a Python app carries them: the OpenAI client's API key and a
custom auth header (the real ``openai`` library, its HTTP transport mocked), an
env-looking string and a bearer token in a ``@tool``'s arguments, and an exception whose
message and traceback hold a token. Then every place GraphMind writes or answers is
searched (the SQLite file, the HTTP API, ``record`` exports and telemetry; the viewer
socket and the server log are searched by cli/tests/leaks.rs), and the exact table of docs/security.md ("Where a credential can end up") is
asserted: a new leak fails this test.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request

import httpx
import openai
import pytest

from conftest import BIN, Server

KEYS = {
    "client-api-key": "sk-gmleak-pyclient-6Rb2",
    "client-header": "gmleak-pyheader-1Mc9",
    "env-string": "sk-gmleak-pyenv-3Fg5",
    "bearer-args": "gmleak-pybearer-7Jk4",
    "exception": "gmleak-pyexc-2Nd8",
}
RECORDED_BY_DESIGN = {"env-string", "bearer-args", "exception"}
EXPORTED = {"env-string", "exception"}


def found_in(text: str) -> set[str]:
    return {name for name, key in KEYS.items() if key in text}


def http_text(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read().decode()


def test_every_planted_credential_is_redacted_or_recorded_by_design_and_nowhere_else():
    srv = Server(env={"GRAPHMIND_TELEMETRY": "log"})
    try:
        import graphmind as gm

        g = gm.GraphMind(url=srv.url, env={}, app="py-leaks")
        assert g.ready(5)

        def answer(request):
            return httpx.Response(200, json={
                "id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-test",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            })

        client = openai.OpenAI(
            api_key=KEYS["client-api-key"], base_url="http://llm.test/v1", max_retries=0,
            default_headers={"X-Custom-Auth": KEYS["client-header"]},
            http_client=httpx.Client(transport=httpx.MockTransport(answer)),
        )
        g.instrument_openai(client)

        @g.tool
        def deploy(note: str, headers: dict) -> str:
            raise RuntimeError(f"401 from upstream: invalid token {KEYS['exception']}")

        with pytest.raises(RuntimeError):
            with g.run("leaky") as ctx:
                run_id = ctx.run_id
                client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
                deploy(f"OPENAI_API_KEY={KEYS['env-string']}", {"Authorization": f"Bearer {KEYS['bearer-args']}"})
        assert g.session.flush(5)
        g.dispose()
        deadline = time.monotonic() + 10
        events = srv.events(run_id, 1)
        while not (events and events[-1]["type"] == "run.finished") and time.monotonic() < deadline:
            time.sleep(0.05)
            events = srv.events(run_id, 1)
        assert events and events[-1]["type"] == "run.finished"

        places: dict[str, str] = {}
        db = os.path.join(srv.dir, "g.db")
        raw = b""
        for suffix in ("", "-wal"):
            if os.path.exists(db + suffix):
                with open(db + suffix, "rb") as f:
                    raw += f.read()
        places["sqlite"] = raw.decode("utf-8", "replace")
        places["http-api"] = "".join(
            http_text(srv.port, p) for p in ("/api/runs", f"/api/runs/{run_id}/events?limit=5000", "/health")
        )
        stderr = ""
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMIND_")}
        env.update(GRAPHMIND_TELEMETRY="log", GRAPHMIND_HOME=srv.home)
        for place, extra in (("record-ndjson", []), ("record-otlp", ["--format", "otlp"]), ("record-html", ["--html"])):
            out = subprocess.run(
                [str(BIN), "record", run_id, "--db", db, "--out", "-", *extra],
                capture_output=True, env=env, timeout=60,
            )
            err = out.stderr.decode()
            if place == "record-html" and out.returncode != 0 and "make viewer" in err:
                continue
            assert out.returncode == 0, f"{place}: {err}"
            places[place] = out.stdout.decode()
            stderr += err
        assert "[graphmind telemetry]" in stderr
        places["telemetry+record-stderr"] = stderr

        expected = {
            p: RECORDED_BY_DESIGN if p in ("sqlite", "http-api") else EXPORTED if p.startswith("record-") else set()
            for p in places
        }
        actual = {p: found_in(text) for p, text in places.items()}
        print(json.dumps({p: sorted(v) for p, v in actual.items()}))
        assert actual == expected, json.dumps({p: sorted(v) for p, v in actual.items()})
    finally:
        srv.stop()
