"""Socket dispatch of the host lease ops: one HostLeaseCalls call each, results as wire dicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from actors.replies import WriteAck
from supervisor.errors import ProtocolError, Unavailable
from supervisor.handle.hosts import HostLeaseCalls
from supervisor.policy.control.permissions import Profile
from supervisor.policy.retirement.host_leases import HostEntry, HostRetirementPlan
from supervisor.surfaces.socket.protocol_hosts import HostArgs

__all__ = ["ack_view", "dispatch_hosts", "plan_view"]


def _entries(entries: Sequence[HostEntry]) -> list[dict[str, str]]:
    return [
        {"worker_identity": e.worker_identity, "reason_code": e.reason_code, "detail": e.detail}
        for e in entries
    ]


def plan_view(plan: HostRetirementPlan) -> dict[str, Any]:
    """The plan as the wire shows it (the candidate rows themselves stay in-process)."""
    return {
        "success": not plan.refused,
        "host_id": plan.host_id,
        "refused": plan.refused or None,
        "detail": plan.detail,
        "lease_expires_at": plan.lease_expires_at,
        "host_token": plan.host_token,
        "candidate_fingerprint": plan.candidate_fingerprint,
        "candidate_count": len(plan.candidates),
        "candidate_worker_identities": [e.worker_identity for e in plan.candidates],
        "candidates": _entries(plan.candidates),
        "preserved": _entries(plan.preserved),
    }


def ack_view(ack: WriteAck) -> dict[str, Any]:
    return {"success": ack.ok, "code": ack.code, "detail": ack.detail, **dict(ack.data)}


async def dispatch_hosts(
    hosts: HostLeaseCalls | None, profile: Profile, args: HostArgs
) -> Mapping[str, Any]:
    if hosts is None:
        raise Unavailable("host leases are not served by this supervisor")
    match args.op:
        case "host_status":
            return {"success": True, **asdict(await hosts.status())}
        case "host_plan":
            result = await hosts.plan_retirement(profile, args.values["host_id"])
            return plan_view(result) if isinstance(result, HostRetirementPlan) else ack_view(result)
        case "host_apply":
            v = args.values
            ack = await hosts.apply_retirement(
                profile,
                host_id=v["host_id"],
                host_token=v["host_token"],
                candidate_fingerprint=v["candidate_fingerprint"],
                worker_identities=args.worker_identities,
            )
            return ack_view(ack)
    raise ProtocolError(f"op {args.op!r} has no handler")
