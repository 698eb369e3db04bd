"""Row mapping and input validation shared by every engine: dicts in, parameter tuples out."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from math import isnan
from sys import intern
from typing import Any

from supervisor.errors import StoreError
from supervisor.store.schema.tables import (
    AUDIT_COLUMNS,
    GUARD_COLUMNS,
    LEASE_COLUMNS,
    LEASE_STATUSES,
    REGISTRATION_COLUMNS,
    REGISTRATION_STATUSES,
)
from supervisor.store.sql import AUDIT_INSERT_COLUMNS
from supervisor.store.stamps import require_stamp

__all__ = [
    "BATCH_NUMBER_COLUMNS",
    "BATCH_TEXT_COLUMNS",
    "SHARED_TEXT_COLUMNS",
    "STAMPABLE_STATUS_COLUMNS",
    "as_dicts",
    "audit_params",
    "audit_rows",
    "decoded_json",
    "detail_json",
    "dict_builder",
    "known_columns",
    "lease_params",
    "refuse_unknown",
    "registration_params",
    "retire_params",
    "status_params",
]

# The only column set_status may stamp; everything else has its own guarded path.
STAMPABLE_STATUS_COLUMNS: frozenset[str] = frozenset({"released_at"})

_REGISTRATION_SET = frozenset(REGISTRATION_COLUMNS)
_LEASE_SET = frozenset(LEASE_COLUMNS)
_AUDIT_SET = frozenset(AUDIT_INSERT_COLUMNS)


#: Registration columns whose values are one worker's own (its identities, its process,
#: a moment of its own life): nothing to share among rows.
_OWN_COLUMNS: frozenset[str] = frozenset(
    {
        "worker_identity",
        "session_id",
        "pid",
        "process_identity",
        "fencing_epoch",
        "process_start_time",
        "retired_at",
        "released_at",
    }
)

#: Registration columns whose values repeat among rows written together (one launch,
#: generation and client for its five workers; one stamp for every beat of a heartbeat
#: flush; a configured ttl) but take many values over time: shared among the rows of
#: one read only. Texts, and the two numbers with their declared type.
BATCH_TEXT_COLUMNS: frozenset[str] = frozenset(
    {
        "client_instance_id",
        "generation_id",
        "started_at",
        "last_heartbeat_at",
        "client_process_start_time",
    }
)
BATCH_NUMBER_COLUMNS: Mapping[str, type] = {"heartbeat_ttl_seconds": float, "client_pid": int}

# Every other registration column has few distinct texts in a fleet (one host, boot,
# repository, profile or revision for many workers). The driver builds a new string per
# row; as_dicts keeps one per distinct text, several MB per 10,000 active rows. Few
# enough to intern: one object across every read, not just within one.
SHARED_TEXT_COLUMNS: frozenset[str] = frozenset(REGISTRATION_COLUMNS).difference(
    _OWN_COLUMNS, BATCH_TEXT_COLUMNS, BATCH_NUMBER_COLUMNS
)


def dict_builder(columns: Sequence[str]) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """Builds plain dicts keyed by ``columns`` from value rows, as ``as_dicts`` does.

    Equal texts of a ``SHARED_TEXT_COLUMNS`` column are one string object in every
    row of every read (``sys.intern``: an interned string is let go with its last
    reference, and a row re-read on its own shares the texts of the rows around it);
    equal texts of a ``BATCH_TEXT_COLUMNS`` column, and equal numbers of the declared
    type of a ``BATCH_NUMBER_COLUMNS`` one, are one object across the rows one
    builder makes. Values are immutable, so only memory differs. Only values of one
    type share a table, as ``1``, ``1.0`` and ``True`` are equal dict keys; float
    zeros are left alone, as 0.0 and -0.0 are equal but not the same value (and NaN
    equals nothing). Any other value is the driver's own.
    """
    texts_at = [index for index, column in enumerate(columns) if column in SHARED_TEXT_COLUMNS]
    batch_at = [index for index, column in enumerate(columns) if column in BATCH_TEXT_COLUMNS]
    numbers_at: list[tuple[int, type, Callable[[Any, Any], Any]]] = [
        (index, BATCH_NUMBER_COLUMNS[column], {}.setdefault)
        for index, column in enumerate(columns)
        if column in BATCH_NUMBER_COLUMNS
    ]
    if not texts_at and not batch_at and not numbers_at:
        return lambda row: dict(zip(columns, row, strict=True))
    batch: dict[str, str] = {}
    share = batch.setdefault

    def build(row: Sequence[Any]) -> dict[str, Any]:
        values: list[Any] = list(row)
        for index in texts_at:
            value = values[index]
            if value.__class__ is str:
                values[index] = intern(value)
        for index in batch_at:
            value = values[index]
            if value.__class__ is str:
                values[index] = share(value, value)
        for index, kind, share_number in numbers_at:
            number = values[index]
            if number.__class__ is kind and number and not _nan(number):
                values[index] = share_number(number, number)
        return dict(zip(columns, values, strict=True))

    return build


def _nan(value: Any) -> bool:
    return value.__class__ is float and isnan(value)


def as_dicts(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Plain dicts keyed by column name; values as the driver returned them
    (repeated texts and numbers of some columns shared, see ``dict_builder``)."""
    return list(map(dict_builder(columns), rows))


def refuse_unknown(row: Mapping[str, Any], known: AbstractSet[str], what: str) -> None:
    """Refuse any key of ``row`` that is not a column of ``what``."""
    unknown = sorted(set(row) - known)
    if unknown:
        # Refuse rather than drop: a silently ignored key is a field the caller
        # believes is stored and is not.
        raise StoreError(f"unknown {what} column(s): {', '.join(unknown)}")


