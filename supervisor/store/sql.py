"""Statement builders shared by every engine: portable SQL with numbered parameters."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from supervisor.store.control_sql import insert_row, upsert_row
from supervisor.store.dialect import Dialect
from supervisor.store.schema.tables import (
    AUDIT_COLUMNS,
    GUARD_COLUMNS,
    LEASE_COLUMNS,
    REGISTRATION_COLUMNS,
)

__all__ = [
    "AUDIT_INSERT_COLUMNS",
    "MAX_IDS_PER_STATEMENT",
    "TOUCH_BATCH_SIZES",
    "expire_due_leases",
    "insert_audit",
    "insert_registration",
    "record_migration",
    "retire_guarded",
    "select_audit",
    "select_due_leases",
    "select_leases",
    "select_registrations",
    "set_status",
    "touch_heartbeats",
    "touch_heartbeats_batch",
    "upsert_lease",
]

# SQLite caps bound parameters per statement (32766 on modern builds, 999 on old ones);
# chunking identity lists well below the old cap keeps one code path for both.
MAX_IDS_PER_STATEMENT = 500

_REGISTRATION_LIST = ", ".join(REGISTRATION_COLUMNS)
_LEASE_LIST = ", ".join(LEASE_COLUMNS)
AUDIT_INSERT_COLUMNS: tuple[str, ...] = AUDIT_COLUMNS[1:]  # event_id is store-generated


# Every builder is cached: the writer runs the same few shapes thousands of times, and
# equal text also lets the sqlite3 statement cache reuse the prepared statement.
def _fixed(statement: str) -> Callable[[Dialect], str]:
    """The builder of a statement whose text is fixed but for its placeholders: written
    with SQLite's numbered ones (``?1``), answered in the spelling of the given dialect."""

    @lru_cache(maxsize=4)
    def build(d: Dialect) -> str:
        # No statement here holds a ``?`` anywhere but in a placeholder.
        return statement.replace("?", d.placeholder_prefix)

    return build


@lru_cache(maxsize=256)
def select_registrations(d: Dialect, *, by_status: bool, id_count: int | None) -> str:
    """Registration rows, optionally filtered by status and/or an IN-list of identities."""
    where: list[str] = []
    n = 0
    if by_status:
        n += 1
        where.append(f"status = {d.param(n)}")
    if id_count is not None:
        where.append(f"worker_identity IN ({d.params(id_count, n + 1)})")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {_REGISTRATION_LIST} FROM worker_registrations{clause} ORDER BY worker_identity"


#: The columns a liveness sweep needs, in this order.
PROCESS_COLUMNS: tuple[str, ...] = ("worker_identity", "pid", "host_id", "process_start_time")

#: Just the process identity of every active row: what a liveness sweep reads.
#: Unordered on purpose: a sweep does not care about order, and ORDER BY makes the
#: first step sort every active row at once, a multi-millisecond block on the
#: database thread that competes with the event loop for a core.
select_active_processes = _fixed(
    f"SELECT {', '.join(PROCESS_COLUMNS)} FROM worker_registrations WHERE status = 'active'"
)

#: Highest epoch ever issued for one (instance, namespace) slot, whatever the status.
max_fencing_epoch = _fixed(
    "SELECT MAX(fencing_epoch) FROM worker_registrations "
    "WHERE client_instance_id = ?1 AND namespace = ?2"
)

#: Active rows that name one pid number (to find an earlier row of the same process).
select_active_by_pid = _fixed(
    f"SELECT {_REGISTRATION_LIST} FROM worker_registrations "
    "WHERE status = 'active' AND pid = ?1 ORDER BY worker_identity"
)


def insert_registration(d: Dialect, columns: tuple[str, ...]) -> str:
    """INSERT of exactly ``columns`` (already validated against REGISTRATION_COLUMNS)."""
    return insert_row(d, "worker_registrations", columns)


#: Heartbeat stamp for one active row; parameters are (worker_identity, stamp).
touch_heartbeats = _fixed(
    "UPDATE worker_registrations SET last_heartbeat_at = ?2 "
    "WHERE worker_identity = ?1 AND status = 'active'"
)


