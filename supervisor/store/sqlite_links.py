"""SQLite operations on namespace health verdicts and incident links, in the write transaction."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aiosqlite

from supervisor.errors import StoreError
from supervisor.policy.incident_links import INCIDENT_KEY_FIELDS, decode_pr_numbers
from supervisor.store import control_sql, links_sql
from supervisor.store.control_base import Row
from supervisor.store.dialect import SQLITE
from supervisor.store.schema_links import INCIDENT_LINK_COLUMNS, NAMESPACE_HEALTH_COLUMNS
from supervisor.store.sqlite_exec import execute, fetchall

__all__ = ["SQLiteLinkOps", "health_rows", "link_rows"]

_HEALTH_KEYS = ("session_id", "namespace")
_FLAGS = ("healthy", "ide_namespace_proven", "blocks_merge_workflow")
_TARGET = ("gitea_org", "gitea_repo", "gitea_issue_number")


def _known(columns: tuple[str, ...], row: Mapping[str, Any], what: str) -> tuple[str, ...]:
    unknown = sorted(set(row) - set(columns))
    if unknown:
        raise StoreError(f"unknown {what} column(s): {', '.join(unknown)}")
    return tuple(c for c in columns if c in row)


def health_rows(found: Sequence[Sequence[Any]]) -> list[Row]:
    """Stored verdicts with flags as bools and the assessment decoded."""
    out: list[Row] = []
    for raw in found:
        row = dict(zip(NAMESPACE_HEALTH_COLUMNS, raw, strict=True))
        for flag in _FLAGS:
            row[flag] = bool(row[flag])
        try:
            row["assessment"] = json.loads(row["assessment"])
        except (TypeError, ValueError):
            row["assessment"] = None
        out.append(row)
    return out


def link_rows(found: Sequence[Sequence[Any]]) -> list[Row]:
    """Incident links with the PR list decoded and scope shown as '' even if stored NULL."""
    out: list[Row] = []
    for raw in found:
        row = dict(zip(INCIDENT_LINK_COLUMNS, raw, strict=True))
        row["linked_pr_numbers"] = decode_pr_numbers(row["linked_pr_numbers"])
        for field in INCIDENT_KEY_FIELDS[1:4]:
            row[field] = row[field] or ""
        out.append(row)
    return out


class SQLiteLinkOps:
    """Mixed into SQLiteControlTx (see control_base.ControlTx for the contract)."""

    _live: Callable[[], aiosqlite.Connection]

    async def namespace_health(self, session_id: str) -> list[Row]:
        statement = control_sql.select_where(
            SQLITE,
            "namespace_health",
            NAMESPACE_HEALTH_COLUMNS,
            ("session_id",),
            order_by="namespace",
        )
        return health_rows(await fetchall(self._live(), statement, (session_id,)))

    async def put_namespace_health(self, row: Mapping[str, Any]) -> None:
        columns = _known(NAMESPACE_HEALTH_COLUMNS, row, "namespace_health")
        values = []
        for column in columns:
            value = row[column]
            if column in _FLAGS:
                value = int(bool(value))
            elif column == "assessment":
                value = json.dumps(value, sort_keys=True, allow_nan=False, default=str)
            values.append(value)
        statement = links_sql.upsert_composite(SQLITE, "namespace_health", _HEALTH_KEYS, columns)
        await execute(self._live(), statement, values)

    async def incident_link(self, key: Mapping[str, Any]) -> Row | None:
        statement = control_sql.select_where(
            SQLITE, "incident_links", INCIDENT_LINK_COLUMNS, INCIDENT_KEY_FIELDS
        )
        found = await fetchall(self._live(), statement, [key[f] for f in INCIDENT_KEY_FIELDS])
        return link_rows(found)[0] if found else None

    async def insert_incident_link(self, row: Mapping[str, Any]) -> int:
        columns = _known(INCIDENT_LINK_COLUMNS[1:], row, "incident_links")
        statement = links_sql.insert_returning(SQLITE, "incident_links", columns, "link_id")
        found = await fetchall(self._live(), statement, [_encode(c, row[c]) for c in columns])
        return int(found[0][0])

    async def update_incident_link(self, link_id: int, changes: Mapping[str, Any]) -> bool:
        columns = _known(INCIDENT_LINK_COLUMNS[1:], changes, "incident_links")
        if not columns:
            raise StoreError("an incident link update needs columns other than link_id")
        statement = links_sql.update_by_key(SQLITE, "incident_links", "link_id", columns)
        values = [link_id, *(_encode(c, changes[c]) for c in columns)]
        return await execute(self._live(), statement, values) == 1

    async def incident_links_for_issue(
        self, *, gitea_org: str, gitea_repo: str, gitea_issue_number: int
    ) -> list[Row]:
        statement = control_sql.select_where(
            SQLITE, "incident_links", INCIDENT_LINK_COLUMNS, _TARGET, order_by="link_id"
        )
        params = (gitea_org, gitea_repo, gitea_issue_number)
        return link_rows(await fetchall(self._live(), statement, params))


def _encode(column: str, value: Any) -> Any:
    if column == "linked_pr_numbers" and isinstance(value, list | tuple):
        return json.dumps(list(value))
    return value
