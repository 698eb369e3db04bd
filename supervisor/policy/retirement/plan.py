"""What a retirement plan is made of: the judge's context, lease owners, entries, the plan."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from supervisor.policy.canonical import canon
from supervisor.policy.fast_init import fast_init

__all__ = [
    "Entries",
    "FencingContext",
    "PlanEntry",
    "ProtectedOwners",
    "RetirementPlan",
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


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEntry:
    """The verdict on one row."""

    worker_identity: str | None
    reason_code: str
    detail: str
    evidence: Mapping[str, Any]


class Entries(Sequence[PlanEntry]):
    """Plan entries built only when read: a compact plan shows a few of thousands.

    ``build`` returns every entry in order; ``first`` returns the first ``n``
    entries per reason code in that same order without building the rest.
    Equal to any sequence holding the same entries.
    """

    __slots__ = ("_build", "_count", "_first", "_items")

    def __init__(
        self,
        count: int,
        build: Callable[[], tuple[PlanEntry, ...]],
        first: Callable[[int], list[PlanEntry]] | None = None,
    ) -> None:
        self._count = count
        self._build: Callable[[], tuple[PlanEntry, ...]] | None = build
        self._first = first
        self._items: tuple[PlanEntry, ...] | None = None

    @classmethod
    def of(cls, items: Sequence[PlanEntry]) -> Entries:
        held = tuple(items)
        return cls(len(held), lambda: held)

    def _all(self) -> tuple[PlanEntry, ...]:
        if self._items is None:
            assert self._build is not None
            self._items = self._build()
            # The closure holds the plan's working columns; drop them once built.
            self._build = self._first = None
        return self._items

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> PlanEntry: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[PlanEntry]: ...

    def __getitem__(self, index: int | slice) -> PlanEntry | Sequence[PlanEntry]:
        return self._all()[index]

    def __iter__(self) -> Iterator[PlanEntry]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Entries):
            return self._all() == other._all()
        if isinstance(other, tuple | list):
            return self._all() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Entries({self._all()!r})"

    def first_by_reason(self, n: int) -> dict[str, list[PlanEntry]]:
        """The first ``n`` entries of each reason code, in entry order."""
        if self._items is None and self._first is not None:
            picked = self._first(n)
        else:
            picked = list(self._all())
        out: dict[str, list[PlanEntry]] = {}
        for entry in picked:
            held = out.setdefault(entry.reason_code, [])
            if len(held) < n:
                held.append(entry)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RetirementPlan:
    """A read-only, deterministic plan; the tokens let apply detect a changed world."""

    registry_fingerprint: str
    candidate_fingerprint: str
    scope_fingerprint: str
    #: In worker_identity order; may be built when first read.
    candidates: Sequence[PlanEntry]
    #: In (worker_identity, reason_code) order; built when first read.
    preserved: Sequence[PlanEntry]
    candidate_rows: tuple[Mapping[str, Any], ...]
    preserved_reason_counts: Mapping[str, int]
    protected: ProtectedOwners
    fencing: FencingContext
    canonical_repository: str | None
    #: Historical rows counted (as ``already_terminal_registration``) but not listed.
    unlisted_terminal_count: int = 0
    # The scope token's inputs, so historical scope rows can be added later
    # (``scope.with_history_scope``); derived, so not part of equality.
    scope_digests: tuple[bytes, ...] = field(default=(), compare=False)
    anchor_identities: tuple[str, ...] = field(default=(), compare=False)
    anchor_keys: frozenset[tuple[str, str]] = field(default=frozenset(), compare=False)

    @property
    def candidate_worker_identities(self) -> tuple[str, ...]:
        # The planner's anchors are exactly these, in this order; reading them
        # spares building every candidate's entry just for its identity.
        if len(self.anchor_identities) == len(self.candidates):
            return self.anchor_identities
        return tuple(str(c.worker_identity) for c in self.candidates)

    @property
    def assessed_count(self) -> int:
        return len(self.candidates) + self.preserved_count

    @property
    def preserved_count(self) -> int:
        return len(self.preserved) + self.unlisted_terminal_count

    def reason_for(self, worker_identity: str) -> PlanEntry | None:
        """The entry for one identity (candidate or preserved), if the row exists."""
        for entry in (*self.candidates, *self.preserved):
            if entry.worker_identity == worker_identity:
                return entry
        return None


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
