"""Incident links through the writer: one canonical row per provider key, never a work item."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from supervisor.policy.control.permissions import OP_LEASE
from tests.actors.harness import Harness
from tests.actors.helpers_app import harness
from tests.actors.helpers_control import (
    AUTHOR_P,
    CONTROLLER_P,
    LOOKER_P,
    RECONCILER_P,
    REVIEWER_P,
    events,
)
from tests.store.rowdata import raw_query

pytestmark = pytest.mark.anyio

TARGET: dict[str, Any] = {"gitea_org": "Scaled-Tech-Consulting", "gitea_repo": "Gitea-Tools"}


async def upsert(h: Harness, **fields: Any) -> Mapping[str, Any]:
    args = {"provider": "sentry", "provider_issue_id": "inc-1", **TARGET, **fields}
    args.setdefault("gitea_issue_number", 1)
    return await h.handle.upsert_incident_link(CONTROLLER_P, **args)


def count(h: Harness, table: str) -> int:
    return int(raw_query(h.store.path, f"SELECT COUNT(*) FROM {table}")[0][0])


async def test_a_link_is_found_by_its_gitea_issue_and_is_not_work(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        made = await upsert(
            h,
            provider_base_url="https://sentry.prgs.cc",
            provider_org="prgs",
            provider_project="gitea-tools-mcp",
            provider_issue_id="12345",
            gitea_issue_number=9001,
            fingerprint="fp-1",
            linked_pr_numbers=[12, 12, 14],
            first_seen="2026-01-01T00:00:00Z",
        )
        link = made["incident_link"]
        assert made["success"] is True
        assert (link["gitea_issue_number"], link["status"]) == (9001, "open")
        assert link["linked_pr_numbers"] == [12, 14]
        assert link["first_seen"] == "2026-01-01T00:00:00Z"
        found = await h.handle.get_incident_link_for_gitea_issue(
            LOOKER_P, **TARGET, gitea_issue_number=9001
        )
        assert found["incident_link"]["link_id"] == link["link_id"]
        assert [x["link_id"] for x in found["incident_links"]] == [link["link_id"]]
        none = await h.handle.get_incident_link_for_gitea_issue(
            LOOKER_P, **TARGET, gitea_issue_number=9002
        )
        assert (none["success"], none["incident_link"], none["incident_links"]) == (True, None, [])
        # A link is no work item, and an incident cannot be filed as one.
        assert count(h, "work_items") == 0
        refused = await h.handle.upsert_work_item(
            CONTROLLER_P, remote="prgs", org="o", repo="r", kind="sentry", number=1
        )
        assert (refused["success"], refused["code"]) == (False, "invalid_work_kind")
        assert count(h, "work_items") == 0
        assert [e[0] for e in events(h)] == ["incident_link_created"]


async def test_minimal_upserts_address_one_row_whatever_the_blank_scope(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        a = (await upsert(h, gitea_issue_number=1))["incident_link"]
        b = (await upsert(h, gitea_issue_number=2))["incident_link"]
        c = (
            await upsert(
                h,
                gitea_issue_number=3,
                provider_base_url=None,
                provider_org="",
                provider_project="  ",
            )
        )["incident_link"]
        assert a["link_id"] == b["link_id"] == c["link_id"]
        assert c["gitea_issue_number"] == 3
        assert (c["provider_base_url"], c["provider_org"], c["provider_project"]) == ("", "", "")
        assert count(h, "incident_links") == 1
        # Another provider (any name) or scope is another link.
        other = (await upsert(h, provider="GlitchTip"))["incident_link"]
        scoped = (await upsert(h, provider_org=" acme "))["incident_link"]
        assert other["provider"] == "glitchtip"
        assert scoped["provider_org"] == "acme"
        assert len({a["link_id"], other["link_id"], scoped["link_id"]}) == 3
        kinds = [e[0] for e in events(h)]
        assert kinds.count("incident_link_created") == 3
        assert kinds.count("incident_link_changed") == 2


async def test_omitted_observations_keep_the_stored_values(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await upsert(h, fingerprint="fp-1", event_count=3, status="open")
        before = len(events(h))
        same = (await upsert(h))["incident_link"]
        assert (same["fingerprint"], same["event_count"], same["status"]) == ("fp-1", 3, "open")
        assert len(events(h)) == before  # nothing changed, no event
        moved = (await upsert(h, status="Resolved", event_count=4))["incident_link"]
        assert (moved["status"], moved["event_count"], moved["fingerprint"]) == (
            "resolved",
            4,
            "fp-1",
        )
        assert events(h)[-1][0] == "incident_link_changed"


@pytest.mark.parametrize(
    "bad",
    [
        {"provider": ""},
        {"provider": "Sentry Cloud"},
        {"provider_issue_id": "  "},
        {"gitea_org": "bad/org"},
        {"gitea_issue_number": 0},
        {"event_count": -1},
        {"linked_pr_numbers": [0]},
        {"linked_pr_numbers": "12"},
        {"first_seen": "2026-01-01"},
        {"last_seen": "2026-01-01T00:00:00"},
        {"provider_permalink": "https://user:pass@sentry.example/issues/1"},
        {"provider_base_url": "https://token@sentry.example"},
        {"status": "not a word"},
    ],
)
async def test_invalid_links_are_refused_before_any_write(
    tmp_path: Path, bad: dict[str, Any]
) -> None:
    async with harness(tmp_path) as h:
        answer = await upsert(h, **bad)
        assert (answer["success"], answer["code"]) == (False, "invalid_incident_link"), bad
        assert "pass" not in repr(answer)
        assert "token@" not in repr(answer)
        assert count(h, "incident_links") == 0
        assert events(h) == []


async def test_only_operator_roles_with_the_lease_grant_write_links(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        for profile in (AUTHOR_P, REVIEWER_P, LOOKER_P):
            denied = await h.handle.upsert_incident_link(
                profile, provider="sentry", provider_issue_id="x", **TARGET, gitea_issue_number=1
            )
            assert denied["denied"] is True, profile.name
        looker = await h.handle.upsert_incident_link(
            LOOKER_P, provider="sentry", provider_issue_id="x", **TARGET, gitea_issue_number=1
        )
        assert looker["permission"]["required_operation"] == OP_LEASE
        assert count(h, "incident_links") == 0
        allowed = await h.handle.upsert_incident_link(
            RECONCILER_P, provider="sentry", provider_issue_id="x", **TARGET, gitea_issue_number=1
        )
        assert allowed["success"] is True
