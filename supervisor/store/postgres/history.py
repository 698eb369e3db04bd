"""The history digest on PostgreSQL: the shared change log folded by transaction horizon."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, NamedTuple

from supervisor.errors import StoreError
from supervisor.policy.retirement.history import HistorySummary
from supervisor.store import rows as rowmap
from supervisor.store.base import Row
from supervisor.store.history_cache import (
    Base,
    Change,
    HistoryCache,
    change_row,
    columns_for,
    probe_rows,
    rescope,
    scope_digests,
    scope_rows,
)
from supervisor.store.postgres.connection import PgConnection
from supervisor.store.schema.history import CHANGE_COLUMNS
from supervisor.store.schema.tables import REGISTRATION_COLUMNS

__all__ = ["PgHistory", "history_page", "history_rows"]

# Why a transaction horizon and not the change id. Ids come from a sequence, so
# they are handed out in statement order but commit in transaction order: a
# reader can see change 101 while 100 is still in flight (another supervisor's
# open transaction), and a cursor that moved past 101 would never fold 100. So
# each change records its writing transaction's id (``xact``, from v9), and a
# read takes its snapshot's xmin: every transaction below it has ended, so the
# visible changes below it are all the changes there will ever be below it.
# Those are folded into the cache for good and the horizon moves to xmin; the
# visible changes at or above it are added to the answer only and read again
# next time (a short window: the transactions running at the moment of the read).
# A long-running writer anywhere holds xmin back and widens the window: slower,
# never wrong. The digest row's position is such a horizon too.
_SELECT_DIGEST_AND_CHANGES = (
    "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint, "
    "d.row_count, d.irregular_count, d.product, d.through_change_id, c.xact, "
    f"c.change_id, c.sign, {', '.join('c.' + name for name in CHANGE_COLUMNS)} "
    "FROM registry_history_digest AS d LEFT JOIN registry_history_changes AS c "
    "ON c.xact >= greatest($1::bigint, d.through_change_id) WHERE d.id = 1 ORDER BY c.change_id"
)
_INT4 = range(-(2**31), 2**31)
_ARRAY_TYPES = {"pid": "int4"}
_CHANGE_LIST = ", ".join(CHANGE_COLUMNS)
_REGISTRATIONS = ", ".join(REGISTRATION_COLUMNS)

# Compaction folds the cache into the shared digest row and drops the changes it
# covers. Any store may do it: the row then holds every change below its horizon,
# and a store whose own horizon is lower restarts from the row (its scope cache
# too, as it cannot tell which dropped changes touched which keys). SKIP LOCKED:
# a writer never waits on another host's compaction, it leaves it to that one.
# The DELETE goes by the committed row (or this transaction's own update), so it
# never drops a change the row does not hold. Only every ``compact_every`` folded
# changes, so other hosts' caches restart rarely and the row is not rewritten on
# every write.
_COMPACT = (
    "UPDATE registry_history_digest SET row_count = $1, irregular_count = $2, product = $3, "
    "through_change_id = $4 WHERE id = (SELECT id FROM registry_history_digest "
    "WHERE id = 1 AND through_change_id < $4 FOR UPDATE SKIP LOCKED)"
)
_DROP_COMPACTED = (
    "DELETE FROM registry_history_changes "
    "WHERE xact < (SELECT through_change_id FROM registry_history_digest WHERE id = 1)"
)


class _Read(NamedTuple):
    horizon: int
    base: Base
    settled: list[Change]
    pending: list[Change]


async def _read_digest(conn: PgConnection, since: int) -> _Read:
    """The digest row and the changes at or above ``since``, split at the snapshot's xmin."""
    found = await conn.fetch(_SELECT_DIGEST_AND_CHANGES, (since,))
    if not found:
        raise StoreError("registry_history_digest has no row (schema damaged)")
    first = found[0]
    horizon = int(first[0])
    base = (int(first[1]), int(first[2]), str(first[3]), int(first[4]))
    settled: list[Change] = []
    pending: list[Change] = []
    for row in found:
        if row[5] is not None:  # a digest without changes: one row of NULL change columns
            (settled if int(row[5]) < horizon else pending).append(row[6:])
    return _Read(horizon, base, settled, pending)


def _lookup_values(column: str, values: list[str]) -> list[Any]:
    if column != "pid":
        return sorted(set(values))
    # An INTEGER column holds only integers; a key that is not one can match no row.
    numbers = set()
    for value in values:
        try:
            number = int(value)
        except ValueError:
            continue
        if number in _INT4:
            numbers.add(number)
    return sorted(numbers)


