"""What a retirement plan is made of: the judge's context, lease owners, entries, the plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .canonical import canon

__all__ = [
    "FencingContext",
    "PlanEntry",
    "ProtectedOwners",
    "RetirementPlan",
    "build_entry",
    "protected_from_leases",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtectedOwners:
    """Owners of active work leases: never retirement candidates."""

    worker_identities: frozenset[str] = frozenset()
    session_ids: frozenset[str] = frozenset()
    pids: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class FencingContext:
    """Who is judging: this host and this boot (``None`` when they cannot be established)."""

    host_id: str | None
    boot_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEntry:
    """The verdict on one row."""

    worker_identity: str | None
    reason_code: str
    detail: str
    evidence: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetirementPlan:
    """A read-only, deterministic plan; the tokens let apply detect a changed world."""

    registry_fingerprint: str
    candidate_fingerprint: str
    scope_fingerprint: str
    candidates: tuple[PlanEntry, ...]
    preserved: tuple[PlanEntry, ...]
    candidate_rows: tuple[Mapping[str, Any], ...]
    preserved_reason_counts: Mapping[str, int]
    protected: ProtectedOwners
    fencing: FencingContext
    canonical_repository: str | None

    @property
    def candidate_worker_identities(self) -> tuple[str, ...]:
        return tuple(str(c.worker_identity) for c in self.candidates)

    @property
    def assessed_count(self) -> int:
        return len(self.candidates) + len(self.preserved)

    def reason_for(self, worker_identity: str) -> PlanEntry | None:
        """The entry for one identity (candidate or preserved), if the row exists."""
        for entry in (*self.candidates, *self.preserved):
            if entry.worker_identity == worker_identity:
                return entry
        return None


# A frozen dataclass's __init__ goes through object.__setattr__ once per field,
# which made entry construction a tenth of a 10k-row plan. The planner builds
# one entry per row on every plan, so it fills the slots directly; the class,
# its equality and its immutability are unchanged.
_new_object = object.__new__
_SET_IDENTITY = PlanEntry.__dict__["worker_identity"].__set__
_SET_REASON = PlanEntry.__dict__["reason_code"].__set__
_SET_DETAIL = PlanEntry.__dict__["detail"].__set__
_SET_EVIDENCE = PlanEntry.__dict__["evidence"].__set__


def build_entry(
    identity: str | None, reason: str, detail: str, evidence: Mapping[str, Any]
) -> PlanEntry:
    entry: PlanEntry = _new_object(PlanEntry)
    _SET_IDENTITY(entry, identity)
    _SET_REASON(entry, reason)
    _SET_DETAIL(entry, detail)
    _SET_EVIDENCE(entry, evidence)
    return entry


def protected_from_leases(leases: Sequence[Mapping[str, Any]]) -> ProtectedOwners:
    """Owners named by active leases (session ids and pids)."""
    sessions: set[str] = set()
    pids: set[int] = set()
    for lease in leases:
        if str(lease.get("status") or "") != "active":
            continue
        session = canon(lease.get("session_id")).strip()
        if session:
            sessions.add(session)
        for key in ("owner_pid", "session_pid"):
            value = lease.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                pids.add(value)
    return ProtectedOwners(session_ids=frozenset(sessions), pids=frozenset(pids))
