"""What the retirement actor answers besides plans: refusals, fleet counts and the post-apply
fleet view."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from actors.replies import FleetCounts
from supervisor.observe.logs import get_logger
from supervisor.policy.evidence import EvidenceMap
from supervisor.policy.fleet.orphans import OrphanFinding, orphan_dict
from supervisor.policy.fleet.snapshot import FleetSnapshot
from supervisor.policy.fleet.worker_view import OWNERSHIP_HISTORICAL, WorkerView, build_worker_view
from supervisor.policy.refusal import refused
from supervisor.policy.render import finding_dict

__all__ = [
    "Refused",
    "count_fleet",
    "count_fleet_rows",
    "orphan_fields",
    "post_apply_view",
    "refusal",
]

_log = get_logger()


def post_apply_view(
    registry_fingerprint: str, snap: FleetSnapshot, result: Mapping[str, Any]
) -> dict[str, Any]:
    """The fleet after an apply, reporting what still blocks instead of claiming safety."""
    retired = {str(r.get("worker_identity")) for r in result.get("retired") or []}
    return {
        "available": True,
        "registry_fingerprint": registry_fingerprint,
        "live_worker_count": snap.live_worker_count,
        "stale_worker_count": snap.stale_worker_count,
        "historical_worker_count": snap.historical_worker_count,
        "retired_still_counted_live": sorted(
            str(w.worker_identity) for w in snap.live_workers if w.worker_identity in retired
        ),
        "retired_still_counted_stale": sorted(
            str(w.worker_identity) for w in snap.stale_workers if w.worker_identity in retired
        ),
        "live_fleet_safe": snap.live_fleet_safe,
        "remaining_blockers": [finding_dict(f) for f in snap.active_blockers],
        "note": "retiring stale rows does not repair untrusted live identity; "
        "remaining blockers are reported as they are",
    }


class Refused(Exception):
    """A gate before the transaction said no; carries the structured refusal."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result.get("reasons"))
        self.result = result


def refusal(code: str, reason: str, **extra: Any) -> dict[str, Any]:
    """A structured refusal: nothing was changed, why, and its stable ``code``."""
    return refused(code, reason, retired_count=0, **extra)


def count_fleet(snap: FleetSnapshot, orphans: Sequence[OrphanFinding]) -> FleetCounts:
    """Registrations by (status, ownership_state, namespace), for the metrics and status."""
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
    """``count_fleet`` of the snapshot of ``rows``, without building the snapshot.

    A row's ownership state is its own worker view's (``build_worker_view``), so the
    counts need one view at a time: a scrape or ``status`` holds the rows and the
    evidence, not every view plus the findings and instance groups of a snapshot
    (about 12 MB at peak for 10,000 rows). ``historical_count`` counts the
    historical rows left out of ``rows``.
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
    # History is counted, not read (see plan_reads), so it is one bucket whatever
    # the rows' terminal status and namespace.
    if historical:
        counts[(OWNERSHIP_HISTORICAL, OWNERSHIP_HISTORICAL, "")] = historical
    return FleetCounts(workers=counts, orphaned=len(orphans))


def orphan_fields(orphans: Sequence[OrphanFinding]) -> dict[str, Any]:
    """The orphaned-worker finding as the keys a snapshot or plan answer carries."""
    return {
        "orphaned_workers": [orphan_dict(o) for o in orphans],
        "orphaned_worker_count": len(orphans),
    }
