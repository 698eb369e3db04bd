"""One plan's observations of every row: probe answer, heartbeat freshness, liveness, ownership."""

from __future__ import annotations

from collections.abc import Sequence
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

from .facts import RowFacts
from .freshness import epoch_us

__all__ = ["Moment", "entry_evidence", "observe", "observe_row"]


@dataclass(frozen=True, slots=True)
class Moment:
    """Every row at this plan's instant, as parallel columns (no object per row)."""

    probes: list[PidEvidence]
    ages: Sequence[float | None]
    fresh: list[bool | None]
    live: list[bool]
    ownership: list[str]


def observe_row(f: RowFacts, probe: PidEvidence, fresh: bool | None) -> tuple[bool, str, bool]:
    """``(live, ownership, contributes)`` of one row, given its probe answer and freshness.

    ``contributes``: the row's conflict keys count as held by a live or
    unsettled worker (``FleetContext.ambiguous_keys``).
    """
    alive = probe.alive
    if not f.active:
        return False, OWNERSHIP_HISTORICAL, False
    # A probe only speaks for rows of this host; it can withdraw liveness, never grant it.
    if fresh is True and not (alive is False and f.pid_local):
        if not f.session_id:
            return True, OWNERSHIP_ORPHANED, True
        if not f.identity_trusted:
            return True, OWNERSHIP_LIVE_UNTRUSTED, True
        return True, OWNERSHIP_LIVE, True
    ownership = OWNERSHIP_INCONSISTENT if f.self_contradicting else OWNERSHIP_STALE
    # An active row whose liveness cannot be settled may still belong to a running process.
    return False, ownership, alive is None or fresh is None


def observe(
    facts: Sequence[RowFacts], evidence: EvidenceMap, now: datetime
) -> tuple[Moment, frozenset[tuple[str, str]]]:
    """What the probes and ``now`` say about each row, and the conflict keys held by
    live or unsettled rows (``FleetContext.ambiguous_keys``)."""
    probe_of = evidence.get
    probes: list[PidEvidence] = []
    ages: list[float | None] = []
    fresh_of: list[bool | None] = []
    live_of: list[bool] = []
    ownership_of: list[str] = []
    ambiguous: set[tuple[str, str]] = set()
    now_us = epoch_us(now)
    for f in facts:
        probe = UNKNOWN if f.pid is None else probe_of(f.pid, UNKNOWN)
        age: float | None = None
        fresh: bool | None = None
        if f.beat_us is not None:
            # Exactly (now - beat).total_seconds(): whole microseconds over 10**6.
            age = (now_us - f.beat_us) / 1_000_000
            if f.ttl is not None:
                fresh = age < f.ttl
        live, ownership, contributes = observe_row(f, probe, fresh)
        if contributes:
            ambiguous.update(f.conflict_keys)
        probes.append(probe)
        ages.append(age)
        fresh_of.append(fresh)
        live_of.append(live)
        ownership_of.append(ownership)
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
