"""Gating a callable: the decorator side of the core's ``Step``.

The wrapper owns the call site, so it is where ``inject`` and ``retry`` really work. It
does exactly what the core's step says (``_native.NEXT_*``): run the function (with the
debugger's edited arguments when given), return its result, return an injected value,
re-raise, or raise the abort error. Sync functions wait at a held gate with the GIL
released; ``async def`` functions await it on their own loop.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, Union

from . import _native
from .errors import error_parts, is_abort_error, replayed_error
from .session import Session, _current_run, await_gate

F = TypeVar("F", bound=Callable[..., Any])

# The core's encoding of a step's next move (graphmind_core::surface::next_code), under
# this module's short names. RUN_EDITED carries the edited input as the value; the loops
# below treat it as RUN with a value.
RUN = _native.NEXT_RUN
RUN_EDITED = _native.NEXT_RUN_EDITED
RETURN = _native.NEXT_RETURN_RESULT
INJECT = _native.NEXT_RETURN_INJECTED
RERAISE = _native.NEXT_RERAISE
ABORT = _native.NEXT_ABORT
WAIT = _native.NEXT_HELD
RAISE = _native.NEXT_RAISE
STREAM = _native.NEXT_STREAM

_POK = inspect.Parameter.POSITIONAL_OR_KEYWORD
_KWO = inspect.Parameter.KEYWORD_ONLY
_POSO = inspect.Parameter.POSITIONAL_ONLY
_VARP = inspect.Parameter.VAR_POSITIONAL
_VARK = inspect.Parameter.VAR_KEYWORD
_EMPTY = inspect.Parameter.empty

#: How far ``functools.partial(...).func`` chains are followed for a name.
_UNWRAP_DEPTH = 8


class _Arguments:
    """The call's arguments as the recorded input: ``signature.bind_partial`` with the
    defaults applied (``{"args": [...], "kwargs": {...}}`` when binding fails), and the
    way back from an edited input to ``(args, kwargs)``."""

    __slots__ = ("defaults", "names", "plain", "signature")

    def __init__(self, fn: Any) -> None:
        try:
            self.signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self.signature = None
        params = list(self.signature.parameters.values()) if self.signature else []
        # Plain: only named parameters (no *args/**kwargs/positional-only): bound by hand.
        self.plain = self.signature is not None and all(p.kind in (_POK, _KWO) for p in params)
        self.names = tuple(p.name for p in params)
        self.defaults = {p.name: p.default for p in params if p.default is not _EMPTY}

    def describe(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, bool]:
        """``(input, bound)``: the input, and whether it maps names to arguments."""
        if self.plain and not kwargs and len(args) == len(self.names):
            return dict(zip(self.names, args)), True
        if self.plain and len(args) <= len(self.names):
            out: dict[str, Any] = {}
            used = 0
            n = len(args)
            defaults = self.defaults
            for i, name in enumerate(self.names):
                if i < n:
                    if name in kwargs:
                        break
                    out[name] = args[i]
                elif name in kwargs:
                    out[name] = kwargs[name]
                    used += 1
                elif name in defaults:
                    out[name] = defaults[name]
            else:
                if used == len(kwargs):
                    return out, True
        if self.signature is not None:
            try:
                bound = self.signature.bind_partial(*args, **kwargs)
                bound.apply_defaults()
                return dict(bound.arguments), True
            except Exception:
                pass
        fallback: dict[str, Any] = {}
        if args:
            fallback["args"] = list(args)
        if kwargs:
            fallback["kwargs"] = dict(kwargs)
        return fallback, False

    def rebuild(self, edited: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call's arguments from the debugger's edited input (a name -> value map)."""
        if not isinstance(edited, dict) or self.signature is None:
            return args, kwargs
        new_args: list[Any] = []
        new_kwargs: dict[str, Any] = {}
        positional = True
        for p in self.signature.parameters.values():
            if p.name not in edited:
                if p.kind in (_POSO, _POK):
                    positional = False
                continue
            value = edited[p.name]
            if p.kind == _VARP:
                new_args.extend(value if isinstance(value, (list, tuple)) else [value])
            elif p.kind == _VARK:
                if isinstance(value, dict):
                    new_kwargs.update(value)
            elif p.kind == _KWO or (p.kind == _POK and not positional):
                new_kwargs[p.name] = value
            else:
                new_args.append(value)
        return tuple(new_args), new_kwargs


def _innermost(fn: Any) -> Any:
    target = fn
    try:
        for _ in range(_UNWRAP_DEPTH):
            inner = getattr(target, "func", None)
            if inner is None or inner is target or not callable(inner):
                break
            target = inner
    except Exception:
        return fn
    return target


def _callable_name(fn: Any) -> str:
    """A readable, stable node name: ``__name__``, a partial's function's, the class's."""
    try:
        for candidate in (fn, _innermost(fn)):
            name = getattr(candidate, "__name__", None)
            if isinstance(name, str) and name:
                return name
        cls_name = type(fn).__name__
        if isinstance(cls_name, str) and cls_name:
            return cls_name
    except Exception:
        pass
    return "callable"


