"""The abort error, and how a Python exception is read into the wire's error info."""

from __future__ import annotations

import traceback
from typing import Any

#: Exception class names that mean "cancelled on purpose" (never held, never retried).
_ABORT_NAMES = frozenset({"AbortError", "GraphMindAbortError", "CancelledError"})

#: How much of a formatted traceback travels as `stack`.
_STACK_CHARS = 4096


class GraphMindAbortError(Exception):
    """Raised into the app when the debugger (or the app) aborts the run.

    ``name`` is ``"AbortError"``, the name the other SDKs put on the wire.
    """

    name = "AbortError"

    def __init__(self, message: str = "Run aborted by GraphMind debugger") -> None:
        super().__init__(message)


class ReplayedError(Exception):
    """A tool or model call's error raised again by a replay: the recorded execution raised
    it (``name``, ``message`` and ``stack`` as recorded). Each recorded name gets its own
    subclass of this one, named after it (``ValueError`` -> a ``ValueError`` subclass of
    ``ReplayedError``), so ``except ReplayedError`` catches every replayed error."""

    name = "Error"

    def __init__(self, name: str, message: str, stack: str | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.message = message
        self.recorded_stack = stack


_replayed_classes: dict[str, type[ReplayedError]] = {}


def replayed_error(parts: Any) -> ReplayedError:
    """The exception a replay raises for a recorded error ``(name, message, stack)``."""
    name, message, stack = parts
    cls = _replayed_classes.get(name)
    if cls is None:
        cls = type(name, (ReplayedError,), {}) if name.isidentifier() else ReplayedError
        _replayed_classes[name] = cls
    return cls(name, message, stack)


def is_abort_error(error: BaseException | None) -> bool:
    """True for GraphMind aborts and for the standard cancellation exceptions."""
    if error is None:
        return False
    if isinstance(error, GraphMindAbortError):
        return True
    return type(error).__name__ in _ABORT_NAMES


def error_parts(error: Any) -> tuple[str, str, str | None]:
    """``(name, message, stack)`` of a raised object; never raises."""
    try:
        if isinstance(error, BaseException):
            name = getattr(error, "name", None)
            if not isinstance(name, str) or not name:
                name = type(error).__name__
            try:
                message = str(error)
            except Exception:
                message = ""
            try:
                stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
                stack = stack[:_STACK_CHARS] if stack else None
            except Exception:
                stack = None
            return name, message, stack
        return "Error", str(error), None
    except Exception:
        return "Error", "", None
