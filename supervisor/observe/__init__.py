"""What the program tells the world: structured JSON logs and fleet metrics."""

from __future__ import annotations

__all__: list[str] = []