def _copy_metadata(wrapper: Any, fn: Any, name: str, signature: inspect.Signature | None) -> None:
    try:
        functools.wraps(fn)(wrapper)
    except Exception:
        pass
    if isinstance(getattr(fn, "__name__", None), str):
        return
    try:
        inner = _innermost(fn)
        wrapper.__name__ = name
        qualname = getattr(inner, "__qualname__", None)
        wrapper.__qualname__ = qualname if isinstance(qualname, str) and qualname else name
        doc = getattr(inner, "__doc__", None)
        wrapper.__doc__ = doc if isinstance(doc, str) else None
        module = getattr(inner, "__module__", None)
        if isinstance(module, str) and module:
            wrapper.__module__ = module
        annotations: dict[str, Any] = {}
        if signature is not None:
            for p in signature.parameters.values():
                if p.annotation is not _EMPTY:
                    annotations[p.name] = p.annotation
            if signature.return_annotation is not _EMPTY:
                annotations["return"] = signature.return_annotation
        wrapper.__annotations__ = annotations
    except Exception:
        pass


def _ordinary(exc: BaseException) -> bool:
    """Only ordinary errors are held; aborts and interrupts go straight through."""
    return isinstance(exc, Exception) and not is_abort_error(exc)


class ModelPlan:
    """What a model call adds to the gated-call loop (``integrations._common``): how a
    result is read (``answer(step, result, kwargs) -> (stream-or-None, answer)``: a stream
    is handed back at once, with no ``after`` gate) and what an injected reply becomes
    (``reply(value)``: the client library's own type)."""

    __slots__ = ()

    def answer(self, step: Any, result: Any, kwargs: Any) -> tuple[Any, Any]:  # pragma: no cover
        raise NotImplementedError

    def reply(self, value: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def stream(self, chunks: list[Any], is_async: bool) -> Any:  # pragma: no cover
        """A replayed stream: the recorded answer's chunks as the client library's stream."""
        raise NotImplementedError


def _run_sync(session: Session, spec: Any, fn: Callable[..., Any], args: Any, kwargs: Any, entered: Any = None, plan: ModelPlan | None = None) -> Any:
    """One gated call, sync: does what the core's step says at each gate. ``entered``:
    ``(step, code, value)`` of a step started elsewhere (a model call, with its ``plan``)."""
    ctx = _current_run.get()
    if entered is None:
        # node.started and the before gate in one call. A signature of named parameters is
        # bound in the module (no dict, no `describe`) unless the call needs more than that.
        run = ctx._native if ctx is not None else None
        entered = session._native.enter_call(run, spec.node, args, kwargs, spec.arguments.defaults) if spec.plain else None
        if entered is None:
            call_input, bound = spec.arguments.describe(args, kwargs)
            entered = session._native.enter(run, spec.node, call_input, bound)
    step, code, value = entered
    while True:
        if code == WAIT:
            code, value = step.on_before(value.wait())
        if code == INJECT:
            return value if plan is None else plan.reply(value)
        if code == RAISE:
            raise replayed_error(value)
        if code == STREAM:
            return value if plan is None else plan.stream(value, False)
        if code == ABORT:
            raise session.abort_error(ctx)
        if value is not None:
            args, kwargs = spec.arguments.rebuild(value, args, kwargs)
        try:
            result = fn(*args, **kwargs)
            answer = result
            if plan is not None:
                stream, answer = plan.answer(step, result, kwargs)
                if stream is not None:
                    step.stream_started()
                    return stream
        except BaseException as exc:
            if not _ordinary(exc):
                step.ungated_error(is_abort_error(exc))
                raise
            code, value = step.error(*error_parts(exc))
            if code == WAIT:
                code, value = step.on_error(value.wait())
            if code == RERAISE:
                raise
            if code == INJECT:
                return value if plan is None else plan.reply(value)
            if code == ABORT:
                raise session.abort_error(ctx) from None
            if value is not None:
                args, kwargs = spec.arguments.rebuild(value, args, kwargs)
            code, value = step.before()
            continue
        code, value = step.after(answer)
        if code == WAIT:
            code, value = step.on_after(value.wait(), answer)
        if code == RETURN:
            return result
        if code == INJECT:
            return value if plan is None else plan.reply(value)
        if code == ABORT:
            raise session.abort_error(ctx)
        if value is not None:
            args, kwargs = spec.arguments.rebuild(value, args, kwargs)
        code, value = step.before()


async def _run_async(session: Session, spec: Any, fn: Callable[..., Any], args: Any, kwargs: Any, entered: Any = None, plan: ModelPlan | None = None) -> Any:
    """The ``async`` twin of :func:`_run_sync`: gates awaited on the app's loop."""
    ctx = _current_run.get()
    if entered is None:
        run = ctx._native if ctx is not None else None
        entered = session._native.enter_call(run, spec.node, args, kwargs, spec.arguments.defaults) if spec.plain else None
        if entered is None:
            call_input, bound = spec.arguments.describe(args, kwargs)
            entered = session._native.enter(run, spec.node, call_input, bound)
    step, code, value = entered
    while True:
        if code == WAIT:
            code, value = step.on_before(await await_gate(value))
        if code == INJECT:
            return value if plan is None else plan.reply(value)
        if code == RAISE:
            raise replayed_error(value)
        if code == STREAM:
            return value if plan is None else plan.stream(value, True)
        if code == ABORT:
            raise session.abort_error(ctx)
        if value is not None:
            args, kwargs = spec.arguments.rebuild(value, args, kwargs)
        try:
            result = await fn(*args, **kwargs)
            answer = result
            if plan is not None:
                stream, answer = plan.answer(step, result, kwargs)
                if inspect.isawaitable(answer):
                    answer = await answer
                if stream is not None:
                    step.stream_started()
                    return stream
        except BaseException as exc:
            if not _ordinary(exc):
                step.ungated_error(is_abort_error(exc))
                raise
            code, value = step.error(*error_parts(exc))
            if code == WAIT:
                code, value = step.on_error(await await_gate(value))
            if code == RERAISE:
                raise
            if code == INJECT:
                return value if plan is None else plan.reply(value)
            if code == ABORT:
                raise session.abort_error(ctx) from None
            if value is not None:
                args, kwargs = spec.arguments.rebuild(value, args, kwargs)
            code, value = step.before()
            continue
        code, value = step.after(answer)
        if code == WAIT:
            code, value = step.on_after(await await_gate(value), answer)
        if code == RETURN:
            return result
        if code == INJECT:
            return value if plan is None else plan.reply(value)
        if code == ABORT:
            raise session.abort_error(ctx)
        if value is not None:
            args, kwargs = spec.arguments.rebuild(value, args, kwargs)
        code, value = step.before()


class _Wrapper:
    __slots__ = ("arguments", "kind", "name", "node", "node_id", "parent_id", "plain", "session_of")

    def __init__(self, session_of: Callable[[], Session | None], name: str, kind: str, node_id: str | None, parent_id: str | None, fn: Any) -> None:
        self.session_of = session_of
        self.name = name
        self.kind = kind
        self.node_id = node_id
        self.parent_id = parent_id
        self.arguments = _Arguments(fn)
        #: Whether the module binds the call's arguments itself (`enter_call`).
        self.plain = self.arguments.plain
        self.node = _native.NodeSpec(kind, name, node_id, parent_id, self.arguments.names if self.plain else None)


def gate_callable(
    fn: F,
    session_of: Callable[[], Session | None],
    *,
    name: str | None = None,
    kind: str = "tool",
    node_id: str | None = None,
    parent_id: str | None = None,
) -> F:
    """Wraps ``fn`` with the step's gates; an ``async def`` stays async."""
    resolved = name or _callable_name(fn)
    # The reference names every wrapped callable's node `tool:<name>`, whatever its kind.
    shown_id = node_id or f"tool:{resolved}"
    spec = _Wrapper(session_of, resolved, kind, shown_id, parent_id, fn)

    if inspect.iscoroutinefunction(fn):

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            session = spec.session_of()
            if session is None or not session.enabled or session._disposed:
                return await fn(*args, **kwargs)
            return await _run_async(session, spec, fn, args, kwargs)

        _copy_metadata(async_wrapper, fn, resolved, spec.arguments.signature)
        _mark(async_wrapper, fn, shown_id, resolved)
        return async_wrapper  # type: ignore[return-value]

    def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
        session = spec.session_of()
        if session is None or not session.enabled or session._disposed:
            return fn(*args, **kwargs)
        return _run_sync(session, spec, fn, args, kwargs)

    _copy_metadata(sync_wrapper, fn, resolved, spec.arguments.signature)
    _mark(sync_wrapper, fn, shown_id, resolved)
    return sync_wrapper  # type: ignore[return-value]


def _mark(wrapper: Any, original: Any, node_id: str, name: str) -> None:
    wrapper.__graphmind_wrapped__ = True
    wrapper.__graphmind_original__ = original
    wrapper.__graphmind_node_id__ = node_id
    wrapper.__graphmind_name__ = name


def is_wrapped(fn: Any) -> bool:
    return getattr(fn, "__graphmind_wrapped__", False) is True


ToolsInput = Union[  # noqa: UP007 - evaluated at import time on 3.9
    Mapping[str, Callable[..., Any]], list[Callable[..., Any]], Callable[..., Any]
]


def wrap_tools(tools: ToolsInput, session_of: Callable[[], Session | None]) -> Any:
    """Wraps a ``{name: fn}`` mapping, a list/tuple of callables, or one callable."""
    if callable(tools) and not isinstance(tools, (dict, list, tuple)):
        return gate_callable(tools, session_of)
    if isinstance(tools, Mapping):
        return {
            key: (fn if is_wrapped(fn) else gate_callable(fn, session_of, name=key))
            for key, fn in tools.items()
        }
    if isinstance(tools, (list, tuple)):
        wrapped = [fn if is_wrapped(fn) else gate_callable(fn, session_of) for fn in tools]
        return type(tools)(wrapped) if isinstance(tools, tuple) else wrapped
    raise TypeError(
        "wrap_tools expects a callable, a list of callables, or a {name: callable} mapping"
    )
