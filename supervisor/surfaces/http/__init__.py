"""The daemon's ops HTTP listener: health, metrics and the fleet page."""

from __future__ import annotations

__all__: list[str] = []
