"""Control-plane schema (version 3): sessions, work items, assignments, terminal locks, events."""

from __future__ import annotations

__all__ = [
    "ASSIGNMENT_COLUMNS",
    "ASSIGNMENT_STATUSES",
    "CONTROL_EVENT_COLUMNS",
    "SESSION_COLUMNS",
    "SESSION_STATUSES",
    "STORE_WORK_KINDS",
    "STORE_WORK_STATES",
    "TERMINAL_LOCK_COLUMNS",
    "TERMINAL_LOCK_STATUSES",
    "V3_DESCRIPTION",
    "V3_STATEMENTS",
    "WORK_ITEM_COLUMNS",
]

# The same portability rules as schema.py: TEXT/INTEGER/BIGINT only, ``{auto_id_pk}``
# for generated ids, one statement per step. Partial unique indexes (``WHERE status =
# 'active'``) are spelled identically on SQLite (3.8+) and PostgreSQL.

#: Checked in the row mapping before any SQL, and again by a CHECK constraint, so no
#: code path (nor a hand-written INSERT) can store a monitoring incident as work.
STORE_WORK_KINDS: tuple[str, ...] = ("issue", "pr")
STORE_WORK_STATES: tuple[str, ...] = ("open", "closed", "merged")
SESSION_STATUSES: tuple[str, ...] = ("active", "ended")
ASSIGNMENT_STATUSES: tuple[str, ...] = ("active", "released", "expired")
TERMINAL_LOCK_STATUSES: tuple[str, ...] = ("active", "cleared", "superseded")

SESSION_COLUMNS: tuple[str, ...] = (
    "session_id",
    "role",
    "profile",
    "namespace",
    "worker_identity",
    "pid",
    "status",
    "started_at",
    "last_heartbeat_at",
    "updated_at",
)

WORK_ITEM_COLUMNS: tuple[str, ...] = (
    "work_item_key",
    "remote",
    "org",
    "repo",
    "kind",
    "number",
    "state",
    "title",
    "priority",
    "current_head_sha",
    "created_at",
    "updated_at",
)

ASSIGNMENT_COLUMNS: tuple[str, ...] = (
    "assignment_id",
    "lease_id",
    "work_item_key",
    "session_id",
    "role",
    "phase",
    "expected_head_sha",
    "allowed_actions",
    "forbidden_actions",
    "ttl_seconds",
    "status",
    "created_at",
    "updated_at",
)

TERMINAL_LOCK_COLUMNS: tuple[str, ...] = (
    "lock_id",
    "remote",
    "org",
    "repo",
    "terminal_pr",
    "review_id",
    "decision",
    "status",
    "cleanup_state",
    "set_by",
    "created_at",
    "updated_at",
)

CONTROL_EVENT_COLUMNS: tuple[str, ...] = (
    "event_id",
    "at",
    "kind",
    "work_item_key",
    "session_id",
    "lease_id",
    "detail",
)

_TYPES: dict[str, str] = {
    "pid": "INTEGER",
    # DOUBLE PRECISION, not REAL: see schema.py (REAL is 4-byte on PostgreSQL).
    "ttl_seconds": "DOUBLE PRECISION",
    "number": "INTEGER NOT NULL",
    "priority": "INTEGER",
    "terminal_pr": "INTEGER NOT NULL",
    "status": "TEXT NOT NULL",
    "remote": "TEXT NOT NULL",
    "org": "TEXT NOT NULL",
    "repo": "TEXT NOT NULL",
    "lease_id": "TEXT NOT NULL",
    "work_item_key": "TEXT NOT NULL",
    "session_id": "TEXT NOT NULL",
    "role": "TEXT NOT NULL",
}


def _columns(columns: tuple[str, ...], primary: str, **overrides: str) -> str:
    types = {**_TYPES, **overrides, primary: "TEXT PRIMARY KEY"}
    return ", ".join(f"{name} {types.get(name, 'TEXT')}" for name in columns)


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


V3_DESCRIPTION = "control plane: sessions, work items, assignments, terminal locks, events"

V3_STATEMENTS: tuple[str, ...] = (
    f"CREATE TABLE sessions ({_columns(SESSION_COLUMNS, 'session_id', role='TEXT')})",
    f"CREATE TABLE work_items ({_columns(WORK_ITEM_COLUMNS, 'work_item_key')}, "
    f"CHECK (kind IN ({_in(STORE_WORK_KINDS)})), "
    f"CHECK (state IN ({_in(STORE_WORK_STATES)})))",
    "CREATE UNIQUE INDEX uq_work_items_ref ON work_items (remote, org, repo, kind, number)",
    f"CREATE TABLE assignments ({_columns(ASSIGNMENT_COLUMNS, 'assignment_id')})",
    "CREATE INDEX idx_assignments_lease_id ON assignments (lease_id)",
    "CREATE INDEX idx_assignments_session ON assignments (session_id, status)",
    # At most one active assignment and one active lease per work item, enforced by
    # the database itself: the writer actor serializes one supervisor's grants, and
    # these indexes still hold when several supervisors share one PostgreSQL.
    "CREATE UNIQUE INDEX uq_assignments_active_item ON assignments (work_item_key) "
    "WHERE status = 'active'",
    "CREATE UNIQUE INDEX uq_leases_active_item ON leases (work_item_key) WHERE status = 'active'",
    f"CREATE TABLE terminal_locks ({_columns(TERMINAL_LOCK_COLUMNS, 'lock_id')})",
    "CREATE UNIQUE INDEX uq_terminal_locks_active_repo ON terminal_locks (remote, org, repo) "
    "WHERE status = 'active'",
    "CREATE TABLE control_events (event_id {auto_id_pk}, at TEXT NOT NULL, kind TEXT NOT NULL, "
    "work_item_key TEXT, session_id TEXT, lease_id TEXT, detail TEXT)",
    "CREATE INDEX idx_control_events_item ON control_events (work_item_key)",
)
