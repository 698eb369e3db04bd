"""Heartbeat batches on PostgreSQL: queued jobs, each one transaction with one set-based UPDATE."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from supervisor.errors import StoreError
from supervisor.store.base import CommitChain
from supervisor.store.postgres_exec import PgConnection
from supervisor.store.postgres_tx import touch_statement

__all__ = ["stamp_and_commit"]


async def stamp_and_commit(
    conn: PgConnection, *, beats: Sequence[tuple[str, str]], chain: CommitChain
) -> bool:
    """One job (see ``Store.submit_heartbeats``); the caller holds the write connection.

    However many beats, the batch is BEGIN, one ``UPDATE ... FROM unnest(...)`` and
    COMMIT: three round trips, where a commit per beat costs a WAL flush each.
    """
    if chain.broken:
        return False
    if conn.in_transaction():
        chain.broken = True
        raise StoreError("a transaction is already open on the write connection")
    ids = [identity for identity, _ in beats]
    stamps = [stamp for _, stamp in beats]
    with anyio.CancelScope(shield=True):
        try:
            await conn.command("BEGIN")
            stamped = await conn.execute(touch_statement(), (ids, stamps))
            if stamped != len(beats):
                # A row stopped being active without the caller knowing: nothing of
                # this batch may stick (same contract as the SQLite job).
                await conn.command("ROLLBACK")
                chain.broken = True
                return False
            status = await conn.command("COMMIT")
        except StoreError:
            chain.broken = True
            await conn.rollback_or_discard()
            raise
    if status != "COMMIT":
        chain.broken = True
        raise StoreError(f"heartbeat transaction was not committed ({status})")
    return True
