"""The session: Python idioms around the core's session (``graphmind._native``).

Everything with a rule in it (options and environment, the kill switch, redaction,
shrinking, the loop guard, gates and what each resume action means, buffering, the
wire) is the Rust core's. This module only maps Python spellings onto it, keeps the
current run in a context variable, and waits at gates the Python way: a blocking wait
with the GIL released for sync code, an awaited future for asyncio code.
"""

from __future__ import annotations

import asyncio
import os
import contextvars
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import _native
from .errors import GraphMindAbortError, error_parts, is_abort_error
from .gate import GateDecision, GateNode

DEFAULT_READY_TIMEOUT = 2.0

def core_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The reference's Python options as the core's camelCase option object: the core's
    option table maps the names and makes seconds milliseconds."""
    return _native.core_options(dict(options))


def _env_mapping(env: Any) -> dict[str, str] | None:
    if env is None:
        return None
    out: dict[str, str] = {}
    for key in list(env.keys()):
        value = env.get(key)
        if isinstance(key, str) and isinstance(value, str):
            out[key] = value
    return out


def _default_sink(line: str) -> None:
    try:
        print(line, file=sys.stderr)
    except Exception:
        pass


class _AbortEvent:
    """``RunContext.abort_event``: a ``threading.Event`` look-alike over the run's signal."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx

    def is_set(self) -> bool:
        return self._ctx.aborted

    def set(self) -> None:
        self._ctx.abort()

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True


class RunContext:
    """One run in progress: its id, name and abort signal (shared with the debugger)."""

    __slots__ = ("_native", "_reason", "abort_event")

    def __init__(self, native_run: Any) -> None:
        self._native = native_run
        self._reason: BaseException | None = None
        self.abort_event = _AbortEvent(self)

    @property
    def run_id(self) -> str:
        return self._native.run_id

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def aborted(self) -> bool:
        return self._native.aborted

    @property
    def reason(self) -> BaseException | None:
        if self._reason is None and self._native.aborted:
            self._reason = GraphMindAbortError()
        return self._reason

    def abort(self, reason: BaseException | None = None) -> None:
        """Aborts the run: the next gated step raises ``reason`` (or the abort error)."""
        if self._reason is None:
            self._reason = reason if reason is not None else GraphMindAbortError()
        self._native.abort(str(self._reason) or "aborted by the app")

    def __repr__(self) -> str:
        return f"RunContext({self.name!r}, run_id={self.run_id!r}, aborted={self.aborted})"


_current_run: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "graphmind_current_run", default=None
)


def current_run() -> RunContext | None:
    """The run the calling thread or task is in."""
    return _current_run.get()


class SessionStats:
    """A diagnostics snapshot."""

    __slots__ = ("attached", "buffered", "dropped", "enabled", "held_gates", "lost", "seq")

    def __init__(
        self,
        enabled: bool,
        attached: bool,
        buffered: int,
        dropped: int,
        held_gates: int,
        seq: int,
        lost: int = 0,
    ) -> None:
        self.enabled = enabled
        self.attached = attached
        self.buffered = buffered
        self.dropped = dropped
        self.held_gates = held_gates
        self.seq = seq
        self.lost = lost

    def as_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "attached": self.attached,
            "buffered": self.buffered,
            "dropped": self.dropped,
            "heldGates": self.held_gates,
            "seq": self.seq,
        }

    def __repr__(self) -> str:
        return f"SessionStats({self.as_dict()})"


# -- waiting at a held gate -----------------------------------------------------------


def wait_gate(gate: Any) -> Any:
    """Blocks on a held gate with the GIL released (Ctrl-C still works)."""
    return gate.wait()


def _settle(future: asyncio.Future[Any], decision: Any) -> None:
    if not future.done():
        future.set_result(decision)


