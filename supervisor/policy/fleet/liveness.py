"""Liveness of one registration: heartbeat freshness, withdrawn (never granted) by a dead pid."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from supervisor.policy.canonical import canon
from supervisor.policy.stamps import parse_stamp

__all__ = [
    "STATUS_ACTIVE",
    "STATUS_RELEASED",
    "STATUS_RETIRED",
    "STATUS_SUPERSEDED",
    "TERMINAL_STATUSES",
    "Liveness",
    "assess_liveness",
    "pid_evidence_applies",
    "ttl_seconds",
]

STATUS_ACTIVE = "active"
STATUS_RELEASED = "released"
STATUS_SUPERSEDED = "superseded"
STATUS_RETIRED = "retired"
TERMINAL_STATUSES = frozenset({STATUS_RELEASED, STATUS_SUPERSEDED, STATUS_RETIRED})


@dataclass(frozen=True, slots=True, kw_only=True)
class Liveness:
    """Point-in-time liveness of one row and the evidence it rests on."""

    live: bool
    active: bool
    heartbeat_fresh: bool | None
    heartbeat_age_seconds: float | None
    heartbeat_ttl_seconds: float | None
    pid_alive: bool | None
    pid_evidence_local: bool
    reason: str


def ttl_seconds(row: Mapping[str, Any]) -> float | None:
    """The row's heartbeat TTL, or ``None`` when it is missing or nonsensical."""
    raw = row.get("heartbeat_ttl_seconds")
    if isinstance(raw, bool) or raw is None:
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    if math.isnan(value) or math.isinf(value) or value <= 0:
        return None
    return value


def pid_evidence_applies(row: Mapping[str, Any], current_host_id: str | None) -> bool:
    """Whether a local pid probe speaks for this row.

    A row bound to another machine names a pid on that machine; probing the
    same number here answers a question nobody asked. Rows that record no host
    (legacy) cannot be proven foreign, so the local answer is taken as given.
    """
    recorded = canon(row.get("host_id")).strip()
    if not recorded or not current_host_id:
        return True
    return recorded == current_host_id


def assess_liveness(
    row: Mapping[str, Any],
    *,
    now: datetime,
    pid_alive: bool | None,
    current_host_id: str | None = None,
) -> Liveness:
    """Live means: status active, heartbeat younger than its TTL, and the pid not known dead."""
    active = str(row.get("status") or "") == STATUS_ACTIVE
    local = pid_evidence_applies(row, current_host_id)
    effective_pid = pid_alive if local else None
    ttl = ttl_seconds(row)
    beat = parse_stamp(row.get("last_heartbeat_at"))
    age: float | None = None
    fresh: bool | None = None
    if beat is not None:
        age = (now - beat).total_seconds()
        if ttl is not None:
            fresh = age < ttl
    if not active:
        reason = "registration is not active"
    elif beat is None:
        reason = "last heartbeat is missing or unparsable"
    elif fresh is None:
        reason = "heartbeat TTL is missing or invalid"
    elif not fresh:
        reason = "heartbeat expired"
    elif effective_pid is False:
        reason = "pid is known dead"
    else:
        reason = "heartbeat fresh"
    live = active and fresh is True and effective_pid is not False
    return Liveness(
        live=live,
        active=active,
        heartbeat_fresh=fresh,
        heartbeat_age_seconds=age,
        heartbeat_ttl_seconds=ttl,
        pid_alive=effective_pid,
        pid_evidence_local=local,
        reason=reason,
    )
