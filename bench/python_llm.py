"""Python figures, one run: what an instrumented `chat.completions.create` adds to the
calling thread's CPU time over the bare `openai` client, against the local fake provider
(tests/fake_provider/server.py, same process, 127.0.0.1), non-streamed and per streamed
chunk, for ours and for graphmind-ai 0.5.1 (.venv-ref, driving the same openai package),
side by side; detached (nothing listens on the GraphMind URL), attached to a real
`graphmind serve` (no breakpoint armed), and over an in-memory transport (no socket).

Two figures each: "added" is the whole difference the app sees (instrumented minus bare);
"own time" is the instrumentation's own share of it, the calling thread's time outside the
client library's `create` (each client's `create` shimmed to count the time inside it;
instrumented minus a null shim). What is added beyond the own time is the client library's
own work running slower next to the instrumentation (caches), which the figure cannot
assign to one line of code.

The bare client itself costs milliseconds a call and its run-to-run noise is larger than
the overhead, so the figure is a paired one: batches of bare and instrumented calls
alternate (ABBA...), each pair gives "instrumented minus bare" per call, and the median of
those differences is reported with a 95% confidence interval (order statistics of the
median), next to the medians of the two sides.

Usage: python bench/python_llm.py   (run by `make bench-python`)
"""

from __future__ import annotations

