"""One-hop helpers over an aiosqlite connection: statements, batches, BEGIN/COMMIT/ROLLBACK."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import aiosqlite
import anyio

from supervisor.errors import StoreError

__all__ = [
    "begin_flushed",
    "begin_immediate",
    "begin_unflushed",
    "close_quietly",
    "commit",
    "execute",
    "executemany",
    "fetch_in_chunks",
    "fetch_job",
    "fetchall",
    "rollback",
    "submit",
]

T = TypeVar("T")


# Each helper is one aiosqlite call, i.e. one hop to the connection's thread; callers
# keep the number of hops per transaction small. sqlite3 errors become StoreError here
# so no engine exception type escapes supervisor/store.
@contextmanager
def _store_errors(what: str) -> Iterator[None]:
    """An sqlite3 error inside becomes ``StoreError("SQLite <what> failed: …")``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite {what} failed: {exc}") from exc


async def execute(conn: aiosqlite.Connection, statement: str, params: Sequence[Any] = ()) -> int:
    """Run one statement; return its rowcount."""
    with _store_errors("statement"):
        cursor = await conn.execute(statement, params)
    return cursor.rowcount


async def executemany(
    conn: aiosqlite.Connection, statement: str, seq: Iterable[Sequence[Any]]
) -> int:
    """Run one statement for every parameter tuple; return the summed rowcount."""
    with _store_errors("batch statement"):
        cursor = await conn.executemany(statement, seq)
    return cursor.rowcount


async def fetchall(
    conn: aiosqlite.Connection, statement: str, params: Sequence[Any] = ()
) -> list[Sequence[Any]]:
    """Run a query and fetch every row in the same hop."""
    with _store_errors("query"):
        return list(await conn.execute_fetchall(statement, params))


async def fetch_job(pending: Awaitable[T]) -> T:
    """Await a read job queued with ``submit``; engine errors become ``StoreError``."""
    with _store_errors("query"):
        return await pending


async def fetch_in_chunks(
    conn: aiosqlite.Connection,
    statement: str,
    params: Sequence[Any] = (),
    *,
    convert: Callable[[Sequence[Any]], T],
    size: int = 512,
) -> list[T]:
    """Fetch a large result a chunk per thread hop, converting each chunk as it arrives.

    One ``fetchall`` of ten thousand rows builds every row object in the
    database thread while holding the GIL, starving the event loop for tens of
    milliseconds; chunks hand the loop back between hops. Converting per chunk
    keeps the conversion from becoming one such block of its own afterwards.
    """
    rows: list[T] = []
    with _store_errors("query"):
        async with conn.execute(statement, params) as cursor:
            while chunk := await cursor.fetchmany(size):
                rows.extend(map(convert, chunk))
    return rows


async def begin_immediate(conn: aiosqlite.Connection, *, durable: bool = True) -> None:
    """Take the database write lock now (waits up to busy_timeout, then StoreError).

    ``durable``: the COMMIT flushes the log to disk before it returns (``synchronous =
    FULL``), so what is acknowledged after it survives an OS crash or power loss;
    otherwise (``NORMAL``) only a process crash. SQLite refuses to change the level
    inside a transaction, so it is set here, in the same thread hop as the BEGIN.

    Shielded: a BEGIN abandoned half-way would still complete on the connection
    thread and leave the connection inside a transaction nobody owns. The wait is
    bounded by busy_timeout.
    """
    with anyio.CancelScope(shield=True), _store_errors("statement"):
        await submit(conn, begin_flushed if durable else begin_unflushed)


def begin_flushed(raw: sqlite3.Connection) -> None:
    """BEGIN IMMEDIATE of a transaction whose COMMIT is flushed to disk."""
    raw.execute("PRAGMA synchronous = FULL")
    raw.execute("BEGIN IMMEDIATE")


def begin_unflushed(raw: sqlite3.Connection) -> None:
    """BEGIN IMMEDIATE of a transaction whose loss in an OS crash fails closed (stamps)."""
    raw.execute("PRAGMA synchronous = NORMAL")
    raw.execute("BEGIN IMMEDIATE")


async def commit(conn: aiosqlite.Connection) -> None:
    """COMMIT, shielded; if SQLite already rolled the transaction back, refuse loudly."""
    with anyio.CancelScope(shield=True):
        if not conn.in_transaction:
            # SQLite aborts the whole transaction on some errors (disk full, I/O);
            # reporting success here would claim writes that were discarded.
            raise StoreError("transaction was rolled back by SQLite; nothing was committed")
        try:
            await execute(conn, "COMMIT")
        except BaseException:
            await rollback(conn)
            raise


async def rollback(conn: aiosqlite.Connection) -> None:
    """ROLLBACK if a transaction is open, shielded from cancellation."""
    with anyio.CancelScope(shield=True):
        if conn.in_transaction:
            await execute(conn, "ROLLBACK")


def submit(conn: aiosqlite.Connection, job: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
    """Queue ``job(raw connection)`` to run on the connection's thread; resolves to its result.

    A whole transaction in one job is one thread hop instead of one per statement, and
    jobs run strictly in the order queued, so the next can be queued before the last
    finishes. aiosqlite has no public call for this: ``_execute`` is the queue its own
    methods use (checked at store open, see ``check_submit_support``).
    """
    raw = conn._conn
    execute_job: Callable[..., Awaitable[T]] = conn._execute
    return asyncio.ensure_future(execute_job(job, raw))


def check_submit_support(conn: aiosqlite.Connection) -> None:
    """Fail at start-up, not under load, if this aiosqlite lacks what ``submit`` uses."""
    if not callable(getattr(conn, "_execute", None)) or not hasattr(type(conn), "_conn"):
        raise StoreError("this aiosqlite version offers no way to run a job on its thread")


async def close_quietly(conn: aiosqlite.Connection) -> BaseException | None:
    """Close ``conn``; return the error instead of raising so the next close still runs."""
    try:
        await conn.close()
    except Exception as exc:
        return exc
    return None
