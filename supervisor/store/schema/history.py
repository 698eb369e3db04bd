"""Schema version 6: the history digest, its change log and the triggers that feed the log."""

from __future__ import annotations

from supervisor.policy.retirement.fingerprints import FINGERPRINT_FIELDS
from supervisor.store.dialect import SQLITE
from supervisor.store.schema.hooks import MigrationConn, runs_on

__all__ = [
    "CHANGE_COLUMNS",
    "HISTORY_DESCRIPTION",
    "HISTORY_STATEMENTS",
    "SQLITE_HISTORY_TRIGGERS",
    "create_history_triggers",
]

#: The columns of a row version the history digest folds: the registry token's fields.
CHANGE_COLUMNS: tuple[str, ...] = FINGERPRINT_FIELDS

# The same types as worker_registrations, so a copied value is stored exactly as the
# row held it (and canonicalizes to the same text).
_TYPES = {
    "pid": "INTEGER",
    "heartbeat_ttl_seconds": "DOUBLE PRECISION",
    "fencing_epoch": "BIGINT",
}
_COLUMN_DDL = ", ".join(f"{name} {_TYPES.get(name, 'TEXT')}" for name in CHANGE_COLUMNS)
_LIST = ", ".join(CHANGE_COLUMNS)

HISTORY_DESCRIPTION = "history digest of non-active registrations; indexes for scope lookups"

# The digest row says: the set of historical rows is ``row_count`` rows whose MuHash
# product is ``product`` (hex), as of every change with change_id <= through_change_id
# (on PostgreSQL, from v9: every change whose transaction id is below it).
# Changes after that are in registry_history_changes, +1 for a row version entering
# history and -1 for one leaving it; readers fold them in, the store compacts them.
HISTORY_STATEMENTS: tuple[str, ...] = (
    "CREATE TABLE registry_history_digest ("
    "id INTEGER PRIMARY KEY, row_count BIGINT NOT NULL, irregular_count BIGINT NOT NULL, "
    "product TEXT NOT NULL, through_change_id BIGINT NOT NULL)",
    f"CREATE TABLE registry_history_changes (change_id {{auto_id_pk}}, "
    f"sign INTEGER NOT NULL, {_COLUMN_DDL})",
    "INSERT INTO registry_history_digest "
    "(id, row_count, irregular_count, product, through_change_id) VALUES (1, 0, 0, '1', 0)",
    # Rows already terminal when the schema is upgraded enter through the log, so
    # the first fold computes their digest with the same code as every later change.
    f"INSERT INTO registry_history_changes (sign, {_LIST}) "
    f"SELECT 1, {_LIST} FROM worker_registrations WHERE status <> 'active' "
    "ORDER BY worker_identity",
    # A plan's scope lookup reads historical rows by identity key.
    "CREATE INDEX idx_worker_registrations_generation_id ON worker_registrations (generation_id)",
    "CREATE INDEX idx_worker_registrations_pid ON worker_registrations (pid)",
    "CREATE INDEX idx_worker_registrations_process_identity "
    "ON worker_registrations (process_identity)",
)


def _values(prefix: str) -> str:
    return ", ".join(f"{prefix}.{name}" for name in CHANGE_COLUMNS)


# Plain SQL triggers, so every writer (the store, a migration, a hand-run sqlite3
# session) logs a change to history in the same transaction as the change itself.
# PostgreSQL has the same as a plpgsql trigger function (schema_history_pg.py).
SQLITE_HISTORY_TRIGGERS: tuple[str, ...] = (
    "CREATE TRIGGER registry_history_insert AFTER INSERT ON worker_registrations "
    "WHEN NEW.status IS NOT 'active' BEGIN "
    f"INSERT INTO registry_history_changes (sign, {_LIST}) VALUES (1, {_values('NEW')}); END",
    "CREATE TRIGGER registry_history_update AFTER UPDATE ON worker_registrations "
    "WHEN OLD.status IS NOT 'active' OR NEW.status IS NOT 'active' BEGIN "
    f"INSERT INTO registry_history_changes (sign, {_LIST}) "
    f"SELECT -1, {_values('OLD')} WHERE OLD.status IS NOT 'active'; "
    f"INSERT INTO registry_history_changes (sign, {_LIST}) "
    f"SELECT 1, {_values('NEW')} WHERE NEW.status IS NOT 'active'; END",
    "CREATE TRIGGER registry_history_delete AFTER DELETE ON worker_registrations "
    "WHEN OLD.status IS NOT 'active' BEGIN "
    f"INSERT INTO registry_history_changes (sign, {_LIST}) VALUES (-1, {_values('OLD')}); END",
)


async def create_history_triggers(conn: MigrationConn) -> None:
    """The engine's triggers feeding the change log (migration hook, same transaction).

    PostgreSQL gets its triggers from version 9 (``schema_history_pg``), which
    seeds the log again for databases that reached v6 before it existed; an
    engine this module does not know is refused.
    """
    if not runs_on(conn, SQLITE, "history-digest triggers"):
        return
    for statement in SQLITE_HISTORY_TRIGGERS:
        await conn.run(statement)
