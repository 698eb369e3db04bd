"""Fleet snapshot: classify every registration and the fleet; historical rows never block."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from supervisor.policy.canonical import canon
from supervisor.policy.evidence import EvidenceMap
from supervisor.policy.identity.instance import UNKNOWN_CLIENT
from supervisor.policy.stamps import format_stamp

from .findings import (
    CLASS_EXPECTED,
    CLASS_HEALTHY,
    CLASS_HISTORICAL,
    CLASS_LEGACY_INCOMPLETE,
    CLASS_MISSING,
    CLASS_STALE_WORKER,
    CLASS_UNKNOWN_CLIENT,
    CLASS_UNMANIFESTED,
    Finding,
    FindingLog,
    InstanceGroup,
    collisions,
    instance_group,
)
from .worker_view import WorkerView, build_worker_view

__all__ = [
    "FleetSnapshot",
    "ManifestEntry",
    "observation_stamp",
    "snapshot_fleet",
]

#: The row fields an observation stamp covers (the customer's snapshot token fields).
_STAMP_FIELDS = (
    "worker_identity",
    "client_instance_id",
    "status",
    "last_heartbeat_at",
    "fencing_epoch",
    "generation_id",
)


def observation_stamp(rows: Iterable[Mapping[str, Any]], snapshot_at: str) -> str:
    """``fleetrev-…``: names one observation of the fleet, for logs and for matching answers.

    It is seeded with the observation time, so it moves on every snapshot even
    when no row changed: it is never a compare-and-swap token (apply takes only
    a plan's fingerprints). Row order does not matter.
    """
    lines = sorted("|".join(canon(row.get(name)) for name in _STAMP_FIELDS) for row in rows)
    material = "\n".join([snapshot_at, *lines]).encode("utf-8")
    return "fleetrev-" + hashlib.sha256(material).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestEntry:
    """One instance the operator approved for the fleet."""

    client_instance_id: str
    client_type: str | None = None
    fleet_run_id: str | None = None
    namespaces: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetSnapshot:
    """The whole fleet at one instant."""

    workers: tuple[WorkerView, ...]
    instances: tuple[InstanceGroup, ...]
    findings: tuple[Finding, ...]
    missing_expected_instance_ids: tuple[str, ...]
    unmanifested_instance_ids: tuple[str, ...]
    multi_instance_same_client_type: Mapping[str, tuple[str, ...]]
    live_worker_count: int
    stale_worker_count: int
    historical_worker_count: int
    live_fleet_safe: bool
    mutation_safe: bool
    active_blockers: tuple[Finding, ...] = field(default=())
    #: When the snapshot was taken (the registry's UTC stamp form).
    snapshot_at: str = ""
    #: Observation stamp over ``snapshot_at`` and the rows; see ``observation_stamp``.
    consistency_token: str = ""

    @property
    def live_workers(self) -> tuple[WorkerView, ...]:
        return tuple(w for w in self.workers if w.live)

    @property
    def stale_workers(self) -> tuple[WorkerView, ...]:
        return tuple(w for w in self.workers if w.stale)

    @property
    def historical_workers(self) -> tuple[WorkerView, ...]:
        return tuple(w for w in self.workers if w.historical)


def snapshot_fleet(
    rows: Iterable[Mapping[str, Any]],
    *,
    now: datetime,
    evidence: EvidenceMap,
    current_host_id: str | None = None,
    canonical_repository: str | None = None,
    expected_live_revision: str | None = None,
    expected_manifest: Sequence[ManifestEntry] | None = None,
    historical_count: int = 0,
) -> FleetSnapshot:
    """Classify the fleet. Deterministic for the same rows, evidence and ``now``.

    ``historical_count`` counts historical rows left out of ``rows`` (the store
    keeps their digest): they never block, so they are one summary finding
    instead of one finding and one worker view each.
    """
    rows = tuple(rows)
    workers = tuple(
        build_worker_view(
            row,
            now=now,
            evidence=evidence,
            current_host_id=current_host_id,
            canonical_repository=canonical_repository,
            expected_live_revision=expected_live_revision,
        )
        for row in rows
    )
    workers = tuple(sorted(workers, key=lambda w: (w.worker_identity or "", w.status)))
    live = [w for w in workers if w.live]
    out = FindingLog()
    collisions(live, out)

    by_instance: dict[str, list[WorkerView]] = defaultdict(list)
    for worker in live:
        if worker.client_instance_id:
            by_instance[worker.client_instance_id].append(worker)
        else:
            out.add(
                CLASS_LEGACY_INCOMPLETE,
                "live worker has no client_instance_id",
                workers=[worker],
                instance_ids=[],
            )
            if worker.client_type == UNKNOWN_CLIENT:
                out.add(
                    CLASS_UNKNOWN_CLIENT,
                    "live worker has an unknown client type and no instance id",
                    workers=[worker],
                    instance_ids=[],
                )
    instances = tuple(instance_group(iid, group, out) for iid, group in sorted(by_instance.items()))

    for worker in workers:
        if worker.stale:
            out.add(
                CLASS_STALE_WORKER,
                f"worker {worker.worker_identity!r} is active in the registry but not live",
                workers=[worker],
            )
        elif worker.historical:
            out.add(
                CLASS_HISTORICAL,
                f"historical registration {worker.worker_identity!r} "
                f"(status {worker.status!r}) does not block",
                workers=[worker],
            )

    expected_ids = sorted(
        {
            e.client_instance_id.strip()
            for e in expected_manifest or ()
            if e.client_instance_id.strip()
        }
    )
    live_ids = set(by_instance)
    missing = tuple(i for i in expected_ids if i not in live_ids)
    # Without a manifest there is no enrollment policy to be outside of.
    unmanifested = tuple(sorted(live_ids - set(expected_ids))) if expected_ids else ()
    # A live instance's finding names it through its workers (``FindingLog.add``).
    for iid in expected_ids:
        if iid in live_ids:
            out.add(CLASS_EXPECTED, f"expected instance {iid!r} is live", workers=by_instance[iid])
        else:
            out.add(
                CLASS_MISSING,
                f"expected instance {iid!r} is missing from the live fleet",
                instance_ids=[iid],
            )
    for iid in unmanifested:
        out.add(
            CLASS_UNMANIFESTED,
            f"live instance {iid!r} is not on the approved manifest",
            workers=by_instance[iid],
        )

    if historical_count:
        out.add(
            CLASS_HISTORICAL,
            f"{historical_count} historical registration(s) (not active) do not block",
        )

    # Healthy is decided last: collisions and manifest findings about an
    # instance are raised outside its own group and must also rule it out.
    # What the blockers name, gathered once: asking every finding about every instance
    # was quadratic (seconds at 10,000 workers). Healthy findings never block, so the
    # ones this loop adds cannot change the sets.
    blocking = [f for f in out.items if f.active_blocker]
    blocked_instances = {iid for f in blocking for iid in f.client_instance_ids}
    blocked_workers = {wid for f in blocking for wid in f.worker_identities}
    for group in instances:
        blocked = group.client_instance_id in blocked_instances or not blocked_workers.isdisjoint(
            group.worker_identities
        )
        if group.mutation_safe and not blocked:
            out.add(
                CLASS_HEALTHY,
                f"instance {group.client_instance_id!r} is healthy",
                workers=by_instance[group.client_instance_id],
                instance_ids=[group.client_instance_id],
            )

    by_type: dict[str, list[str]] = defaultdict(list)
    for group in instances:
        for client_type in group.client_types:
            by_type[client_type].append(group.client_instance_id)
    findings = tuple(out.items)
    blockers = tuple(f for f in findings if f.active_blocker)
    safe = not blockers
    snapshot_at = format_stamp(now)
    return FleetSnapshot(
        workers=workers,
        instances=instances,
        findings=findings,
        active_blockers=blockers,
        missing_expected_instance_ids=missing,
        unmanifested_instance_ids=unmanifested,
        multi_instance_same_client_type={
            k: tuple(v) for k, v in sorted(by_type.items()) if len(v) > 1
        },
        live_worker_count=len(live),
        stale_worker_count=sum(1 for w in workers if w.stale),
        historical_worker_count=sum(1 for w in workers if w.historical) + historical_count,
        live_fleet_safe=safe,
        mutation_safe=safe and all(g.mutation_safe for g in instances),
        snapshot_at=snapshot_at,
        consistency_token=observation_stamp(rows, snapshot_at),
    )
