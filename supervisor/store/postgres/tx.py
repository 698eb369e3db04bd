"""PostgreSQL write transaction: the WriteTx operations, with row locks for multi-host writers."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache
from typing import Any

from supervisor.policy.retirement.history import HistorySummary
from supervisor.store import rows as rowmap
from supervisor.store import sql
from supervisor.store.base import Row
from supervisor.store.dialect import POSTGRESQL
from supervisor.store.host_leases import HostLeaseTx
from supervisor.store.observed_servers import ObservedServersTx
from supervisor.store.postgres.connection import PgConnection, coercer
from supervisor.store.postgres.control import PostgresControlTx, sqlite_shaped
from supervisor.store.postgres.history import PgHistory, history_rows
from supervisor.store.schema.tables import GUARD_COLUMNS, LEASE_COLUMNS, REGISTRATION_COLUMNS
from supervisor.store.stamps import require_stamp
from supervisor.store.write_tx import RETIRE_IDENTITY_PARAM, PortableWriteTx

__all__ = ["PG_COLUMN_TYPES", "PostgresWriteTx", "touch_statement"]

_REGISTRATION_LIST = ", ".join(REGISTRATION_COLUMNS)
_LEASE_LIST = ", ".join(LEASE_COLUMNS)

#: Non-text column types of the registry table, for typed arrays.
PG_COLUMN_TYPES: Mapping[str, str] = {
    "pid": "int4",
    "fencing_epoch": "int8",
    "heartbeat_ttl_seconds": "float8",
}


def touch_statement() -> str:
    """Stamp many active rows in one statement; parameters: identities[], stamps[].

    No explicit row locks first: a locking CTE tripled the statement's cost. The rows
    a supervisor stamps are its own host's, which only its own writer (one connection)
    touches, and callers pass identities sorted, the order locking reads use. The one
    cross-host overlap, another host retiring a silent host's rows while that host
    comes back, can at worst deadlock; PostgreSQL then aborts one side, and both fail
    closed (the beat is judged from the table again, the apply reports the failure).
    """
    return (
        "UPDATE worker_registrations AS w SET last_heartbeat_at = v.stamp "
        "FROM unnest($1::text[], $2::text[]) AS v(worker_identity, stamp) "
        "WHERE w.worker_identity = v.worker_identity AND w.status = 'active'"
    )


@lru_cache(maxsize=8)
def _select_registrations(*, by_status: bool, by_ids: bool) -> str:
    where: list[str] = []
    if by_status:
        where.append("status = $1")
    if by_ids:
        where.append(f"worker_identity = ANY(${len(where) + 1}::text[])")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    # Rows read by identity are locked (FOR UPDATE): what a write transaction read stays
    # as read until it commits, even when another host's supervisor writes the same
    # table (BEGIN IMMEDIATE's role on SQLite); ORDER BY fixes the lock order. A read of
    # every row does not lock: holding the whole registry would make each host's
    # heartbeats wait on the others' writes, and a group commit that had locked its own
    # rows first could deadlock against another host. Whatever a transaction writes
    # after such a read is a guarded UPDATE, which re-checks the newest row anyway.
    lock = " FOR UPDATE" if by_ids else ""
    return (
        f"SELECT {_REGISTRATION_LIST} FROM worker_registrations{clause} "
        f"ORDER BY worker_identity{lock}"
    )


@lru_cache(maxsize=1)
def _retire_many() -> str:
    columns = ("worker_identity", *GUARD_COLUMNS)
    arrays = ", ".join(
        f"${i}::{PG_COLUMN_TYPES.get(c, 'text')}[]" for i, c in enumerate(columns, start=4)
    )
    guards = " AND ".join(f"w.{c} IS NOT DISTINCT FROM g.{c}" for c in GUARD_COLUMNS)
    return (
        "UPDATE worker_registrations AS w SET status = 'retired', retired_at = $1, "
        "retired_by = $2, retirement_reason = $3 "
        f"FROM unnest({arrays}) AS g({', '.join(columns)}) "
        f"WHERE w.worker_identity = g.worker_identity AND {guards} "
        "RETURNING w.worker_identity"
    )


_LOCK_ROWS = (
    "SELECT worker_identity FROM worker_registrations WHERE worker_identity = ANY($1::text[]) "
    "ORDER BY worker_identity FOR UPDATE"
)


class PostgresWriteTx(PortableWriteTx[PgConnection]):
    """One transaction on the store's write connection (see base.WriteTx)."""

    dialect = POSTGRESQL
    _ROLLBACK_TO = "ROLLBACK TO SAVEPOINT"
    _RELEASE = "RELEASE SAVEPOINT"
    _NOT_IN_TRANSACTION = "transaction is no longer open; refusing further writes"

    def __init__(self, conn: PgConnection, history: PgHistory | None = None) -> None:
        super().__init__(conn)
        self._history = history or PgHistory()

    def _in_transaction(self, conn: PgConnection) -> bool:
        return conn.in_transaction()

    async def _fetch(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return await self._live().fetch(statement, params)

    async def _execute(self, statement: str, params: Sequence[Any]) -> int:
        return await self._live().execute(statement, params)

    async def _command(self, conn: PgConnection, statement: str) -> None:
        await conn.command(statement)

    async def registrations(
        self, *, status: str | None = None, worker_identities: Sequence[str] | None = None
    ) -> list[Row]:
        params: list[Any] = [] if status is None else [status]
        if worker_identities is not None:
            params.append(list(dict.fromkeys(worker_identities)))
        statement = _select_registrations(
            by_status=status is not None, by_ids=worker_identities is not None
        )
        return rowmap.as_dicts(REGISTRATION_COLUMNS, await self._live().fetch(statement, params))

    async def history_summary(self) -> HistorySummary:
        return await self._history.in_transaction(self._live())

    async def history_scope(self, keys: Collection[tuple[str, str]]) -> list[Row]:
        # Rows, not just texts: apply checks them one by one; a few, read by index.
        return await history_rows(self._live(), list(set(keys)))

    async def touch_heartbeats(self, beats: Sequence[tuple[str, str]]) -> int:
        if not beats:
            return 0
        ids = [identity for identity, _ in beats]
        if len(set(ids)) != len(ids):
            # Pairs of one identity would stamp one row twice in one UPDATE (an error);
            # the last pair wins, as executemany would leave it.
            newest = dict(beats)
            ids = list(newest)
            beats = list(newest.items())
        stamps = [stamp for _, stamp in beats]
        return await self._live().execute(touch_statement(), (ids, stamps))

    async def _retire_rows(
        self, params: list[tuple[Any, ...]], stamp: tuple[str, str, str]
    ) -> list[bool]:
        identities = [p[RETIRE_IDENTITY_PARAM] for p in params]
        conn = self._live()
        # Lock the rows in worker_identity order first (the order every locking read
        # uses), then one set-based compare-and-swap; RETURNING names the rows that
        # still matched.
        await conn.fetch(_LOCK_ROWS, (identities,))
        columns = list(zip(*(p[RETIRE_IDENTITY_PARAM:] for p in params), strict=True))
        found = await conn.fetch(_retire_many(), (*stamp, *_arrays(columns)))
        retired = {str(r[0]) for r in found}
        return [identity in retired for identity in identities]

    async def expire_leases(self, *, now_stamp: str) -> list[Row]:
        require_stamp(now_stamp, "now_stamp")
        conn = self._live()
        # Locked as read, then updated by key: the rows returned are exactly the rows
        # expired, as they were before, whatever another host does meanwhile.
        due = await conn.fetch(f"{sql.select_due_leases(POSTGRESQL)} FOR UPDATE", (now_stamp,))
        if not due:
            return []
        ids = [row[0] for row in due]
        await conn.execute(
            "UPDATE leases SET status = 'expired' WHERE lease_id = ANY($1::text[]) "
            "AND status = 'active'",
            (ids,),
        )
        return rowmap.as_dicts(LEASE_COLUMNS, due)

    def control(self) -> PostgresControlTx:
        return PostgresControlTx(self._live)

    def hosts(self) -> HostLeaseTx:
        return HostLeaseTx(sqlite_shaped(self._live), lock=" FOR UPDATE")

    def observed(self) -> ObservedServersTx:
        return ObservedServersTx(sqlite_shaped(self._live))


def _arrays(columns: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    """Each guard column's values as the typed array it is bound as (SQLite-like values)."""
    names = ("worker_identity", *GUARD_COLUMNS)
    return [
        [coercer(PG_COLUMN_TYPES.get(name, "text"))(v) for v in values]
        for name, values in zip(names, columns, strict=True)
    ]
