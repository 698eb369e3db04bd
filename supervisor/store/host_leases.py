"""Host lease rows inside a write transaction, in portable SQL that both engines run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import aiosqlite

from supervisor.errors import StoreError
from supervisor.store.control_sql import insert_row
from supervisor.store.dialect import SQLITE
from supervisor.store.rows import as_dicts, refuse_unknown
from supervisor.store.schema.hosts import HOST_LEASE_COLUMNS, HOST_LEASE_STATUSES
from supervisor.store.sqlite.connection import execute, fetchall
from supervisor.store.stamps import require_stamp

__all__ = ["HostLeaseTx", "HostLeases", "host_lease_rows", "select_host_leases"]

Row = dict[str, Any]
_COLUMNS = frozenset(HOST_LEASE_COLUMNS)
_STAMPS = ("registered_at", "renewed_at", "expires_at", "declared_dead_at")
_LIST = ", ".join(HOST_LEASE_COLUMNS)


def select_host_leases(*, one: bool) -> str:
    """Every host lease by host_id, or the one with host_id = ?1 (SQLite spelling)."""
    where = " WHERE host_id = ?1" if one else ""
    return f"SELECT {_LIST} FROM host_leases{where} ORDER BY host_id"


def host_lease_rows(found: list[Any]) -> list[Row]:
    return as_dicts(HOST_LEASE_COLUMNS, found)


def _checked(values: Mapping[str, Any]) -> None:
    refuse_unknown(values, _COLUMNS, "host_leases")
    if "status" in values and values["status"] not in HOST_LEASE_STATUSES:
        raise StoreError(f"host lease status must be one of {', '.join(HOST_LEASE_STATUSES)}")
    for column in _STAMPS:
        if values.get(column) is not None:
            # Expiry is compared as text: only the store's fixed-width stamps sort right.
            require_stamp(values[column], column)


class HostLeases(Protocol):
    """Host leases in the enclosing write transaction (``WriteTx.hosts()``)."""

    async def lease(self, host_id: str, *, lock: bool = True) -> Row | None:
        """This host's lease row, locked until commit where the engine has row locks
        (``lock=False``: a plain read, for a check that can only refuse)."""
        ...

    async def insert(self, row: Mapping[str, Any]) -> None:
        """A new host lease; an existing host_id fails."""
        ...

    async def update(
        self, host_id: str, *, expected_epoch: int, expected_status: str, changes: Mapping[str, Any]
    ) -> bool:
        """Apply ``changes`` only if the lease still has this epoch and status."""
        ...


class HostLeaseTx:
    """``HostLeases`` over an aiosqlite-shaped connection (SQLite's, or PostgreSQL's adapter).

    ``lock`` is appended to the read of one lease: ``" FOR UPDATE"`` on PostgreSQL, so
    a renewal and another host's retirement of the same host take turns; SQLite's
    BEGIN IMMEDIATE already serializes them.
    """

    def __init__(self, live: Callable[[], aiosqlite.Connection], *, lock: str = "") -> None:
        self._live = live
        self._lock = lock

    async def lease(self, host_id: str, *, lock: bool = True) -> Row | None:
        statement = select_host_leases(one=True) + (self._lock if lock else "")
        found = await fetchall(self._live(), statement, (host_id,))
        rows = host_lease_rows(found)
        return rows[0] if rows else None

    async def insert(self, row: Mapping[str, Any]) -> None:
        _checked(row)
        for required in ("host_id", "status", "epoch", "expires_at"):
            if row.get(required) is None or row.get(required) == "":
                raise StoreError(f"a host lease needs {required}")
        columns = [c for c in HOST_LEASE_COLUMNS if c in row]
        statement = insert_row(SQLITE, "host_leases", tuple(columns))
        await execute(self._live(), statement, [row[c] for c in columns])

    async def update(
        self, host_id: str, *, expected_epoch: int, expected_status: str, changes: Mapping[str, Any]
    ) -> bool:
        _checked(changes)
        columns = [c for c in HOST_LEASE_COLUMNS if c in changes and c != "host_id"]
        if not columns:
            raise StoreError("a host lease update needs columns other than host_id")
        sets = ", ".join(f"{c} = {SQLITE.param(i)}" for i, c in enumerate(columns, start=4))
        statement = (
            f"UPDATE host_leases SET {sets} WHERE host_id = ?1 AND epoch = ?2 AND status = ?3"
        )
        params = [host_id, expected_epoch, expected_status, *(changes[c] for c in columns)]
        return await execute(self._live(), statement, params) == 1
