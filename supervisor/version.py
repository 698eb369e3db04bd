"""The installed package's version, as ``--version`` and the MCP ``serverInfo`` report it."""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "package_version"]

DISTRIBUTION = "mcp-fleet-supervisor"


def package_version() -> str:
    """The distribution's version; a source tree that was never installed says so."""
    # Imported here: importlib.metadata (with email, zipfile, csv) is about 2 MB of RSS,
    # which every daemon would carry for a version string it may never print.
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"
