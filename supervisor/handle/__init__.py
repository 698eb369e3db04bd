"""The façade surfaces and tests call: one method per request, each one actor message."""

from __future__ import annotations

from supervisor.handle.facade import SupervisorHandle

__all__ = ["SupervisorHandle"]
