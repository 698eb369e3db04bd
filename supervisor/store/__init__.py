"""Database layer: the store interface, schema and stamps (backends: sqlite/, postgres/)."""

from __future__ import annotations

from supervisor.store.base import Row, Store, WriteTx
from supervisor.store.schema.tables import (
    CURRENT_VERSION,
    GUARD_COLUMNS,
    LEASE_COLUMNS,
    REGISTRATION_COLUMNS,
)
from supervisor.store.stamps import format_stamp

__all__ = [
    "CURRENT_VERSION",
    "GUARD_COLUMNS",
    "LEASE_COLUMNS",
    "REGISTRATION_COLUMNS",
    "Row",
    "Store",
    "WriteTx",
    "format_stamp",
]
