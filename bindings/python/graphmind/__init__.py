"""GraphMind: a live step-through debugger for AI agents (Python SDK on the Rust core).

A drop-in replacement for ``graphmind-ai`` 0.5.1 (import name ``graphmind``)::

    import graphmind as gm

    @gm.tool
    def search_flights(origin: str, destination: str) -> list[dict]:
        ...

    with gm.run("handle-ticket"):
        search_flights("AMS", "LIS")

Run ``graphmind serve`` and open the viewer. With nothing attached everything is a
near no-op; with GraphMind disabled it is nothing at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from . import _native
from ._version import __version__
from .api import GraphMind, Span, configure, init, instance, is_configured, reset
from .errors import GraphMindAbortError, is_abort_error
from .gate import GateDecision, GateNode
from .session import RunContext, RunScope, Session, SessionStats

#: Where the SDK connects when neither ``url`` nor ``GRAPHMIND_URL`` says otherwise.
DEFAULT_URL: str = _native.DEFAULT_URL
#: The wire protocol version (``gm`` of every envelope).
PROTOCOL_VERSION: int = _native.PROTOCOL_VERSION

__all__ = [
    "DEFAULT_URL",
    "PROTOCOL_VERSION",
    "AsyncGraphMindCallbackHandler",
    "GateDecision",
    "GateNode",
    "GraphMind",
    "GraphMindAbortError",
    "GraphMindCallbackHandler",
    "RunContext",
    "RunScope",
    "Session",
    "SessionStats",
    "Span",
    "__version__",
    "async_callback_handler",
    "async_handler",
    "callback_handler",
    "canonical_json",
    "configure",
    "dispose",
    "emit",
    "fingerprint",
    "graph_hint",
    "handler",
    "init",
    "instance",
    "instrument_anthropic",
    "instrument_openai",
    "is_abort_error",
    "is_configured",
    "ready",
    "ready_async",
    "reset",
    "run",
    "session",
    "span",
    "stats",
    "tool",
    "wrap_anthropic",
    "wrap_openai",
    "wrap_tools",
]


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value`` (keys sorted by UTF-16 code units,
    JavaScript number spelling, ``_meta`` removed at every depth)."""
    return _native.canonical_json(value)


def fingerprint(node_id: str, input: Any = None) -> str:
    """The loop guard's fingerprint of a call: 32 hex digits of SHA-256 over the
    canonical ``[node_id, input]``."""
    return _native.fingerprint(node_id, input)


def run(name: str, meta: dict[str, Any] | None = None) -> RunScope:
    """Run boundary: ``with gm.run(...)`` and ``async with gm.run(...)``."""
    return instance().run(name, meta)


def span(name: str, kind: str = "custom", input: Any = None, parent_id: str | None = None) -> Span:
    """A gated, timed node for code GraphMind cannot see by itself."""
    return instance().span(name, kind, input, parent_id)


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    kind: str = "tool",
    parent_id: str | None = None,
) -> Any:
    """Decorates a tool so the debugger can pause, retry and inject it."""
    return instance().tool(fn, name=name, kind=kind, parent_id=parent_id)


def wrap_tools(tools: Any) -> Any:
    """Wraps a ``{name: fn}`` mapping, a list of callables, or one callable."""
    return instance().wrap_tools(tools)


def instrument_openai(client: Any) -> Any:
    """Instruments an ``openai`` client in place and returns it."""
    return instance().instrument_openai(client)


wrap_openai = instrument_openai


def instrument_anthropic(client: Any) -> Any:
    """Instruments an ``anthropic`` client in place and returns it."""
    return instance().instrument_anthropic(client)


wrap_anthropic = instrument_anthropic


def ready(timeout: float = 2.0) -> bool:
    """Waits until a debugger is attached; ``False`` means "carry on detached"."""
    return instance().ready(timeout)


async def ready_async(timeout: float = 2.0) -> bool:
    """Async twin of :func:`ready`."""
    return await instance().ready_async(timeout)


def emit(type: str, payload: dict[str, Any]) -> None:
    """Emits a raw protocol event (advanced)."""
    instance().emit(type, payload)


def graph_hint(nodes: Iterable[dict[str, Any]]) -> None:
    """Announces graph structure ahead of running."""
    instance().graph_hint(nodes)


def stats() -> SessionStats:
    """Diagnostics snapshot of the default session."""
    return instance().stats()


def session() -> Session:
    """The default instance's session (advanced)."""
    return instance().session


def dispose() -> None:
    """Releases held gates, flushes events, closes the socket. Idempotent."""
    instance().dispose()


def callback_handler(**kwargs: Any) -> Any:
    """A sync LangChain/LangGraph handler bound to the default session."""
    return instance().callback_handler(**kwargs)


def async_callback_handler(**kwargs: Any) -> Any:
    """An async LangChain/LangGraph handler bound to the default session."""
    return instance().async_callback_handler(**kwargs)


handler = callback_handler
async_handler = async_callback_handler


def __getattr__(name: str) -> Any:
    """The LangChain handler classes, without importing langchain_core up front."""
    if name in ("GraphMindCallbackHandler", "AsyncGraphMindCallbackHandler"):
        from .integrations import langchain

        return getattr(langchain, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
