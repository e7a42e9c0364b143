"""The public surface: :class:`GraphMind`, :class:`Span` and the default instance."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ._version import __version__
from .errors import error_parts, is_abort_error
from .gate import GateDecision, GateNode
from .session import RunContext, RunScope, Session, SessionStats, _current_run, await_gate
from .wrap import ToolsInput, gate_callable
from .wrap import wrap_tools as _wrap_tools

F = TypeVar("F", bound=Callable[..., Any])


class GraphMind:
    """One debugger attachment point for a process."""

    def __init__(self, *, app: str = "python-app", sdk: dict[str, str] | None = None, **session_options: Any) -> None:
        self.session = Session(
            app_name=app,
            sdk=sdk if sdk is not None else {"name": "python", "version": __version__},
            **session_options,
        )

    @property
    def enabled(self) -> bool:
        return self.session.enabled

    @property
    def attached(self) -> bool:
        return self.session.attached

    def ready(self, timeout: float = 2.0) -> bool:
        """Waits until a debugger is attached (breakpoints armed)."""
        return self.session.ready(timeout)

    async def ready_async(self, timeout: float = 2.0) -> bool:
        return await self.session.ready_async(timeout)

    def run(self, name: str, meta: dict[str, Any] | None = None) -> RunScope:
        """A run boundary; ``with`` and ``async with``."""
        return self.session.run(name, meta)

    def span(self, name: str, kind: str = "custom", input: Any = None, parent_id: str | None = None) -> Span:
        """A gated, timed node for code GraphMind cannot see by itself."""
        return Span(self.session, name, kind, input, parent_id)

    def current_run(self) -> RunContext | None:
        return self.session.current_run()

    def tool(self, fn: F | None = None, *, name: str | None = None, kind: str = "tool", parent_id: str | None = None) -> Any:
        """Decorator, bare (``@gm.tool``) or called (``@gm.tool(name=...)``)."""

        def decorate(target: F) -> F:
            return gate_callable(target, lambda: self.session, name=name, kind=kind, parent_id=parent_id)

        if fn is None:
            return decorate
        return decorate(fn)

    def wrap_tools(self, tools: ToolsInput) -> Any:
        return _wrap_tools(tools, lambda: self.session)

    def instrument_openai(self, client: Any) -> Any:
        from .integrations.openai import instrument_openai

        return instrument_openai(client, self.session)

    wrap_openai = instrument_openai

    def instrument_anthropic(self, client: Any) -> Any:
        from .integrations.anthropic import instrument_anthropic

        return instrument_anthropic(client, self.session)

    wrap_anthropic = instrument_anthropic

    def callback_handler(self, **kwargs: Any) -> Any:
        from .integrations.langchain import GraphMindCallbackHandler

        return GraphMindCallbackHandler(session=self.session, **kwargs)

    def async_callback_handler(self, **kwargs: Any) -> Any:
        from .integrations.langchain import AsyncGraphMindCallbackHandler

        return AsyncGraphMindCallbackHandler(session=self.session, **kwargs)

    handler = callback_handler
    async_handler = async_callback_handler

    def emit(self, type: str, payload: dict[str, Any]) -> None:
        self.session.emit(type, payload)

    def gate(self, point: str, node: GateNode) -> GateDecision:
        return self.session.gate(point, node)

    async def gate_async(self, point: str, node: GateNode) -> GateDecision:
        return await self.session.gate_async(point, node)

    def graph_hint(self, nodes: Iterable[dict[str, Any]]) -> None:
        self.session.graph_hint(nodes)

    def stats(self) -> SessionStats:
        return self.session.stats()

    def dispose(self) -> None:
        self.session.dispose()

    def __enter__(self) -> GraphMind:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.dispose()


class Span:
    """A user-declared node, gated like a tool; ``with`` and ``async with``.

    Driven by the core's step: the ``before`` gate on entry (``inject`` records the
    injected value as the span's output, ``abort`` raises the abort error), the
    ``error`` gate when the body raises (``inject`` swallows the error), the ``after``
    gate on a clean exit.
    """

    __slots__ = ("_input", "_kind", "_name", "_node_id", "_output", "_parent_id", "_session", "_step")

    def __init__(self, session: Session, name: str, kind: str, input: Any, parent_id: str | None) -> None:
        from .event_kinds import NODE_KINDS

        self._session = session
        self._name = name
        self._kind = kind if kind in NODE_KINDS else "custom"
        self._input = input
        self._parent_id = parent_id
        self._node_id = f"{self._kind}:{name}"
        self._output: Any = None
        self._step: Any = None

    @property
    def node_id(self) -> str:
        return self._node_id

    def set_output(self, output: Any) -> None:
        """Records what this span produced."""
        self._output = output

    def _begin(self) -> Any:
        if not self._session._active():
            return None
        ctx = _current_run.get()
        self._step = self._session._native.step(
            ctx.run_id if ctx is not None else None,
            self._kind, self._name, self._node_id, self._parent_id, self._input, False,
        )
        return self._step.before()

    def _after_before(self, code: int, value: Any) -> None:
        from .wrap import ABORT, INJECT

        if code == ABORT:
            self._step = None
            raise self._session.abort_error()
        if code == INJECT:
            self._output = value
            self._step = None  # the core recorded the injected output

    def __enter__(self) -> Span:
        from .wrap import WAIT

        first = self._begin()
        if first is not None:
            code, value = first
            if code == WAIT:
                code, value = self._step.on_before(value.wait())
            self._after_before(code, value)
        return self

    async def __aenter__(self) -> Span:
        from .wrap import WAIT

        first = self._begin()
        if first is not None:
            code, value = first
            if code == WAIT:
                code, value = self._step.on_before(await await_gate(value))
            self._after_before(code, value)
        return self

    def _exit_error(self, exc: BaseException) -> tuple[int, Any] | None:
        step = self._step
        if not isinstance(exc, Exception) or is_abort_error(exc):
            step.ungated_error(is_abort_error(exc))
            return None
        return step.error(*error_parts(exc))

    def _apply_error(self, code: int, value: Any) -> bool:
        from .wrap import ABORT, INJECT

        if code == INJECT:
            self._output = value
            return True
        if code == ABORT:
            raise self._session.abort_error() from None
        if code != _RERAISE:
            # `retry` cannot re-run a `with` block: the span ends as an error.
            self._step.ungated_error(False)
        return False

    def _apply_after(self, code: int, value: Any) -> None:
        from .wrap import ABORT, INJECT, RETURN

        if code == ABORT:
            raise self._session.abort_error()
        if code == INJECT:
            self._output = value
        elif code != RETURN:
            self._step.finish(self._output)  # `retry` cannot re-run a `with` block

    def _exit(self, exc: BaseException | None) -> Any:
        """The end of the block, shared by ``__exit__`` and ``__aexit__``: a generator that
        yields each held gate and is sent its decision (waited for or awaited by the caller);
        returns whether the exception is swallowed."""
        from .wrap import WAIT

        step = self._step
        if step is None:
            return False
        try:
            if exc is not None:
                first = self._exit_error(exc)
                if first is None:
                    return False
                code, value = first
                if code == WAIT:
                    code, value = step.on_error((yield value))
                return self._apply_error(code, value)
            code, value = step.after(self._output)
            if code == WAIT:
                code, value = step.on_after((yield value), self._output)
            self._apply_after(code, value)
            return False
        finally:
            self._step = None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        ending = self._exit(exc)
        try:
            held = next(ending)
            while True:
                held = ending.send(held.wait())
        except StopIteration as done:
            return bool(done.value)
        finally:
            ending.close()  # a wait that raised still ends the step now

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        ending = self._exit(exc)
        try:
            held = next(ending)
            while True:
                held = ending.send(await await_gate(held))
        except StopIteration as done:
            return bool(done.value)
        finally:
            ending.close()  # a wait that raised still ends the step now


from .wrap import RERAISE as _RERAISE  # noqa: E402

# -- the default instance ---------------------------------------------------------------

_default: GraphMind | None = None
_default_lock = threading.Lock()


def configure(**options: Any) -> GraphMind:
    """Creates (or replaces) the process-wide default instance. Accepts everything
    :class:`GraphMind` accepts (``app``, ``sdk``, ``url``, ``enabled``, ``meta``,
    ``connect_timeout``, ``handshake_timeout``, ``retry_interval``, ``buffer_size``,
    ``pause_timeout``, ``token_interval``, ``env``, ``logger``, ``warn_interval``,
    ``clock``, ``loop_guard``, ``hide_*``)."""
    global _default
    with _default_lock:
        previous = _default
        _default = GraphMind(**options)
    if previous is not None:
        previous.dispose()
    return _default


def instance() -> GraphMind:
    """The default instance, created with defaults on first use."""
    global _default
    current = _default
    if current is not None:
        return current
    with _default_lock:
        if _default is None:
            _default = GraphMind()
        return _default


init = configure


def is_configured() -> bool:
    return _default is not None


def reset() -> None:
    """Disposes and forgets the default instance (mainly for tests)."""
    global _default
    with _default_lock:
        current = _default
        _default = None
    if current is not None:
        current.dispose()

