"""The socket's ``status`` answer: the server's own figures plus the actors' health."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.handle import SupervisorHandle
from supervisor.policy.permissions import Profile, decide
from supervisor.policy.reasons import OUTCOME_REFUSED
from supervisor.policy.render import decision_dict
from supervisor.surfaces.protocol import PROTOCOL_VERSION

__all__ = ["ServerFigures", "status_report"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerFigures:
    socket_path: Path
    active_connections: int
    max_connections: int


async def status_report(
    handle: SupervisorHandle, profile: Profile, server: ServerFigures
) -> dict[str, Any]:
    """What ``status`` answers, or a structured refusal for a profile without the grant."""
    decision = decide(profile, "status")
    if not decision.allowed:
        return {
            "success": False,
            "outcome": OUTCOME_REFUSED,
            "mutation_performed": False,
            "reasons": [f"status refused: {decision.reason}"],
            "permission": decision_dict(decision),
            "denied": True,
        }
    liveness = await handle.liveness_status()
    owners = await handle.lease_owners()
    return {
        "success": True,
        "profile": profile.name,
        "role_kind": profile.role_kind,
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
            "verdicts": dict(sorted(Counter(v.state for v in liveness.verdicts).items())),
        },
        "leases": {
            "readable": owners.readable,
            "active_lease_count": owners.active_lease_count,
            "detail": owners.detail,
        },
    }
