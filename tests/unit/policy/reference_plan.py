"""The planner as it was before incremental planning: the oracle the memoized planner must equal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from supervisor.policy.canonical import canon
from supervisor.policy.evidence import EvidenceMap, PidEvidence, evidence_for
from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.policy.fleet.worker_view import OWNERSHIP_STALE, WorkerView, build_worker_view
from supervisor.policy.incarnation import same_incarnation
from supervisor.policy.retirement.fingerprints import (
    candidate_token,
    registry_fingerprint,
    row_digest,
    scope_indices,
    scope_token,
)
from supervisor.policy.retirement.plan import (
    FencingContext,
    PlanEntry,
    ProtectedOwners,
    RetirementPlan,
)
from supervisor.policy.retirement.reasons import (
    REASON_ALREADY_TERMINAL,
    REASON_AMBIGUOUS_OWNERSHIP,
    REASON_BOOT_UNKNOWN,
    REASON_CONFLICTING_IDENTITY,
    REASON_ELIGIBLE,
    REASON_FOREIGN_REPOSITORY,
    REASON_HEARTBEAT_FRESH,
    REASON_HOST_UNPROVEN,
    REASON_INCOMPLETE_IDENTITY,
    REASON_INSTANCE_CONFLICT,
    REASON_PID_ALIVE,
    REASON_PID_REUSED,
    REASON_PID_UNKNOWN,
    REASON_PROTECTED_OWNER,
    REASON_UNPARSABLE_HEARTBEAT,
    REASON_UNTRUSTED_PROVENANCE,
    REASON_WORKER_LIVE,
)
from supervisor.policy.stamps import parse_stamp

__all__ = ["reference_plan"]

#: Columns that must hold a value before the conjunction can even be read.
#: The fencing triple is here on purpose: rows written before it existed are
#: preserved permanently rather than retired on weaker evidence.
REQUIRED_IDENTITY_FIELDS: tuple[str, ...] = (
    "worker_identity",
    "client_instance_id",
    "session_id",
    "generation_id",
    "status",
    "started_at",
    "last_heartbeat_at",
    "heartbeat_ttl_seconds",
    "pid",
    "host_id",
    "boot_id",
    "process_start_time",
)


_Verdict = tuple[str, str] | None


@dataclass(frozen=True, slots=True)
class _FleetContext:
    """What a single row's verdict needs to know about the rest of the fleet."""

    fencing: FencingContext
    owners: ProtectedOwners
    identity_counts: Mapping[str, int]
    ambiguous_keys: frozenset[tuple[str, str]]
    contested_slots: frozenset[tuple[str, str]]


def _evidence(view: WorkerView, row: Mapping[str, Any], probe: PidEvidence) -> dict[str, Any]:
    return {
        "worker_identity": view.worker_identity,
        "client_type": view.client_type,
        "client_instance_id": view.client_instance_id,
        "fleet_run_id": view.fleet_run_id,
        "namespace": view.namespace,
        "profile": view.profile,
        "declared_role": view.role,
        "session_id": view.session_id,
        "generation_id": view.generation_id,
        "fencing_epoch": view.fencing_epoch,
        "process_identity": view.process_identity,
        "pid": view.pid,
        "pid_alive": probe.alive,
        "probed_start_time": probe.start_time,
        "host_id": view.host_id,
        "boot_id": view.boot_id,
        "process_start_time": view.process_start_time,
        "repository_binding": view.repository_binding,
        "foreign_repository": view.foreign_repository,
        "status": view.status,
        "started_at": row.get("started_at"),
        "last_heartbeat_at": row.get("last_heartbeat_at"),
        "heartbeat_ttl_seconds": view.liveness.heartbeat_ttl_seconds,
        "heartbeat_age_seconds": view.liveness.heartbeat_age_seconds,
        "heartbeat_fresh": view.liveness.heartbeat_fresh,
        "live": view.live,
        "ownership_state": view.ownership_state,
        "instance_id_provenance": view.identity.provenance,
        "instance_identity_trusted": view.identity.trusted,
    }


def _missing_fields(row: Mapping[str, Any]) -> list[str]:
    return [name for name in REQUIRED_IDENTITY_FIELDS if not canon(row.get(name)).strip()]


def _conflict_keys(view: WorkerView) -> set[tuple[str, str]]:
    keys = {
        ("session_id", canon(view.session_id)),
        ("generation_id", canon(view.generation_id)),
        ("process_identity", canon(view.process_identity)),
        ("pid", canon(view.pid)),
    }
    return {(name, value) for name, value in keys if value}


