"""The package version (the distribution's, when installed)."""

from __future__ import annotations

try:
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("graphmind-ai")
    except PackageNotFoundError:  # running from a checkout
        __version__ = "0.0.0+dev"
except Exception:  # pragma: no cover
    __version__ = "0.0.0+dev"
