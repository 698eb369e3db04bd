"""JSON-ready views of control-plane results: assignments, allocations, gate verdicts, leases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .allocation import OUTCOME_ASSIGNED, Candidate, Skip, expected_role, next_command
from .decisions import GateVerdict
from .plane import WorkRef

__all__ = [
    "ASSIGN_OUTCOME_ASSIGNED",
    "ASSIGN_OUTCOME_NO_SAFE_WORK",
    "ASSIGN_OUTCOME_REFUSED",
    "ASSIGN_OUTCOME_WAIT",
    "LEASE_SOURCE",
    "allocation_view",
    "assignment_view",
    "gate_view",
    "lease_view",
    "selection_view",
    "skip_view",
]

#: The outcomes of one assign-and-lease (the allocator maps them to its own outcomes).
ASSIGN_OUTCOME_ASSIGNED = "assigned"
ASSIGN_OUTCOME_WAIT = "wait"
ASSIGN_OUTCOME_NO_SAFE_WORK = "no_safe_work"
ASSIGN_OUTCOME_REFUSED = "refused"

#: Where a lease proof came from: the writer's single assign-and-lease transaction.
LEASE_SOURCE = "supervisor.registry_writer.assign_and_lease"


def _pins(assignment: Mapping[str, Any]) -> dict[str, Any]:
    """What an assignment pins: the head it expects, the actions it allows and forbids."""
    return {
        "expected_head_sha": assignment.get("expected_head_sha"),
        "allowed_actions": list(assignment.get("allowed_actions") or ()),
        "forbidden_actions": list(assignment.get("forbidden_actions") or ()),
    }


def assignment_view(
    *,
    outcome: str,
    code: str,
    reason: str,
    ref: WorkRef,
    session_id: str,
    role: str,
    lease: Mapping[str, Any] | None = None,
    assignment: Mapping[str, Any] | None = None,
    owner_session_id: str | None = None,
    resumed: bool = False,
) -> dict[str, Any]:
    """One assign-and-lease answer; lease and assignment fields are None unless assigned."""
    held = outcome == ASSIGN_OUTCOME_ASSIGNED
    asn = assignment if held and assignment is not None else {}
    own = lease if held and lease is not None else {}
    return {
        "outcome": outcome,
        "code": code,
        "reason": reason,
        "session_id": session_id,
        "role": role,
        "remote": ref.remote,
        "org": ref.org,
        "repo": ref.repo,
        "work_kind": ref.kind,
        "work_number": ref.number,
        "work_item_key": ref.key,
        "assignment_id": asn.get("assignment_id"),
        "lease_id": own.get("lease_id"),
        "expires_at": own.get("expires_at"),
        "phase": asn.get("phase"),
        **_pins(asn),
        "owner_session_id": owner_session_id,
        "resumed": resumed,
    }


def lease_view(lease: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("lease_id", "work_item_key", "session_id", "role", "status", "expires_at")
    return {
        **{key: lease.get(key) for key in keys},
        "heartbeat_at": lease.get("heartbeat_at"),
        "released_at": lease.get("released_at"),
    }


def gate_view(
    verdict: GateVerdict,
    *,
    ref: WorkRef,
    session_id: str,
    action: str,
    assignment: Mapping[str, Any] | None,
    lease: Mapping[str, Any] | None,
    item: Mapping[str, Any] | None,
) -> dict[str, Any]:
    return {
        "success": verdict.allowed,
        "allowed": verdict.allowed,
        "code": verdict.code,
        "reason": verdict.reason,
        "session_id": session_id,
        "action": action,
        "work_item_key": ref.key,
        "assignment_id": assignment.get("assignment_id") if assignment else None,
        "lease_id": assignment.get("lease_id") if assignment else None,
        "expires_at": lease.get("expires_at") if lease else None,
        "expected_head_sha": assignment.get("expected_head_sha") if assignment else None,
        "current_head_sha": item.get("current_head_sha") if item else None,
        "work_state": item.get("state") if item else None,
    }


def skip_view(skip: Skip) -> dict[str, Any]:
    return {"kind": skip.kind, "number": skip.number, "code": skip.code, "reason": skip.reason}


def selection_view(candidate: Candidate, role: str) -> dict[str, Any]:
    wanted = expected_role(candidate)
    return {
        "kind": candidate.kind,
        "number": candidate.number,
        "title": candidate.title,
        "labels": list(candidate.labels),
        "head_sha": candidate.head_sha,
        "priority": candidate.priority,
        "expected_role_next": wanted,
        "reason_selected": f"highest-ranked safe item for role {role!r} (expects {wanted!r})",
    }


def allocation_view(
    *,
    outcome: str,
    apply: bool,
    role: str,
    session_id: str,
    remote: str,
    org: str,
    repo: str,
    selected: Candidate | None,
    skipped: Sequence[Skip],
    reasons: Sequence[str],
    terminal_pr: int | None,
    assignment: Mapping[str, Any] | None = None,
    owner_session_id: str | None = None,
) -> dict[str, Any]:
    """The allocator's answer; ``lease_proof`` and ``next_command`` only when work was assigned."""
    assigned = outcome == OUTCOME_ASSIGNED and assignment is not None
    result: dict[str, Any] = {
        "success": True,
        "outcome": outcome,
        "apply": apply,
        "mutation_performed": assigned,
        "role": role,
        "session_id": session_id,
        "remote": remote,
        "org": org,
        "repo": repo,
        "selected": selection_view(selected, role) if selected is not None else None,
        "expected_role_next": expected_role(selected) if selected is not None else None,
        "reasons": list(reasons),
        "skipped": [skip_view(s) for s in skipped],
        "terminal_pr": terminal_pr,
        "assignment": dict(assignment) if assignment is not None else None,
        "owner_session_id": owner_session_id,
        "substrate": "supervisor_control_plane",
    }
    if assigned and assignment is not None and selected is not None:
        result["lease_proof"] = {
            "assignment_id": assignment.get("assignment_id"),
            "lease_id": assignment.get("lease_id"),
            "expires_at": assignment.get("expires_at"),
            **_pins(assignment),
            "source": LEASE_SOURCE,
        }
        result["next_command"] = next_command(role, selected)
    return result
