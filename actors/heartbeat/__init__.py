"""The heartbeat actor: registrations, heartbeats and releases on their way to the writer."""

from __future__ import annotations

__all__: list[str] = []