import json
import math
import os
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REF_PYTHON = os.environ.get("GRAPHMIND_REF_PYTHON") or str(ROOT / ".venv-ref" / "bin" / "python")
#: Batch pairs per figure, and calls per batch (non-streamed, streamed).
PAIRS = int(os.environ.get("GM_BENCH_LLM_PAIRS", "150"))
BATCH = int(os.environ.get("GM_BENCH_LLM_BATCH", "8"))
STREAM_BATCH = max(BATCH // 4, 1)
#: Chunks of the streamed answer.
CHUNKS = 50
#: Calls of each kind before measuring.
WARMUP = 60


def median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def median_ci(values: list[float]) -> tuple[float, float]:
    """A 95% confidence interval of the median (the binomial order statistics)."""
    v = sorted(values)
    n = len(v)
    half = 1.96 * math.sqrt(n) / 2
    lo = max(int(math.floor(n / 2 - half)), 0)
    hi = min(int(math.ceil(n / 2 + half)), n - 1)
    return v[lo], v[hi]


def paired(bare, instrumented, pairs: int, batch: int) -> dict:
    """Alternating batches of both (ABBA order, so a drift hits both alike): per-call thread
    CPU of each side and of the difference."""
    for _ in range(WARMUP):
        bare()
        instrumented()
    a, b, d = [], [], []

    def batch_us(fn) -> float:
        start = time.thread_time_ns()
        for _ in range(batch):
            fn()
        return (time.thread_time_ns() - start) / batch / 1000.0

    for i in range(pairs):
        if i % 2 == 0:
            ta, tb = batch_us(bare), batch_us(instrumented)
        else:
            tb, ta = batch_us(instrumented), batch_us(bare)
        a.append(ta)
        b.append(tb)
        d.append(tb - ta)
    lo, hi = median_ci(d)
    return {"bare_us": median(a), "instrumented_us": median(b), "overhead_us": median(d), "ci": [lo, hi]}


def own_time(null_call, inst_call, inside: list[int], pairs: int, batch: int) -> dict:
    """The instrumentation's own calling-thread time: each client's `create` is shimmed to
    count the time spent inside it, so what is left is the time outside the client library
    (the wrapper's, and for a stream the chunks' iteration), instrumented minus a null
    shim, per call, in alternating batches."""
    def batch_outside(fn) -> float:
        inside[0] = 0
        start = time.thread_time_ns()
        for _ in range(batch):
            fn()
        return (time.thread_time_ns() - start - inside[0]) / batch / 1000.0

    for _ in range(WARMUP):
        null_call()
        inst_call()
    d = []
    for i in range(pairs):
        if i % 2 == 0:
            tn, ti = batch_outside(null_call), batch_outside(inst_call)
        else:
            ti, tn = batch_outside(inst_call), batch_outside(null_call)
        d.append(ti - tn)
    lo, hi = median_ci(d)
    return {"own_us": median(d), "own_ci": [lo, hi]}


def shimmed(client, inside: list[int]):
    """`client.chat.completions.create` counting the thread time spent inside it."""
    original = client.chat.completions.create

    def create(*args, **kwargs):
        start = time.thread_time_ns()
        try:
            return original(*args, **kwargs)
        finally:
            inside[0] += time.thread_time_ns() - start

    client.chat.completions.create = create
    return client


def floored(client, inside: list[int] | None = None):
    """The floor: the least work any recorder must do on the calling thread. The method is
    patched (a wrapper runs around the call), the request's arguments are copied into a
    plain dict, and the answer (non-streamed) or each chunk (streamed) is read into plain
    values with pydantic's own `model_dump()` (compiled, in pydantic-core) and kept, so that a recorder could
    store it; nothing else (no event, no gate, no id, no thread hand-off). Reading less
    would not record the answer; reading it later would read an object the app may
    have changed meanwhile (and still need this thread, holding the GIL, to read it)."""
    original = client.chat.completions.create
    kept: list = []

    def chunks(stream):
        for chunk in stream:
            kept.append(chunk.model_dump())
            yield chunk

    def create(*args, **kwargs):
        request = dict(kwargs)
        result = original(*args, **kwargs)
        if kwargs.get("stream") is True:
            kept.append(request)
            return chunks(result)
        kept.append((request, result.model_dump()))
        if len(kept) > 256:
            del kept[:128]
        return result

    client.chat.completions.create = create
    return client


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

    in_memory = os.environ.get("GM_BENCH_LLM_MEMORY") == "1"

    def make():
        if not in_memory:
            return openai.OpenAI(api_key="sk", base_url=provider.base_url, max_retries=0)
        # The same client over an in-memory transport: no socket, so the calling thread never
        # blocks (and never comes back to cold caches) between the request and the answer.
        import httpx
        from server import sse_body

        def answer(request):
            if json.loads(request.content or b"{}").get("stream"):
                return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse_body(stream["sse"]))
            return httpx.Response(200, json=completion["json"])

        http = httpx.Client(transport=httpx.MockTransport(answer))
        return openai.OpenAI(api_key="sk", base_url="http://llm.test/v1", http_client=http, max_retries=0)

    bare, instrumented = make(), make()
    inside = [0]
    null_shim, inst_shim = shimmed(make(), inside), shimmed(make(), inside)
    url = os.environ.get("GM_BENCH_LLM_URL") or "ws://127.0.0.1:9/ingest"
    g = gm.GraphMind(url=url, app="bench", env={}, logger=lambda line: None)
    attached = g.ready(5) if os.environ.get("GM_BENCH_LLM_URL") else False
    g.instrument_openai(instrumented)
    g.instrument_openai(inst_shim)
    floor, floor_shim = floored(make()), floored(shimmed(make(), inside))

    def call(client, answer, streamed):
        def once():
            if not in_memory:
                provider.script(answer)
            if streamed:
                for _ in client.chat.completions.create(model="gpt-test", messages=messages, stream=True):
                    pass
            else:
                client.chat.completions.create(model="gpt-test", messages=messages, temperature=0.2)
        return once

    out: dict = {"attached": attached}
    with g.run("bench"):
        out["create"] = paired(call(bare, completion, False), call(instrumented, completion, False), PAIRS, BATCH)
        out["stream"] = paired(call(bare, stream, True), call(instrumented, stream, True), PAIRS, STREAM_BATCH)
        out["create"].update(own_time(call(null_shim, completion, False), call(inst_shim, completion, False), inside, PAIRS, BATCH))
        out["stream"].update(own_time(call(null_shim, stream, True), call(inst_shim, stream, True), inside, PAIRS, STREAM_BATCH))
        # The floor, measured the same way in the same process (see `floored`).
        out["floor_create"] = paired(call(bare, completion, False), call(floor, completion, False), PAIRS, BATCH)
        out["floor_stream"] = paired(call(bare, stream, True), call(floor, stream, True), PAIRS, STREAM_BATCH)
        out["floor_create"].update(own_time(call(null_shim, completion, False), call(floor_shim, completion, False), inside, PAIRS, BATCH))
        out["floor_stream"].update(own_time(call(null_shim, stream, True), call(floor_shim, stream, True), inside, PAIRS, STREAM_BATCH))
    if inside[0] == 0:
        out["create"]["own_us"] = out["stream"]["own_us"] = float("nan")  # the shim was bypassed
    for s in (out["stream"], out["floor_stream"]):
        s["per_chunk_us"] = s["overhead_us"] / CHUNKS
        s["per_chunk_ci"] = [x / CHUNKS for x in s["ci"]]
        s["own_per_chunk_us"] = s["own_us"] / CHUNKS
        s["own_per_chunk_ci"] = [x / CHUNKS for x in s["own_ci"]]
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


