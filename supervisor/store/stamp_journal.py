"""The heartbeat batches a SQLite store's writer committed, kept for its active-row cache."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

__all__ = ["StampJournal", "close_batch", "journaled", "open_batch", "read_batch"]

_OPEN = "UPDATE registry_stamp_batches SET batch = batch + 1, unlogged = 1 WHERE id = 1"
_NUMBER = "SELECT batch FROM registry_stamp_batches WHERE id = 1"
_CLOSE = "UPDATE registry_stamp_batches SET unlogged = 0 WHERE id = 1"
_READ = "SELECT batch, unlogged FROM registry_stamp_batches WHERE id = 1"


class StampJournal:
    """Batch number to the (worker_identity, stamp) pairs that batch wrote, handed from
    the write connection's thread to the read connection's.

    A batch is added only once its COMMIT has returned, so a number here is one this
    store committed, with exactly these stamps; the counter never repeats a number
    (``schema_stamps`` guards it). A reader that misses a number it needs reads every
    stamp instead, which also covers a batch committed but not added yet.
    """

    __slots__ = ("_batches", "_held", "_lock", "capacity")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: dict[int, Sequence[tuple[str, str]]] = {}
        self._held = 0
        #: Pairs held at most. The cache sets it at each view (0 while it has no position
        #: to fold from); an overflow sets it to 0 until then.
        self.capacity = 0

    def add(self, batch: int, beats: Sequence[tuple[str, str]]) -> None:
        with self._lock:
            if self._held + len(beats) > self.capacity:
                # More than a round of beats since the last view: dropping every batch
                # only makes the next view read every stamp, as it would without a
                # journal, and holding nothing until that view re-arms the journal
                # keeps a daemon that nobody asks for views from paying for one.
                self._batches.clear()
                self._held = self.capacity = 0
                return
            self._batches[batch] = beats
            self._held += len(beats)

    def take(self, after: int, through: int) -> list[Sequence[tuple[str, str]]] | None:
        """The batches numbered ``after < n <= through`` in order, or None unless each one
        is here; either way nothing up to ``through`` is kept."""
        with self._lock:
            found = self._find(after, through)
            self._drop(through)
            return found

    def _find(self, after: int, through: int) -> list[Sequence[tuple[str, str]]] | None:
        batches = self._batches
        if after < 0 or through < after or through - after > len(batches):
            return None
        found: list[Sequence[tuple[str, str]]] = []
        for number in range(after + 1, through + 1):
            beats = batches.get(number)
            if beats is None:
                return None
            found.append(beats)
        return found

    def drop_through(self, through: int) -> None:
        with self._lock:
            self._drop(through)

    def _drop(self, through: int) -> None:
        batches = self._batches
        for number in [n for n in batches if n <= through]:
            self._held -= len(batches.pop(number))


def journaled(beats: Sequence[tuple[str, str]]) -> bool:
    """Whether a fresh read would return these very values: a ``str`` identity matches
    exactly the row whose text equals it, and a ``str`` stamp is stored and read back
    unchanged (a number would come back as text, under the column's TEXT affinity)."""
    return all(type(identity) is str and type(stamp) is str for identity, stamp in beats)


def open_batch(raw: sqlite3.Connection) -> int | None:
    """Start a journaled batch in the open write transaction: its number, or None when
    there is no batch row (nothing is switched on then, so every stamp gets logged)."""
    try:
        if raw.execute(_OPEN).rowcount != 1:
            return None
    except (sqlite3.OperationalError, sqlite3.IntegrityError):
        return None  # no v10 table, or its guard refused: the stamp trigger logs instead
    number = raw.execute(_NUMBER).fetchone()[0]
    if type(number) is not int:
        close_batch(raw)
        return None
    return number


def close_batch(raw: sqlite3.Connection) -> None:
    """End the batch before COMMIT: ``unlogged`` must never be committed as 1."""
    if raw.execute(_CLOSE).rowcount != 1:
        raise sqlite3.DatabaseError("the heartbeat batch row vanished inside a transaction")


def read_batch(raw: sqlite3.Connection) -> int | None:
    """The committed batch number, or None when it vouches for nothing (no row, not a
    number, or ``unlogged`` committed as anything but 0)."""
    try:
        found = raw.execute(_READ).fetchone()
    except sqlite3.OperationalError:
        return None
    if found is None:
        return None
    number, unlogged = found
    if type(number) is not int or type(unlogged) is not int or unlogged != 0:
        return None
    return number
