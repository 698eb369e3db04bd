"""A heartbeat batch as one job on the SQLite write connection's thread: BEGIN, stamp, COMMIT."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence

from supervisor.errors import StoreError
from supervisor.store.base import CommitChain

__all__ = ["stamp_and_commit"]


def stamp_and_commit(
    raw: sqlite3.Connection,
    *,
    statement: str,
    beats: Sequence[tuple[str, str]],
    chain: CommitChain,
) -> bool:
    """Runs on the connection's thread (see ``Store.submit_heartbeats`` for the contract).

    Jobs of one chain run in order on this one thread. ``chain.broken`` is also set by
    the caller when it gives up on a chain; a job that reads it a moment too early ran
    before that decision and is answered as such, so a plain flag is enough.
    """
    if chain.broken:
        return False
    if _in_transaction(raw):
        # Someone else's transaction is open on this connection: never write inside it.
        chain.broken = True
        raise StoreError("a transaction is already open on the write connection")
    try:
        raw.execute("BEGIN IMMEDIATE")
        stamped = raw.executemany(statement, beats).rowcount
        if stamped != len(beats):
            # A row stopped being active without the caller knowing: it must judge these
            # beats from the table, so nothing of this batch may stick.
            raw.execute("ROLLBACK")
            chain.broken = True
            return False
        raw.execute("COMMIT")
        return True
    except sqlite3.Error as exc:
        chain.broken = True
        if _in_transaction(raw):
            # The first failure is the one to report; a failing ROLLBACK adds nothing.
            with contextlib.suppress(sqlite3.Error):
                raw.execute("ROLLBACK")
        raise StoreError(f"heartbeat transaction failed: {exc}") from exc


def _in_transaction(raw: sqlite3.Connection) -> bool:
    # A call, not the attribute inline: the state changes under the statements run in
    # between, which a type checker narrowing the attribute would not see.
    return raw.in_transaction
