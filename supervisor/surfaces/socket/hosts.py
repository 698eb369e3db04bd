"""Socket dispatch of the host lease ops: the request to ``HostLeaseCalls.call``, answers as
wire dicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from actors.replies import WriteAck
from supervisor.errors import Unavailable
from supervisor.handle.hosts import HostLeaseCalls
from supervisor.operations.requests import Request
from supervisor.policy.control.permissions import Profile
from supervisor.policy.retirement.host_leases import HostEntry, HostRetirementPlan

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
        **({"code": plan.refused} if plan.refused else {}),
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


def _view(answer: Any) -> dict[str, Any]:
    if isinstance(answer, HostRetirementPlan):
        return plan_view(answer)
    if isinstance(answer, WriteAck):
        return ack_view(answer)
    # This host's lease: any authenticated profile may look.
    return {"success": True, **asdict(answer)}


async def dispatch_hosts(
    hosts: HostLeaseCalls | None, profile: Profile, request: Request
) -> Mapping[str, Any]:
    """The host op's answer (``HostLeaseCalls.call``), as the wire shows it."""
    if hosts is None:
        raise Unavailable("host leases are not served by this supervisor")
    return _view(await hosts.call(profile, request))
