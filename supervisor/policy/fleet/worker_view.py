"""Per-row view of a registration: liveness, identity trust, ownership state, mutation safety."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from supervisor.policy.canonical import canon
from supervisor.policy.evidence import EvidenceMap, evidence_for, row_pid
from supervisor.policy.flat import flat
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
    "RowColumns",
    "WorkerView",
    "build_worker_view",
    "foreign_repository",
    "live_ownership",
    "not_live_ownership",
    "process_identity",
    "row_columns",
    "self_contradicting",
    "text_of",
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
class RowColumns:
    """One row's columns, normalized as every reader takes them (``row_columns``)."""

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


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerView(RowColumns):
    """What the snapshot and the planner know about one row at one instant."""

    liveness: Liveness
    live: bool
    historical: bool
    stale: bool
    ownership_state: str
    foreign_repository: bool
    old_revision: bool
    restart_required: bool
    mutation_safe: bool


# Read once: ``fields`` is too slow to call per row of a 10k-row snapshot.
_COLUMN_NAMES, _COLUMN_VALUES = flat(RowColumns)


def text_of(row: Mapping[str, Any], name: str) -> str | None:
    """A column's canonical text, stripped; ``None`` when empty."""
    text = canon(row.get(name)).strip()
    return text or None


def process_identity(row: Mapping[str, Any]) -> str | None:
    """The recorded process identity, or ``pid-<n>`` when only the pid is known."""
    explicit = text_of(row, "process_identity")
    if explicit:
        return explicit
    pid = row_pid(row)
    return f"pid-{pid}" if pid is not None else None


def row_columns(row: Mapping[str, Any]) -> RowColumns:
    """The row's columns as every reader takes them; liveness, judged per instant, is not here."""
    identity = assess_instance_identity(row.get("client_instance_id"))
    return RowColumns(
        worker_identity=text_of(row, "worker_identity"),
        client_type=normalize_client_name(row.get("client_name") or row.get("client_type")),
        client_instance_id=identity.client_instance_id,
        fleet_run_id=text_of(row, "fleet_run_id"),
        namespace=text_of(row, "namespace"),
        profile=text_of(row, "profile"),
        role=text_of(row, "role"),
        session_id=text_of(row, "session_id"),
        generation_id=text_of(row, "generation_id"),
        fencing_epoch=row.get("fencing_epoch"),
        process_identity=process_identity(row),
        pid=row_pid(row),
        host_id=text_of(row, "host_id"),
        boot_id=text_of(row, "boot_id"),
        process_start_time=text_of(row, "process_start_time"),
        repository_binding=text_of(row, "repository_binding"),
        status=str(row.get("status") or ""),
        last_heartbeat_at=row.get("last_heartbeat_at"),
        identity=identity,
    )


def foreign_repository(binding: str | None, canonical_repository: str | None) -> bool:
    """The row is bound to a repository other than the canonical one (trailing ``/`` aside)."""
    return bool(
        canonical_repository and binding and binding.rstrip("/") != canonical_repository.rstrip("/")
    )


def self_contradicting(row: Mapping[str, Any]) -> bool:
    """The start is unreadable or later than the last heartbeat."""
    started = parse_stamp(row.get("started_at"))
    beat = parse_stamp(row.get("last_heartbeat_at"))
    return started is None or (beat is not None and started > beat)


def live_ownership(session_id: str | None, *, trusted: bool) -> str:
    """The ownership state of an active row that is live."""
    if not session_id:
        return OWNERSHIP_ORPHANED
    return OWNERSHIP_LIVE if trusted else OWNERSHIP_LIVE_UNTRUSTED


def not_live_ownership(contradicting: bool) -> str:
    """The ownership state of an active row that is not live."""
    return OWNERSHIP_INCONSISTENT if contradicting else OWNERSHIP_STALE


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
    columns = row_columns(row)
    foreign = foreign_repository(columns.repository_binding, canonical_repository)
    pid_alive = evidence_for(row, evidence).alive
    liveness = assess_liveness(row, now=now, pid_alive=pid_alive, current_host_id=current_host_id)
    historical = columns.status != STATUS_ACTIVE
    live = liveness.live and not historical
    old_revision = bool(expected_live_revision) and any(
        (rev := text_of(row, column)) is not None and rev != expected_live_revision
        for column in REVISION_COLUMNS
    )
    if historical:
        ownership = OWNERSHIP_HISTORICAL
    elif not live:
        ownership = not_live_ownership(self_contradicting(row))
    else:
        ownership = live_ownership(columns.session_id, trusted=columns.identity.trusted)
    mutation_safe = (
        ownership == OWNERSHIP_LIVE
        and not foreign
        and not old_revision
        and columns.client_type != UNKNOWN_CLIENT
    )
    return WorkerView(
        **dict(zip(_COLUMN_NAMES, _COLUMN_VALUES(columns), strict=True)),
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
