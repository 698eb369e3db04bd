"""Settings: the supervisor.toml loader and its checks, and the permission profiles."""

from __future__ import annotations

__all__: list[str] = []
