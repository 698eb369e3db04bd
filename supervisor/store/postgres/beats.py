"""Heartbeat batches on PostgreSQL: queued jobs, each one statement in a transaction of its own."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import anyio
import asyncpg

from supervisor.errors import StoreError
from supervisor.store.base import CommitChain
from supervisor.store.postgres.connection import PgConnection
from supervisor.store.postgres.tx import touch_statement

__all__ = ["SPOILED_MARKER", "stamp_all_or_none", "stamp_and_commit"]

#: Start of the error text ``stamp_all_or_none`` raises when a row is not active.
SPOILED_MARKER = "heartbeat job spoiled"


@lru_cache(maxsize=1)
def stamp_all_or_none() -> str:
    """``touch_statement`` that fails unless it stamped a row for every identity.

    Sent alone, the statement is its own transaction (PostgreSQL commits it before
    answering), so the failure rolls back every stamp of the job: all-or-nothing in
    one round trip, where BEGIN, UPDATE, COMMIT took three. SQL has no RAISE; casting
    a text that names the shortfall to an integer is the error. It depends on the
    aggregate, so the planner cannot fold it into a constant and fail at plan time.
    """
    return (
        f"WITH stamped AS ({touch_statement()} RETURNING 1) "
        "SELECT CASE WHEN count(*) = cardinality($1::text[]) THEN count(*) "
        f"ELSE ('{SPOILED_MARKER}: ' || count(*) || ' of ' || cardinality($1::text[]) "
        "|| ' rows active')::int8 END FROM stamped"
    )


def _spoiled(exc: StoreError) -> bool:
    cause = exc.__cause__
    return isinstance(cause, asyncpg.InvalidTextRepresentationError) and SPOILED_MARKER in str(
        cause
    )


async def stamp_and_commit(
    conn: PgConnection, *, beats: Sequence[tuple[str, str]], chain: CommitChain
) -> bool:
    """One job (see ``Store.submit_heartbeats``); the caller holds the write connection.

    However many beats, the job is one ``UPDATE ... FROM unnest(...)`` statement,
    committed on its own: a commit per beat costs a WAL flush and a round trip each.
    """
    if chain.broken:
        return False
    if conn.in_transaction():
        chain.broken = True
        raise StoreError("a transaction is already open on the write connection")
    ids = [identity for identity, _ in beats]
    stamps = [stamp for _, stamp in beats]
    # Shielded: once sent, the statement commits or fails on the server whatever
    # happens to this task, and the connection must not be left mid-answer.
    with anyio.CancelScope(shield=True):
        try:
            await conn.fetch(stamp_all_or_none(), (ids, stamps))
        except StoreError as exc:
            chain.broken = True
            if _spoiled(exc):
                # A row stopped being active without the caller knowing: the statement
                # failed, so nothing of this job stuck (same contract as the SQLite job).
                return False
            await conn.rollback_or_discard()
            raise
    return True
