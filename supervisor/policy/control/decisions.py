"""Who gets a work item (grant, owner-resume, wait, no safe work) and the mutation gate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Literal

from supervisor.policy.canonical import canon

from .plane import TERMINAL_STATES, WorkRef

__all__ = [
    "ASSIGN_GRANT",
    "ASSIGN_NO_SAFE_WORK",
    "ASSIGN_REFUSED",
    "ASSIGN_RESUME",
    "ASSIGN_WAIT",
    "GATE_ACTION_FORBIDDEN",
    "GATE_ACTION_NOT_ALLOWED",
    "GATE_HEAD_UNPINNED",
    "GATE_LEASE_EXPIRED",
    "GATE_LEASE_NOT_ACTIVE",
    "GATE_NO_ASSIGNMENT",
    "GATE_OK",
    "GATE_STALE_HEAD",
    "GATE_TERMINAL",
    "AssignDecision",
    "AssignKind",
    "GateVerdict",
    "check_mutation",
    "decide_assign",
    "split_due",
]

ASSIGN_GRANT: Final = "grant"
ASSIGN_RESUME: Final = "resume"
ASSIGN_WAIT: Final = "wait"
ASSIGN_NO_SAFE_WORK: Final = "no_safe_work"
ASSIGN_REFUSED: Final = "refused"
AssignKind = Literal["grant", "resume", "wait", "no_safe_work", "refused"]

GATE_OK = "assignment_valid"
GATE_NO_ASSIGNMENT = "no_assignment"
GATE_LEASE_NOT_ACTIVE = "lease_not_active"
GATE_LEASE_EXPIRED = "lease_expired"
GATE_TERMINAL = "work_item_terminal"
GATE_ACTION_FORBIDDEN = "action_forbidden"
GATE_ACTION_NOT_ALLOWED = "action_not_allowed"
GATE_HEAD_UNPINNED = "head_unpinned"
GATE_STALE_HEAD = "stale_head"

_Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignDecision:
    """What assign-and-lease does; the writer carries it out in the same transaction."""

    kind: AssignKind
    code: str
    reason: str
    #: Leases still marked active whose deadline has passed: expired before anything else.
    expire_lease_ids: tuple[str, ...] = ()
    #: The lease resumed (owner-resume) or waited on (another session's).
    lease: _Row | None = None

    @property
    def owner_session_id(self) -> str | None:
        if self.lease is None:
            return None
        return canon(self.lease.get("session_id")) or None


@dataclass(frozen=True, slots=True, kw_only=True)
class GateVerdict:
    allowed: bool
    code: str
    reason: str


def split_due(leases: Sequence[_Row], now_stamp: str) -> tuple[list[_Row], list[_Row]]:
    """Active-status leases split into (still live, deadline passed).

    Stamps are the fixed-width UTC text, so text order is time order; a lease
    without a deadline never lapses on its own.
    """
    live: list[_Row] = []
    due: list[_Row] = []
    for lease in leases:
        if canon(lease.get("status")) != "active":
            continue
        deadline = lease.get("expires_at")
        (due if isinstance(deadline, str) and deadline <= now_stamp else live).append(lease)
    return live, due


def _lease_id(lease: _Row) -> str:
    return canon(lease.get("lease_id"))


def _terminal(item: _Row | None) -> bool:
    return item is not None and canon(item.get("state")) in TERMINAL_STATES


def decide_assign(
    *,
    session_id: str,
    role: str,
    ref: WorkRef,
    expected_head_sha: str | None,
    item: _Row | None,
    leases: Sequence[_Row],
    now_stamp: str,
) -> AssignDecision:
    """Decide one request against the item's row and its active-status leases."""
    if ref.kind == "pr" and expected_head_sha is None:
        # A pull request moves; an assignment that does not say which head it is
        # for could authorize a push or merge on code nobody reviewed.
        return AssignDecision(
            kind=ASSIGN_REFUSED,
            code="head_pin_required",
            reason=f"{ref.label}: a pull request assignment needs expected_head_sha",
        )
    if _terminal(item):
        assert item is not None
        return AssignDecision(
            kind=ASSIGN_NO_SAFE_WORK,
            code=GATE_TERMINAL,
            reason=f"{ref.label} is {item.get('state')}; it is never assigned",
        )
    stored_head = canon(item.get("current_head_sha")) if item is not None else ""
    if expected_head_sha is not None and stored_head and stored_head != expected_head_sha:
        # One of the two views is stale; guessing which could pin a worker to a
        # head that is already gone.
        return AssignDecision(
            kind=ASSIGN_NO_SAFE_WORK,
            code="head_moved",
            reason=(
                f"{ref.label}: expected head {expected_head_sha} but the work item is at "
                f"{stored_head}; refresh the work item first"
            ),
        )
    live, due = split_due(leases, now_stamp)
    # Every decision from here on also expires the leases found past their deadline.
    decided = partial(AssignDecision, expire_lease_ids=tuple(sorted(map(_lease_id, due))))
    live.sort(key=lambda lease: (canon(lease.get("acquired_at")), _lease_id(lease)))
    own = [lease for lease in live if canon(lease.get("session_id")) == session_id]
    if own:
        held_role = canon(own[0].get("role"))
        if held_role and held_role != role:
            return decided(
                kind=ASSIGN_REFUSED,
                code="role_mismatch",
                reason=f"session {session_id} already holds {ref.label} as {held_role}, not {role}",
            )
        return decided(
            kind=ASSIGN_RESUME,
            code="owner_resume",
            reason=f"owner-resume: session {session_id} already holds {ref.label}; lease refreshed",
            lease=own[0],
        )
    if live:
        owner = canon(live[0].get("session_id")) or "an unnamed session"
        return decided(
            kind=ASSIGN_WAIT,
            code="foreign_lease",
            reason=f"{ref.label} is leased to session {owner} until {live[0].get('expires_at')}",
            lease=live[0],
        )
    return decided(
        kind=ASSIGN_GRANT,
        code="assigned",
        reason=f"{ref.label} assigned to session {session_id} as {role}",
    )


