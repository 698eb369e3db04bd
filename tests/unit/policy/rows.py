"""Synthetic registry rows, pid evidence and plan helpers shared by the policy tests.

Every default row is a conclusive stale orphan under ``FENCE``: trusted
instance (unique per identity), expired heartbeat, fenced on this host and
boot, bound to the canonical repository. Tests change one thing at a time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from supervisor.policy.evidence import PidEvidence, row_pid
from supervisor.policy.retirement.plan import FencingContext, ProtectedOwners, RetirementPlan
from supervisor.policy.retirement.planner import plan_retirement
from supervisor.policy.stamps import format_stamp

__all__ = [
    "BOOT",
    "FENCE",
    "FRESH_AGE",
    "HOST",
    "NOW",
    "OTHER_BOOT",
    "OTHER_HOST",
    "REPO",
    "STALE_AGE",
    "TTL",
    "ago",
    "all_dead",
    "live_row",
    "make_plan",
    "probes",
    "reason_of",
    "row",
    "start_of",
    "trusted_instance",
]

NOW = datetime(2026, 7, 30, 7, 0, 0, tzinfo=UTC)
TTL = 900
STALE_AGE = 7200.0
FRESH_AGE = 30.0
REPO = "/srv/fleet/canonical-repo"
HOST = "host-alpha"
OTHER_HOST = "host-beta"
BOOT = "boot-0002"
OTHER_BOOT = "boot-0001"
FENCE = FencingContext(host_id=HOST, boot_id=BOOT)


def ago(seconds: float, *, now: datetime = NOW) -> str:
    """The registry stamp ``seconds`` before ``now``."""
    return format_stamp(now - timedelta(seconds=seconds))


def trusted_instance(label: str, client: str = "codex") -> str:
    """A launcher-format instance id, distinct per label."""
    digest = hashlib.sha256(label.encode()).hexdigest()[:12]
    return f"inst-{client}-20260730T060000Z-{digest}"


def start_of(pid: int) -> str:
    """The recorded incarnation token of a default row with this pid."""
    return f"ticks-{pid}"


def row(
    identity: str,
    *,
    pid: int | None,
    age: float = STALE_AGE,
    status: str | None = "active",
    namespace: str | None = "author",
    **overrides: Any,
) -> dict[str, Any]:
    """One full ``worker_registrations`` row; ``overrides`` replace columns by name."""
    record: dict[str, Any] = {
        "worker_identity": identity,
        "client_name": "codex",
        "client_instance_id": trusted_instance(identity),
        "session_id": f"sess-{identity}",
        "generation_id": f"gen-{identity}",
        "role": namespace,
        "profile": f"fleet-{namespace}",
        "namespace": namespace,
        "remote": "origin",
        "repository_binding": REPO,
        "pid": pid,
        "process_identity": f"proc-{identity}",
        "transport": "stdio",
        "token_fingerprint": "tok-aaaa",
        "started_at": ago(STALE_AGE + 3600),
        "last_heartbeat_at": ago(age),
        "heartbeat_ttl_seconds": TTL,
        "fencing_epoch": 1,
        "status": status,
        "fleet_run_id": "run-1",
        "authenticated_account": "synthetic-user",
        "instance_id_provenance": "trusted_launcher",
        "startup_revision": "rev-1",
        "loaded_revision": "rev-1",
        "parity_revision": "rev-1",
        "live_revision": "rev-1",
        "host_id": HOST,
        "boot_id": BOOT,
        "process_start_time": start_of(pid) if pid is not None else None,
        "retired_at": None,
        "retired_by": None,
        "retirement_reason": None,
        "released_at": None,
    }
    record.update(overrides)
    return record


def live_row(identity: str, *, pid: int, **overrides: Any) -> dict[str, Any]:
    """A row with a fresh heartbeat (live when its pid is alive or unknown)."""
    return row(identity, pid=pid, age=FRESH_AGE, **overrides)


def probes(
    *,
    dead: Iterable[int] = (),
    alive: Iterable[int] = (),
    reused: Iterable[int] = (),
    unknown: Iterable[int] = (),
) -> dict[int, PidEvidence]:
    """Evidence by pid: ``alive`` keeps the registered incarnation, ``reused`` does not."""
    out: dict[int, PidEvidence] = {}
    for pid in dead:
        out[pid] = PidEvidence(alive=False, start_time=None)
    for pid in alive:
        out[pid] = PidEvidence(alive=True, start_time=start_of(pid))
    for pid in reused:
        out[pid] = PidEvidence(alive=True, start_time=f"other-{pid}")
    for pid in unknown:
        out[pid] = PidEvidence(alive=None, start_time=None)
    return out


def all_dead(rows: Iterable[Mapping[str, Any]]) -> dict[int, PidEvidence]:
    """Every pid named by the rows probes dead."""
    return probes(dead=[pid for r in rows if (pid := row_pid(r)) is not None])


def make_plan(
    rows: Sequence[Mapping[str, Any]],
    *,
    evidence: Mapping[int, PidEvidence] | None = None,
    fencing: FencingContext = FENCE,
    protected: ProtectedOwners | None = None,
    now: datetime = NOW,
    repo: str | None = REPO,
) -> RetirementPlan:
    """``plan_retirement`` with the fixture defaults (every pid dead unless told)."""
    return plan_retirement(
        rows,
        now=now,
        evidence=all_dead(rows) if evidence is None else evidence,
        fencing=fencing,
        canonical_repository=repo,
        protected=protected,
    )


def reason_of(plan: RetirementPlan, identity: str) -> str:
    """The reason code the plan gave one identity (fails loudly if absent)."""
    entry = plan.reason_for(identity)
    assert entry is not None, f"{identity!r} not in plan"
    return entry.reason_code
