"""Schema version 9: PostgreSQL triggers feeding the history change log, and the log's seed."""

from __future__ import annotations

from supervisor.store.dialect import POSTGRESQL
from supervisor.store.schema.history import CHANGE_COLUMNS
from supervisor.store.schema.hooks import MigrationConn, runs_on

__all__ = ["PG_HISTORY_DESCRIPTION", "XACT_EXPR", "create_pg_history_log"]

PG_HISTORY_DESCRIPTION = "history change log fed by PostgreSQL triggers (no-op on SQLite)"

#: The writing transaction's top-level id, epoch-extended (never wraps around);
#: a savepoint's writes get their top-level transaction's id.
XACT_EXPR = "pg_current_xact_id()::text::bigint"

_LIST = ", ".join(CHANGE_COLUMNS)


def _values(prefix: str) -> str:
    return ", ".join(f"{prefix}.{name}" for name in CHANGE_COLUMNS)


def _statements(log: str, table: str) -> tuple[str, ...]:
    """``log``/``table``: the change log and the registry, schema-qualified, so the
    function writes where it was created whatever search_path a writer runs with."""
    insert = f"INSERT INTO {log} (sign, {_LIST})"
    history = "IS DISTINCT FROM 'active'"
    return (
        # Nothing may write the registry between the seed below and the triggers
        # (CREATE TRIGGER would take this lock too; taken first, the seed is exact).
        f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE",
        # Up to v8 nothing fed the log on PostgreSQL, so what v6 seeded is stale:
        # start it again from the rows as they are, as v6 did on SQLite.
        f"DELETE FROM {log}",
        "UPDATE registry_history_digest SET row_count = 0, irregular_count = 0, "
        "product = '1', through_change_id = 0 WHERE id = 1",
        # Change ids come from a sequence and commit out of order; the fold goes by
        # which transaction wrote a change instead (see postgres_history.py).
        f"ALTER TABLE {log} ADD COLUMN xact BIGINT NOT NULL DEFAULT ({XACT_EXPR})",
        f"CREATE INDEX idx_registry_history_changes_xact ON {log} (xact)",
        f"CREATE FUNCTION registry_history_log() RETURNS trigger LANGUAGE plpgsql AS $fn$ "
        "BEGIN "
        f"IF TG_OP <> 'INSERT' THEN IF OLD.status {history} THEN "
        f"{insert} VALUES (-1, {_values('OLD')}); END IF; END IF; "
        f"IF TG_OP <> 'DELETE' THEN IF NEW.status {history} THEN "
        f"{insert} VALUES (1, {_values('NEW')}); END IF; END IF; "
        "RETURN NULL; END $fn$",
        # A TRUNCATE fires no row trigger: log every historical row leaving first.
        f"CREATE FUNCTION registry_history_truncate() RETURNS trigger LANGUAGE plpgsql AS $fn$ "
        f"BEGIN {insert} SELECT -1, {_LIST} FROM {table} WHERE status {history}; "
        "RETURN NULL; END $fn$",
        # WHEN clauses, so an active row's writes (every heartbeat) call no function.
        f"CREATE TRIGGER registry_history_insert AFTER INSERT ON {table} FOR EACH ROW "
        f"WHEN (NEW.status {history}) EXECUTE FUNCTION registry_history_log()",
        f"CREATE TRIGGER registry_history_update AFTER UPDATE ON {table} FOR EACH ROW "
        f"WHEN (OLD.status {history} OR NEW.status {history}) "
        "EXECUTE FUNCTION registry_history_log()",
        f"CREATE TRIGGER registry_history_delete AFTER DELETE ON {table} FOR EACH ROW "
        f"WHEN (OLD.status {history}) EXECUTE FUNCTION registry_history_log()",
        f"CREATE TRIGGER registry_history_truncate BEFORE TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION registry_history_truncate()",
        f"{insert} SELECT 1, {_LIST} FROM {table} WHERE status {history} ORDER BY worker_identity",
    )


async def create_pg_history_log(conn: MigrationConn) -> None:
    """The triggers and the log's seed (migration hook, same transaction).

    One version for fresh and upgraded databases alike: v6 created the tables
    on PostgreSQL too but nothing wrote them, so every database reaching v9
    seeds the log here. SQLite has had its triggers since v6: nothing to do.
    """
    if not runs_on(conn, POSTGRESQL, "history-digest triggers"):
        return
    (schema,) = (await conn.query("SELECT quote_ident(current_schema())"))[0]
    log, table = f"{schema}.registry_history_changes", f"{schema}.worker_registrations"
    for statement in _statements(log, table):
        await conn.run(statement)
