"""Recorded runs as offline tests: :func:`replay` (a context manager) and the
``graphmind_replay`` pytest fixture (`pytest_plugins = ["graphmind.testing"]` in a conftest.py).

Inside ``with replay("run.ndjson"):`` the next run the app starts (a run with the
recorded run's name) has its tool and model calls answered from the recording, in the
core (``docs/replay.md``): no tool function runs, no request reaches the provider, until
the fork point or the first call whose input differs, after which the run is live.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .session import Session

__all__ = ["ReplayDiverged", "Replay", "replay", "graphmind_replay"]


class ReplayDiverged(AssertionError):
    """Raised on leaving ``replay(..., strict=True)`` when the run went live before the
    recording ended (or nothing was replayed)."""


class Replay:
    """What a replay did: ``replayed`` (calls answered from the recording), ``live`` (where
    it went live: ``{reason, at, differs?}``), ``error`` (why nothing was replayed),
    ``replay_of`` (the recorded run) and ``run_id`` (the run it answered)."""

    def __init__(self, session: Session, begun: dict[str, Any] | None = None) -> None:
        self._session = session
        self._begun = begun or {}
        self._final: dict[str, Any] | None = None

    @property
    def report(self) -> dict[str, Any]:
        if self._final is not None:
            return self._final
        return self._session._native.replay_report() or self._begun

    @property
    def replayed(self) -> int:
        return int(self.report.get("replayed") or 0)

    @property
    def live(self) -> dict[str, Any] | None:
        return self.report.get("live")

    @property
    def error(self) -> str | None:
        return self.report.get("error")

    @property
    def replay_of(self) -> str | None:
        return self.report.get("replayOf")

    @property
    def run_id(self) -> str | None:
        return self.report.get("runId")


def _spec(source: Any, from_: str | None, output: Any) -> dict[str, Any]:
    # The core reads `source` as a file when one exists there, else as a run reference.
    spec: dict[str, Any] = {"source": os.fspath(source) if isinstance(source, os.PathLike) else str(source)}
    if from_ is not None:
        spec["from"] = from_
    if output is not None:
        spec["output"] = output
    return spec


@contextmanager
def replay(
    source: Any,
    *,
    from_: str | None = None,
    output: Any = None,
    strict: bool = False,
    session: Session | None = None,
) -> Iterator[Replay]:
    """Replays a recorded run inside the block: ``source`` an exported run
    (``graphmind record RUN_ID --no-redact-secrets``) or a run id on the server the
    session attaches to. ``from_="<nodeId>#<n>"`` goes live at that call, with ``output``
    as the output of the call just before it. ``strict``: raise :class:`ReplayDiverged`
    on leaving when the run went live anywhere but at ``from_``."""
    if session is None:
        from .api import instance

        session = instance().session
    handle = Replay(session, session._native.replay_begin(_spec(source, from_, output)))
    try:
        yield handle
    finally:
        handle._final = session._native.replay_end() or handle._final or handle._begun
    if strict:
        live = handle.live
        if handle.error:
            raise ReplayDiverged(f"nothing replayed: {handle.error}")
        if live is not None and live.get("reason") != "fork":
            raise ReplayDiverged(f"the run went live at {live.get('at')}: {live.get('reason')} {live.get('differs') or ''}".rstrip())


try:  # the fixture, when pytest is there: `pytest_plugins = ["graphmind.testing"]` in a conftest.py
    import pytest

    @pytest.fixture
    def graphmind_replay() -> Iterator[Any]:
        """``graphmind_replay(path, **kw)`` starts a :func:`replay` that ends with the test
        and returns its :class:`Replay`."""
        opened: list[Any] = []

        def start(source: Any, **kwargs: Any) -> Replay:
            manager = replay(source, **kwargs)
            opened.append(manager)
            return manager.__enter__()

        yield start
        for manager in reversed(opened):
            manager.__exit__(None, None, None)

except ImportError:  # pragma: no cover - pytest absent
    pass
