"""Who a worker is: application-instance ids, launch-derived ids, the exec marker."""

from __future__ import annotations

__all__: list[str] = []