async def history_rows(conn: PgConnection, keys: Collection[tuple[str, str]]) -> list[Row]:
    """Historical rows (token columns) carrying any of ``keys``, each once; by index."""
    return scope_rows(await _hits(conn, keys), keys)


async def _hits(conn: PgConnection, keys: Collection[tuple[str, str]]) -> list[tuple[Any, Row]]:
    out: list[tuple[Any, Row]] = []
    for column, values in columns_for(keys).items():
        wanted = _lookup_values(column, values)
        if not wanted:
            continue
        found = await conn.fetch(
            f"SELECT {_CHANGE_LIST} FROM worker_registrations WHERE status <> 'active' "
            f"AND {column} = ANY($1::{_ARRAY_TYPES.get(column, 'text')}[])",
            (wanted,),
        )
        for hit in found:
            row = dict(zip(CHANGE_COLUMNS, hit, strict=True))
            out.append((row["worker_identity"], row))  # the primary key: one per row
    return out


async def history_page(
    conn: PgConnection, after: str | None, limit: int, needle: str | None
) -> list[Row]:
    """Historical rows by identity after ``after``; ``needle`` narrows by substring first."""
    where = ["status <> 'active'"]
    params: list[Any] = []
    if after is not None:
        params.append(after)
        where.append(f"worker_identity > ${len(params)}")
    if needle:
        params.append(needle)
        mark = f"${len(params)}"
        where.append(f"(strpos(client_instance_id, {mark}) > 0 OR strpos(namespace, {mark}) > 0)")
    params.append(limit)
    statement = (
        f"SELECT {_REGISTRATIONS} FROM worker_registrations WHERE {' AND '.join(where)} "
        f"ORDER BY worker_identity LIMIT ${len(params)}"
    )
    return rowmap.as_dicts(REGISTRATION_COLUMNS, await conn.fetch(statement, params))


class PgHistory:
    """One store's fold of the shared change log, and its compaction of it."""

    __slots__ = ("_folded", "cache", "compact_every")

    def __init__(self, compact_every: int = 256) -> None:
        self.cache = HistoryCache()
        #: Changes folded since this store last compacted (see _COMPACT).
        self._folded = 0
        self.compact_every = compact_every

    async def _settle(self, conn: PgConnection) -> list[Change]:
        read = await _read_digest(conn, self.cache.through)
        self.cache.settle(read.base, read.settled, read.horizon)
        self._folded += len(read.settled)
        return read.pending

    async def summary(self, conn: PgConnection) -> HistorySummary:
        """The digest as of ``conn``'s snapshot (a read-only transaction's)."""
        return self.cache.with_pending(await self._settle(conn))

    async def scope(self, conn: PgConnection, keys: Collection[tuple[str, str]]) -> list[bytes]:
        """``Store.read_history_scope`` in ``conn``'s snapshot (one read-only transaction)."""
        pending = [change_row(change) for change in await self._settle(conn)]
        cache, wanted = self.cache, set(keys)
        # After the settle: a restart from the digest row empties the scope cache.
        missing = [key for key in wanted if key not in cache.scope]
        found = probe_rows(await _hits(conn, missing), missing) if missing else {}
        # The table shows the pending changes too; the cache holds settled history only.
        for sign, row in reversed(pending):
            rescope(found, -sign, row)
        # Copies (the pending changes are applied to them), taken before remember()
        # may empty a full cache.
        held = {key: list(found[key] if key in found else cache.scope[key]) for key in wanted}
        cache.remember(found)
        for sign, row in pending:
            rescope(held, sign, row)
        return scope_digests(held)

    async def in_transaction(self, conn: PgConnection) -> HistorySummary:
        """The digest as a write transaction sees it, its own changes included.

        Folded into a scratch copy: this transaction may still roll back (its own
        changes are never below the horizon, as it is still running).
        """
        read = await _read_digest(conn, self.cache.through)
        scratch = HistoryCache()
        scratch.fold, scratch.through = self.cache.fold, self.cache.through
        scratch.settle(read.base, read.settled, read.horizon)
        return scratch.with_pending(read.pending)

    async def compact(self, conn: PgConnection, *, force: bool = False) -> None:
        """Fold the cache into the digest row, inside the caller's write transaction."""
        cache = self.cache
        if cache.fold is None or cache.through <= cache.compacted_through:
            return
        if not force and self._folded < self.compact_every:
            return
        summary = cache.fold.summary()
        params = (summary.count, summary.irregular_count, format(summary.product, "x"))
        await conn.execute(_COMPACT, (*params, cache.through))
        await conn.execute(_DROP_COMPACTED)
        # Counted as done once the statements ran: a rollback only leaves the log longer.
        cache.compacted_through, self._folded = cache.through, 0
