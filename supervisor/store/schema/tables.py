"""Versioned schema: column sets, portable DDL migrations and the schema_migrations ledger."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from supervisor.policy.retirement.fingerprints import (
    FENCING_FIELDS,
    FINGERPRINT_STANDING_FIELDS,
    FINGERPRINT_WORKER_FIELDS,
)
from supervisor.store.schema.active import ACTIVE_DESCRIPTION, create_active_log
from supervisor.store.schema.control import V3_DESCRIPTION, V3_STATEMENTS
from supervisor.store.schema.history import (
    HISTORY_DESCRIPTION,
    HISTORY_STATEMENTS,
    create_history_triggers,
)
from supervisor.store.schema.history_pg import PG_HISTORY_DESCRIPTION, create_pg_history_log
from supervisor.store.schema.hooks import MigrationConn
from supervisor.store.schema.hosts import V5_DESCRIPTION, V5_STATEMENTS
from supervisor.store.schema.links import V4_DESCRIPTION, V4_STATEMENTS, migrate_incident_links
from supervisor.store.schema.observed import V11_DESCRIPTION, V11_STATEMENTS
from supervisor.store.schema.stamps import STAMPS_DESCRIPTION, create_stamp_batches

__all__ = [
    "AUDIT_COLUMNS",
    "CURRENT_VERSION",
    "GUARD_COLUMNS",
    "LEASE_COLUMNS",
    "LEASE_STATUSES",
    "MIGRATIONS",
    "REGISTRATION_COLUMNS",
    "REGISTRATION_STATUSES",
    "SCHEMA_MIGRATIONS_DDL",
    "V1_REGISTRATION_COLUMNS",
    "Migration",
    "MigrationConn",
]

# Portability rules for every statement below (they must also run on PostgreSQL):
# * only TEXT, INTEGER, BIGINT and DOUBLE PRECISION column types. DOUBLE PRECISION
#   rather than REAL because PostgreSQL's REAL is 4-byte: a ttl of 0.1 would come back
#   as 0.10000000149 and the NULL-safe guard comparison against the 8-byte value the
#   planner read would never match. SQLite maps both names to REAL affinity, so the
#   stored values are identical there.
# * store-generated ids use the ``{auto_id_pk}`` token, rendered per dialect
#   (``INTEGER PRIMARY KEY`` rowid alias on SQLite, an identity column on PostgreSQL):
#   no AUTOINCREMENT, no sequences spelled out here.
# * one statement per ALTER TABLE ADD COLUMN (SQLite cannot add several at once).

REGISTRATION_STATUSES: tuple[str, ...] = ("active", "released", "superseded", "retired")
LEASE_STATUSES: tuple[str, ...] = ("active", "released", "expired")

# Kept for deployment bookkeeping (which configuration revision a worker started,
# loaded and runs), never a retirement input.
_REVISION_COLUMNS: tuple[str, ...] = (
    "startup_revision",
    "loaded_revision",
    "parity_revision",
    "live_revision",
)

# The token columns are the retirement policy's (its FINGERPRINT_FIELDS, in parts);
# what lies between them here is every column a token leaves out.
V1_REGISTRATION_COLUMNS: tuple[str, ...] = (
    *FINGERPRINT_WORKER_FIELDS,
    "token_fingerprint",
    *FINGERPRINT_STANDING_FIELDS,
    *_REVISION_COLUMNS,
)

# Version 2 appends these (ALTER TABLE appends, so fresh and upgraded databases
# end up with the same physical column order).
_V2_REGISTRATION_COLUMNS: tuple[str, ...] = (
    *FENCING_FIELDS,
    "retired_at",
    "retired_by",
    "retirement_reason",
    "released_at",
)

# Version 7 appends the launching client of an ``exec`` sidecar (its pid and start
# time), so a worker that outlives its client can be reported as orphaned.
_V7_REGISTRATION_COLUMNS: tuple[str, ...] = ("client_pid", "client_process_start_time")

REGISTRATION_COLUMNS: tuple[str, ...] = (
    V1_REGISTRATION_COLUMNS + _V2_REGISTRATION_COLUMNS + _V7_REGISTRATION_COLUMNS
)

# What the retirement compare-and-swap asserts unchanged between plan and write:
# every identity, liveness and fencing column that a retirement decision rests on.
GUARD_COLUMNS: tuple[str, ...] = (
    "status",
    "last_heartbeat_at",
    "generation_id",
    "session_id",
    "fencing_epoch",
    "pid",
    "host_id",
    "boot_id",
    "process_start_time",
    "client_instance_id",
    "namespace",
    "heartbeat_ttl_seconds",
)

LEASE_COLUMNS: tuple[str, ...] = (
    "lease_id",
    "work_item_key",
    "session_id",
    "owner_pid",
    "session_pid",
    "role",
    "phase",
    "status",
    "generation",
    "acquired_at",
    "heartbeat_at",
    "expires_at",
    "released_at",
)

AUDIT_COLUMNS: tuple[str, ...] = ("event_id", "at", "actor", "role", "action", "outcome", "detail")


class Migration(NamedTuple):
    """One schema step: applied at most once, in its own transaction, in version order."""

    version: int
    description: str
    statements: tuple[str, ...]
    #: Runs after ``statements`` in the same transaction, for steps that depend on what
    #: the database already holds; raising rolls the whole version back.
    hook: Callable[[MigrationConn], Awaitable[None]] | None = None


SCHEMA_MIGRATIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "version INTEGER PRIMARY KEY, description TEXT, applied_at TEXT)"
)

_V1_TYPES: dict[str, str] = {
    "worker_identity": "TEXT PRIMARY KEY",
    "pid": "INTEGER",
    "heartbeat_ttl_seconds": "DOUBLE PRECISION",
    # BIGINT: a fencing token only grows; INTEGER is 4-byte on PostgreSQL.
    "fencing_epoch": "BIGINT",
    "status": "TEXT NOT NULL",
}


def _column_list(columns: tuple[str, ...], types: dict[str, str]) -> str:
    return ", ".join(f"{name} {types.get(name, 'TEXT')}" for name in columns)


_V1 = Migration(
    version=1,
    description="worker registry (pre-retirement schema)",
    statements=(
        f"CREATE TABLE worker_registrations ({_column_list(V1_REGISTRATION_COLUMNS, _V1_TYPES)})",
        "CREATE INDEX idx_worker_registrations_status ON worker_registrations (status)",
        "CREATE INDEX idx_worker_registrations_client_instance_id "
        "ON worker_registrations (client_instance_id)",
        "CREATE INDEX idx_worker_registrations_session_id ON worker_registrations (session_id)",
    ),
)

_LEASE_TYPES: dict[str, str] = {
    "lease_id": "TEXT PRIMARY KEY",
    "work_item_key": "TEXT NOT NULL",
    "owner_pid": "INTEGER",
    "session_pid": "INTEGER",
    "status": "TEXT NOT NULL",
}

_V2 = Migration(
    version=2,
    description="fencing triple, retirement bookkeeping, leases and audit events",
    statements=(
        # Existing rows get NULL in every new column; the retirement policy reads a
        # NULL fencing triple as "cannot prove the incarnation" and preserves the row.
        *(
            f"ALTER TABLE worker_registrations ADD COLUMN {name} TEXT"
            for name in _V2_REGISTRATION_COLUMNS
        ),
        f"CREATE TABLE leases ({_column_list(LEASE_COLUMNS, _LEASE_TYPES)})",
        "CREATE INDEX idx_leases_status ON leases (status)",
        "CREATE INDEX idx_leases_work_item_key ON leases (work_item_key)",
        "CREATE TABLE audit_events ("
        "event_id {auto_id_pk}, at TEXT NOT NULL, actor TEXT, role TEXT, "
        "action TEXT NOT NULL, outcome TEXT, detail TEXT)",
    ),
)

# Version 3 only adds tables and indexes (see schema_control.py); the one index it puts
# on an existing table refuses the upgrade if a work item already has two active leases,
# rather than choosing which holder to drop.
_V3 = Migration(version=3, description=V3_DESCRIPTION, statements=V3_STATEMENTS)

# Version 4 adds the namespace health table and builds incident_links, adopting a
# legacy nullable-scope incident_links table when one is there (see schema/links.py).
_V4 = Migration(
    version=4,
    description=V4_DESCRIPTION,
    statements=V4_STATEMENTS,
    hook=migrate_incident_links,
)

# Version 5 only adds the host_leases table (schema_hosts.py).
_V5 = Migration(version=5, description=V5_DESCRIPTION, statements=V5_STATEMENTS)

# Version 6: the maintained history digest (see schema_history.py); its hook creates
# the engine's triggers that feed the change log.
_V6 = Migration(
    version=6,
    description=HISTORY_DESCRIPTION,
    statements=HISTORY_STATEMENTS,
    hook=create_history_triggers,
)

# Version 7 appends the launching client of an ``exec`` sidecar (orphan detection).
_V7 = Migration(
    version=7,
    description="launching client of a worker (orphan detection)",
    statements=(
        "ALTER TABLE worker_registrations ADD COLUMN client_pid INTEGER",
        "ALTER TABLE worker_registrations ADD COLUMN client_process_start_time TEXT",
    ),
)

# Version 8: the change log of registration rows behind the SQLite store's cache of
# active rows (schema_active.py); its hook creates the table and triggers on SQLite
# only, so it is a no-op on PostgreSQL.
_V8 = Migration(version=8, description=ACTIVE_DESCRIPTION, statements=(), hook=create_active_log)

# Version 9: the PostgreSQL triggers feeding v6's change log, and the log seeded
# again from the rows (schema_history_pg.py); a no-op on SQLite, which has had its
# triggers since v6.
_V9 = Migration(
    version=9, description=PG_HISTORY_DESCRIPTION, statements=(), hook=create_pg_history_log
)

# Version 10: the heartbeat batch counter and the trigger logging every stamp written
# outside a batch the writing store journals itself (schema_stamps.py), so the active
# cache needs no pass over every stamp; SQLite only, a no-op on PostgreSQL.
_V10 = Migration(
    version=10, description=STAMPS_DESCRIPTION, statements=(), hook=create_stamp_batches
)

# Version 11 only adds the observed_servers table (schema/observed.py).
_V11 = Migration(version=11, description=V11_DESCRIPTION, statements=V11_STATEMENTS)

MIGRATIONS: tuple[Migration, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10, _V11)
CURRENT_VERSION = MIGRATIONS[-1].version
