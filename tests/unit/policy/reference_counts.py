"""Fleet counts as they were before the tally was kept: the oracle ``FleetTally`` must equal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from actors.replies import FleetCounts
from supervisor.policy.evidence import EvidenceMap
from supervisor.policy.fleet.orphans import OrphanFinding
from supervisor.policy.fleet.snapshot import FleetSnapshot
from supervisor.policy.fleet.worker_view import OWNERSHIP_HISTORICAL, WorkerView, build_worker_view

__all__ = ["count_fleet", "count_fleet_rows"]


def count_fleet(snap: FleetSnapshot, orphans: Sequence[OrphanFinding]) -> FleetCounts:
    """Registrations by (status, ownership_state, namespace), read off a whole snapshot."""
    counts, _ = _tally(snap.workers)
    # The snapshot's historical count includes the historical rows it was given.
    return _fleet_counts(counts, snap.historical_worker_count, orphans)


def count_fleet_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    now: datetime,
    evidence: EvidenceMap,
    current_host_id: str | None,
    canonical_repository: str | None,
    historical_count: int,
    orphans: Sequence[OrphanFinding],
) -> FleetCounts:
    """``count_fleet`` of the snapshot of ``rows``, one worker view at a time: every row is
    classified afresh on every call (the cost the kept tally removes from a scrape).

    ``historical_count`` counts the historical rows left out of ``rows``.
    """
    views = (
        build_worker_view(
            row,
            now=now,
            evidence=evidence,
            current_host_id=current_host_id,
            canonical_repository=canonical_repository,
        )
        for row in rows
    )
    counts, historical_read = _tally(views)
    return _fleet_counts(counts, historical_count + historical_read, orphans)


def _tally(workers: Iterable[WorkerView]) -> tuple[dict[tuple[str, str, str], int], int]:
    """Active workers by (status, ownership_state, namespace), and the historical ones seen."""
    counts: dict[tuple[str, str, str], int] = {}
    historical = 0
    for worker in workers:
        if worker.historical:
            historical += 1
            continue
        key = (worker.status, worker.ownership_state, worker.namespace or "")
        counts[key] = counts.get(key, 0) + 1
    return counts, historical


def _fleet_counts(
    counts: dict[tuple[str, str, str], int], historical: int, orphans: Sequence[OrphanFinding]
) -> FleetCounts:
    # History is counted, not read, so it is one bucket whatever the rows' terminal
    # status and namespace.
    if historical:
        counts[(OWNERSHIP_HISTORICAL, OWNERSHIP_HISTORICAL, "")] = historical
    return FleetCounts(workers=counts, orphaned=len(orphans))
