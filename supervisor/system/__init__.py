"""Linux facts: /proc probes, pidfds, process trees, peer credentials, lock files, sd_notify."""

from __future__ import annotations

__all__: list[str] = []
