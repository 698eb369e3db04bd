"""The stdio bridge's control-plane calls: each one request to the daemon, which decides."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from supervisor.client import AsyncClient, RemoteError
from supervisor.errors import ProtocolError, Unavailable
from supervisor.policy.control.permissions import Profile
from supervisor.surfaces.mcp_bridge_health import SocketHealthCalls

__all__ = ["SocketControlCalls", "unanswered_as_unavailable"]


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


class SocketControlCalls(SocketHealthCalls):
    """Mixed into SocketToolBackend: the MCP-side profile is ignored, the daemon
    authenticates the token that travels with every request. The namespace health and
    incident link calls come from ``SocketHealthCalls``."""

    _client: AsyncClient

    async def _control(self, op: str, args: Mapping[str, Any]) -> Mapping[str, Any]:
        with unanswered_as_unavailable():
            return await self._client.request(op, dict(args))

    async def allocate_next_work(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        remote: str,
        org: str,
        repo: str,
        candidates: Sequence[Mapping[str, Any]],
        role: str | None = None,
        apply: bool = False,
        lease_ttl_seconds: float | None = None,
        owner_pid: int | None = None,
    ) -> Mapping[str, Any]:
        del profile
        return await self._control(
            "allocate",
            {
                "session_id": session_id,
                "remote": remote,
                "org": org,
                "repo": repo,
                "candidates": [dict(c) for c in candidates],
                "role": role,
                "apply": apply,
                "lease_ttl_seconds": lease_ttl_seconds,
                "owner_pid": owner_pid,
            },
        )

    async def heartbeat_lease(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        lease_id: str,
        lease_ttl_seconds: float | None = None,
    ) -> Mapping[str, Any]:
        del profile
        args = {"session_id": session_id, "lease_id": lease_id}
        return await self._control(
            "lease_heartbeat", {**args, "lease_ttl_seconds": lease_ttl_seconds}
        )

    async def release_lease(
        self, profile: Profile | None, *, session_id: str, lease_id: str
    ) -> Mapping[str, Any]:
        del profile
        return await self._control(
            "lease_release", {"session_id": session_id, "lease_id": lease_id}
        )

    async def require_valid_assignment(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        remote: str,
        org: str,
        repo: str,
        kind: str,
        number: int,
        action: str,
    ) -> Mapping[str, Any]:
        del profile
        return await self._control(
            "assignment_check",
            {
                "session_id": session_id,
                "remote": remote,
                "org": org,
                "repo": repo,
                "kind": kind,
                "number": number,
                "action": action,
            },
        )
