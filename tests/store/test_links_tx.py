"""Namespace health and incident link operations of the control transaction (SQLite)."""

from __future__ import annotations

import pytest

from supervisor.errors import StoreError
from supervisor.store.sqlite.store import SQLiteStore

pytestmark = pytest.mark.anyio

STAMP = "2026-11-30T12:00:00.000000Z"
VERDICT = {
    "session_id": "s1",
    "namespace": "gitea-merger",
    "required_tool": "gitea_whoami",
    "probe_source": "client_namespace",
    "healthy": False,
    "ide_namespace_proven": False,
    "blocks_merge_workflow": True,
    "error_type": "namespace_eof",
    "assessment": {"healthy": False},
    "assessed_at": STAMP,
}
LINK = {
    "provider": "sentry",
    "provider_base_url": "",
    "provider_org": "",
    "provider_project": "",
    "provider_issue_id": "1",
    "gitea_org": "o",
    "gitea_repo": "r",
    "gitea_issue_number": 5,
}


async def test_a_verdict_replaces_the_previous_one_of_its_namespace(store: SQLiteStore) -> None:
    async with store.write() as tx:
        control = tx.control()
        await control.put_namespace_health(VERDICT)
        await control.put_namespace_health({**VERDICT, "healthy": True, "error_type": None})
        await control.put_namespace_health({**VERDICT, "namespace": "gitea-reviewer"})
        rows = await control.namespace_health("s1")
        assert await control.namespace_health("s2") == []
    assert [(r["namespace"], r["healthy"]) for r in rows] == [
        ("gitea-merger", True),
        ("gitea-reviewer", False),
    ]
    assert rows[0]["assessment"] == {"healthy": False}
    assert rows[0]["blocks_merge_workflow"] is True


async def test_links_insert_update_and_refuse_unknown_columns(store: SQLiteStore) -> None:
    async with store.write() as tx:
        control = tx.control()
        link_id = await control.insert_incident_link({**LINK, "linked_pr_numbers": (3, 4)})
        assert await control.update_incident_link(link_id, {"gitea_issue_number": 6})
        assert not await control.update_incident_link(link_id + 1, {"gitea_issue_number": 6})
        found = await control.incident_link(LINK)
        assert found is not None
        assert (found["link_id"], found["linked_pr_numbers"]) == (link_id, [3, 4])
        by_issue = await control.incident_links_for_issue(
            gitea_org="o", gitea_repo="r", gitea_issue_number=6
        )
        assert [r["link_id"] for r in by_issue] == [link_id]
        with pytest.raises(StoreError, match="unknown"):
            await control.put_namespace_health({**VERDICT, "token": "x"})
        with pytest.raises(StoreError, match="unknown"):
            await control.insert_incident_link({**LINK, "kind": "sentry"})
        with pytest.raises(StoreError, match="needs columns"):
            await control.update_incident_link(link_id, {})
