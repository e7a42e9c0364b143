"""Python figures, one run: what an instrumented `chat.completions.create` costs the calling
thread over the bare `openai` client, against the local fake provider
(tests/fake_provider/server.py, same process, 127.0.0.1), non-streamed and per streamed
chunk, for ours and for graphmind-ai 0.5.1 (.venv-ref, driving the same openai package),
side by side. Detached (nothing listens on the GraphMind URL), as bench/python_tool.py.

Usage: python bench/python_llm.py   (run by `make bench-python`)
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REF_PYTHON = os.environ.get("GRAPHMIND_REF_PYTHON") or str(ROOT / ".venv-ref" / "bin" / "python")
CALLS = int(os.environ.get("GM_BENCH_LLM_CALLS", "1500"))
#: Chunks of the streamed answer.
CHUNKS = 50


def thread_us(fn, calls: int) -> float:
    """Best of 5 runs: the calling thread's CPU time per call (the provider's threads are
    not counted)."""
    for _ in range(50):
        fn()
    best = None
    for _ in range(5):
        start = time.thread_time_ns()
        for _ in range(calls):
            fn()
        per = (time.thread_time_ns() - start) / calls / 1000.0
        best = per if best is None or per < best else best
    return best


def figures() -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "fake_provider"))
    import openai
    from server import FakeProvider

    import graphmind as gm

    provider = FakeProvider()
    completion = {"status": 200, "json": {
        "id": "c", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Lisbon is sunny."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}}
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
             "choices": [{"index": 0, "delta": {"content": "tok "}, "finish_reason": None}]}
    stream = {"status": 200, "sse": [[None, chunk]] * CHUNKS + [[None, "[DONE]"]]}
    messages = [{"role": "user", "content": "weather in Lisbon?"}]

    def make():
        return openai.OpenAI(api_key="sk", base_url=provider.base_url, max_retries=0)

    bare, instrumented = make(), make()
    g = gm.GraphMind(url="ws://127.0.0.1:9/ingest", app="bench", env={}, logger=lambda line: None)
    g.instrument_openai(instrumented)

    def call(client, answer, streamed):
        def once():
            provider.script(answer)
            if streamed:
                for _ in client.chat.completions.create(model="gpt-test", messages=messages, stream=True):
                    pass
            else:
                client.chat.completions.create(model="gpt-test", messages=messages, temperature=0.2)
        return once

    out = {}
    with g.run("bench"):
        for label, answer, streamed, calls in (("create", completion, False, CALLS), ("stream", stream, True, max(CALLS // 10, 50))):
            base = thread_us(call(bare, answer, False if not streamed else True), calls)
            inst = thread_us(call(instrumented, answer, streamed), calls)
            out[label] = {"bare_us": base, "instrumented_us": inst, "overhead_us": inst - base}
    out["stream"]["per_chunk_us"] = out["stream"]["overhead_us"] / CHUNKS
    g.dispose()
    provider.stop()
    return out


def shelf() -> str:
    """This venv's client libraries without our `graphmind`, for the reference's venv."""
    d = Path(tempfile.mkdtemp(prefix="gm-bench-libs-"))
    for base in site.getsitepackages():
        for entry in Path(base).iterdir():
            name = entry.name
            if name.startswith(("graphmind", "_graphmind")) or name.endswith(".pth") or name.startswith("_distutils"):
                continue
            if not (d / name).exists():
                (d / name).symlink_to(entry)
    return str(d)


def main() -> None:
    if os.environ.get("GM_BENCH_LLM_CHILD"):
        print(json.dumps(figures()))
        return
    env = dict(os.environ, GM_BENCH_LLM_CHILD="1")
    env = {k: v for k, v in env.items() if not k.startswith("GRAPHMIND_")}
    ours = json.loads(subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, check=True).stdout)
    ref = None
    if os.path.exists(REF_PYTHON):
        ref_env = dict(env, PYTHONPATH=shelf())
        done = subprocess.run([REF_PYTHON, __file__], env=ref_env, capture_output=True, text=True)
        ref = json.loads(done.stdout) if done.returncode == 0 else None
        if ref is None:
            print(f"(graphmind-ai 0.5.1 failed: {done.stderr.strip()[-300:]})")
    print(f"chat.completions.create against the local fake provider, calling thread's CPU, best of 5 ({CALLS} calls; streams {CHUNKS} chunks)")
    print(f"{'':34}{'ours':>12}{'graphmind-ai 0.5.1':>22}")
    rows = [
        ("bare client, one call (us)", "create", "bare_us"),
        ("instrumented, one call (us)", "create", "instrumented_us"),
        ("overhead, one call (us)", "create", "overhead_us"),
        ("bare client, streamed call (us)", "stream", "bare_us"),
        ("instrumented, streamed call (us)", "stream", "instrumented_us"),
        ("overhead per streamed chunk (us)", "stream", "per_chunk_us"),
    ]
    for label, group, key in rows:
        theirs = f"{ref[group][key]:.1f}" if ref else "-"
        print(f"{label:34}{ours[group][key]:>12.1f}{theirs:>22}")
    if ref:
        for group, key in (("create", "overhead_us"), ("stream", "per_chunk_us")):
            mine, other = ours[group][key], ref[group][key]
            ratio = mine / other if other > 0 else float("nan")
            print(f"ratio ours / 0.5.1, {group} overhead: {ratio:.2f} (goal <= 0.10)")


if __name__ == "__main__":
    main()
