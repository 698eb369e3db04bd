"""The stdio bridge's operation calls: each one request to the daemon, which decides."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from supervisor.client import AsyncClient, RemoteError
from supervisor.errors import ProtocolError, Unavailable
from supervisor.operations.requests import Request, given
from supervisor.policy.control.permissions import Profile
from supervisor.surfaces.socket.answers import to_wire

__all__ = ["SocketOperationCalls", "unanswered_as_unavailable"]


@contextmanager
def unanswered_as_unavailable() -> Iterator[None]:
    """Only the daemon's own error frames may read as refusals; a lost answer is not one."""
    try:
        yield
    except RemoteError:
        raise
    except ProtocolError as exc:
        # Raised by the client after the request went out (unreadable or mismatched
        # answer): the request may have run, so it must not be reported as refused.
        raise Unavailable(f"the supervisor's answer could not be read: {exc.detail}") from exc


class SocketOperationCalls:
    """Mixed into SocketToolBackend: every declared operation is one socket request of the
    same name and arguments. The MCP-side profile is ignored: the daemon authenticates the
    token that travels with every request."""

    _client: AsyncClient

    async def call(self, profile: Profile | None, request: Request) -> Any:
        """The op's request as the frame of the same name and arguments (the wire's values:
        a manifest entry as its object, a list for a tuple)."""
        del profile
        with unanswered_as_unavailable():
            return await self._client.request(request.op, to_wire(given(request)))