async def await_gate(gate: Any) -> Any:
    """Awaits a held gate: the loop keeps running; a cancelled task discards the gate."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def deliver(decision: Any) -> None:
        try:
            loop.call_soon_threadsafe(_settle, future, decision)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    gate.on_decision(deliver)
    try:
        return await future
    except asyncio.CancelledError:
        gate.discard()
        raise


# -- every live session gets the process hook at exit ---------------------------------

_sessions: weakref.WeakSet[Session] = weakref.WeakSet()
_sessions_lock = threading.Lock()


# Fork safety needs no Python hook: every native session is registered with the core's
# pthread_atfork hooks, which run inside fork() itself, so no session lock is held while
# Python code runs (an os.register_at_fork hook would be, and a thread holding the GIL could
# wait for it). The child gets its own worker and socket on its first event.


def _at_exit() -> None:
    for s in list(_sessions):
        try:
            s.dispose()
        except Exception:
            pass
    _native._shutting_down()


import atexit  # noqa: E402

atexit.register(_at_exit)


class Session:
    """The GraphMind client session; integrations share it. Options are the reference's
    (``url``, ``app_name``, ``sdk``, ``meta``, ``enabled``, ``connect_timeout``,
    ``handshake_timeout``, ``retry_interval``, ``buffer_size``, ``pause_timeout``,
    ``token_interval``, ``env``, ``logger``, ``warn_interval``, ``clock``, ``loop_guard``,
    ``hide_inputs``, ``hide_outputs``, ``hide_tool_args``, ``hide_tool_results``), plus
    ``spool_dir`` and ``spool_max_bytes`` (docs/spool.md); durations are seconds."""

    def __init__(
        self,
        *,
        url: str | None = None,
        app_name: str = "python",
        sdk: dict[str, str] | None = None,
        meta: dict[str, Any] | None = None,
        enabled: bool | None = None,
        connect_timeout: float | None = None,
        handshake_timeout: float | None = None,
        retry_interval: float | None = None,
        buffer_size: int | None = None,
        pause_timeout: float | None = None,
        token_interval: float | None = None,
        env: Mapping[str, str] | None = None,
        logger: Callable[[str], None] | None = None,
        warn_interval: float | None = None,
        clock: Callable[[], float] | None = None,
        loop_guard: Any = None,
        hide_inputs: bool | None = None,
        hide_outputs: bool | None = None,
        hide_tool_args: bool | None = None,
        hide_tool_results: bool | None = None,
        break_on_error_result: bool | None = None,
        break_on_truncated: bool | None = None,
        max_buffer_bytes: int | None = None,
        replay: Any = None,
        spool_dir: str | os.PathLike[str] | None = None,
        spool_max_bytes: int | None = None,
    ) -> None:
        options = core_options(
            {
                "url": url,
                "app_name": app_name,
                "sdk": sdk if sdk is not None else {"name": "python", "version": "0.0.0"},
                "meta": meta,
                "enabled": enabled,
                "connect_timeout": connect_timeout,
                "handshake_timeout": handshake_timeout,
                "retry_interval": retry_interval,
                "buffer_size": buffer_size,
                "max_buffer_bytes": max_buffer_bytes,
                "pause_timeout": pause_timeout,
                "token_interval": token_interval,
                "warn_interval": warn_interval,
                "loop_guard": loop_guard,
                "hide_inputs": hide_inputs,
                "hide_outputs": hide_outputs,
                "hide_tool_args": hide_tool_args,
                "hide_tool_results": hide_tool_results,
                "break_on_error_result": break_on_error_result,
                "break_on_truncated": break_on_truncated,
                "replay": replay,
                "spool_dir": os.fspath(spool_dir) if spool_dir is not None else None,
                "spool_max_bytes": spool_max_bytes,
            }
        )
        # `clock` drove the reference's held-time ledger; the core times holds itself.
        self._clock = clock
        self._native = _native.NativeSession(
            options, _env_mapping(env), logger if logger is not None else _default_sink
        )
        self._disposed = False
        config = self._native.config()
        self.enabled: bool = bool(config.get("enabled"))
        self.app_name: str = config.get("appName", app_name)
        self.sdk: dict[str, str] = config.get("sdk") or {}
        self.meta = config.get("meta")
        with _sessions_lock:
            _sessions.add(self)

    # -- state --------------------------------------------------------------------

    @property
    def attached(self) -> bool:
        return self._native.attached

    @property
    def disposed(self) -> bool:
        return self._disposed

    @property
    def url(self) -> str:
        return self._native.url

    @property
    def config(self) -> dict[str, Any]:
        """The resolved configuration, as the core reports it."""
        return self._native.config()

    def stats(self) -> SessionStats:
        enabled, attached, buffered, dropped, held, seq, lost = self._native.stats()
        return SessionStats(enabled, attached, buffered, dropped, held, seq, lost)

    def _active(self) -> bool:
        return self.enabled and not self._disposed

    # -- attach -------------------------------------------------------------------

    def ready(self, timeout: float = DEFAULT_READY_TIMEOUT) -> bool:
        """Waits until a debugger is attached; ``False`` means "carry on detached"."""
        return self._native.ready(float(timeout))

    async def ready_async(self, timeout: float = DEFAULT_READY_TIMEOUT) -> bool:
        """Async twin of :meth:`ready`: waits on a worker thread, never on the loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self._native.ready, float(timeout))

    # -- runs ---------------------------------------------------------------------

    def current_run(self) -> RunContext | None:
        return _current_run.get()

    def run(self, name: str, meta: dict[str, Any] | None = None) -> RunScope:
        """A run boundary usable as ``with`` and ``async with``."""
        return RunScope(self, name, meta)

    def _run_id(self) -> str | None:
        ctx = _current_run.get()
        return ctx.run_id if ctx is not None else None

    # -- events -------------------------------------------------------------------

    def emit(self, type: str, payload: dict[str, Any]) -> None:
        """Emits one raw event into the current run (or the implicit one)."""
        if not self._active():
            return
        self._native.emit(self._run_id(), type, payload)

    def graph_hint(self, nodes: Iterable[dict[str, Any]]) -> None:
        if not self._active():
            return
        self._native.graph_hint(self._run_id(), [n for n in nodes if isinstance(n, dict)])

    def flush(self, timeout: float = 1.0) -> bool:
        return self._native.flush(float(timeout))

    def step(
        self,
        kind: str,
        name: str,
        input: Any = None,
        *,
        node_id: str | None = None,
        parent_id: str | None = None,
        editable: bool = False,
    ) -> Any:
        """Starts one gated call in the current run (the core's ``Step``)."""
        return self._native.step(self._run_id(), kind, name, node_id, parent_id, input, editable)

    # -- bare gates (advanced) -------------------------------------------------------

    def gate(self, point: str, node: GateNode) -> GateDecision:
        held = self._native.gate(self._run_id(), point, node.node_id, node.kind, node.name)
        if held is None:
            return GateDecision.CONTINUE
        return GateDecision._from_native(wait_gate(held))

    async def gate_async(self, point: str, node: GateNode) -> GateDecision:
        held = self._native.gate(self._run_id(), point, node.node_id, node.kind, node.name)
        if held is None:
            return GateDecision.CONTINUE
        return GateDecision._from_native(await await_gate(held))

    def abort_error(self, ctx: RunContext | None = None) -> BaseException:
        """The exception to raise after an ``abort`` decision."""
        if ctx is None:
            ctx = _current_run.get()
        if ctx is not None and ctx.reason is not None:
            return ctx.reason
        return GraphMindAbortError()

    # -- lifecycle ----------------------------------------------------------------

    def dispose(self) -> None:
        """Releases held gates, flushes, closes the link (bounded wait). Idempotent."""
        if self._disposed:
            return
        self._disposed = True
        # The core's bound: a connection in flight or never tried is waited for (connect +
        # handshake timeouts), then what the ring holds is sent.
        self._native.dispose(self._native.exit_deadline())