#: Sizes the set-based heartbeat UPDATE is prepared for; a batch is padded up to one, so
#: the connection's statement cache holds five statements, not one per batch size.
TOUCH_BATCH_SIZES: tuple[int, ...] = (1, 4, 16, 64, 256)


@lru_cache(maxsize=16)
def touch_heartbeats_batch(d: Dialect, size: int) -> str:
    """One UPDATE stamping up to ``size`` active rows; parameters are identity, stamp pairs.

    Unused pairs are NULL and match no row. Identities must be distinct (the rows
    changed are counted, so a repeated identity would read as a missing row).
    """
    values = ", ".join(f"({d.param(2 * i + 1)}, {d.param(2 * i + 2)})" for i in range(size))
    return (
        "UPDATE worker_registrations SET last_heartbeat_at = v.column2 "
        f"FROM (VALUES {values}) AS v "
        "WHERE worker_registrations.worker_identity = v.column1 "
        "AND worker_registrations.status = 'active'"
    )


@lru_cache(maxsize=16)
def set_status(d: Dialect, *, stamp_column: str | None) -> str:
    """Status change guarded by the expected status.

    Parameters: (worker_identity, expected_status, new_status[, stamp]).
    """
    stamp = f", {stamp_column} = {d.param(4)}" if stamp_column else ""
    return (
        f"UPDATE worker_registrations SET status = {d.param(3)}{stamp} "
        f"WHERE worker_identity = {d.param(1)} AND status = {d.param(2)}"
    )


@lru_cache(maxsize=8)
def retire_guarded(d: Dialect) -> str:
    """The retirement compare-and-swap.

    Parameters: (retired_at, retired_by, reason, worker_identity, *GUARD_COLUMNS values).
    """
    first_guard = 5
    guards = " AND ".join(
        f"{column} {d.null_safe_eq} {d.param(first_guard + i)}"
        for i, column in enumerate(GUARD_COLUMNS)
    )
    return (
        "UPDATE worker_registrations SET status = 'retired', "
        f"retired_at = {d.param(1)}, retired_by = {d.param(2)}, "
        f"retirement_reason = {d.param(3)} "
        f"WHERE worker_identity = {d.param(4)} AND {guards}"
    )


@lru_cache(maxsize=8)
def select_leases(d: Dialect, *, by_status: bool) -> str:
    """Lease rows, optionally filtered by status."""
    clause = f" WHERE status = {d.param(1)}" if by_status else ""
    return f"SELECT {_LEASE_LIST} FROM leases{clause} ORDER BY lease_id"


def upsert_lease(d: Dialect, columns: tuple[str, ...]) -> str:
    """Insert a lease, or update only the given columns of the existing one.

    ``columns`` starts with lease_id and always holds the NOT NULL columns.
    ON CONFLICT ... DO UPDATE is spelled the same on SQLite (3.24+) and PostgreSQL (9.5+).
    """
    return upsert_row(d, "leases", "lease_id", columns)


# expires_at <= now compares text: valid only for the fixed-width stamps of stamps.py.
#: Active leases whose deadline has passed; parameter: now stamp.
select_due_leases = _fixed(
    f"SELECT {_LEASE_LIST} FROM leases "
    "WHERE status = 'active' AND expires_at <= ?1 "
    "ORDER BY expires_at, lease_id"
)

#: Mark every due active lease expired; parameter: now stamp (same predicate as above).
expire_due_leases = _fixed(
    "UPDATE leases SET status = 'expired' WHERE status = 'active' AND expires_at <= ?1"
)


def insert_audit(d: Dialect) -> str:
    """Append one audit event; parameters in AUDIT_INSERT_COLUMNS order."""
    return insert_row(d, "audit_events", AUDIT_INSERT_COLUMNS)


#: The newest events, newest first; parameter: limit.
select_audit = _fixed(
    f"SELECT {', '.join(AUDIT_COLUMNS)} FROM audit_events ORDER BY event_id DESC LIMIT ?1"
)

#: Ledger row for an applied migration; parameters: version, description, applied_at.
record_migration = _fixed(
    "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?1, ?2, ?3)"
)
