"""Database layer: schema, migrations, row mapping and SQL."""

from __future__ import annotations

from supervisor.store.base import Row, Store, WriteTx
from supervisor.store.schema import (
    CURRENT_VERSION,
    GUARD_COLUMNS,
    LEASE_COLUMNS,
    REGISTRATION_COLUMNS,
)
from supervisor.store.sqlite import SQLiteStore, migrate, open_sqlite_store, sqlite_store
from supervisor.store.stamps import format_stamp

__all__ = [
    "CURRENT_VERSION",
    "GUARD_COLUMNS",
    "LEASE_COLUMNS",
    "REGISTRATION_COLUMNS",
    "Row",
    "SQLiteStore",
    "Store",
    "WriteTx",
    "format_stamp",
    "migrate",
    "open_sqlite_store",
    "sqlite_store",
]
