"""Per-row view of a registration: liveness, identity trust, ownership state, mutation safety."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from supervisor.policy.canonical import canon
from supervisor.policy.evidence import EvidenceMap, evidence_for, row_pid
from supervisor.policy.identity.instance import (
    UNKNOWN_CLIENT,
    InstanceIdentity,
    assess_instance_identity,
    normalize_client_name,
)
from supervisor.policy.stamps import parse_stamp

from .liveness import STATUS_ACTIVE, Liveness, assess_liveness

__all__ = [
    "OWNERSHIP_HISTORICAL",
    "OWNERSHIP_INCONSISTENT",
    "OWNERSHIP_LIVE",
    "OWNERSHIP_LIVE_UNTRUSTED",
    "OWNERSHIP_ORPHANED",
    "OWNERSHIP_STALE",
    "REVISION_COLUMNS",
    "WorkerView",
    "build_worker_view",
    "process_identity",
    "self_contradicting",
]

OWNERSHIP_HISTORICAL = "historical"
OWNERSHIP_LIVE = "live"
OWNERSHIP_STALE = "stale"
OWNERSHIP_LIVE_UNTRUSTED = "live_untrusted_identity"
OWNERSHIP_ORPHANED = "orphaned"
#: Not live, but the record contradicts itself (its start is unreadable or
#: later than its last heartbeat), so nobody can say whose row it was.
OWNERSHIP_INCONSISTENT = "inconsistent_record"

REVISION_COLUMNS = ("startup_revision", "loaded_revision", "parity_revision", "live_revision")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerView:
    """What the snapshot and the planner know about one row at one instant."""

    worker_identity: str | None
    client_type: str
    client_instance_id: str | None
    fleet_run_id: str | None
    namespace: str | None
    profile: str | None
    role: str | None
    session_id: str | None
    generation_id: str | None
    fencing_epoch: Any
    process_identity: str | None
    pid: int | None
    host_id: str | None
    boot_id: str | None
    process_start_time: str | None
    repository_binding: str | None
    status: str
    last_heartbeat_at: Any
    identity: InstanceIdentity
    liveness: Liveness
    live: bool
    historical: bool
    stale: bool
    ownership_state: str
    foreign_repository: bool
    old_revision: bool
    restart_required: bool
    mutation_safe: bool


def _text(row: Mapping[str, Any], name: str) -> str | None:
    text = canon(row.get(name)).strip()
    return text or None


def process_identity(row: Mapping[str, Any]) -> str | None:
    """The recorded process identity, or ``pid-<n>`` when only the pid is known."""
    explicit = _text(row, "process_identity")
    if explicit:
        return explicit
    pid = row_pid(row)
    return f"pid-{pid}" if pid is not None else None


def self_contradicting(row: Mapping[str, Any]) -> bool:
    """The start is unreadable or later than the last heartbeat."""
    started = parse_stamp(row.get("started_at"))
    beat = parse_stamp(row.get("last_heartbeat_at"))
    return started is None or (beat is not None and started > beat)


def _same_repository(binding: str, canonical: str) -> bool:
    return binding.rstrip("/") == canonical.rstrip("/")


def build_worker_view(
    row: Mapping[str, Any],
    *,
    now: datetime,
    evidence: EvidenceMap,
    current_host_id: str | None = None,
    canonical_repository: str | None = None,
    expected_live_revision: str | None = None,
) -> WorkerView:
    """Classify one row; pure and deterministic for the same row, evidence and ``now``."""
    status = str(row.get("status") or "")
    identity = assess_instance_identity(row.get("client_instance_id"))
    pid_alive = evidence_for(row, evidence).alive
    liveness = assess_liveness(row, now=now, pid_alive=pid_alive, current_host_id=current_host_id)
    historical = status != STATUS_ACTIVE
    live = liveness.live and not historical
    client_type = normalize_client_name(row.get("client_name") or row.get("client_type"))
    binding = _text(row, "repository_binding")
    foreign = bool(
        canonical_repository and binding and not _same_repository(binding, canonical_repository)
    )
    old_revision = bool(expected_live_revision) and any(
        (rev := _text(row, column)) is not None and rev != expected_live_revision
        for column in REVISION_COLUMNS
    )
    session_id = _text(row, "session_id")
    if historical:
        ownership = OWNERSHIP_HISTORICAL
    elif not live:
        ownership = OWNERSHIP_INCONSISTENT if self_contradicting(row) else OWNERSHIP_STALE
    elif not session_id:
        ownership = OWNERSHIP_ORPHANED
    elif not identity.trusted:
        ownership = OWNERSHIP_LIVE_UNTRUSTED
    else:
        ownership = OWNERSHIP_LIVE
    mutation_safe = (
        ownership == OWNERSHIP_LIVE
        and not foreign
        and not old_revision
        and client_type != UNKNOWN_CLIENT
    )
    return WorkerView(
        worker_identity=_text(row, "worker_identity"),
        client_type=client_type,
        client_instance_id=identity.client_instance_id,
        fleet_run_id=_text(row, "fleet_run_id"),
        namespace=_text(row, "namespace"),
        profile=_text(row, "profile"),
        role=_text(row, "role"),
        session_id=session_id,
        generation_id=_text(row, "generation_id"),
        fencing_epoch=row.get("fencing_epoch"),
        process_identity=process_identity(row),
        pid=row_pid(row),
        host_id=_text(row, "host_id"),
        boot_id=_text(row, "boot_id"),
        process_start_time=_text(row, "process_start_time"),
        repository_binding=binding,
        status=status,
        last_heartbeat_at=row.get("last_heartbeat_at"),
        identity=identity,
        liveness=liveness,
        live=live,
        historical=historical,
        stale=not live and not historical,
        ownership_state=ownership,
        foreign_repository=foreign,
        old_revision=old_revision,
        restart_required=old_revision,
        mutation_safe=mutation_safe,
    )