def known_columns(
    row: Mapping[str, Any], known: AbstractSet[str], ordered: Sequence[str], what: str
) -> tuple[str, ...]:
    """The columns of ``ordered`` that ``row`` holds, once no key is unknown."""
    refuse_unknown(row, known, what)
    return tuple(c for c in ordered if c in row)


def detail_json(detail: Any, what: str) -> str | None:
    """An event's ``detail`` as canonical JSON text (``None`` stays ``None``)."""
    if detail is None:
        return None
    try:
        # sort_keys: the same detail always serializes to the same text.
        # allow_nan=False: PostgreSQL's JSON types reject NaN/Infinity.
        return json.dumps(detail, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} detail is not JSON-serializable: {exc}") from exc


def decoded_json(raw: Any) -> Any:
    """Text read back from a JSON column, decoded; anything else as it is."""
    if isinstance(raw, str):
        # Text written by something other than this store stays as it is, rather
        # than failing a read that only feeds an operator view.
        with contextlib.suppress(ValueError):
            return json.loads(raw)
    return raw


def _check_status(value: Any, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise StoreError(f"{what} must be one of {', '.join(allowed)}; got {value!r}")


def registration_params(row: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """Columns (in schema order) and values for inserting one registration."""
    columns = known_columns(row, _REGISTRATION_SET, REGISTRATION_COLUMNS, "registration")
    if "worker_identity" not in row or not row["worker_identity"]:
        raise StoreError("a registration needs a non-empty worker_identity")
    _check_status(row.get("status"), REGISTRATION_STATUSES, "registration status")
    return columns, tuple(row[c] for c in columns)


def status_params(
    worker_identity: str,
    *,
    expected_status: str,
    new_status: str,
    stamp_column: str | None,
    stamp: str | None,
) -> tuple[Any, ...]:
    """Parameters for the plain status UPDATE (see sql.set_status), after refusing
    status changes that must not go through that path."""
    _check_status(expected_status, REGISTRATION_STATUSES, "expected_status")
    _check_status(new_status, REGISTRATION_STATUSES, "new_status")
    if new_status == "retired":
        # Retirement must assert the fencing columns and record who/why; a bare
        # status flip would bypass the compare-and-swap.
        raise StoreError("use retire_guarded to retire a registration")
    if stamp_column is not None and stamp_column not in STAMPABLE_STATUS_COLUMNS:
        raise StoreError(f"set_status cannot stamp column {stamp_column!r}")
    if (stamp_column is None) != (stamp is None):
        raise StoreError("stamp_column and stamp must be given together")
    params: tuple[Any, ...] = (worker_identity, expected_status, new_status)
    return params if stamp_column is None else (*params, stamp)


def retire_params(
    expected: Mapping[str, Any], *, retired_at: str, retired_by: str, reason: str
) -> tuple[Any, ...]:
    """Parameters for the guarded retirement UPDATE (see sql.retire_guarded)."""
    missing = [c for c in ("worker_identity", *GUARD_COLUMNS) if c not in expected]
    if missing:
        # A missing key must not be read as NULL: the guard would then match a row
        # whose column really is NULL and retire something the planner never saw.
        raise StoreError(f"retire_guarded needs the read value of: {', '.join(missing)}")
    if expected["status"] != "active":
        raise StoreError(f"only active registrations can be retired, not {expected['status']!r}")
    require_stamp(retired_at, "retired_at")
    if not retired_by or not reason:
        raise StoreError("retire_guarded needs a non-empty retired_by and reason")
    return (
        retired_at,
        retired_by,
        reason,
        expected["worker_identity"],
        *(expected[c] for c in GUARD_COLUMNS),
    )


def lease_params(lease: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """Columns (lease_id first, then schema order) and values for an upsert.

    lease_id, work_item_key and status are required; other absent columns are NULL on
    insert and left untouched on update.
    """
    columns = known_columns(lease, _LEASE_SET, LEASE_COLUMNS, "lease")
    for required in ("lease_id", "work_item_key"):
        # Both engines check NOT NULL on the would-be inserted row before resolving
        # the conflict, so even an update must carry the NOT NULL columns.
        if not lease.get(required):
            raise StoreError(f"a lease needs a non-empty {required}")
    _check_status(lease.get("status"), LEASE_STATUSES, "lease status")
    if lease.get("expires_at") is not None:
        # Expiry compares expires_at as text; a stamp in any other shape would sort
        # wrongly and expire the lease early or never.
        require_stamp(lease["expires_at"], "expires_at")
    return columns, tuple(lease[c] for c in columns)


def audit_params(event: Mapping[str, Any]) -> tuple[Any, ...]:
    """Values in AUDIT_INSERT_COLUMNS order; detail becomes canonical JSON text."""
    refuse_unknown(event, _AUDIT_SET, "audit")
    for required in ("at", "action"):
        if not event.get(required):
            raise StoreError(f"an audit event needs a non-empty {required}")
    detail = detail_json(event.get("detail"), "audit")
    return tuple(detail if c == "detail" else event.get(c) for c in AUDIT_INSERT_COLUMNS)


def audit_rows(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Audit dicts with detail decoded back from JSON (kept as text if it is not JSON)."""
    events = as_dicts(AUDIT_COLUMNS, rows)
    for event in events:
        event["detail"] = decoded_json(event["detail"])
    return events
