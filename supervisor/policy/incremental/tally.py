"""Fleet counts kept current row by row: a read reclassifies only what changed since the last."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import is_, itemgetter
from typing import Any

from supervisor.policy.evidence import EvidenceMap
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


@dataclass(frozen=True, slots=True, kw_only=True)
class TallyCounts:
    """Active rows by bucket, the historical rows among those given, and the orphaned ones."""

    workers: Mapping[Bucket, int]
    historical: int
    orphaned: int


#: Keys of the rows reading one pid's evidence: one key alone (the common case), or a set.
_Keys = int | set[int]


class FleetTally:
    """``count_fleet_rows`` of the rows, kept between reads instead of recomputed.

    Rows follow the store's ``RowVersions`` contract: a new row version is a new
    mapping and none is edited in place, so an unchanged row is the very object the
    last read saw. A read judges again only rows that are new, rows whose pid
    evidence changed since the last read (compared by value, the whole answer first),
    and rows whose heartbeat went stale since the last read, which happens without any
    write: each kept class knows the instant its row stops being fresh, and the kept
    classes are looked through once the earliest such instant has passed. A new
    version that differs only in its stamp (a heartbeat; the store copies the row and
    sets the stamp) is judged from the stamp alone. Everything else is a pointer
    comparison. The counts equal a full classification of the same rows, evidence
    and ``now`` at every read (tests/unit/policy/test_fleet_tally.py).

    A read is ``update`` (the rows; returns the pids to probe) then ``count`` (the
    evidence of those pids and ``now``); ``count_rows`` does both. Each row object is
    given once per read (the store's contract too); a repeat found among the rows that
    changed is counted afresh for that read, nothing kept. About 0.25 KB is kept per
    row (2.5 MB for 10,000).
    """

    __slots__ = (
        "_by_pid",
        "_context",
        "_entries",
        "_getter",
        "_historical",
        "_keys",
        "_last_evidence",
        "_next_us",
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
        self._entries: dict[int, RowClass] = {}
        # Pid -> keys of the rows whose class read its evidence.
        self._by_pid: dict[int, _Keys] = {}
        # The evidence answer of the last read (a copy: callers own theirs). Every kept
        # class was judged on evidence equal to it: a row whose pid's evidence moved
        # since is judged again in the same read.
        self._last_evidence: EvidenceMap | None = None
        self._pid_list: tuple[int, ...] | None = None
        # No row's heartbeat stops being fresh before this instant (epoch µs; None: no
        # row is fresh). Never later than the earliest such instant, maybe earlier.
        self._next_us: int | None = None
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
                self._add(judge(new))
            else:
                self._replace(key, restamp(self._entries[key], new, now_us))
            dirty.discard(key)
        for key in dirty:
            held = self._entries.get(key)
            if held is not None:
                self._drop(key)
                self._add(judge(held.row))
        for row in self._pending:
            self._add(judge(row))
        self._pending, self._pairs = [], []
        self._now_us = now_us
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
        # Kept as given, not copied: the liveness actor keeps the same answer, and a
        # caller never changes a mapping once it has passed it (ProbeNow's contract).
        last, self._last_evidence = self._last_evidence, evidence
        if last is not None and last == evidence:
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
        """Keys of the rows whose heartbeat stopped being fresh by ``now_us``.

        One pass over the kept classes, only once the earliest freshness edge has
        passed: in a fleet that beats about once per beat interval (a beat moves its
        row's edge on, unseen here until the pass), and no copy of every edge is kept
        for it (a heap of ten thousand is about 0.9 MB).
        """
        if self._next_us is None or self._next_us > now_us:
            return []
        due: list[int] = []
        later: int | None = None
        for key, cls in self._entries.items():
            until = cls.until_us
            if until is None:
                continue
            if until <= now_us:
                due.append(key)
            elif later is None or until < later:
                later = until
        self._next_us = later
        return due

    # --- bookkeeping -----------------------------------------------------------------

    def _add(self, cls: RowClass) -> None:
        row = cls.row
        key = id(row)
        self._entries[key] = cls
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
        self._edge(cls.until_us)

    def _replace(self, key: int, cls: RowClass) -> None:
        """Put ``cls`` (of a new version with the same pids and evidence) in the place of
        the row kept under ``key``."""
        was = self._entries.pop(key)
        if was.bucket is not cls.bucket:
            self._move(was.bucket, -1)
            self._move(cls.bucket, 1)
        new_key = id(cls.row)
        self._entries[new_key] = cls
        by_pid = self._by_pid
        for pid in row_pids(was.row, self._context[0]):
            keys = by_pid[pid]
            if isinstance(keys, set):
                keys.discard(key)
                keys.add(new_key)
            else:
                by_pid[pid] = new_key
        self._edge(cls.until_us)

    def _edge(self, until: int | None) -> None:
        if until is not None and (self._next_us is None or until < self._next_us):
            self._next_us = until

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
        cls = self._entries.pop(key)
        self._move(cls.bucket, -1)
        self._orphaned -= cls.orphan
        by_pid = self._by_pid
        for pid in row_pids(cls.row, self._context[0]):
            keys = by_pid[pid]
            if isinstance(keys, set):
                keys.discard(key)
                if len(keys) == 1:
                    by_pid[pid] = keys.pop()
            else:
                del by_pid[pid]
                self._pid_list = None

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
