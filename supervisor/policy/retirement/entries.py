"""A plan's entries: candidates and preserved rows, in listing order, built only when read."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .conjunction import verdict_detail
from .facts import RowFacts, Verdict
from .plan import Entries, PlanEntry
from .reasons import REASON_ELIGIBLE

__all__ = ["ELIGIBLE_DETAIL", "EvidenceOf", "candidate_entries", "entry_order", "preserved_entries"]

#: Row index -> the evidence its entry shows.
EvidenceOf = Callable[[int], dict[str, Any]]

ELIGIBLE_DETAIL = (
    "dead pid, expired heartbeat, stale ownership, trusted and fenced "
    "identity, canonical repository, no active lease"
)


def candidate_entries(
    facts: Sequence[RowFacts], indices: Sequence[int], evidence: EvidenceOf
) -> Entries:
    """The candidates ``indices`` (already in worker-identity order), built when first read."""

    def build() -> tuple[PlanEntry, ...]:
        return tuple(
            PlanEntry(
                worker_identity=facts[i].worker_identity,
                reason_code=REASON_ELIGIBLE,
                detail=ELIGIBLE_DETAIL,
                evidence=evidence(i),
            )
            for i in indices
        )

    return Entries(len(indices), build)


def entry_order(
    facts: Sequence[RowFacts], verdicts: Sequence[Verdict], kept: Sequence[int]
) -> list[int]:
    """``kept`` in (worker_identity, reason_code) order: the order entries are listed in."""

    def order(index: int) -> tuple[str, str]:
        verdict = verdicts[index]
        assert verdict is not None
        return (facts[index].worker_identity or "", verdict[0])

    return sorted(kept, key=order)


def preserved_entries(
    facts: Sequence[RowFacts],
    kept: Sequence[int],
    verdicts: Sequence[Verdict],
    evidence: EvidenceOf,
    ordered: Sequence[int] | None = None,
) -> Entries:
    """Entries of the preserved rows ``kept`` (indices; their verdicts in ``verdicts``),
    in (worker_identity, reason_code) order, built only when read. ``ordered``:
    ``entry_order`` of ``kept``, when the caller already has it."""

    def sort() -> Sequence[int]:
        return entry_order(facts, verdicts, kept) if ordered is None else ordered

    def entry(index: int) -> PlanEntry:
        verdict = verdicts[index]
        assert verdict is not None
        f = facts[index]
        return PlanEntry(
            worker_identity=f.worker_identity,
            reason_code=verdict[0],
            detail=verdict_detail(verdict, f),
            evidence=evidence(index),
        )

    def build() -> tuple[PlanEntry, ...]:
        return tuple(map(entry, sort()))

    def first(n: int) -> list[PlanEntry]:
        taken: dict[str, int] = {}
        picked: list[PlanEntry] = []
        for index in sort():
            verdict = verdicts[index]
            assert verdict is not None
            code = verdict[0]
            if taken.get(code, 0) < n:
                taken[code] = taken.get(code, 0) + 1
                picked.append(entry(index))
        return picked

    return Entries(len(kept), build, first)
