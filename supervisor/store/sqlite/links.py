"""SQLite operations on namespace health verdicts and incident links, in the write transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import aiosqlite

from supervisor.errors import StoreError
from supervisor.policy.control.incident_links import INCIDENT_KEY_FIELDS, INCIDENT_TARGET_FIELDS
from supervisor.store import control_sql, links_sql
from supervisor.store.control_base import Row
from supervisor.store.dialect import SQLITE
from supervisor.store.links_rows import health_params, health_rows, link_params, link_rows
from supervisor.store.schema.links import INCIDENT_LINK_COLUMNS, NAMESPACE_HEALTH_COLUMNS
from supervisor.store.sqlite.connection import execute, fetchall

__all__ = ["SQLiteLinkOps"]

_HEALTH_KEYS = ("session_id", "namespace")


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
        columns, values = health_params(row)
        statement = links_sql.upsert_composite(SQLITE, "namespace_health", _HEALTH_KEYS, columns)
        await execute(self._live(), statement, values)

    async def incident_link(self, key: Mapping[str, Any]) -> Row | None:
        statement = control_sql.select_where(
            SQLITE, "incident_links", INCIDENT_LINK_COLUMNS, INCIDENT_KEY_FIELDS
        )
        found = await fetchall(self._live(), statement, [key[f] for f in INCIDENT_KEY_FIELDS])
        return link_rows(found)[0] if found else None

    async def insert_incident_link(self, row: Mapping[str, Any]) -> int:
        columns, values = link_params(row)
        statement = links_sql.insert_returning(SQLITE, "incident_links", columns, "link_id")
        return int((await fetchall(self._live(), statement, values))[0][0])

    async def update_incident_link(self, link_id: int, changes: Mapping[str, Any]) -> bool:
        columns, values = link_params(changes)
        if not columns:
            raise StoreError("an incident link update needs columns other than link_id")
        statement = links_sql.update_by_key(SQLITE, "incident_links", "link_id", columns)
        return await execute(self._live(), statement, [link_id, *values]) == 1

    async def incident_links_for_issue(
        self, *, gitea_org: str, gitea_repo: str, gitea_issue_number: int
    ) -> list[Row]:
        statement = control_sql.select_where(
            SQLITE,
            "incident_links",
            INCIDENT_LINK_COLUMNS,
            INCIDENT_TARGET_FIELDS,
            order_by="link_id",
        )
        params = (gitea_org, gitea_repo, gitea_issue_number)
        return link_rows(await fetchall(self._live(), statement, params))
