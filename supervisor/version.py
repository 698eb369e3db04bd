"""The installed package's version, as ``--version`` and the MCP ``serverInfo`` report it."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["DISTRIBUTION", "package_version"]

DISTRIBUTION = "mcp-fleet-supervisor"


def package_version() -> str:
    """The distribution's version; a source tree that was never installed says so."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"