def _deny(code: str, reason: str) -> GateVerdict:
    return GateVerdict(allowed=False, code=code, reason=reason)


def check_mutation(
    *,
    session_id: str,
    action: str,
    ref: WorkRef,
    item: _Row | None,
    assignment: _Row | None,
    lease: _Row | None,
    now_stamp: str,
) -> GateVerdict:
    """May ``session_id`` perform ``action`` on ``ref`` right now? Anything unproven is no."""
    if assignment is None:
        return _deny(
            GATE_NO_ASSIGNMENT,
            f"session {session_id} holds no active assignment on {ref.label}; allocate first",
        )
    lease_id = canon(assignment.get("lease_id"))
    if lease is None or canon(lease.get("status")) != "active":
        status = canon(lease.get("status")) if lease is not None else "missing"
        return _deny(GATE_LEASE_NOT_ACTIVE, f"lease {lease_id} is {status}, not active")
    if canon(lease.get("session_id")) != session_id:
        return _deny(GATE_LEASE_NOT_ACTIVE, f"lease {lease_id} belongs to another session")
    deadline = lease.get("expires_at")
    if not isinstance(deadline, str) or deadline <= now_stamp:
        return _deny(GATE_LEASE_EXPIRED, f"lease {lease_id} expired at {deadline}")
    if item is None:
        return _deny(GATE_NO_ASSIGNMENT, f"{ref.label} is not a known work item")
    if _terminal(item):
        return _deny(GATE_TERMINAL, f"{ref.label} is {item.get('state')} (terminal)")
    if action in tuple(assignment.get("forbidden_actions") or ()):
        return _deny(GATE_ACTION_FORBIDDEN, f"action {action!r} is forbidden by the assignment")
    if action not in tuple(assignment.get("allowed_actions") or ()):
        return _deny(GATE_ACTION_NOT_ALLOWED, f"action {action!r} is not allowed by the assignment")
    pinned = canon(assignment.get("expected_head_sha"))
    if ref.kind == "pr" and not pinned:
        return _deny(
            GATE_HEAD_UNPINNED,
            f"{ref.label}: the assignment has no expected_head_sha pin, so no head is vouched for",
        )
    current = canon(item.get("current_head_sha"))
    if pinned and current != pinned:
        return _deny(
            GATE_STALE_HEAD,
            f"stale head on {ref.label}: assigned at {pinned}, work item now at {current or '?'}",
        )
    return GateVerdict(allowed=True, code=GATE_OK, reason=f"{action} on {ref.label} is covered")
