"""Finding classes and the collision / per-instance checks the fleet snapshot is built from."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from supervisor.policy.identity.instance import UNKNOWN_CLIENT

from .worker_view import OWNERSHIP_ORPHANED, WorkerView

__all__ = [
    "ACTIVE_BLOCKER_CLASSES",
    "CLASS_DUPLICATE_NAMESPACE",
    "CLASS_EXPECTED",
    "CLASS_FOREIGN_REPOSITORY",
    "CLASS_GENERATION_COLLISION",
    "CLASS_HEALTHY",
    "CLASS_HISTORICAL",
    "CLASS_INSTANCE_ID_COLLISION",
    "CLASS_LEGACY_INCOMPLETE",
    "CLASS_MISSING",
    "CLASS_OLD_REVISION",
    "CLASS_ORPHANED",
    "CLASS_OWNERSHIP_COLLISION",
    "CLASS_PID_COLLISION",
    "CLASS_PROCESS_COLLISION",
    "CLASS_SESSION_COLLISION",
    "CLASS_STALE_WORKER",
    "CLASS_UNKNOWN_CLIENT",
    "CLASS_UNMANIFESTED",
    "CLASS_WORKER_ID_COLLISION",
    "Finding",
    "FindingLog",
    "InstanceGroup",
    "collisions",
    "instance_group",
]

CLASS_EXPECTED = "expected_enrolled"
CLASS_MISSING = "missing_expected"
CLASS_UNMANIFESTED = "unmanifested"
CLASS_DUPLICATE_NAMESPACE = "duplicate_namespace_worker"
CLASS_INSTANCE_ID_COLLISION = "instance_id_collision"
CLASS_WORKER_ID_COLLISION = "worker_identity_collision"
CLASS_SESSION_COLLISION = "session_identity_collision"
CLASS_GENERATION_COLLISION = "generation_identity_collision"
CLASS_PROCESS_COLLISION = "process_identity_collision"
CLASS_PID_COLLISION = "pid_collision"
CLASS_OWNERSHIP_COLLISION = "ownership_fencing_collision"
CLASS_ORPHANED = "orphaned_unowned"
CLASS_UNKNOWN_CLIENT = "unknown_client"
CLASS_FOREIGN_REPOSITORY = "foreign_repository"
CLASS_OLD_REVISION = "old_revision"
CLASS_STALE_WORKER = "stale_orphaned_worker"
CLASS_LEGACY_INCOMPLETE = "legacy_incomplete_identity"
CLASS_HISTORICAL = "historical_dead"
CLASS_HEALTHY = "healthy"

ACTIVE_BLOCKER_CLASSES = frozenset(
    {
        CLASS_MISSING,
        CLASS_UNMANIFESTED,
        CLASS_DUPLICATE_NAMESPACE,
        CLASS_INSTANCE_ID_COLLISION,
        CLASS_WORKER_ID_COLLISION,
        CLASS_SESSION_COLLISION,
        CLASS_GENERATION_COLLISION,
        CLASS_PROCESS_COLLISION,
        CLASS_PID_COLLISION,
        CLASS_OWNERSHIP_COLLISION,
        CLASS_ORPHANED,
        CLASS_UNKNOWN_CLIENT,
        CLASS_FOREIGN_REPOSITORY,
        CLASS_OLD_REVISION,
        CLASS_STALE_WORKER,
        CLASS_LEGACY_INCOMPLETE,
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One classified observation; ``active_blocker`` findings make the live fleet unsafe."""

    classification: str
    severity: str
    active_blocker: bool
    detail: str
    client_instance_ids: tuple[str, ...] = ()
    worker_identities: tuple[str | None, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceGroup:
    """The live workers of one application launch."""

    client_instance_id: str
    client_types: tuple[str, ...]
    fleet_run_ids: tuple[str, ...]
    namespaces: tuple[str, ...]
    namespace_counts: Mapping[str, int]
    duplicate_namespaces: tuple[str, ...]
    trusted_instance_identity: bool
    worker_identities: tuple[str | None, ...]
    mutation_safe: bool


class FindingLog:
    def __init__(self) -> None:
        self.items: list[Finding] = []

    def add(
        self,
        classification: str,
        detail: str,
        *,
        workers: Sequence[WorkerView] = (),
        instance_ids: Sequence[str] | None = None,
    ) -> None:
        blocker = classification in ACTIVE_BLOCKER_CLASSES
        if instance_ids is None:
            instance_ids = sorted({w.client_instance_id for w in workers if w.client_instance_id})
        severity = "blocker" if blocker else "info"
        if classification == CLASS_STALE_WORKER:
            severity = "warning"
        self.items.append(
            Finding(
                classification=classification,
                severity=severity,
                active_blocker=blocker,
                detail=detail,
                client_instance_ids=tuple(instance_ids),
                worker_identities=tuple(w.worker_identity for w in workers),
            )
        )


def _groups(
    workers: Iterable[WorkerView], key: Callable[[WorkerView], object]
) -> dict[str, list[WorkerView]]:
    grouped: dict[str, list[WorkerView]] = defaultdict(list)
    for worker in workers:
        value = key(worker)
        if value is None or value == "":
            continue
        grouped[str(value)].append(worker)
    return {k: v for k, v in sorted(grouped.items()) if len(v) > 1}


def _distinct_workers(group: Sequence[WorkerView]) -> bool:
    return len({w.worker_identity for w in group}) > 1


def collisions(live: Sequence[WorkerView], out: FindingLog) -> None:
    for wid, group in _groups(live, lambda w: w.worker_identity).items():
        out.add(
            CLASS_WORKER_ID_COLLISION,
            f"worker identity {wid!r} is claimed by {len(group)} live rows",
            workers=group,
        )
    for sid, group in _groups(live, lambda w: w.session_id).items():
        out.add(
            CLASS_SESSION_COLLISION,
            f"session {sid!r} is reused by {len(group)} live workers",
            workers=group,
        )
    for gen, group in _groups(live, lambda w: w.generation_id).items():
        per_namespace: dict[str, int] = defaultdict(int)
        for worker in group:
            per_namespace[worker.namespace or ""] += 1
        instances = {w.client_instance_id for w in group}
        # One launch may legitimately share a generation across its five
        # distinct namespaces; the same namespace twice, or two launches, may not.
        if any(ns and n > 1 for ns, n in per_namespace.items()) or len(instances) > 1:
            out.add(
                CLASS_GENERATION_COLLISION,
                f"generation {gen!r} is contested across namespaces or instances",
                workers=group,
            )
    for proc, group in _groups(live, lambda w: w.process_identity).items():
        if _distinct_workers(group):
            out.add(
                CLASS_PROCESS_COLLISION,
                f"process identity {proc!r} is shared by distinct live workers",
                workers=group,
            )
    for pid, group in _groups(
        live, lambda w: None if w.pid is None else (w.host_id or "", w.pid)
    ).items():
        if _distinct_workers(group):
            out.add(
                CLASS_PID_COLLISION, f"pid {pid} is shared by distinct live workers", workers=group
            )

    def fencing_key(w: WorkerView) -> str | None:
        if w.generation_id is None or w.fencing_epoch is None:
            return None
        return f"{w.generation_id}:{w.fencing_epoch}"

    for token, group in _groups(live, fencing_key).items():
        if len({w.client_instance_id for w in group}) > 1:
            out.add(
                CLASS_OWNERSHIP_COLLISION,
                f"fencing token {token!r} spans more than one instance",
                workers=group,
            )


def instance_group(iid: str, workers: Sequence[WorkerView], out: FindingLog) -> InstanceGroup:
    client_types = tuple(sorted({w.client_type for w in workers}))
    trusted = all(w.identity.trusted for w in workers)
    counts: dict[str, int] = defaultdict(int)
    for worker in workers:
        if worker.namespace:
            counts[worker.namespace] += 1
    duplicates = tuple(sorted(ns for ns, n in counts.items() if n > 1))
    ids = [iid]
    if duplicates:
        out.add(
            CLASS_DUPLICATE_NAMESPACE,
            f"instance {iid!r} has more than one live worker in {list(duplicates)}",
            workers=[w for w in workers if w.namespace in duplicates],
            instance_ids=ids,
        )
    if len(client_types) > 1:
        out.add(
            CLASS_INSTANCE_ID_COLLISION,
            f"instance {iid!r} is live under client types {list(client_types)}",
            workers=workers,
            instance_ids=ids,
        )
    if not trusted:
        out.add(
            CLASS_LEGACY_INCOMPLETE,
            f"instance {iid!r} lacks a launcher-minted identity",
            workers=workers,
            instance_ids=ids,
        )
    checks: tuple[tuple[str, str, Callable[[WorkerView], bool]], ...] = (
        (
            CLASS_UNKNOWN_CLIENT,
            "has workers of unknown client type",
            lambda w: w.client_type == UNKNOWN_CLIENT,
        ),
        (
            CLASS_FOREIGN_REPOSITORY,
            "has workers bound to a foreign repository",
            lambda w: w.foreign_repository,
        ),
        (CLASS_OLD_REVISION, "has workers on an old revision", lambda w: w.old_revision),
        (
            CLASS_ORPHANED,
            "has live workers without an owning session",
            lambda w: w.ownership_state == OWNERSHIP_ORPHANED,
        ),
    )
    for classification, text, predicate in checks:
        hits = [w for w in workers if predicate(w)]
        if hits:
            out.add(classification, f"instance {iid!r} {text}", workers=hits, instance_ids=ids)
    safe = all(w.mutation_safe for w in workers) and not duplicates and trusted
    return InstanceGroup(
        client_instance_id=iid,
        client_types=client_types,
        fleet_run_ids=tuple(sorted({w.fleet_run_id for w in workers if w.fleet_run_id})),
        namespaces=tuple(sorted(counts)),
        namespace_counts=dict(counts),
        duplicate_namespaces=duplicates,
        trusted_instance_identity=trusted,
        worker_identities=tuple(w.worker_identity for w in workers),
        mutation_safe=safe,
    )
