"""The daemon: service lifecycle, the wiring of actors to surfaces, and the ops listener."""

from __future__ import annotations

__all__: list[str] = []
