"""The façade surfaces and tests call: every declared op's request through one ``call``."""

from __future__ import annotations

from supervisor.handle.facade import SupervisorHandle

__all__ = ["SupervisorHandle"]
