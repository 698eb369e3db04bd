"""The liveness actor: verdicts per registration, exit watches and probe-now answers."""

from __future__ import annotations

__all__: list[str] = []
