"""Host leases: renewing this host's lease, and planning the retirement of a dead host's rows."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from supervisor.policy.canonical import canon, digest, serialize
from supervisor.policy.stamps import format_stamp, parse_stamp

from .fingerprints import candidate_fingerprint
from .reasons import REASON_ALREADY_TERMINAL, REASON_PROTECTED_OWNER

__all__ = [
    "HOST_FIELDS",
    "REASON_HOST_ALREADY_TERMINAL",
    "REASON_HOST_ID_IN_USE",
    "REASON_HOST_IS_LOCAL",
    "REASON_HOST_LEASE_EXPIRED",
    "REASON_HOST_LEASE_LIVE",
    "REASON_HOST_LEASE_RECENT",
    "REASON_HOST_LEASE_UNKNOWN",
    "REASON_HOST_PROTECTED_OWNER",
    "HostEntry",
    "HostRetirementPlan",
    "Renewal",
    "host_refusal",
    "host_token",
    "lease_owner_keys",
    "plan_host_retirement",
    "renew",
]

#: The reason a dead host's row is retired with: distinct from ``eligible_stale_orphan``,
#: because no pid of that host was probed; the evidence is its supervisor's silence.
REASON_HOST_LEASE_EXPIRED = "host_lease_expired"
#: Refusals for the whole host.
REASON_HOST_IS_LOCAL = "host_is_local"
REASON_HOST_LEASE_UNKNOWN = "host_lease_unknown"
REASON_HOST_LEASE_LIVE = "host_lease_live"
REASON_HOST_LEASE_RECENT = "host_lease_expired_recently"
#: Per-row refusals: the retirement plan's own codes, for the same reasons.
REASON_HOST_ALREADY_TERMINAL = REASON_ALREADY_TERMINAL
REASON_HOST_PROTECTED_OWNER = REASON_PROTECTED_OWNER
#: A renewal refused because another live supervisor holds this host id.
REASON_HOST_ID_IN_USE = "host_id_in_use"

#: What the host token covers: any renewal, reboot or declaration moves it.
HOST_FIELDS: tuple[str, ...] = (
    "host_id",
    "boot_id",
    "supervisor_id",
    "status",
    "epoch",
    "expires_at",
)

_Row = Mapping[str, Any]


def host_token(lease: _Row | None) -> str:
    """Token over one host lease row (``hostfp-…``); a missing row has its own token."""
    units = [] if lease is None else [serialize(lease, HOST_FIELDS)]
    return digest("hostfp-v1", units, "hostfp")


@dataclass(frozen=True, slots=True, kw_only=True)
class Renewal:
    """What the writer does with this host's lease row, and what the supervisor is told.

    ``insert`` or ``changes`` (guarded by ``expected_epoch``/``expected_status``), or
    ``refused`` with a reason. ``declared_dead`` tells the supervisor that another host
    retired this host's rows while it was silent: its workers must register again.
    """

    insert: Mapping[str, Any] | None = None
    changes: Mapping[str, Any] | None = None
    expected_epoch: int = 0
    expected_status: str = ""
    refused: str = ""
    detail: str = ""
    declared_dead: bool = False
    declared_dead_by: str = ""
    retired_rows: int = 0
    epoch: int = 0


def renew(
    existing: _Row | None,
    *,
    host_id: str,
    boot_id: str | None,
    supervisor_id: str,
    now: datetime,
    lease_seconds: float,
) -> Renewal:
    """The renewal of this host's lease at ``now`` (pure: the row in, the decision out)."""
    stamp = format_stamp(now)
    expires = format_stamp(now + timedelta(seconds=lease_seconds))
    if existing is None:
        row = {
            "host_id": host_id,
            "boot_id": boot_id,
            "supervisor_id": supervisor_id,
            "status": "live",
            "epoch": 1,
            "registered_at": stamp,
            "renewed_at": stamp,
            "expires_at": expires,
        }
        return Renewal(insert=row, epoch=1)
    epoch = int(existing.get("epoch") or 0)
    status = str(existing.get("status") or "")
    holder = canon(existing.get("supervisor_id"))
    expiry = parse_stamp(existing.get("expires_at"))
    if status == "live" and holder != supervisor_id and expiry is not None and expiry > now:
        # Two supervisors configured with one host id would vouch for each other's
        # pids; refuse rather than share (the other one keeps its lease).
        return Renewal(
            refused=REASON_HOST_ID_IN_USE,
            detail=f"host {host_id!r} is leased by supervisor {holder} until "
            f"{existing.get('expires_at')}",
            epoch=epoch,
        )
    declared = status == "declared_dead"
    # A new incarnation (declared dead, another supervisor process, another boot) gets a
    # new epoch, so nothing planned against the old one can apply to it.
    new_incarnation = (
        declared or holder != supervisor_id or canon(existing.get("boot_id")) != canon(boot_id)
    )
    changes: dict[str, Any] = {"renewed_at": stamp, "expires_at": expires, "status": "live"}
    if new_incarnation:
        changes |= {
            "epoch": epoch + 1,
            "boot_id": boot_id,
            "supervisor_id": supervisor_id,
            "registered_at": stamp,
            "declared_dead_at": None,
            "declared_dead_by": None,
            "retired_rows": None,
        }
    return Renewal(
        changes=changes,
        expected_epoch=epoch,
        expected_status=status,
        declared_dead=declared,
        declared_dead_by=canon(existing.get("declared_dead_by")) if declared else "",
        retired_rows=int(existing.get("retired_rows") or 0) if declared else 0,
        epoch=epoch + 1 if new_incarnation else epoch,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class HostEntry:
    worker_identity: str
    reason_code: str
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HostRetirementPlan:
    """Read-only plan for one remote host's rows; ``refused`` set means none may go."""

    host_id: str
    host_token: str
    candidate_fingerprint: str
    candidates: tuple[HostEntry, ...]
    preserved: tuple[HostEntry, ...]
    candidate_rows: tuple[_Row, ...]
    refused: str = ""
    detail: str = ""
    lease_expires_at: str = ""


def host_refusal(
    lease: _Row | None, *, host_id: str, local_host_id: str | None, now: datetime, after: float
) -> tuple[str, str]:
    """Why no row of ``host_id`` may be retired now, from its lease alone ("" when none)."""
    if local_host_id is not None and host_id == local_host_id:
        return REASON_HOST_IS_LOCAL, "this host's own rows go through the probing plan"
    if lease is None:
        # A host that never held a lease may run a supervisor that predates leases:
        # its silence proves nothing.
        return REASON_HOST_LEASE_UNKNOWN, f"host {host_id!r} has no lease row"
    expiry = parse_stamp(lease.get("expires_at"))
    if expiry is None:
        return REASON_HOST_LEASE_UNKNOWN, "the host lease has no readable expiry"
    if str(lease.get("status")) == "live" and expiry > now:
        return REASON_HOST_LEASE_LIVE, f"lease renewed until {lease.get('expires_at')}"
    if now - expiry < timedelta(seconds=after):
        retirable = format_stamp(expiry + timedelta(seconds=after))
        return REASON_HOST_LEASE_RECENT, f"lease expired; its rows become retirable at {retirable}"
    return "", ""


def plan_host_retirement(
    rows: Sequence[_Row],
    *,
    host_id: str,
    lease: _Row | None,
    local_host_id: str | None,
    now: datetime,
    retire_after_seconds: float,
    owner_sessions: Collection[str],
    owner_pids: Collection[str],
) -> HostRetirementPlan:
    """Which rows of ``host_id`` may be retired because its supervisor has been silent.

    Only a host whose lease expired at least ``retire_after_seconds`` ago qualifies;
    then its active rows are candidates unless a row's session or pid still owns an
    active work lease. Rows of other hosts are never in the plan.
    """
    refused, detail = host_refusal(
        lease, host_id=host_id, local_host_id=local_host_id, now=now, after=retire_after_seconds
    )
    candidates: list[HostEntry] = []
    preserved: list[HostEntry] = []
    chosen: list[_Row] = []
    for row in sorted(
        (r for r in rows if canon(r.get("host_id")) == host_id),
        key=lambda r: canon(r.get("worker_identity")),
    ):
        identity = canon(row.get("worker_identity"))
        if str(row.get("status")) != "active":
            preserved.append(_entry(identity, REASON_HOST_ALREADY_TERMINAL, f"{row.get('status')}"))
        elif refused:
            preserved.append(_entry(identity, refused, detail))
        elif canon(row.get("session_id")) in owner_sessions or canon(row.get("pid")) in owner_pids:
            preserved.append(
                _entry(identity, REASON_HOST_PROTECTED_OWNER, "holds an active work lease")
            )
        else:
            candidates.append(_entry(identity, REASON_HOST_LEASE_EXPIRED, detail_expired(lease)))
            chosen.append(row)
    return HostRetirementPlan(
        host_id=host_id,
        host_token=host_token(lease),
        candidate_fingerprint=candidate_fingerprint(chosen),
        candidates=tuple(candidates),
        preserved=tuple(preserved),
        candidate_rows=tuple(chosen),
        refused=refused,
        detail=detail,
        lease_expires_at=canon(lease.get("expires_at")) if lease is not None else "",
    )


def lease_owner_keys(leases: Sequence[_Row]) -> tuple[frozenset[str], frozenset[str]]:
    """Session ids and pids (canonical text) that hold the given active work leases."""
    sessions = frozenset(canon(r.get("session_id")) for r in leases if r.get("session_id"))
    pids = frozenset(
        canon(r.get(k)) for r in leases for k in ("owner_pid", "session_pid") if r.get(k)
    )
    return sessions, pids


def detail_expired(lease: _Row | None) -> str:
    expires = lease.get("expires_at") if lease is not None else None
    return f"host supervisor silent; lease expired at {expires}"


def _entry(identity: str, code: str, detail: str) -> HostEntry:
    return HostEntry(worker_identity=identity, reason_code=code, detail=detail)
