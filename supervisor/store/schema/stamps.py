"""Schema version 10: heartbeat batches journaled by their writer; other stamp writes are logged."""

from __future__ import annotations

from supervisor.store.dialect import SQLITE
from supervisor.store.schema.active import STAMP_COLUMN
from supervisor.store.schema.hooks import MigrationConn, runs_on

__all__ = [
    "BATCHES_DDL",
    "LOG_KIND_COLUMN",
    "STAMPS_DESCRIPTION",
    "create_stamp_batches",
    "stamp_trigger_sql",
]

STAMPS_DESCRIPTION = (
    "heartbeat batch counter; stamps written outside a journaled batch are logged too"
)

#: The change-log column that marks an entry as "only the heartbeat stamp moved" (1).
LOG_KIND_COLUMN = "stamp_only"

# One row. ``batch`` counts the heartbeat transactions whose stamps the writing store
# journals in memory; ``unlogged`` is 1 only inside such a transaction, between its
# bump and its end, and turns the stamp trigger off for its own rows. A reader that
# sees every batch number since its last pass in its own journal, and ``unlogged`` = 0,
# knows every other stamp write is in the change log.
BATCHES_DDL = (
    "CREATE TABLE registry_stamp_batches (id INTEGER PRIMARY KEY CHECK (id = 1), "
    "batch INTEGER NOT NULL, unlogged INTEGER NOT NULL)"
)


def stamp_trigger_sql() -> tuple[tuple[str, str], ...]:
    """(name, CREATE TRIGGER text) of the stamp trigger and the batch row's guards.

    The guards keep the counter honest against hand-run sessions: the row cannot be
    deleted, replaced or counted back, and ``unlogged`` can only be switched on
    together with a new batch number, which any reader without that number in its
    journal treats as "stamps unknown". The texts are also what the store compares
    with ``sqlite_master`` before it trusts a pass without reading every stamp.
    """
    refuse = (
        "BEGIN SELECT RAISE(ABORT, 'registry_stamp_batches keeps one row that only counts up'); END"
    )
    return (
        (
            "registry_stamps_logged",
            f"CREATE TRIGGER registry_stamps_logged AFTER UPDATE OF {STAMP_COLUMN} "
            "ON worker_registrations WHEN NEW.status = 'active' AND "
            "(SELECT unlogged FROM registry_stamp_batches WHERE id = 1) IS NOT 1 "
            f"BEGIN INSERT INTO registry_active_changes (row_id, {LOG_KIND_COLUMN}) "
            "VALUES (NEW.rowid, 1); END",
        ),
        (
            "registry_stamp_batches_insert",
            "CREATE TRIGGER registry_stamp_batches_insert BEFORE INSERT "
            f"ON registry_stamp_batches {refuse}",
        ),
        (
            "registry_stamp_batches_delete",
            "CREATE TRIGGER registry_stamp_batches_delete BEFORE DELETE "
            f"ON registry_stamp_batches {refuse}",
        ),
        (
            "registry_stamp_batches_update",
            "CREATE TRIGGER registry_stamp_batches_update BEFORE UPDATE "
            "ON registry_stamp_batches WHEN NEW.id IS NOT OLD.id "
            "OR typeof(NEW.batch) IS NOT 'integer' OR NEW.batch < OLD.batch "
            "OR (NEW.unlogged IS 1 AND OLD.unlogged IS NOT 1 AND NEW.batch IS NOT OLD.batch + 1) "
            f"{refuse}",
        ),
    )


async def create_stamp_batches(conn: MigrationConn) -> None:
    """The batch row, its guards, the log's kind column and the stamp trigger (migration
    hook, same transaction).

    PostgreSQL gets nothing, as for v8: its store keeps no active-row cache. An
    engine this module does not know is refused.
    """
    if not runs_on(conn, SQLITE, "heartbeat batch counter"):
        return
    await conn.run(f"ALTER TABLE registry_active_changes ADD COLUMN {LOG_KIND_COLUMN} INTEGER")
    await conn.run(BATCHES_DDL)
    # Before the guards, which refuse every insert.
    await conn.run("INSERT INTO registry_stamp_batches (id, batch, unlogged) VALUES (1, 0, 0)")
    for _, statement in stamp_trigger_sql():
        await conn.run(statement)
