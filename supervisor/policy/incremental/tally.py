"""Fleet counts kept current row by row: a read reclassifies only what changed since the last."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import is_, itemgetter
from typing import Any

from supervisor.policy.evidence import EvidenceMap, PidEvidence
from supervisor.policy.incremental.row_class import (
    STAMP,
    Bucket,
    Judge,
    RowClass,
    restamp,
    row_pids,
)
from supervisor.policy.incremental.row_columns import changed_positions
from supervisor.policy.retirement.freshness import epoch_us

__all__ = ["FleetTally", "TallyCounts"]

Row = Mapping[str, Any]
#: Expired heap entries beyond this many per tracked row (plus a floor): rebuild the heap.
_HEAP_SLACK = 2
_HEAP_FLOOR = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class TallyCounts:
    """Active rows by bucket, the historical rows among those given, and the orphaned ones."""

    workers: Mapping[Bucket, int]
    historical: int
    orphaned: int


#: A kept row and its class (a tuple: ten thousand of them are kept).
_Entry = tuple[Row, RowClass]
#: Keys of the rows reading one pid's evidence: one key alone (the common case), or a set.
_Keys = int | set[int]


class FleetTally:
    """``count_fleet_rows`` of the rows, kept between reads instead of recomputed.

    Rows follow the store's ``RowVersions`` contract: a new row version is a new
    mapping and none is edited in place, so an unchanged row is the very object the
    last read saw. A read judges again only rows that are new, rows whose pid
    evidence is another object than last time (``ProbeNow`` hands out the same object
    for unchanged evidence), and rows whose heartbeat went stale since the last read:
    those wait on a heap ordered by the instant they stop being fresh, since a row
    crosses its TTL without any write. A new version that differs only in its stamp
    (a heartbeat; the store copies the row and sets the stamp) is judged from the
    stamp alone. Everything else is a pointer comparison. The counts equal a full
    classification of the same rows, evidence and ``now`` at every read
    (tests/unit/policy/test_fleet_tally.py).

    A read is ``update`` (the rows; returns the pids to probe) then ``count`` (the
    evidence of those pids and ``now``); ``count_rows`` does both. Each row object is
    given once per read (the store's contract too); a repeat found among the rows that
    changed is counted afresh for that read, nothing kept. About 0.4 KB is kept per
    row (4 MB for 10,000).
    """

    __slots__ = (
        "_by_pid",
        "_context",
        "_entries",
        "_getter",
        "_heap",
        "_historical",
        "_keys",
        "_last_evidence",
        "_now_us",
        "_orphaned",
        "_pairs",
        "_pending",
        "_pid_list",
        "_rows",
        "_uncounted",
        "_workers",
    )

    def __init__(self) -> None:
        self._context: tuple[str | None, str | None] = (None, None)
        # The key layout of the last stamp-only check, and the getter of its other values.
        self._keys: set[str] = set()
        self._getter: itemgetter[Any] | None = None
        self._reset()

    def _reset(self) -> None:
        self._rows: list[Row] = []
        self._entries: dict[int, _Entry] = {}
        # Pid -> keys of the rows whose class read its evidence.
        self._by_pid: dict[int, _Keys] = {}
        # The evidence answer of the last read (a copy: callers own theirs). Every kept
        # class was judged on evidence equal to it: a row whose pid's evidence moved
        # since is judged again in the same read.
        self._last_evidence: dict[int, PidEvidence] | None = None
        self._pid_list: tuple[int, ...] | None = None
        # (until_us, key): rows by the instant their heartbeat stops being fresh.
        self._heap: list[tuple[int, int]] = []
        self._now_us: int | None = None
        self._workers: dict[Bucket, int] = {}
        self._historical = 0
        self._orphaned = 0
        # Taken in by ``update``, judged by ``count``: new rows, and (old, new) versions.
        self._pending: list[Row] = []
        self._pairs: list[tuple[Row, Row]] = []
        # Rows that break the one-object contract: counted afresh, nothing kept.
        self._uncounted: Sequence[Row] | None = None

    # --- a read ----------------------------------------------------------------------

    def count_rows(
        self,
        rows: Sequence[Row],
        *,
        now: datetime,
        evidence: EvidenceMap,
        current_host_id: str | None,
        canonical_repository: str | None,
    ) -> TallyCounts:
        """``update`` then ``count``, for a caller that has every pid's evidence at hand."""
        self.update(
            rows, current_host_id=current_host_id, canonical_repository=canonical_repository
        )
        return self.count(now=now, evidence=evidence)

    def update(
        self, rows: Sequence[Row], *, current_host_id: str | None, canonical_repository: str | None
    ) -> tuple[int, ...]:
        """Take in this read's rows; the sorted pids whose evidence ``count`` needs."""
        context = (current_host_id, canonical_repository)
        if context != self._context or self._pending or self._pairs:
            # Another host or repository, or the last update was never counted (its
            # probe failed): what was staged is lost, so start over.
            self._reset()
            self._context = context
        self._uncounted = None
        if not self._take(rows):
            self._reset()
            self._uncounted = rows
            return tuple(sorted({p for row in rows for p in row_pids(row, current_host_id)}))
        self._rows = list(rows)
        host = self._context[0]
        for row in self._pending:
            if any(pid not in self._by_pid for pid in row_pids(row, host)):
                self._pid_list = None
        if self._pid_list is None:
            wanted = set(self._by_pid)
            for row in self._pending:
                wanted.update(row_pids(row, host))
            self._pid_list = tuple(sorted(wanted))
        return self._pid_list

    def count(self, *, now: datetime, evidence: EvidenceMap) -> TallyCounts:
        """The counts of the rows of the last ``update`` at ``now``."""
        if self._uncounted is not None:
            return self._count_once(self._uncounted, now, evidence)
        now_us = epoch_us(now)
        if self._now_us is not None and now_us < self._now_us:
            # Time stepped back, so a stale row could be fresh again: judge all afresh.
            rows, context = self._rows, self._context
            self._reset()
            self._rows, self._context, self._pending = rows, context, list(rows)
        dirty = self._evidence_changes(evidence)
        dirty.update(self._expired(now_us))
        judge = Judge(now, evidence, self._context)
        for old, new in self._pairs:
            key = id(old)
            if key in dirty or not self._stamp_only(old, new):
                self._drop(key)
                self._add(new, judge(new))
            else:
                self._replace(key, new, restamp(self._entries[key][1], new, now_us))
            dirty.discard(key)
        for key in dirty:
            held = self._entries.get(key)
            if held is not None:
                self._drop(key)
                self._add(held[0], judge(held[0]))
        for row in self._pending:
            self._add(row, judge(row))
        self._pending, self._pairs = [], []
        self._now_us = now_us
        if len(self._heap) > _HEAP_SLACK * len(self._entries) + _HEAP_FLOOR:
            self._compact()
        return TallyCounts(
            workers=dict(self._workers), historical=self._historical, orphaned=self._orphaned
        )

    # --- what changed ----------------------------------------------------------------

    def _take(self, rows: Sequence[Row]) -> bool:
        """Drop the rows no longer given; stage new rows and new versions at one position.
        False when ``rows`` holds one object twice (nothing can be kept then)."""
        old = self._rows
        same_length = len(rows) == len(old)
        if same_length:
            # Nothing changed is the common read: one C-level pass says so.
            positions = [] if all(map(is_, rows, old)) else changed_positions(rows, old)
            was = {id(old[i]): old[i] for i in positions}
            new = {id(rows[i]): rows[i] for i in positions}
            if len(new) != len(positions):
                return False
        else:
            was = {id(row): row for row in old}
            new = {id(row): row for row in rows}
            if len(new) != len(rows):
                return False
        # A row that only moved (rows were inserted or removed before it) stays as it is.
        moved = was.keys() & new.keys()
        entries = self._entries
        if any(key in entries and key not in was for key in new):
            return False  # a row kept at another position is given again here
        pairs: list[tuple[Row, Row]] = []
        if same_length:
            for i in positions:
                before, after = old[i], rows[i]
                if id(before) not in moved and id(after) not in moved:
                    pairs.append((before, after))
        paired = {id(after) for _, after in pairs}
        kept_old = {id(before) for before, _ in pairs}
        for key in was:
            if key not in moved and key not in kept_old:
                self._drop(key)
        self._pairs = pairs
        self._pending = [row for key, row in new.items() if key not in moved and key not in paired]
        return True

    def _stamp_only(self, old: Row, new: Row) -> bool:
        """``new`` is ``old`` with at most its stamp replaced: the same columns, every
        other value equal and of the same type. The SQLite store's stamp fold leaves the
        very same objects (settled by identity); PostgreSQL's rows are new every read."""
        columns = old.keys()
        if columns != self._keys:
            rest = [key for key in columns if key != STAMP]
            self._keys = set(columns)
            self._getter = itemgetter(*rest) if len(rest) > 1 else None
        getter = self._getter
        if getter is None or new.keys() != self._keys:
            return False
        before, after = getter(old), getter(new)
        if all(map(is_, before, after)):
            return True
        return before == after and all(map(is_, map(type, before), map(type, after)))

    def _evidence_changes(self, evidence: EvidenceMap) -> set[int]:
        """Keys of the rows whose pids' evidence differs from what they were judged on.

        Evidence is compared by value (a class reads nothing else of it), first the
        whole answer at once: between two reads of a quiet fleet nothing moved.
        """
        last, self._last_evidence = self._last_evidence, dict(evidence)
        if last is not None and last == self._last_evidence:
            return set()
        dirty: set[int] = set()
        held = last or {}
        for pid, keys in self._by_pid.items():
            current, before = evidence.get(pid), held.get(pid)
            if current is not before and current != before:
                if isinstance(keys, set):
                    dirty.update(keys)
                else:
                    dirty.add(keys)
        return dirty

    def _expired(self, now_us: int) -> list[int]:
        """Keys of the rows whose heartbeat stopped being fresh by ``now_us``."""
        heap, entries = self._heap, self._entries
        due: list[int] = []
        while heap and heap[0][0] <= now_us:
            _, key = heapq.heappop(heap)
            entry = entries.get(key)
            # An item the row outlived (beaten, judged again since) is let go.
            if entry is not None and (until := entry[1].until_us) is not None and until <= now_us:
                due.append(key)
        return due

    # --- bookkeeping -----------------------------------------------------------------

    def _add(self, row: Row, cls: RowClass) -> None:
        key = id(row)
        self._entries[key] = (row, cls)
        self._move(cls.bucket, 1)
        self._orphaned += cls.orphan
        by_pid = self._by_pid
        for pid in row_pids(row, self._context[0]):
            keys = by_pid.get(pid)
            if keys is None:
                by_pid[pid] = key
                self._pid_list = None
            elif isinstance(keys, set):
                keys.add(key)
            else:
                by_pid[pid] = {keys, key}
        if cls.until_us is not None:
            heapq.heappush(self._heap, (cls.until_us, key))

    def _replace(self, key: int, row: Row, cls: RowClass) -> None:
        """Put ``row`` (same pids, same evidence) in the place of the row kept under ``key``."""
        old, was = self._entries.pop(key)
        if was.bucket is not cls.bucket:
            self._move(was.bucket, -1)
            self._move(cls.bucket, 1)
        new_key = id(row)
        self._entries[new_key] = (row, cls)
        by_pid = self._by_pid
        for pid in row_pids(old, self._context[0]):
            keys = by_pid[pid]
            if isinstance(keys, set):
                keys.discard(key)
                keys.add(new_key)
            else:
                by_pid[pid] = new_key
        if cls.until_us is not None:
            heapq.heappush(self._heap, (cls.until_us, new_key))

    def _move(self, bucket: Bucket | None, step: int) -> None:
        if bucket is None:
            self._historical += step
            return
        left = self._workers.get(bucket, 0) + step
        if left:
            self._workers[bucket] = left
        else:
            del self._workers[bucket]

    def _drop(self, key: int) -> None:
        row, cls = self._entries.pop(key)
        self._move(cls.bucket, -1)
        self._orphaned -= cls.orphan
        by_pid = self._by_pid
        for pid in row_pids(row, self._context[0]):
            keys = by_pid[pid]
            if isinstance(keys, set):
                keys.discard(key)
                if len(keys) == 1:
                    by_pid[pid] = keys.pop()
            else:
                del by_pid[pid]
                self._pid_list = None

    def _compact(self) -> None:
        entries = self._entries
        self._heap = [
            (until, key)
            for until, key in self._heap
            if (entry := entries.get(key)) is not None and entry[1].until_us == until
        ]
        heapq.heapify(self._heap)

    def _count_once(self, rows: Sequence[Row], now: datetime, evidence: EvidenceMap) -> TallyCounts:
        judge = Judge(now, evidence, self._context)
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
