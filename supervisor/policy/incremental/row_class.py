"""One row's part in the fleet counts: its gauge bucket, orphan flag and freshness edge."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from supervisor.policy.evidence import EvidenceMap, row_pid
from supervisor.policy.fleet.liveness import STATUS_ACTIVE, ttl_seconds
from supervisor.policy.fleet.orphans import client_candidate, orphan_of
from supervisor.policy.fleet.worker_view import build_worker_view, ownership_state
from supervisor.policy.retirement.freshness import FOREVER, epoch_us, fresh_until
from supervisor.policy.stamps import parse_stamp

__all__ = ["STAMP", "Bucket", "Judge", "RowClass", "classify_row", "restamp", "row_pids"]

Row = Mapping[str, Any]
#: (status, ownership_state, namespace or "") of an active row: one gauge series.
Bucket = tuple[str, str, str]
STAMP = "last_heartbeat_at"


@dataclass(frozen=True, slots=True, kw_only=True)
class RowClass:
    """What one row adds to the counts at one instant, and until when that holds."""

    #: The row judged (kept here, not beside: ten thousand of these are kept).
    row: Row
    #: None for a historical (terminal) row.
    bucket: Bucket | None
    orphan: bool
    #: Epoch microseconds at which the heartbeat stops being fresh; None when time
    #: cannot change the class (no fresh heartbeat now, or a TTL that never ends).
    until_us: int | None
    # What the class read besides the row's own columns, so a new stamp is judged
    # without the evidence or a view (``restamp``): the pid is known dead here, and
    # the session and trust (a whole view to rebuild).
    dead: bool
    session: bool
    trusted: bool


def row_pids(row: Row, current_host_id: str | None) -> tuple[int, ...]:
    """The pids whose evidence a row's class reads: an active row's own and its client's."""
    if str(row.get("status") or "") != STATUS_ACTIVE:
        return ()
    pids = {row_pid(row), client_candidate(row, current_host_id)}
    return tuple(sorted(p for p in pids if p is not None))


#: One tuple per distinct bucket, shared by every row in it (ten thousand rows use a few).
_BUCKETS: dict[Bucket, Bucket] = {}
_MAX_BUCKETS = 4096


def _bucket(status: str, ownership: str, namespace: str | None) -> Bucket:
    bucket = (status, ownership, namespace or "")
    shared = _BUCKETS.get(bucket)
    if shared is not None:
        return shared
    if len(_BUCKETS) < _MAX_BUCKETS:  # namespaces come from rows, and rows are input
        _BUCKETS[bucket] = bucket
    return bucket


def _us(moment: datetime | None) -> int | None:
    return None if moment is None else epoch_us(moment)


def _until(beat_us: int | None, ttl: float | None, now_us: int) -> int | None:
    """When a stamp fresh at ``now_us`` stops being fresh (None: not fresh, or never stale)."""
    edge = fresh_until(beat_us, ttl)
    return edge if now_us < edge < FOREVER else None


def classify_row(
    row: Row,
    *,
    now: datetime,
    evidence: EvidenceMap,
    current_host_id: str | None,
    canonical_repository: str | None,
) -> RowClass:
    """The row's gauge bucket and orphan flag, as ``build_worker_view`` and ``orphan_of``
    judge them; pure and deterministic for the same row, evidence and ``now``."""
    view = build_worker_view(
        row,
        now=now,
        evidence=evidence,
        current_host_id=current_host_id,
        canonical_repository=canonical_repository,
    )
    liveness = view.liveness
    bucket = None if view.historical else _bucket(view.status, view.ownership_state, view.namespace)
    # Fresh now, stale from ``until_us`` on (without any write): the one way time moves
    # a row between buckets, since an age only grows.
    until = None
    if not view.historical and liveness.heartbeat_fresh:
        beat_us = _us(parse_stamp(row.get(STAMP)))
        until = _until(beat_us, liveness.heartbeat_ttl_seconds, epoch_us(now))
    return RowClass(
        row=row,
        bucket=bucket,
        orphan=orphan_of(row, client_candidate(row, current_host_id), evidence) is not None,
        until_us=until,
        dead=liveness.pid_alive is False,
        session=bool(view.session_id),
        trusted=view.identity.trusted,
    )


def restamp(cls: RowClass, row: Row, now_us: int) -> RowClass:
    """``classify_row`` of a row that differs from the one ``cls`` was judged on only in
    its stamp, with the same evidence (the liveness and ownership rules, on integers)."""
    if cls.bucket is None:
        return replace(cls, row=row)
    beat_us = _us(parse_stamp(row.get(STAMP)))
    ttl = ttl_seconds(row)
    until = _until(beat_us, ttl, now_us)
    fresh = until is not None or fresh_until(beat_us, ttl) >= FOREVER
    live = fresh and not cls.dead
    status, _, namespace = cls.bucket
    started = _us(parse_stamp(row.get("started_at")))
    ownership = ownership_state(
        historical=False,
        live=live,
        contradicting=started is None or (beat_us is not None and started > beat_us),
        session=cls.session,
        trusted=cls.trusted,
    )
    return RowClass(
        row=row,
        bucket=_bucket(status, ownership, namespace),
        orphan=cls.orphan,
        until_us=until,
        dead=cls.dead,
        session=cls.session,
        trusted=cls.trusted,
    )


class Judge:
    """``classify_row`` with one read's arguments bound."""

    __slots__ = ("_context", "_evidence", "_now")

    def __init__(
        self, now: datetime, evidence: EvidenceMap, context: tuple[str | None, str | None]
    ) -> None:
        self._now, self._evidence, self._context = now, evidence, context

    def __call__(self, row: Row) -> RowClass:
        return classify_row(
            row,
            now=self._now,
            evidence=self._evidence,
            current_host_id=self._context[0],
            canonical_repository=self._context[1],
        )
