"""Schema version 8: the active-row change log and the SQLite triggers that feed it."""

from __future__ import annotations

from supervisor.store.dialect import SQLITE
from supervisor.store.schema.hooks import MigrationConn, runs_on

__all__ = [
    "ACTIVE_CHANGES_DDL",
    "ACTIVE_DESCRIPTION",
    "STAMP_COLUMN",
    "active_trigger_sql",
    "create_active_log",
]

ACTIVE_DESCRIPTION = "change log of registration rows (every column but the heartbeat stamp)"

#: The column every heartbeat writes; the log leaves it out so beats fire no trigger.
STAMP_COLUMN = "last_heartbeat_at"

# One entry per row version a statement touched, by rowid: the reader re-reads
# just those rows. SQLite only (see create_active_log), so no dialect token.
ACTIVE_CHANGES_DDL = (
    "CREATE TABLE registry_active_changes (change_id INTEGER PRIMARY KEY, row_id INTEGER NOT NULL)"
)


def active_trigger_sql(columns: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(name, CREATE TRIGGER text) of each trigger, for the table's ``columns``.

    The UPDATE trigger names every column but the stamp, and ``rowid`` too (a
    hand-run ``UPDATE ... SET rowid`` moves a row without changing a column).
    The text is also what the store compares with ``sqlite_master`` before it
    trusts the log, so a later version adding a column without recreating this
    trigger turns the cache off instead of making it miss that column.
    """
    watched = ", ".join(("rowid", *(c for c in columns if c != STAMP_COLUMN)))
    log = "INSERT INTO registry_active_changes (row_id) VALUES"
    return (
        (
            "registry_active_insert",
            "CREATE TRIGGER registry_active_insert AFTER INSERT ON worker_registrations "
            f"BEGIN {log} (NEW.rowid); END",
        ),
        (
            "registry_active_update",
            f"CREATE TRIGGER registry_active_update AFTER UPDATE OF {watched} "
            f"ON worker_registrations BEGIN {log} (OLD.rowid); "
            "INSERT INTO registry_active_changes (row_id) SELECT NEW.rowid "
            "WHERE NEW.rowid IS NOT OLD.rowid; END",
        ),
        (
            "registry_active_delete",
            "CREATE TRIGGER registry_active_delete AFTER DELETE ON worker_registrations "
            f"BEGIN {log} (OLD.rowid); END",
        ),
    )


async def create_active_log(conn: MigrationConn) -> None:
    """The log table and its triggers (migration hook, same transaction).

    PostgreSQL gets nothing: its store answers every view from a full read and
    promises no row identity, so there is nothing to keep current there; an
    engine this module does not know is refused.
    """
    if not runs_on(conn, SQLITE, "active-row change log"):
        return
    await conn.run(ACTIVE_CHANGES_DDL)
    for _, statement in active_trigger_sql(tuple(await conn.table_columns("worker_registrations"))):
        await conn.run(statement)
