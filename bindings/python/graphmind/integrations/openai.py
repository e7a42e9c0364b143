"""The ``openai`` client library: ``instrument_openai(client)`` / ``wrap_openai``.

Patches the client *instance*'s ``chat.completions.create`` / ``parse``,
``responses.create`` and the same methods behind ``with_raw_response`` and
``with_streaming_response`` (what the OpenAI Agents SDK calls), for ``OpenAI`` and
``AsyncOpenAI``. Each call is one ``llm:step`` node driven by the core's LLM step: the
``before`` gate is held before the request leaves, ``error`` when it raises, ``after`` on a
complete answer; a streamed answer is handed back behind a proxy that gives the core each
chunk as the app reads it. An injected reply comes back as the library's own
``ChatCompletion`` / ``Response``. Nothing from ``openai`` is imported until a reply is
injected: the objects are read by shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..session import Session
from ._common import (
    ModelMethod,
    default_session,
    is_async_callable,
    is_async_client,
    model_caller,
    patch_method,
    unpatch_method,
    warn,
)

SDK_NAME = "openai"

_CHAT = ModelMethod("openai-chat", SDK_NAME, "openai.types.chat:ChatCompletion", chunk_type="openai.types.chat:ChatCompletionChunk")
_RESPONSES = ModelMethod("openai-responses", SDK_NAME, "openai.types.responses:Response")

#: (resource path, method, how it speaks).
_TARGETS: tuple[tuple[tuple[str, ...], str, ModelMethod], ...] = (
    (("chat", "completions"), "create", _CHAT),
    (("chat", "completions"), "parse", _CHAT),
    (("responses",), "create", _RESPONSES),
)

#: The wrappers the library builds over the same methods (patched too: they capture the
#: method when first built, which may have happened before instrumenting).
_WRAPPERS = ("with_raw_response", "with_streaming_response")


def _targets() -> list[tuple[tuple[str, ...], str, ModelMethod]]:
    out = list(_TARGETS)
    for path, attr, method in _TARGETS:
        for wrapper in _WRAPPERS:
            out.append(((*path, wrapper), attr, method))
    return out


def instrument_openai(client: Any, session: Session | None = None) -> Any:
    """Instruments an ``openai.OpenAI`` / ``AsyncOpenAI`` client in place and returns the
    same client. Idempotent; with GraphMind disabled the client is left untouched."""
    session = default_session(session)
    if not session.enabled:
        return client
    async_client = is_async_client(client)
    patched = 0
    for path, attr, method in _TARGETS:
        target: Any = client
        for part in path:
            target = getattr(target, part, None) if target is not None else None
        original = getattr(target, attr, None) if target is not None else None
        if original is None or not callable(original):
            continue
        is_async = is_async_callable(original) or async_client

        def make(fn: Callable[..., Any], method: ModelMethod = method, is_async: bool = is_async) -> Callable[..., Any]:
            return model_caller(session, method, fn, is_async)

        if patch_method(session, client, path, attr, make, f"openai.{'.'.join(path)}.{attr}"):
            patched += 1
        # A wrapper built before now holds the unpatched method: build it again over ours.
        for wrapper in _WRAPPERS:
            try:
                target.__dict__.pop(wrapper, None)
            except Exception:
                pass
    if patched == 0:
        warn(
            session,
            "openai-nothing-patched",
            "instrument_openai() found no chat.completions / responses methods on this object; "
            "pass an openai.OpenAI or openai.AsyncOpenAI client",
        )
    return client


#: The same function under the name other tools use.
wrap_openai = instrument_openai


def uninstrument_openai(client: Any) -> Any:
    """Puts the client's original methods back."""
    for path, attr, _method in _TARGETS:
        unpatch_method(client, path, attr)
        target: Any = client
        for part in path:
            target = getattr(target, part, None) if target is not None else None
        for wrapper in _WRAPPERS:
            try:
                target.__dict__.pop(wrapper, None)
            except Exception:
                pass
    return client
