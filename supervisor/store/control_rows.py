"""Row mapping for the control-plane tables: validation before SQL, JSON columns both ways."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from supervisor.errors import StoreError
from supervisor.store.rows import (
    as_dicts,
    decoded_json,
    detail_json,
    known_columns,
    refuse_unknown,
)
from supervisor.store.schema.control import (
    ASSIGNMENT_COLUMNS,
    ASSIGNMENT_STATUSES,
    CONTROL_EVENT_COLUMNS,
    SESSION_COLUMNS,
    SESSION_STATUSES,
    STORE_WORK_KINDS,
    STORE_WORK_STATES,
    TERMINAL_LOCK_COLUMNS,
    TERMINAL_LOCK_STATUSES,
    WORK_ITEM_COLUMNS,
)
from supervisor.store.schema.tables import LEASE_COLUMNS, LEASE_STATUSES
from supervisor.store.stamps import require_stamp

__all__ = [
    "EVENT_INSERT_COLUMNS",
    "TABLES",
    "Table",
    "as_dicts",
    "assignment_rows",
    "change_params",
    "event_params",
    "event_rows",
    "row_params",
]

#: event_id is store-generated.
EVENT_INSERT_COLUMNS: tuple[str, ...] = CONTROL_EVENT_COLUMNS[1:]
_JSON_COLUMNS = frozenset({"allowed_actions", "forbidden_actions"})
_STAMP_COLUMNS = frozenset({"expires_at"})


class Table:
    """What the mapping knows of one table: columns, key, NOT NULL columns, statuses."""

    __slots__ = ("columns", "key", "name", "required", "statuses")

    def __init__(
        self,
        name: str,
        columns: tuple[str, ...],
        *,
        required: tuple[str, ...],
        statuses: tuple[str, ...],
    ) -> None:
        self.name = name
        self.columns = columns
        self.key = columns[0]
        self.required = required
        self.statuses = statuses


TABLES: Mapping[str, Table] = {
    "sessions": Table(
        "sessions", SESSION_COLUMNS, required=("session_id", "status"), statuses=SESSION_STATUSES
    ),
    "work_items": Table(
        "work_items",
        WORK_ITEM_COLUMNS,
        required=("work_item_key", "remote", "org", "repo", "kind", "number", "state"),
        statuses=(),
    ),
    "assignments": Table(
        "assignments",
        ASSIGNMENT_COLUMNS,
        required=(
            "assignment_id",
            "lease_id",
            "work_item_key",
            "session_id",
            "role",
            "status",
        ),
        statuses=ASSIGNMENT_STATUSES,
    ),
    "terminal_locks": Table(
        "terminal_locks",
        TERMINAL_LOCK_COLUMNS,
        required=("lock_id", "remote", "org", "repo", "terminal_pr", "status"),
        statuses=TERMINAL_LOCK_STATUSES,
    ),
    "leases": Table(
        "leases",
        LEASE_COLUMNS,
        required=("lease_id", "work_item_key", "status"),
        statuses=LEASE_STATUSES,
    ),
}


def _value(table: Table, column: str, value: Any) -> Any:
    if column == "status":
        allowed = table.statuses or (LEASE_STATUSES if table.name == "leases" else ())
        if value not in allowed:
            raise StoreError(
                f"{table.name} status must be one of {', '.join(allowed)}; got {value!r}"
            )
    elif column == "kind" and value not in STORE_WORK_KINDS:
        # Refused here, before any SQL; the CHECK constraint is only the backstop.
        raise StoreError(
            f"work item kind must be one of {', '.join(STORE_WORK_KINDS)}; got {value!r} "
            "(monitoring incidents are never work items)"
        )
    elif column == "state" and value not in STORE_WORK_STATES:
        raise StoreError(f"work item state must be one of {', '.join(STORE_WORK_STATES)}")
    elif column in _STAMP_COLUMNS and value is not None:
        require_stamp(value, column)
    elif column in _JSON_COLUMNS and value is not None:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise StoreError(f"{column} must be a list of strings")
        return json.dumps(list(value))
    return value


def _known(table: Table, row: Mapping[str, Any]) -> tuple[str, ...]:
    return known_columns(row, frozenset(table.columns), table.columns, table.name)


def row_params(table: Table, row: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """Columns (key first, schema order) and encoded values for an insert or upsert."""
    columns = _known(table, row)
    missing = [c for c in table.required if row.get(c) is None or row.get(c) == ""]
    if missing:
        raise StoreError(f"a {table.name} row needs {', '.join(missing)}")
    return columns, tuple(_value(table, c, row[c]) for c in columns)


def change_params(
    table: Table, changes: Mapping[str, Any]
) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """Columns and values for a guarded update; the key itself never changes."""
    columns = _known(table, changes)
    if not columns or table.key in columns:
        raise StoreError(f"an update of {table.name} needs columns other than {table.key}")
    return columns, tuple(_value(table, c, changes[c]) for c in columns)


def event_params(event: Mapping[str, Any]) -> tuple[Any, ...]:
    """Values in EVENT_INSERT_COLUMNS order; detail becomes canonical JSON text."""
    refuse_unknown(event, frozenset(EVENT_INSERT_COLUMNS), "control event")
    require_stamp(event.get("at"), "at")
    if not event.get("kind"):
        raise StoreError("a control event needs a kind")
    detail = detail_json(event.get("detail"), "event")
    return tuple(detail if c == "detail" else event.get(c) for c in EVENT_INSERT_COLUMNS)


def assignment_rows(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Assignment dicts with the action lists decoded to tuples."""
    out = as_dicts(ASSIGNMENT_COLUMNS, rows)
    for row in out:
        for column in _JSON_COLUMNS:
            decoded = decoded_json(row[column])
            row[column] = tuple(decoded) if isinstance(decoded, list) else ()
    return out


def event_rows(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    out = as_dicts(CONTROL_EVENT_COLUMNS, rows)
    for row in out:
        row["detail"] = decoded_json(row["detail"])
    return out