def _unresolved(view: WorkerView, probe: PidEvidence) -> bool:
    """An active row whose liveness cannot be settled may still belong to a running process."""
    return view.status == STATUS_ACTIVE and (
        probe.alive is None or view.liveness.heartbeat_fresh is None
    )


def _reuse(view: WorkerView, probe: PidEvidence, fencing: FencingContext) -> bool:
    # A pid number is only comparable within one host and one boot.
    if not fencing.host_id or view.host_id != fencing.host_id:
        return False
    if not fencing.boot_id or view.boot_id != fencing.boot_id:
        return False
    # Tokens that cannot be told apart (equal starts, an inode missing) are not a reuse.
    return bool(probe.start_time) and not same_incarnation(
        str(probe.start_time), view.process_start_time or ""
    )


def _identity_proof(view: WorkerView, fencing: FencingContext) -> _Verdict:
    """Attribution (launcher-minted instance) plus fencing (same host, known boots)."""
    if not view.identity.trusted:
        return (
            REASON_UNTRUSTED_PROVENANCE,
            f"client_instance_id {view.client_instance_id!r} is not launcher-minted "
            f"({view.identity.provenance}); nothing proves which launch this row belongs to",
        )
    if not fencing.host_id:
        return (
            REASON_HOST_UNPROVEN,
            "the supervisor cannot establish its own host identity, so a local probe "
            "speaks for no machine",
        )
    if view.host_id != fencing.host_id:
        return (
            REASON_HOST_UNPROVEN,
            f"row is bound to host {view.host_id!r} but this supervisor runs on "
            f"{fencing.host_id!r}; a local probe says nothing about another machine",
        )
    if not fencing.boot_id:
        return (
            REASON_BOOT_UNKNOWN,
            "the current boot identity is unknown, so the recorded pid cannot be "
            "compared with a live one",
        )
    # Different boot: every pid of the old boot is gone. Same boot: the probe
    # already said the pid is dead. Either way this incarnation is gone.
    return None


def reference_plan(
    rows: Iterable[Mapping[str, Any]],
    *,
    now: datetime,
    evidence: EvidenceMap,
    fencing: FencingContext,
    canonical_repository: str | None = None,
    protected: ProtectedOwners | None = None,
) -> RetirementPlan:
    """Decide, without side effects, which registrations are conclusively stale orphans."""
    all_rows = [dict(row) for row in rows]
    owners = protected or ProtectedOwners()
    probes = [evidence_for(row, evidence) for row in all_rows]
    views = [
        build_worker_view(
            row,
            now=now,
            evidence=evidence,
            current_host_id=fencing.host_id,
            canonical_repository=canonical_repository,
        )
        for row in all_rows
    ]

    identity_counts: Counter[str] = Counter(v.worker_identity for v in views if v.worker_identity)
    ambiguous: set[tuple[str, str]] = set()
    slots: dict[tuple[str, str], list[int]] = {}
    for index, view in enumerate(views):
        if view.live or _unresolved(view, probes[index]):
            ambiguous |= _conflict_keys(view)
        if view.status == STATUS_ACTIVE and view.client_instance_id and view.namespace:
            slots.setdefault((view.client_instance_id, view.namespace), []).append(index)
    # Several dead rows on one (instance, namespace) slot are ordinary restart
    # history; the slot is only contested when one of them might be running.
    contested_slots = {
        slot
        for slot, members in slots.items()
        if len(members) > 1 and any(views[i].live or probes[i].alive is None for i in members)
    }

    context = _FleetContext(
        fencing=fencing,
        owners=owners,
        identity_counts=identity_counts,
        ambiguous_keys=frozenset(ambiguous),
        contested_slots=frozenset(contested_slots),
    )
    candidates: list[PlanEntry] = []
    candidate_rows: list[Mapping[str, Any]] = []
    preserved: list[PlanEntry] = []
    for index, row in enumerate(all_rows):
        view, probe = views[index], probes[index]
        verdict = _verdict(row, view, probe, context)
        entry_evidence = _evidence(view, row, probe)
        if verdict is None:
            candidates.append(
                PlanEntry(
                    worker_identity=view.worker_identity,
                    reason_code=REASON_ELIGIBLE,
                    detail="dead pid, expired heartbeat, stale ownership, trusted and fenced "
                    "identity, canonical repository, no active lease",
                    evidence=entry_evidence,
                )
            )
            candidate_rows.append(row)
        else:
            preserved.append(
                PlanEntry(
                    worker_identity=view.worker_identity,
                    reason_code=verdict[0],
                    detail=verdict[1],
                    evidence=entry_evidence,
                )
            )

    candidates.sort(key=lambda e: e.worker_identity or "")
    preserved.sort(key=lambda e: (e.worker_identity or "", e.reason_code))
    anchors = [str(c.worker_identity) for c in candidates]
    # Digested once: the registry and scope tokens share every row's digest.
    digests = [row_digest(row) for row in all_rows]
    return RetirementPlan(
        registry_fingerprint=registry_fingerprint(all_rows),
        candidate_fingerprint=candidate_token(row_digest(row) for row in candidate_rows),
        scope_fingerprint=scope_token(
            (digests[i] for i in scope_indices(all_rows, anchors)), anchors
        ),
        candidates=tuple(candidates),
        preserved=tuple(preserved),
        candidate_rows=tuple(sorted(candidate_rows, key=lambda r: canon(r.get("worker_identity")))),
        preserved_reason_counts=dict(sorted(Counter(p.reason_code for p in preserved).items())),
        protected=owners,
        fencing=fencing,
        canonical_repository=canonical_repository,
    )


