"""Assign-and-lease via the writer: fields, refused kinds, wait, owner-resume, terminal items."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.actors.helpers_app import harness
from tests.actors.helpers_control import (
    AUTHOR_P,
    CONTROLLER_P,
    LOOKER_P,
    SHA_1,
    WHERE,
    active_leases,
    assign,
    at,
    events,
)
from tests.store.rowdata import raw_query

pytestmark = pytest.mark.anyio


async def test_an_assignment_carries_lease_expiry_head_and_actions(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        result = await assign(
            h,
            "s-a",
            613,
            kind="pr",
            expected_head_sha=SHA_1,
            allowed_actions=["implement", "comment"],
            forbidden_actions=["approve", "merge"],
            lease_ttl_seconds=600,
        )
        assert result["success"] is True
        assert result["outcome"] == "assigned"
        assert str(result["assignment_id"]).startswith("asn-")
        assert str(result["lease_id"]).startswith("lease-")
        assert result["role"] == "author"
        assert (result["work_kind"], result["work_number"]) == ("pr", 613)
        assert result["work_item_key"] == "pr:prgs/org/repo#613"
        assert result["expected_head_sha"] == SHA_1
        assert result["allowed_actions"] == ["implement", "comment"]
        assert result["forbidden_actions"] == ["approve", "merge"]
        assert result["expires_at"] == at(600)
        assert result["resumed"] is False
        assert active_leases(h) == [(result["lease_id"], "pr:prgs/org/repo#613", "s-a")]
        assert [e[0] for e in events(h)] == [
            "session_started",
            "work_item_created",
            "lease_granted",
        ]


async def test_default_actions_come_from_the_role_and_forbidden_wins(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        default = await assign(h, "s-a", 1, role="merger")
        assert "merge" in default["allowed_actions"]
        assert "approve" in default["forbidden_actions"]
        both = await assign(
            h, "s-b", 2, allowed_actions=["merge", "comment"], forbidden_actions=["merge"]
        )
        assert both["allowed_actions"] == ["comment"]


@pytest.mark.parametrize("kind", ["sentry_incident", "glitchtip_incident", "incident"])
async def test_incidents_are_refused_before_anything_is_written(tmp_path: Path, kind: str) -> None:
    async with harness(tmp_path) as h:
        result = await assign(h, "s-a", 9, kind=kind)
        assert result["success"] is False
        assert result["code"] == "invalid_work_kind"
        assert "issue" in result["reasons"][0]
        item = await h.handle.upsert_work_item(CONTROLLER_P, kind=kind, number=9, **WHERE)
        assert item["code"] == "invalid_work_kind"
        assert raw_query(h.store.path, "SELECT COUNT(*) FROM work_items") == [(0,)]
        assert events(h) == []


async def test_a_second_session_waits_and_learns_the_owner(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        first = await assign(h, "s1", 100, kind="pr", expected_head_sha=SHA_1)
        before = events(h)
        second = await assign(h, "s2", 100, kind="pr", expected_head_sha=SHA_1)
        assert first["outcome"] == "assigned"
        assert second["success"] is True
        assert second["outcome"] == "wait"
        assert second["owner_session_id"] == "s1"
        assert second["lease_id"] is None
        assert second["assignment_id"] is None
        assert len(active_leases(h)) == 1
        # Waiting is not a transition: only s2's new session row was recorded.
        assert events(h)[len(before) :] == [("session_started", None, "s2", None)]


async def test_the_owner_asking_again_resumes_and_refreshes_its_lease(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        first = await assign(h, "s1", 50, kind="pr", expected_head_sha=SHA_1, lease_ttl_seconds=60)
        await h.advance(30)
        again = await assign(h, "s1", 50, kind="pr", expected_head_sha=SHA_1, lease_ttl_seconds=60)
        assert again["outcome"] == "assigned"
        assert again["resumed"] is True
        assert "owner-resume" in again["reason"]
        assert again["lease_id"] == first["lease_id"]
        assert again["assignment_id"] == first["assignment_id"]
        assert again["expires_at"] == at(90)
        assert len(active_leases(h)) == 1
        assert events(h, kind="lease_resumed") == [
            ("lease_resumed", "pr:prgs/org/repo#50", "s1", first["lease_id"])
        ]


async def test_the_owner_cannot_resume_under_another_role(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await assign(h, "s1", 5)
        other = await assign(h, "s1", 5, role="reviewer")
        assert (other["success"], other["code"]) == (False, "role_mismatch")


@pytest.mark.parametrize(
    ("kind", "state"), [("pr", "merged"), ("pr", "closed"), ("issue", "closed")]
)
async def test_terminal_items_are_never_assigned(tmp_path: Path, kind: str, state: str) -> None:
    async with harness(tmp_path) as h:
        marked = await h.handle.upsert_work_item(
            CONTROLLER_P, kind=kind, number=99, state=state, current_head_sha=SHA_1, **WHERE
        )
        assert marked["success"] is True
        result = await assign(h, "s1", 99, kind=kind, expected_head_sha=SHA_1)
        assert result["success"] is True
        assert result["outcome"] == "no_safe_work"
        assert state in result["reason"]
        assert active_leases(h) == []


async def test_a_merged_item_never_reopens(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await h.handle.upsert_work_item(CONTROLLER_P, kind="pr", number=7, state="merged", **WHERE)
        again = await h.handle.upsert_work_item(
            CONTROLLER_P, kind="pr", number=7, state="open", **WHERE
        )
        assert (again["success"], again["code"]) == (False, "work_item_merged")


async def test_a_pull_request_needs_a_head_pin(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        result = await assign(h, "s1", 88, kind="pr")
        assert result["success"] is False
        assert result["code"] == "head_pin_required"
        assert "expected_head_sha" in result["reasons"][0]
        assert active_leases(h) == []


async def test_a_pin_on_a_head_that_moved_is_no_safe_work(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await h.handle.upsert_work_item(
            CONTROLLER_P, kind="pr", number=4, current_head_sha="b" * 40, **WHERE
        )
        result = await assign(h, "s1", 4, kind="pr", expected_head_sha=SHA_1)
        assert (result["outcome"], result["code"]) == ("no_safe_work", "head_moved")


async def test_direct_assignment_needs_the_lease_grant_and_an_operator_role(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        by_author = await assign(h, "s1", 1, profile=AUTHOR_P)
        assert by_author["success"] is False
        assert by_author["denied"] is True
        assert by_author["permission"]["role_denied"] is True
        no_grant = await h.handle.upsert_session(LOOKER_P, session_id="s1")
        assert no_grant["denied"] is True
        assert no_grant["permission"]["missing_operation"] == "gitea.workflow.lease"
        nobody = await assign(h, "s1", 1, profile=None)  # type: ignore[arg-type]
        assert nobody["denied"] is True
        assert active_leases(h) == []
        assert events(h) == []


async def test_sessions_record_a_transition_only_when_something_changed(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        first = await h.handle.upsert_session(AUTHOR_P, session_id="s1", role="author", pid=41)
        assert first["session"]["profile"] == "cp-author"
        await h.handle.upsert_session(AUTHOR_P, session_id="s1", role="author", pid=41)
        await h.handle.upsert_session(AUTHOR_P, session_id="s1", pid=42)
        assert [e[0] for e in events(h)] == ["session_started", "session_changed"]
        ended = await h.handle.upsert_session(AUTHOR_P, session_id="s1", status="ended")
        assert ended["session"]["status"] == "ended"
        refused = await assign(h, "s1", 3)
        assert (refused["success"], refused["code"]) == (False, "session_ended")


async def test_bad_arguments_are_refused_with_reasons(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        for kwargs in (
            {"lease_ttl_seconds": float("nan")},
            {"lease_ttl_seconds": 10**9},
            {"allowed_actions": ["Drop Table"]},
            {"owner_pid": -1},
            {"role": "janitor"},
        ):
            result = await assign(h, "s1", 1, **kwargs)
            assert result["success"] is False, kwargs
            assert result["reasons"], kwargs
        assert active_leases(h) == []
