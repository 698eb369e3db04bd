"""Allocator routing: the role each candidate needs next, what is skipped and why, what first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from .candidates import (
    CANDIDATE_FIELDS,
    MAX_CANDIDATES,
    Candidate,
    candidate_from_mapping,
    candidates_from_mappings,
)
from .plane import TERMINAL_STATES, check_role

__all__ = [
    "CANDIDATE_FIELDS",
    "MAX_CANDIDATES",
    "OUTCOMES",
    "OUTCOME_ASSIGNED",
    "OUTCOME_BLOCKED_TERMINAL",
    "OUTCOME_NO_SAFE",
    "OUTCOME_PREVIEW",
    "OUTCOME_ROLE_INELIGIBLE",
    "OUTCOME_WAIT",
    "SKIP_BLOCKED",
    "SKIP_CLAIMED",
    "SKIP_DEPENDENCY",
    "SKIP_LEASED",
    "SKIP_NOT_READY",
    "SKIP_NO_HEAD",
    "SKIP_ROLE",
    "SKIP_TERMINAL_PATH",
    "SKIP_TERMINAL_STATE",
    "Candidate",
    "Routing",
    "Skip",
    "candidate_from_mapping",
    "candidates_from_mappings",
    "expected_role",
    "next_command",
    "order_candidates",
    "route",
    "skip_reason",
]

OUTCOME_ASSIGNED = "assigned_work"
OUTCOME_WAIT = "wait"
OUTCOME_BLOCKED_TERMINAL = "blocked_by_terminal_path"
OUTCOME_NO_SAFE = "no_safe_work"
OUTCOME_ROLE_INELIGIBLE = "role_ineligible"
OUTCOME_PREVIEW = "preview"
OUTCOMES: tuple[str, ...] = (
    OUTCOME_ASSIGNED,
    OUTCOME_WAIT,
    OUTCOME_BLOCKED_TERMINAL,
    OUTCOME_NO_SAFE,
    OUTCOME_ROLE_INELIGIBLE,
    OUTCOME_PREVIEW,
)

#: Roles that work down the review path, and so must clear a terminal-review lock first.
_TERMINAL_PATH_ROLES = frozenset({"reviewer", "merger"})
_READY_LABELS = frozenset({"status:ready", "status:in-progress"})
_BLOCKED_LABEL = "status:blocked"

_Key = tuple[str, int]
_RouteKind = Literal["assign", "resume", "wait", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Skip:
    """A candidate passed over: ``code`` for programs, ``reason`` for people."""

    kind: str
    number: int
    code: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Routing:
    """The routing verdict before any lease is written.

    ``kind`` is ``assign`` (a free candidate), ``resume`` (the caller already
    holds it), ``wait`` (the best candidate is another session's) or ``none``.
    """

    kind: _RouteKind
    outcome: str
    selected: Candidate | None
    owner_session_id: str | None
    skipped: tuple[Skip, ...]
    reasons: tuple[str, ...]


def expected_role(candidate: Candidate) -> str:
    """The role that should take this item next."""
    if candidate.kind == "issue":
        return "author"
    if candidate.approval_contaminated:
        return "reconciler"
    if candidate.request_changes_current_head:
        return "author"
    if candidate.approval_stale:
        return "reviewer"
    if candidate.approval_on_current_head:
        # Approved but not mergeable (conflicts): only the author can move it.
        return "merger" if candidate.mergeable else "author"
    return "reviewer"


SKIP_TERMINAL_STATE = "terminal_state"
SKIP_BLOCKED = "blocked"
SKIP_DEPENDENCY = "dependency_unmet"
SKIP_CLAIMED = "claimed_elsewhere"
SKIP_NO_HEAD = "head_unpinned"
SKIP_TERMINAL_PATH = "terminal_path_first"
SKIP_ROLE = "role_mismatch"
SKIP_NOT_READY = "not_ready"
SKIP_LEASED = "leased_elsewhere"


def skip_reason(
    candidate: Candidate, *, role: str, terminal_pr: int | None
) -> tuple[str, str] | None:
    """Why ``role`` must not take this candidate as (code, reason), or None when it may."""
    c = candidate
    if c.state in TERMINAL_STATES:
        return SKIP_TERMINAL_STATE, f"{c.label} is {c.state}; it is never assigned"
    if c.blocked or _BLOCKED_LABEL in c.labels:
        return SKIP_BLOCKED, f"{c.label} is blocked"
    if c.dependency_unmet:
        return SKIP_DEPENDENCY, c.dependency_reason or f"{c.label} has unmet dependencies"
    if c.already_claimed_elsewhere:
        return SKIP_CLAIMED, f"{c.label} is already claimed outside this supervisor"
    if c.kind == "pr" and c.head_sha is None:
        return SKIP_NO_HEAD, f"{c.label} has no head sha to pin an assignment to"
    if (
        terminal_pr is not None
        and role in _TERMINAL_PATH_ROLES
        and c.kind == "pr"
        and c.number != terminal_pr
    ):
        return (
            SKIP_TERMINAL_PATH,
            f"{c.label} waits: the terminal-review lock on PR #{terminal_pr} is resolved first",
        )
    wanted = expected_role(c)
    # The controller takes only diagnosis work, the same items the reconciler does.
    if wanted != role and not (role == "controller" and wanted == "reconciler"):
        return SKIP_ROLE, f"{c.label} expects role {wanted!r}, not {role!r}"
    statuses = {x for x in c.labels if x.startswith("status:")}
    if c.kind == "issue" and statuses and not statuses & _READY_LABELS:
        return SKIP_NOT_READY, f"{c.label} is not status:ready ({', '.join(c.labels)})"
    return None


def order_candidates(
    candidates: Sequence[Candidate], *, role: str, terminal_pr: int | None
) -> list[Candidate]:
    """Terminal path first (review roles), then higher priority, then older first.

    Age is ``created_at`` when given; undated candidates follow the dated ones of
    the same priority, lowest number first.
    """

    def key(c: Candidate) -> tuple[int, int, bool, datetime, int, str]:
        terminal_first = role in _TERMINAL_PATH_ROLES and c.kind == "pr" and c.number == terminal_pr
        created = c.created_at or datetime.max.replace(tzinfo=None)
        return (
            0 if terminal_first else 1,
            -c.priority,
            c.created_at is None,
            created.replace(tzinfo=None),
            c.number,
            c.kind,
        )

    return sorted(candidates, key=key)


def route(
    candidates: Sequence[Candidate],
    *,
    role: str,
    session_id: str,
    terminal_pr: int | None,
    holders: Mapping[_Key, str],
) -> Routing:
    """Pick the caller's next item. ``holders`` maps items under a live lease to its session.

    The caller's own leased item comes first (finish what you hold), then the
    best free item; an item leased to another session is passed over for a free
    one, and only when nothing free remains is the answer ``wait``.
    """
    role = check_role(role)
    skipped: list[Skip] = []
    eligible: list[Candidate] = []
    for c in order_candidates(candidates, role=role, terminal_pr=terminal_pr):
        verdict = skip_reason(c, role=role, terminal_pr=terminal_pr)
        if verdict is None:
            eligible.append(c)
            continue
        skipped.append(Skip(kind=c.kind, number=c.number, code=verdict[0], reason=verdict[1]))

    def answer(
        kind: _RouteKind, outcome: str, reason: str, pick: Candidate | None, owner: str | None
    ) -> Routing:
        # Every answer carries what was passed over so far, and one reason.
        return Routing(
            kind=kind,
            outcome=outcome,
            selected=pick,
            owner_session_id=owner,
            skipped=tuple(skipped),
            reasons=(reason,),
        )

    own = next((c for c in eligible if holders.get(c.key) == session_id), None)
    if own is not None:
        reason = f"{own.label} is already leased to this session (owner-resume)"
        return answer("resume", OUTCOME_ASSIGNED, reason, own, session_id)
    held: list[Candidate] = []
    for c in eligible:
        owner = holders.get(c.key)
        if owner is None:
            skipped.extend(
                Skip(
                    kind=h.kind,
                    number=h.number,
                    code=SKIP_LEASED,
                    reason=f"{h.label} is leased to session {holders[h.key]}",
                )
                for h in held
            )
            reason = f"{c.label} is the first free item for role {role!r}"
            return answer("assign", OUTCOME_ASSIGNED, reason, c, None)
        held.append(c)
    if held:
        first = held[0]
        reason = f"every item {role!r} could take is leased; {first.label} is the next one"
        return answer("wait", OUTCOME_WAIT, reason, first, holders[first.key])
    if role in _TERMINAL_PATH_ROLES and any(s.code == SKIP_TERMINAL_PATH for s in skipped):
        reason = (
            f"no safe work for {role!r}: PR #{terminal_pr} holds the terminal-review lock "
            "and must be resolved first"
        )
        return answer("none", OUTCOME_BLOCKED_TERMINAL, reason, None, None)
    reason = f"no safe work for {role!r} among {len(candidates)} candidate(s)"
    return answer("none", OUTCOME_NO_SAFE, reason, None, None)


def next_command(role: str, candidate: Candidate) -> str:
    """A one-line instruction for the session that just received the item."""
    head = (candidate.head_sha or "")[:12]
    if role == "author" and candidate.kind == "issue":
        return f"implement issue #{candidate.number} on a branch and open a pull request"
    if role == "author":
        return f"address the requested changes on PR #{candidate.number} (head {head}) and push"
    if role == "reviewer":
        return f"review PR #{candidate.number} at head {head}"
    if role == "merger":
        return f"merge PR #{candidate.number} at head {head} once the merge is authorized"
    return f"diagnose the contested state of {candidate.label}"
