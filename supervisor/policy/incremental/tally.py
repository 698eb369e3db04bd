"""Fleet counts kept current row by row: a read reclassifies only what changed since the last."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from supervisor.policy.evidence import EvidenceMap, PidEvidence, row_pid
from supervisor.policy.fleet.orphans import client_candidate, orphan_of
from supervisor.policy.fleet.worker_view import build_worker_view
from supervisor.policy.incremental.row_columns import changed_positions
from supervisor.policy.retirement.freshness import FOREVER, epoch_us, fresh_until
from supervisor.policy.stamps import parse_stamp

__all__ = ["Bucket", "FleetTally", "TallyCounts", "classify_row"]

Row = Mapping[str, Any]
#: (status, ownership_state, namespace or "") of an active row: one gauge series.
Bucket = tuple[str, str, str]

#: Expired heap entries beyond this many per tracked row (plus a floor): rebuild the heap.
_HEAP_SLACK = 2
_HEAP_FLOOR = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class TallyCounts:
    """Active rows by bucket, the historical rows among those given, and the orphaned ones."""

    workers: Mapping[Bucket, int]
    historical: int
    orphaned: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RowClass:
    """What one row adds to the counts at one instant, and until when that holds."""

    #: None for a historical (terminal) row.
    bucket: Bucket | None
    orphan: bool
    #: The pids whose evidence the class read (the worker's and its launching client's).
    pids: tuple[int, ...]
    #: Epoch microseconds at which the heartbeat stops being fresh; None when time
    #: cannot change the class (no fresh heartbeat now, or a TTL that never ends).
    until_us: int | None


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
    bucket = None if view.historical else (view.status, view.ownership_state, view.namespace or "")
    client = client_candidate(row, current_host_id)
    worker = row_pid(row)
    until: int | None = None
    if not view.historical and view.liveness.heartbeat_fresh:
        # Fresh now, stale from this instant on (without any write): the one way time
        # moves a row between buckets, since an age only grows.
        beat = parse_stamp(row.get("last_heartbeat_at"))
        if beat is not None:
            edge = fresh_until(epoch_us(beat), view.liveness.heartbeat_ttl_seconds)
            until = None if edge >= FOREVER else edge
    return RowClass(
        bucket=bucket,
        orphan=orphan_of(row, client, evidence) is not None,
        pids=tuple(sorted({p for p in (worker, client) if p is not None})),
        until_us=until,
    )


@dataclass(slots=True)
class _Entry:
    row: Row
    cls: RowClass
    #: Which push onto the expiry heap is this entry's current one.
    seq: int


class FleetTally:
    """``count_fleet_rows`` of the rows, kept between reads instead of recomputed.

    Rows follow the store's ``RowVersions`` contract: a new row version is a new
    mapping and none is edited in place, so an unchanged row is the very object the
    last read saw. A read reclassifies only rows that are new, rows whose pid
    evidence is a different object than last time (``ProbeNow`` hands out the same
    object for unchanged evidence), and rows whose heartbeat went stale since the
    last read; those wait on a heap ordered by the instant they stop being fresh,
    since a row crosses its TTL without any write. Everything else is a pointer
    comparison. The counts equal a full classification of the same rows, evidence
    and ``now`` at every read (tests/unit/policy/test_fleet_tally.py).
    """

    __slots__ = (
        "_by_pid",
        "_context",
        "_entries",
        "_heap",
        "_historical",
        "_now_us",
        "_orphaned",
        "_rows",
        "_seen",
        "_seq",
        "_workers",
    )

    def __init__(self) -> None:
        self._context: tuple[str | None, str | None] | None = None
        self._reset()

    def _reset(self) -> None:
        self._rows: list[Row] = []
        self._entries: dict[int, _Entry] = {}
        # Pid -> keys of the rows whose class read its evidence.
        self._by_pid: dict[int, set[int]] = {}
        # Pid -> the evidence object each tracked pid had at the last read.
        self._seen: dict[int, PidEvidence | None] = {}
        self._heap: list[tuple[int, int, int]] = []
        self._seq = 0
        self._now_us: int | None = None
        self._workers: dict[Bucket, int] = {}
        self._historical = 0
        self._orphaned = 0

    def count(
        self,
        rows: Sequence[Row],
        *,
        now: datetime,
        evidence: EvidenceMap,
        current_host_id: str | None,
        canonical_repository: str | None,
    ) -> TallyCounts:
        """The counts of ``rows`` at ``now``; reuses what the last read classified."""
        context = (current_host_id, canonical_repository)
        now_us = epoch_us(now)
        if context != self._context or (self._now_us is not None and now_us < self._now_us):
            # Another host or repository, or time stepped back (a stale row could be
            # fresh again): nothing kept holds, so start over.
            self._reset()
            self._context = context
        gone, added = self._row_changes(rows)
        if gone is None:
            return _count_once(rows, now, evidence, context)
        for key in gone:
            self._drop(key)
        dirty = self._evidence_changes(evidence)
        dirty.update(self._expired(now_us))
        judge = _Judge(now, evidence, context)
        for key in dirty:
            entry = self._entries.get(key)
            if entry is not None:
                self._drop(key)
                self._add(entry.row, judge(entry.row), evidence)
        for row in added:
            self._add(row, judge(row), evidence)
        self._rows = list(rows)
        self._now_us = now_us
        if len(self._heap) > _HEAP_SLACK * len(self._entries) + _HEAP_FLOOR:
            self._compact()
        return TallyCounts(
            workers=dict(self._workers), historical=self._historical, orphaned=self._orphaned
        )

    # --- what changed ----------------------------------------------------------------

    def _row_changes(self, rows: Sequence[Row]) -> tuple[list[int] | None, list[Row]]:
        """Keys of the tracked rows no longer given, and the rows not tracked yet;
        ``(None, [])`` when ``rows`` holds one object twice (nothing can be kept then)."""
        old = self._rows
        if len(rows) == len(old):
            positions = changed_positions(rows, old)
            was = {id(old[i]): old[i] for i in positions}
            new = {id(rows[i]): rows[i] for i in positions}
            if len(new) != len(positions):
                return None, []
        else:
            was = {id(row): row for row in old}
            new = {id(row): row for row in rows}
            if len(new) != len(rows):
                return None, []
        # A row that only moved (rows were inserted or removed before it) stays as it is.
        moved = was.keys() & new.keys()
        gone = [key for key in was if key not in moved]
        added = [row for key, row in new.items() if key not in moved]
        entries = self._entries
        gone_set = set(gone)
        if any(id(row) in entries and id(row) not in gone_set for row in added):
            return None, []
        return gone, added

    def _evidence_changes(self, evidence: EvidenceMap) -> set[int]:
        """Keys of the rows whose pids' evidence is not the object it was at the last read."""
        dirty: set[int] = set()
        seen = self._seen
        for pid, keys in self._by_pid.items():
            current = evidence.get(pid)
            if current is not seen.get(pid):
                seen[pid] = current
                dirty.update(keys)
        return dirty

    def _expired(self, now_us: int) -> list[int]:
        """Keys of the rows whose heartbeat stopped being fresh by ``now_us``."""
        heap, entries = self._heap, self._entries
        due: list[int] = []
        while heap and heap[0][0] <= now_us:
            _, seq, key = heapq.heappop(heap)
            entry = entries.get(key)
            if entry is not None and entry.seq == seq:
                due.append(key)
        return due

    # --- bookkeeping -----------------------------------------------------------------

    def _add(self, row: Row, cls: RowClass, evidence: EvidenceMap) -> None:
        key = id(row)
        self._seq += 1
        self._entries[key] = _Entry(row=row, cls=cls, seq=self._seq)
        if cls.bucket is None:
            self._historical += 1
        else:
            self._workers[cls.bucket] = self._workers.get(cls.bucket, 0) + 1
        self._orphaned += cls.orphan
        for pid in cls.pids:
            # The evidence this class was judged on, so the next read sees what changed.
            self._seen[pid] = evidence.get(pid)
            keys = self._by_pid.get(pid)
            if keys is None:
                self._by_pid[pid] = {key}
            else:
                keys.add(key)
        if cls.until_us is not None:
            heapq.heappush(self._heap, (cls.until_us, self._seq, key))

    def _drop(self, key: int) -> None:
        cls = self._entries.pop(key).cls
        if cls.bucket is None:
            self._historical -= 1
        else:
            left = self._workers[cls.bucket] - 1
            if left:
                self._workers[cls.bucket] = left
            else:
                del self._workers[cls.bucket]
        self._orphaned -= cls.orphan
        for pid in cls.pids:
            keys = self._by_pid[pid]
            keys.discard(key)
            if not keys:
                del self._by_pid[pid]
                self._seen.pop(pid, None)

    def _compact(self) -> None:
        entries = self._entries
        self._heap = [
            item
            for item in self._heap
            if (e := entries.get(item[2])) is not None and e.seq == item[1]
        ]
        heapq.heapify(self._heap)


class _Judge:
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


def _count_once(
    rows: Sequence[Row],
    now: datetime,
    evidence: EvidenceMap,
    context: tuple[str | None, str | None],
) -> TallyCounts:
    """Every row classified afresh, nothing kept (rows that break the one-object contract)."""
    judge = _Judge(now, evidence, context)
    workers: dict[Bucket, int] = {}
    historical = orphaned = 0
    for row in rows:
        cls = judge(row)
        if cls.bucket is None:
            historical += 1
        else:
            workers[cls.bucket] = workers.get(cls.bucket, 0) + 1
        orphaned += cls.orphan
    return TallyCounts(workers=workers, historical=historical, orphaned=orphaned)
