"""The active cache's jobs on a connection's thread: a refresh in a read transaction of its
own, and the change log's compaction inside the writer's."""

from __future__ import annotations

import sqlite3

from supervisor.store.base import Row
from supervisor.store.sqlite.active import ActiveCache

__all__ = ["active_job", "compact_active_job"]


def compact_active_job(raw: sqlite3.Connection, through: int) -> None:
    """Drop the log entries before ``through`` (inside the writer's open transaction).

    The entry at ``through`` stays, so new ids (max + 1) never restart below the
    folded position and a reader can tell its position is still there.
    """
    raw.execute("DELETE FROM registry_active_changes WHERE change_id < ?1", (through,))


def active_job(raw: sqlite3.Connection, cache: ActiveCache) -> list[Row]:
    """``cache.refresh`` in a read transaction of its own (see ``view_job`` for why)."""
    if raw.in_transaction:
        return cache.refresh(raw)
    raw.execute("BEGIN")
    try:
        return cache.refresh(raw)
    finally:
        raw.execute("ROLLBACK")
