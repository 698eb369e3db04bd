"""A heartbeat batch as one job on the SQLite write connection's thread: BEGIN, stamp, COMMIT."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence

from supervisor.errors import StoreError
from supervisor.store import sql
from supervisor.store.base import CommitChain
from supervisor.store.dialect import SQLITE
from supervisor.store.sqlite.connection import begin_unflushed
from supervisor.store.stamp_journal import StampJournal, close_batch, journaled, open_batch

__all__ = ["stamp_and_commit"]


#: UPDATE ... FROM arrived in SQLite 3.33; older libraries stamp row by row.
SET_BASED = sqlite3.sqlite_version_info >= (3, 33, 0)


def stamp_and_commit(
    raw: sqlite3.Connection,
    *,
    beats: Sequence[tuple[str, str]],
    chain: CommitChain,
    journal: StampJournal | None = None,
) -> bool:
    """Runs on the connection's thread (see ``Store.submit_heartbeats`` for the contract).

    Jobs of one chain run in order on this one thread. ``chain.broken`` is also set by
    the caller when it gives up on a chain; a job that reads it a moment too early ran
    before that decision and is answered as such, so a plain flag is enough.

    With a ``journal`` the batch is numbered and its stamps are not logged (schema
    v10): the journal gets them once COMMIT has returned, so the active-row cache
    folds them without reading a stamp. ``beats`` must not change afterwards.
    """
    if chain.broken:
        return False
    if _in_transaction(raw):
        # Someone else's transaction is open on this connection: never write inside it.
        chain.broken = True
        raise StoreError("a transaction is already open on the write connection")
    try:
        # Stamps are the one write not flushed at commit: an OS crash may lose the last
        # of them, which only makes rows look older (fail closed), never lost or younger.
        begin_unflushed(raw)
        batch = open_batch(raw) if journal is not None and journaled(beats) else None
        stamped = _stamp(raw, beats)
        if stamped != len(beats):
            # A row stopped being active without the caller knowing: it must judge these
            # beats from the table, so nothing of this batch may stick.
            raw.execute("ROLLBACK")
            chain.broken = True
            return False
        if batch is not None:
            close_batch(raw)
        raw.execute("COMMIT")
        if batch is not None and journal is not None:
            journal.add(batch, beats)
        return True
    except (sqlite3.Error, ValueError, OverflowError) as exc:
        # ValueError and OverflowError are what binding refuses (a lone surrogate, an
        # integer past 64 bits): the transaction must not stay open after them either.
        chain.broken = True
        if _in_transaction(raw):
            # The first failure is the one to report; a failing ROLLBACK adds nothing.
            with contextlib.suppress(sqlite3.Error):
                raw.execute("ROLLBACK")
        raise StoreError(f"heartbeat transaction failed: {exc}") from exc


def _stamp(raw: sqlite3.Connection, beats: Sequence[tuple[str, str]]) -> int:
    """Stamp every beat's row; the number of rows changed. ``beats`` name distinct workers.

    One statement per up to 256 beats rather than ``executemany``: each statement
    step hands the GIL back and forth with the event loop's thread, and a busy loop
    makes every hand-back wait, so a batch of steps was slower than one set-based
    UPDATE by more than its own cost.
    """
    if not SET_BASED:
        return raw.executemany(sql.touch_heartbeats(SQLITE), beats).rowcount
    largest = sql.TOUCH_BATCH_SIZES[-1]
    stamped = 0
    for start in range(0, len(beats), largest):
        part = beats[start : start + largest]
        size = next(s for s in sql.TOUCH_BATCH_SIZES if s >= len(part))
        params: list[str | None] = [value for pair in part for value in pair]
        params.extend([None] * (2 * (size - len(part))))
        stamped += raw.execute(sql.touch_heartbeats_batch(SQLITE, size), params).rowcount
    return stamped


def _in_transaction(raw: sqlite3.Connection) -> bool:
    # A call, not the attribute inline: the state changes under the statements run in
    # between, which a type checker narrowing the attribute would not see.
    return raw.in_transaction
