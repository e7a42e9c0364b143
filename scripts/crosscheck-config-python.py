#!/usr/bin/env python3
"""Cross-check our configuration vectors against the reference Python SDK.

Run with the interpreter that has the reference installed (graphmind-ai 0.5.1):

    /work/main/.venv-ref/bin/python scripts/crosscheck-config-python.py

It feeds every case of tests/vectors/ours/kill-switch.json and environment.json
(the kill switch for python-flavor cases only, since the production rule differs
per language; url, hide switches and loop guard for all) to the reference's own
resolvers (graphmind.env.resolve_enabled,
graphmind.env.resolve_url, graphmind.redaction.resolve_redaction,
graphmind.loop_guard.resolve_loop_guard) and compares what they return with our
expected values. A case marked "referenceDiffers" must differ (it is a documented
choice); any other disagreement is printed and makes the exit status 1.
"""
import json
import pathlib
import sys

from graphmind import env as ref_env
from graphmind import loop_guard as ref_loop
from graphmind import redaction as ref_red

ROOT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "vectors" / "ours"
HIDE = {"hideInputs": "hide_inputs", "hideOutputs": "hide_outputs",
        "hideToolArgs": "hide_tool_args", "hideToolResults": "hide_tool_results"}


def reference_view(case):
    env, opts = case["env"], case.get("options") or {}
    explicit = opts.get("enabled") if isinstance(opts.get("enabled"), bool) else None
    out = {"enabled": ref_env.resolve_enabled(explicit, env)}
    out["url"] = ref_env.resolve_url(opts.get("url"), env)
    switches = ref_red.resolve_redaction({snake: opts.get(camel) for camel, snake in HIDE.items()}, env)
    for camel, snake in HIDE.items():
        out[camel] = getattr(switches, snake)
    guard = opts.get("loopGuard")
    g = ref_loop.resolve_loop_guard(guard, env)
    out["loopGuard"] = {"threshold": g.threshold, "mode": g.mode, "allowNodes": sorted(g.allow_nodes),
                        "ignoreKeys": sorted(g.ignore_keys), "kinds": sorted(g.kinds)}
    return out


def main():
    checked = differ_ok = 0
    problems = []
    for name in ("kill-switch.json", "environment.json"):
        for case in json.loads((ROOT / name).read_text())["cases"]:
            if name == "kill-switch.json" and case["flavor"] != "python":
                continue
            ref = reference_view(case)
            if case["flavor"] != "python":
                # The production rule is flavor-specific; every other rule is shared.
                ref.pop("enabled")
            mismatched = []
            for key, want in case["expected"].items():
                if key not in ref:
                    continue
                got = ref[key]
                if key == "loopGuard":
                    want = {k: (sorted(v) if isinstance(v, list) else v) for k, v in want.items() if k != "active"}
                if got != want:
                    mismatched.append(f"{key}: ours {want!r}, reference {got!r}")
            checked += 1
            if case.get("referenceDiffers"):
                if mismatched:
                    differ_ok += 1
                else:
                    problems.append(f"{name} / {case['name']}: marked referenceDiffers but agrees")
            elif mismatched:
                problems.append(f"{name} / {case['name']}: " + "; ".join(mismatched))
    for p in problems:
        print("MISMATCH", p)
    print(f"{checked} cases checked against the reference, {differ_ok} documented differences, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
