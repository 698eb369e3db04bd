"""Schema version 4: per-session MCP namespace health verdicts and incident links."""

from __future__ import annotations

from supervisor.errors import StoreError
from supervisor.policy.control.incident_links import (
    INCIDENT_LINK_COLUMNS,
    INCIDENT_SCOPE_FIELDS,
    plan_legacy_collapse,
)
from supervisor.store.control_sql import insert_row
from supervisor.store.schema.hooks import MigrationConn

__all__ = [
    "INCIDENT_LINK_COLUMNS",
    "NAMESPACE_HEALTH_COLUMNS",
    "V4_DESCRIPTION",
    "V4_STATEMENTS",
    "migrate_incident_links",
]

NAMESPACE_HEALTH_COLUMNS: tuple[str, ...] = (
    "session_id",
    "namespace",
    "required_tool",
    "probe_source",
    "healthy",
    "ide_namespace_proven",
    "blocks_merge_workflow",
    "error_type",
    "assessment",
    "profile",
    "assessed_at",
)

V4_DESCRIPTION = "namespace health verdicts and incident links"

# The latest verdict per (session, namespace) replaces the previous one, so the pair is
# the key. Flags are INTEGER 0/1: the same on both engines.
V4_STATEMENTS: tuple[str, ...] = (
    "CREATE TABLE namespace_health (session_id TEXT NOT NULL, namespace TEXT NOT NULL, "
    "required_tool TEXT NOT NULL, probe_source TEXT NOT NULL, healthy INTEGER NOT NULL, "
    "ide_namespace_proven INTEGER NOT NULL, blocks_merge_workflow INTEGER NOT NULL, "
    "error_type TEXT, assessment TEXT NOT NULL, profile TEXT, assessed_at TEXT NOT NULL, "
    "PRIMARY KEY (session_id, namespace))",
)

# Scope columns are NOT NULL DEFAULT '': under a UNIQUE constraint both engines treat
# NULLs as distinct, so a nullable scope would admit a twin for every minimal upsert.
_INCIDENT_LINKS_DDL = (
    "CREATE TABLE incident_links (link_id {auto_id_pk}, provider TEXT NOT NULL, "
    "provider_base_url TEXT NOT NULL DEFAULT '', provider_org TEXT NOT NULL DEFAULT '', "
    "provider_project TEXT NOT NULL DEFAULT '', provider_issue_id TEXT NOT NULL, "
    "provider_short_id TEXT, provider_permalink TEXT, fingerprint TEXT, "
    "gitea_org TEXT NOT NULL, gitea_repo TEXT NOT NULL, gitea_issue_number INTEGER NOT NULL, "
    "linked_pr_numbers TEXT, first_seen TEXT, last_seen TEXT, event_count INTEGER, "
    "status TEXT NOT NULL DEFAULT 'open', release_resolved_at TEXT, last_sync_at TEXT, "
    "created_at TEXT, updated_at TEXT, "
    "CONSTRAINT uq_incident_links_key UNIQUE "
    "(provider, provider_base_url, provider_org, provider_project, provider_issue_id))"
)
_INCIDENT_LINKS_INDEX = (
    "CREATE INDEX idx_incident_links_gitea_issue "
    "ON incident_links (gitea_org, gitea_repo, gitea_issue_number)"
)
_LEGACY = "incident_links_legacy"
_LEGACY_NEEDS = ("link_id", "provider", "provider_issue_id", "gitea_org", "gitea_repo")


async def migrate_incident_links(conn: MigrationConn) -> None:
    """Create incident_links, adopting a legacy nullable-scope table if one exists.

    Legacy twins (the same key once NULL scope reads as '') collapse to the lowest
    link_id only when every target and observation field agrees; any disagreement
    raises, the migration's transaction rolls back and nothing is deleted.
    """
    legacy = await conn.table_columns("incident_links")
    if not legacy:
        await conn.run(_INCIDENT_LINKS_DDL)
        await conn.run(_INCIDENT_LINKS_INDEX)
        return
    missing = [c for c in _LEGACY_NEEDS if c not in legacy]
    if missing:
        raise StoreError(
            f"the existing incident_links table lacks {', '.join(missing)}; "
            "migrate it by hand before starting the supervisor"
        )
    present = [c for c in INCIDENT_LINK_COLUMNS if c in legacy]
    found = await conn.query(f"SELECT {', '.join(present)} FROM incident_links")
    # Columns the legacy table lacks read as NULL, like a NULL the rows hold.
    rows = [
        dict.fromkeys(INCIDENT_LINK_COLUMNS) | dict(zip(present, r, strict=True)) for r in found
    ]
    plan = plan_legacy_collapse(rows)
    if plan.conflicts:
        raise StoreError(
            "incident_links migration refused, nothing was changed: "
            + "; ".join(plan.conflicts)
            + " (resolve these rows by hand, then start again)"
        )
    await conn.run(f"ALTER TABLE incident_links RENAME TO {_LEGACY}")
    await conn.run(_INCIDENT_LINKS_DDL)
    await conn.run(_INCIDENT_LINKS_INDEX)
    insert = insert_row(conn.dialect, "incident_links", INCIDENT_LINK_COLUMNS)
    for row in plan.keep:
        values = {**row, "status": row.get("status") or "open"}
        for field in INCIDENT_SCOPE_FIELDS:
            values[field] = values[field] or ""
        await conn.run(insert, tuple(values[c] for c in INCIDENT_LINK_COLUMNS))
    await conn.run(f"DROP TABLE {_LEGACY}")
