"""What every MCP tool calls: the handle in the daemon, the socket client in the stdio bridge."""

from __future__ import annotations

from typing import Any, Protocol

from supervisor.operations.requests import Request
from supervisor.policy.control.permissions import Profile

__all__ = ["ToolBackend"]


class ToolBackend(Protocol):
    """The one generic ``call`` of an op's request: ``SupervisorHandle.call`` in the daemon,
    ``SocketToolBackend.call`` (one socket request) in the stdio bridge. ``profile`` is the
    caller the MCP transport authenticated; a backend that authenticates by other means
    (the socket backend sends its token) ignores it."""

    async def call(self, profile: Profile | None, request: Request) -> Any: ...
