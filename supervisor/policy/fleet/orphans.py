"""Workers that outlive the client that launched them: a finding, never a retirement."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from supervisor.policy.canonical import canon
from supervisor.policy.evidence import UNKNOWN, EvidenceMap, row_pid
from supervisor.policy.flat import flat, flat_dict
from supervisor.policy.incarnation import same_incarnation

from .liveness import STATUS_ACTIVE

__all__ = [
    "REASON_CLIENT_EXITED",
    "REASON_CLIENT_PID_REUSED",
    "OrphanFinding",
    "client_candidate",
    "client_pids",
    "find_orphans",
    "orphan_dict",
]

#: The launching client's pid is not running on this host any more.
REASON_CLIENT_EXITED = "launching_client_exited"
#: The pid runs, but as another process: the client that launched the worker is gone.
REASON_CLIENT_PID_REUSED = "launching_client_pid_reused"


@dataclass(frozen=True, slots=True, kw_only=True)
class OrphanFinding:
    worker_identity: str
    namespace: str | None
    client_instance_id: str | None
    pid: int | None
    client_pid: int
    reason_code: str
    detail: str


def _client_pid(row: Mapping[str, Any]) -> int | None:
    return row_pid({"pid": row.get("client_pid")})


def client_candidate(row: Mapping[str, Any], host_id: str | None) -> int | None:
    """The client pid this host's probes can speak for, on an active row; else None."""
    # Most rows were not launched through the sidecar: settle those with one lookup.
    if row.get("client_pid") is None:
        return None
    if canon(row.get("status")) != STATUS_ACTIVE or not host_id:
        return None
    if canon(row.get("host_id")) != host_id:
        return None  # another machine's pid numbers mean nothing here
    return _client_pid(row)


def client_pids(rows: Iterable[Mapping[str, Any]], *, current_host_id: str | None) -> set[int]:
    """The launching-client pids to probe for ``find_orphans``."""
    return {pid for row in rows if (pid := client_candidate(row, current_host_id)) is not None}


def find_orphans(
    rows: Sequence[Mapping[str, Any]],
    *,
    evidence: EvidenceMap,
    current_host_id: str | None,
    clients: Sequence[int | None] | None = None,
) -> tuple[OrphanFinding, ...]:
    """Active rows of this host whose launching client is gone, in identity order.

    A worker already known dead is left to the retirement plan (it is stale, not an
    orphan), and a client that cannot be probed is not called gone: unknown is never
    treated as an answer. ``clients``, when given, is ``client_candidate`` of each
    row (a caller that keeps it between calls passes it in).
    """
    if clients is None:
        clients = [client_candidate(row, current_host_id) for row in rows]
    found: list[OrphanFinding] = []
    for row, client in zip(rows, clients, strict=True):
        if client is None:
            continue
        worker_pid = row_pid(row)
        if worker_pid is not None and evidence.get(worker_pid, UNKNOWN).alive is False:
            continue
        seen = evidence.get(client, UNKNOWN)
        recorded = canon(row.get("client_process_start_time")) or None
        if seen.alive is False:
            reason = REASON_CLIENT_EXITED
            detail = f"launching client pid {client} is not running"
        elif (
            seen.alive
            and recorded
            and seen.start_time
            and not same_incarnation(seen.start_time, recorded)
        ):
            reason = REASON_CLIENT_PID_REUSED
            detail = (
                f"pid {client} now runs another process (start {seen.start_time!r}, "
                f"the client's was {recorded!r})"
            )
        else:
            continue
        found.append(
            OrphanFinding(
                worker_identity=canon(row.get("worker_identity")),
                namespace=canon(row.get("namespace")) or None,
                client_instance_id=canon(row.get("client_instance_id")) or None,
                pid=worker_pid,
                client_pid=client,
                reason_code=reason,
                detail=detail,
            )
        )
    return tuple(sorted(found, key=lambda f: f.worker_identity))


_ORPHAN = flat(OrphanFinding)


def orphan_dict(finding: OrphanFinding) -> dict[str, Any]:
    return flat_dict(_ORPHAN, finding)