class RunScope:
    """A run boundary, ``with`` and ``async with``: ``run.started``/``run.finished`` plus
    the run's ``agent:<name>`` node; the :class:`RunContext` carries the abort signal."""

    __slots__ = ("_ctx", "_meta", "_name", "_session", "_started_at", "_token")

    def __init__(self, session: Session, name: str, meta: dict[str, Any] | None = None) -> None:
        self._session = session
        self._name = name
        self._meta = meta
        self._ctx: RunContext | None = None
        self._token: Any = None
        self._started_at = 0.0

    @property
    def context(self) -> RunContext | None:
        return self._ctx

    def __enter__(self) -> RunContext:
        return self._begin()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._end(exc)

    async def __aenter__(self) -> RunContext:
        return self._begin()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._end(exc)

    def _begin(self) -> RunContext:
        native = self._session._native
        meta = dict(self._meta) if self._meta else None
        run = native.start_run(self._name, meta)
        ctx = RunContext(run)
        self._ctx = ctx
        self._token = _current_run.set(ctx)
        self._started_at = time.perf_counter()
        if self._session._active():
            native.run_node_started(run)
        return ctx

    def _end(self, error: BaseException | None) -> None:
        ctx = self._ctx
        if self._token is not None:
            try:
                _current_run.reset(self._token)
            except ValueError:  # exited in another context: leave the variable alone
                pass
        self._token = None
        session = self._session
        if ctx is None or not session._active():
            return
        native = session._native
        aborted = ctx.aborted or is_abort_error(error)
        elapsed = (time.perf_counter() - self._started_at) * 1000.0
        if aborted:
            native.run_node_finished(ctx._native, elapsed, "aborted")
            native.finish_run(ctx._native, "aborted")
        elif error is not None:
            name, message, stack = error_parts(error)
            native.run_node_finished(ctx._native, elapsed, "error", name, message, stack)
            native.finish_run(ctx._native, "error", name, message, stack)
        else:
            native.run_node_finished(ctx._native, elapsed, "ok")
            native.finish_run(ctx._native, "ok")