def child(python: str, env: dict, url: str | None, in_memory: bool = False) -> dict | None:
    env = dict(env, GM_BENCH_LLM_CHILD="1", GM_BENCH_LLM_MEMORY="1" if in_memory else "0")
    if url:
        env["GM_BENCH_LLM_URL"] = url
    done = subprocess.run([python, __file__], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"({python}: failed: {done.stderr.strip()[-400:]})")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def fmt(value: float, ci: list[float] | None = None) -> str:
    return f"{value:.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")


def table(title: str, ours: dict, ref: dict | None) -> None:
    """Ours, 0.5.1's and the floor (measured in ours' process), side by side, with ratios."""
    floor = {"create": ours["floor_create"], "stream": ours["floor_stream"]}
    print(f"\n{title}")
    print(f"{'':36}{'ours':>24}{'graphmind-ai 0.5.1':>24}{'floor':>24}")
    rows = [
        ("bare client, one call (us)", "create", "bare_us", None),
        ("instrumented, one call (us)", "create", "instrumented_us", None),
        ("added, one call (us, 95% CI)", "create", "overhead_us", "ci"),
        ("bare client, streamed call (us)", "stream", "bare_us", None),
        ("instrumented, streamed call (us)", "stream", "instrumented_us", None),
        ("added per streamed chunk (us, CI)", "stream", "per_chunk_us", "per_chunk_ci"),
        ("own time, one call (us, CI)", "create", "own_us", "own_ci"),
        ("own time per streamed chunk (us, CI)", "stream", "own_per_chunk_us", "own_per_chunk_ci"),
    ]
    for label, group, key, ci in rows:
        cells = [
            fmt(side[group][key], side[group].get(ci) if ci else None) if side else "-"
            for side in (ours, ref, floor)
        ]
        print(f"{label:36}" + "".join(f"{c:>24}" for c in cells))
    for what, group, key in (
        ("added, one call", "create", "overhead_us"),
        ("added per chunk", "stream", "per_chunk_us"),
        ("own time, one call", "create", "own_us"),
        ("own time per chunk", "stream", "own_per_chunk_us"),
    ):
        mine, low = ours[group][key], floor[group][key]
        parts = [f"ours / floor {ratio(mine, low)}"]
        if ref:
            other = ref[group][key]
            parts = [f"ours / 0.5.1 {ratio(mine, other)} (goal <= 0.10)", f"floor / 0.5.1 {ratio(low, other)}"] + parts
        print(f"ratios, {what}: " + "; ".join(parts))


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b > 0 else "n/a"


def main() -> None:
    if os.environ.get("GM_BENCH_LLM_CHILD"):
        print(json.dumps(figures()))
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMIND_")}
    ref_env = dict(env, PYTHONPATH=shelf())
    have_ref = os.path.exists(REF_PYTHON)
    sys.path.insert(0, str(ROOT / "bindings" / "python" / "tests"))
    from conftest import Server

    load = os.getloadavg()[0]
    print(f"chat.completions.create against the local fake provider: the calling thread's CPU, "
          f"{PAIRS} alternating batch pairs ({BATCH} calls; streams {STREAM_BATCH} calls of {CHUNKS} chunks), "
          f"medians; load average {load:.1f} at start")
    configs = (
        ("fake provider over 127.0.0.1, detached (nothing listens)", False, False),
        ("fake provider over 127.0.0.1, attached to graphmind serve (no breakpoint)", True, False),
        ("the same client over an in-memory transport (no socket), detached", False, True),
    )
    for title, attach, in_memory in configs:
        server = Server() if attach else None
        try:
            url = server.url if server else None
            ours = child(sys.executable, env, url, in_memory)
            ref = child(REF_PYTHON, ref_env, url, in_memory) if have_ref else None
        finally:
            if server:
                server.stop()
        if ours:
            if attach and not ours.get("attached"):
                print("(ours did not attach)")
            if attach and ref and not ref.get("attached"):
                print("(0.5.1 did not attach)")
            table(title, ours, ref)
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
