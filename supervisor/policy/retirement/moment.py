"""One plan's observations of every row, and the preserved entries built from them on demand."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from supervisor.policy.evidence import UNKNOWN, EvidenceMap, PidEvidence
from supervisor.policy.fleet.worker_view import (
    OWNERSHIP_HISTORICAL,
    OWNERSHIP_INCONSISTENT,
    OWNERSHIP_LIVE,
    OWNERSHIP_LIVE_UNTRUSTED,
    OWNERSHIP_ORPHANED,
    OWNERSHIP_STALE,
)

from .facts import RowFacts, epoch_us, verdict_detail
from .plan import Entries, PlanEntry

__all__ = [
    "EvidenceBases",
    "Moment",
    "entry_evidence",
    "entry_order",
    "evidence_reader",
    "lazy_entries",
    "observe",
]


@dataclass(frozen=True, slots=True)
class Moment:
    """Every row at this plan's instant, as parallel columns (no object per row)."""

    probes: list[PidEvidence]
    ages: Sequence[float | None]
    fresh: list[bool | None]
    live: list[bool]
    ownership: list[str]


def observe(
    facts: Sequence[RowFacts], evidence: EvidenceMap, now: datetime
) -> tuple[Moment, frozenset[tuple[str, str]]]:
    """What the probes and ``now`` say about each row; the only per-plan work per row."""
    probe_of = evidence.get
    probes: list[PidEvidence] = []
    ages: list[float | None] = []
    fresh_of: list[bool | None] = []
    live_of: list[bool] = []
    ownership_of: list[str] = []
    ambiguous: set[tuple[str, str]] = set()
    now_us = epoch_us(now)
    for f in facts:
        pid = f.pid
        probe = UNKNOWN if pid is None else probe_of(pid, UNKNOWN)
        alive = probe.alive
        beat_us = f.beat_us
        age: float | None = None
        fresh: bool | None = None
        if beat_us is not None:
            # Exactly (now - beat).total_seconds(): whole microseconds over 10**6.
            age = (now_us - beat_us) / 1_000_000
            ttl = f.ttl
            if ttl is not None:
                fresh = age < ttl
        active = f.active
        # A probe only speaks for rows of this host; it can withdraw liveness, never grant it.
        live = active and fresh is True and not (alive is False and f.pid_local)
        if not active:
            ownership = OWNERSHIP_HISTORICAL
        elif not live:
            ownership = OWNERSHIP_INCONSISTENT if f.self_contradicting else OWNERSHIP_STALE
            # An active row whose liveness cannot be settled may still belong to a
            # running process, like a live one.
            if alive is None or fresh is None:
                ambiguous.update(f.conflict_keys)
        else:
            ambiguous.update(f.conflict_keys)
            if not f.session_id:
                ownership = OWNERSHIP_ORPHANED
            elif not f.identity_trusted:
                ownership = OWNERSHIP_LIVE_UNTRUSTED
            else:
                ownership = OWNERSHIP_LIVE
        probes.append(probe)
        ages.append(age)
        fresh_of.append(fresh)
        live_of.append(live)
        ownership_of.append(ownership)
    # The conflict keys held by live or unsettled rows (``plan_verdict.FleetContext``).
    return Moment(probes, ages, fresh_of, live_of, ownership_of), frozenset(ambiguous)


def entry_evidence(f: RowFacts, index: int, moment: Moment) -> dict[str, Any]:
    """One entry's evidence: the row's template plus this plan's six observations."""
    probe = moment.probes[index]
    entry_evidence = dict(f.evidence_template.get())
    entry_evidence["last_heartbeat_at"] = f.beat_raw
    entry_evidence["pid_alive"] = probe.alive
    entry_evidence["probed_start_time"] = probe.start_time
    entry_evidence["heartbeat_age_seconds"] = moment.ages[index]
    entry_evidence["heartbeat_fresh"] = moment.fresh[index]
    entry_evidence["live"] = moment.live[index]
    entry_evidence["ownership_state"] = moment.ownership[index]
    return entry_evidence


class EvidenceBases:
    """Each rendered row's evidence but its age, kept while the row's facts and the
    plan's observations of it are the very objects the last render saw.

    A plan renders every candidate in full, and a candidate is a stale row whose
    probe answer and ownership rarely move between two plans: copying one dict and
    setting the age is several times cheaper than filling the template again.
    Only rendered rows are held, and past ``limit`` entries it starts over.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[int, tuple[Any, ...]] = {}

    def evidence(self, f: RowFacts, index: int, moment: Moment, limit: int) -> dict[str, Any]:
        probe = moment.probes[index]
        fresh = moment.fresh[index]
        live = moment.live[index]
        ownership = moment.ownership[index]
        held = self._held.get(id(f))
        # ``held[0] is f`` first: an id is reused once its object is gone, and the
        # held tuple keeps the facts alive, so a match is the same facts object. A
        # probe answer may be a new but equal object (a dead pid, answered anew).
        if (
            held is not None
            and held[0] is f
            and (held[1] is probe or held[1] == probe)
            and held[2] is fresh
            and held[3] is live
            and held[4] == ownership
        ):
            base: dict[str, Any] = held[5]
        else:
            base = entry_evidence(f, index, moment)
            if len(self._held) >= limit:
                self._held.clear()
            self._held[id(f)] = (f, probe, fresh, live, ownership, base)
        out = dict(base)
        out["heartbeat_age_seconds"] = moment.ages[index]
        return out


def evidence_reader(
    facts: Sequence[RowFacts], moment: Moment, bases: EvidenceBases | None
) -> Callable[[int], dict[str, Any]]:
    """Row index -> its entry's evidence: from ``bases`` when they are kept between
    plans, else built from the template."""
    if bases is None:
        return lambda index: entry_evidence(facts[index], index, moment)
    limit = 2 * len(facts) + 1024
    evidence = bases.evidence
    return lambda index: evidence(facts[index], index, moment, limit)


def entry_order(
    facts: Sequence[RowFacts], verdicts: Sequence[tuple[str, str] | None], kept: Sequence[int]
) -> list[int]:
    """``kept`` in (worker_identity, reason_code) order: the order entries are listed in."""

    def order(index: int) -> tuple[str, str]:
        verdict = verdicts[index]
        assert verdict is not None
        return (facts[index].worker_identity or "", verdict[0])

    return sorted(kept, key=order)


def lazy_entries(
    facts: Sequence[RowFacts],
    moment: Moment,
    kept: Sequence[int],
    verdicts: Sequence[tuple[str, str] | None],
    ordered: Sequence[int] | None = None,
    *,
    bases: EvidenceBases | None = None,
) -> Entries:
    """Entries of the preserved rows ``kept`` (indices; their verdicts in ``verdicts``),
    in (worker_identity, reason_code) order, built only when read. ``ordered``:
    ``entry_order`` of ``kept``, when the caller already has it; ``bases``: kept
    between plans, to render unchanged rows from their last evidence."""
    evidence = evidence_reader(facts, moment, bases)

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
