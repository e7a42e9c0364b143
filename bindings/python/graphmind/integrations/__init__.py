"""Integrations with LLM client libraries and agent frameworks.

Each one is imported on first use, so ``import graphmind`` never imports ``openai``,
``anthropic`` or ``langchain_core`` (the OpenAI and Anthropic ones read the clients'
objects by shape and import nothing from them at all).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AsyncGraphMindCallbackHandler",
    "GraphMindCallbackHandler",
    "instrument_anthropic",
    "instrument_openai",
    "wrap_anthropic",
    "wrap_openai",
]


def __getattr__(name: str) -> Any:
    if name in ("instrument_openai", "wrap_openai"):
        from .openai import instrument_openai

        return instrument_openai
    if name in ("instrument_anthropic", "wrap_anthropic"):
        from .anthropic import instrument_anthropic

        return instrument_anthropic
    if name in ("GraphMindCallbackHandler", "AsyncGraphMindCallbackHandler"):
        from . import langchain

        return getattr(langchain, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
