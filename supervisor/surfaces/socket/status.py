"""The socket's ``status`` answer: the server's own figures plus the actors' health."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.errors import SupervisorError
from supervisor.handle import SupervisorHandle
from supervisor.policy.control.permissions import Profile
from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.policy.servers.view import summary_dict
from supervisor.wire import PROTOCOL_VERSION

__all__ = ["ServerFigures", "status_report"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerFigures:
    socket_path: Path
    active_connections: int
    max_connections: int


async def status_report(
    handle: SupervisorHandle, profile: Profile | None, server: ServerFigures
) -> dict[str, Any]:
    """What ``status`` answers, or a structured refusal for a profile without the grant.

    ``profile`` None means the caller proved no profile but is the socket's owner
    (same uid, from peer credentials): the operator at their own terminal.
    """
    if profile is not None and (denied := await handle.deny(profile, "status")) is not None:
        return denied
    liveness = await handle.liveness_counts()
    owners = await handle.lease_owners()
    return {
        "success": True,
        "profile": profile.name if profile is not None else None,
        "role_kind": profile.role_kind if profile is not None else None,
        "authenticated_by": "token" if profile is not None else "peer_uid",
        "server": {
            "protocol_version": PROTOCOL_VERSION,
            "pid": os.getpid(),
            "socket_path": str(server.socket_path),
            "active_connections": server.active_connections,
            "max_connections": server.max_connections,
        },
        "liveness": {
            "sweeps_completed": liveness.sweeps_completed,
            "watched_pids": liveness.watched_pids,
            "verdicts": dict(liveness.states),
        },
        "leases": {
            "readable": owners.readable,
            "active_lease_count": owners.active_lease_count,
            "detail": owners.detail,
        },
        "fleet": await _fleet(handle),
        "servers": await _servers(handle),
    }


async def _servers(handle: SupervisorHandle) -> dict[str, Any]:
    """The host's MCP servers in counts (the census's latest sweep)."""
    try:
        return {"available": True, **summary_dict(await handle.census_report())}
    except SupervisorError as exc:
        return {"available": False, "detail": f"{exc.code}: {exc.detail}"}


async def _fleet(handle: SupervisorHandle) -> dict[str, Any]:
    """Registrations by ownership state and active ones by namespace (the metrics' counts)."""
    try:
        counts = await handle.fleet_counts()
    except SupervisorError as exc:
        return {"available": False, "detail": f"{exc.code}: {exc.detail}"}
    by_ownership: Counter[str] = Counter()
    by_namespace: Counter[str] = Counter()
    for (status, ownership, namespace), count in counts.workers.items():
        by_ownership[ownership] += count
        if status == STATUS_ACTIVE:
            by_namespace[namespace or "none"] += count
    return {
        "available": True,
        "by_ownership": dict(sorted(by_ownership.items())),
        "active_by_namespace": dict(sorted(by_namespace.items())),
        "orphaned": counts.orphaned,
    }
