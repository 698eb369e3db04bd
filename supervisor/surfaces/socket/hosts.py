"""Socket dispatch of the host lease ops: one HostLeaseCalls call each, results as wire dicts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from actors.replies import WriteAck
from supervisor.errors import ProtocolError, Unavailable
from supervisor.handle.hosts import HostLeaseCalls
from supervisor.operations.registry import HOST_OPS, OPERATIONS
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


async def _status(call: Any, profile: Profile, args: HostArgs) -> Mapping[str, Any]:
    del profile, args  # this host's lease: any authenticated profile may look
    return {"success": True, **asdict(await call())}


async def _plan(call: Any, profile: Profile, args: HostArgs) -> Mapping[str, Any]:
    result = await call(profile, args.values["host_id"])
    return plan_view(result) if isinstance(result, HostRetirementPlan) else ack_view(result)


async def _apply(call: Any, profile: Profile, args: HostArgs) -> Mapping[str, Any]:
    v = args.values
    ack = await call(
        profile,
        host_id=v["host_id"],
        host_token=v["host_token"],
        candidate_fingerprint=v["candidate_fingerprint"],
        worker_identities=args.worker_identities,
    )
    return ack_view(ack)


_Hook = Callable[[Any, Profile, HostArgs], Awaitable[Mapping[str, Any]]]
_HOOKS: Mapping[str, _Hook] = {"host_status": _status, "host_plan": _plan, "host_apply": _apply}
if set(_HOOKS) != HOST_OPS:
    raise AssertionError(f"host op hooks {sorted(_HOOKS)} != declared {sorted(HOST_OPS)}")


async def dispatch_hosts(
    hosts: HostLeaseCalls | None, profile: Profile, args: HostArgs
) -> Mapping[str, Any]:
    """The declared op's call on ``hosts``, its answer as the op's hook shows it."""
    if hosts is None:
        raise Unavailable("host leases are not served by this supervisor")
    hook = _HOOKS.get(args.op)
    if hook is None:
        raise ProtocolError(f"op {args.op!r} has no handler")
    return await hook(getattr(hosts, OPERATIONS[args.op].call), profile, args)
