"""Observed server rows inside a write transaction, in portable SQL that both engines run."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import aiosqlite

from supervisor.errors import StoreError
from supervisor.store.dialect import SQLITE
from supervisor.store.rows import as_dicts, refuse_unknown
from supervisor.store.schema.observed import OBSERVED_COLUMNS, OBSERVED_KEY
from supervisor.store.sqlite.connection import execute
from supervisor.store.stamps import require_stamp

__all__ = [
    "ObservedServers",
    "ObservedServersTx",
    "observed_rows",
    "select_observed_servers",
]

Row = dict[str, Any]
_COLUMNS = frozenset(OBSERVED_COLUMNS)
_STAMPS = ("first_seen", "last_seen", "owner_gone_at", "gone_at")
#: What the process runs now: an exec since its first sight (``sh -c`` exec'ing ``node``)
#: changes it, and the latest sighting's word stands.
_RUNS = ("command", "cwd", "env_keys")
_LIST = ", ".join(OBSERVED_COLUMNS)
#: What a later sighting of the same incarnation may change; the rest is its first sight.
_MUTABLE = ("last_seen", "owner_gone_at", "gone_at", *_RUNS)


def select_observed_servers(*, live_only: bool) -> str:
    """Every observed server of host ``?1`` (live only: not gone), by first sight then pid."""
    where = "host_id = ?1" + (" AND gone_at IS NULL" if live_only else "")
    return f"SELECT {_LIST} FROM observed_servers WHERE {where} ORDER BY first_seen, pid"


def observed_rows(found: Sequence[Any]) -> list[Row]:
    return as_dicts(OBSERVED_COLUMNS, found)


def _checked(row: Mapping[str, Any]) -> None:
    refuse_unknown(row, _COLUMNS, "observed_servers")
    for required in (*OBSERVED_KEY, "provenance", "command", "env_keys", "evidence"):
        if row.get(required) is None or row.get(required) == "":
            raise StoreError(f"an observed server needs {required}")
    for column in ("first_seen", "last_seen"):
        if row.get(column) is None:
            raise StoreError(f"an observed server needs {column}")
    for column in _STAMPS:
        if row.get(column) is not None:
            require_stamp(row[column], column)


class ObservedServers(Protocol):
    """Observed servers in the enclosing write transaction (``WriteTx.observed()``)."""

    async def record(self, row: Mapping[str, Any]) -> None:
        """Insert a first sight, or update a known incarnation's ``last_seen``,
        ``owner_gone_at`` and ``gone_at`` (a stamp once set is kept)."""
        ...


class ObservedServersTx:
    """``ObservedServers`` over an aiosqlite-shaped connection (SQLite's, or PostgreSQL's
    adapter): one upsert statement both engines spell alike."""

    def __init__(self, live: Callable[[], aiosqlite.Connection]) -> None:
        self._live = live

    async def record(self, row: Mapping[str, Any]) -> None:
        _checked(row)
        values = [row.get(c) for c in OBSERVED_COLUMNS]
        key = ", ".join(OBSERVED_KEY)
        # COALESCE keeps the first stamp of a gone owner or server: a later sighting
        # never moves when something was first seen gone.
        updates = ", ".join(
            f"{c} = excluded.{c}"
            if c == "last_seen" or c in _RUNS
            else f"{c} = COALESCE(observed_servers.{c}, excluded.{c})"
            for c in _MUTABLE
        )
        statement = (
            f"INSERT INTO observed_servers ({_LIST}) VALUES ({SQLITE.params(len(values))}) "
            f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
        )
        await execute(self._live(), statement, values)
