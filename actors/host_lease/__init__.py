"""The host lease keeper: this host's lease, and the retirement of a silent host's rows."""

from __future__ import annotations

__all__: list[str] = []