def _verdict(
    row: Mapping[str, Any],
    view: WorkerView,
    probe: PidEvidence,
    context: _FleetContext,
) -> _Verdict:
    """The first requirement this row fails, in the specified order; ``None`` if eligible."""
    identity = view.worker_identity
    if identity and context.identity_counts.get(identity, 0) > 1:
        return (
            REASON_CONFLICTING_IDENTITY,
            f"worker identity {identity!r} appears on more than one registry row",
        )
    if view.status != STATUS_ACTIVE:
        return (REASON_ALREADY_TERMINAL, f"status is {view.status!r}; nothing to retire")
    missing = _missing_fields(row)
    if missing:
        return (
            REASON_INCOMPLETE_IDENTITY,
            f"row lacks field(s) the retirement conjunction reads: {missing}",
        )
    if parse_stamp(row.get("last_heartbeat_at")) is None:
        return (REASON_UNPARSABLE_HEARTBEAT, "last_heartbeat_at is not a parsable UTC stamp")
    if view.live:
        return (REASON_WORKER_LIVE, "worker is live and must not be retired")
    if probe.alive is None:
        return (REASON_PID_UNKNOWN, f"pid {view.pid} could not be probed; liveness unproven")
    if probe.alive and _reuse(view, probe, context.fencing):
        return (
            REASON_PID_REUSED,
            f"pid {view.pid} is alive but started at {probe.start_time!r}, not the "
            f"registered {view.process_start_time!r}: the number was reused",
        )
    if probe.alive:
        # Absolute: even across a boot boundary an occupied pid is not argued away.
        return (REASON_PID_ALIVE, f"recorded pid {view.pid} is still running")
    if view.liveness.heartbeat_fresh is not False:
        return (REASON_HEARTBEAT_FRESH, "heartbeat has not expired under its TTL")
    if view.ownership_state != OWNERSHIP_STALE:
        return (
            REASON_AMBIGUOUS_OWNERSHIP,
            f"ownership state is {view.ownership_state!r}, not 'stale'",
        )
    if not view.repository_binding or view.foreign_repository:
        return (
            REASON_FOREIGN_REPOSITORY,
            "repository binding is absent or not the canonical repository",
        )
    shared = sorted(
        f"{name}={value}" for name, value in _conflict_keys(view) & context.ambiguous_keys
    )
    if shared:
        return (
            REASON_CONFLICTING_IDENTITY,
            f"identity evidence is shared with a live or unprobeable worker: {shared}",
        )
    hits = _protected_hits(view, context.owners)
    if hits:
        return (
            REASON_PROTECTED_OWNER,
            f"worker still owns active workflow state: {hits}",
        )
    slot = (view.client_instance_id or "", view.namespace or "")
    if slot in context.contested_slots:
        return (
            REASON_INSTANCE_CONFLICT,
            f"another active row claims instance {view.client_instance_id!r} in "
            f"namespace {view.namespace!r} and may be running",
        )
    return _identity_proof(view, context.fencing)


def _protected_hits(view: WorkerView, owners: ProtectedOwners) -> list[str]:
    hits: list[str] = []
    if view.worker_identity and view.worker_identity in owners.worker_identities:
        hits.append(f"worker_identity={view.worker_identity}")
    if view.session_id and view.session_id in owners.session_ids:
        hits.append(f"session_id={view.session_id}")
    if view.pid is not None and view.pid in owners.pids:
        hits.append(f"pid={view.pid}")
    return hits
