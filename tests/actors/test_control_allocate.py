"""allocate_next_work through the writer: preview vs apply, routing, skips, wait, terminal path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supervisor.policy.control.permissions import Profile
from tests.actors.helpers_app import SettledHarness, harness
from tests.actors.helpers_control import (
    AUTHOR_P,
    CONTROLLER_P,
    LOOKER_P,
    MERGER_P,
    RECONCILER_P,
    REVIEWER_P,
    SHA_1,
    WHERE,
    active_leases,
    assign,
    check,
    events,
)

pytestmark = pytest.mark.anyio


def issue(number: int, **signals: Any) -> dict[str, Any]:
    return {"kind": "issue", "number": number, **signals}


def pr(number: int, **signals: Any) -> dict[str, Any]:
    return {"kind": "pr", "number": number, "head_sha": SHA_1, **signals}


async def allocate(
    h: SettledHarness,
    candidates: list[dict[str, Any]],
    *,
    profile: Profile = AUTHOR_P,
    session: str = "s-a",
    apply: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    result = await h.handle.allocate_next_work(
        profile, session_id=session, candidates=candidates, apply=apply, **WHERE, **extra
    )
    return dict(result)


async def test_preview_selects_without_reserving(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        candidates = [
            issue(612, priority=99, dependency_unmet=True, dependency_reason="downstream of #600"),
            issue(601, priority=98, labels=["status:blocked"]),
            issue(600, priority=1, labels=["status:ready"]),
        ]
        preview = await allocate(h, candidates)
        assert preview["success"] is True
        assert preview["outcome"] == "preview"
        assert preview["apply"] is False
        assert preview["mutation_performed"] is False
        assert preview["selected"]["number"] == 600
        assert preview["expected_role_next"] == "author"
        assert preview["assignment"] is None
        assert "lease_proof" not in preview
        assert {s["number"]: s["code"] for s in preview["skipped"]} == {
            612: "dependency_unmet",
            601: "blocked",
        }
        assert any("600" in s["reason"] for s in preview["skipped"] if s["number"] == 612)
        assert active_leases(h) == []
        assert events(h) == []


async def test_apply_reserves_atomically_with_a_lease_proof(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        result = await allocate(h, [issue(600, priority=10, title="allocator")], apply=True)
        assert result["outcome"] == "assigned_work"
        assert result["mutation_performed"] is True
        assignment = result["assignment"]
        assert assignment["outcome"] == "assigned"
        assert assignment["work_number"] == 600
        assert "implement" in assignment["allowed_actions"]
        assert "merge" in assignment["forbidden_actions"]
        proof = result["lease_proof"]
        assert proof["lease_id"] == assignment["lease_id"]
        assert proof["source"] == "supervisor.registry_writer.assign_and_lease"
        assert "issue #600" in result["next_command"]
        assert active_leases(h) == [(proof["lease_id"], "issue:prgs/org/repo#600", "s-a")]
        assert (await check(h, "s-a", 600, "implement"))["success"] is True
        assert [e[0] for e in events(h)] == [
            "session_started",
            "work_item_created",
            "lease_granted",
        ]


async def test_a_looker_may_preview_but_not_apply(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        assert (await allocate(h, [issue(1)], profile=LOOKER_P))["outcome"] == "preview"
        denied = await allocate(h, [issue(1)], profile=LOOKER_P, apply=True)
        assert denied["denied"] is True
        assert active_leases(h) == []


@pytest.mark.parametrize(
    ("profile", "candidate"),
    [
        (AUTHOR_P, pr(2, request_changes_current_head=True)),
        (REVIEWER_P, pr(3, approval_stale=True)),
        (MERGER_P, pr(4, approval_on_current_head=True, mergeable=True)),
        (RECONCILER_P, pr(5, approval_contaminated=True)),
    ],
)
async def test_each_role_is_assigned_its_own_kind_of_work(
    tmp_path: Path, profile: Profile, candidate: dict[str, Any]
) -> None:
    async with harness(tmp_path) as h:
        result = await allocate(h, [candidate], profile=profile, apply=True)
        assert result["outcome"] == "assigned_work"
        assert result["role"] == profile.role_kind
        assert result["assignment"]["expected_head_sha"] == SHA_1
        for other in {AUTHOR_P, REVIEWER_P, MERGER_P, RECONCILER_P} - {profile}:
            refused = await allocate(h, [candidate], profile=other, session=f"s-{other.name}")
            assert refused["outcome"] == "no_safe_work", other.name
            assert refused["skipped"][0]["code"] == "role_mismatch"


async def test_asking_for_another_role_is_role_ineligible(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        result = await allocate(
            h, [pr(4, approval_on_current_head=True, mergeable=True)], role="merger"
        )
        assert result["success"] is False
        assert result["outcome"] == "role_ineligible"
        unknown = await allocate(h, [issue(1)], role="janitor")
        assert unknown["outcome"] == "role_ineligible"


async def test_an_item_leased_elsewhere_is_passed_over_then_waited_on(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await assign(h, "owner", 50)
        passed = await allocate(h, [issue(50, priority=9), issue(51)], apply=True, session="other")
        assert passed["outcome"] == "assigned_work"
        assert passed["selected"]["number"] == 51
        assert [(s["number"], s["code"]) for s in passed["skipped"]] == [(50, "leased_elsewhere")]
        waiting = await allocate(h, [issue(50)], apply=True, session="third")
        assert waiting["outcome"] == "wait"
        assert waiting["owner_session_id"] == "owner"
        assert waiting["mutation_performed"] is False


async def test_the_holder_asking_again_resumes(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        first = await allocate(h, [issue(7), issue(8)], apply=True)
        again = await allocate(h, [issue(8, priority=5), issue(7)], apply=True)
        assert again["outcome"] == "assigned_work"
        assert again["selected"]["number"] == 7
        assert again["assignment"]["resumed"] is True
        assert again["assignment"]["lease_id"] == first["assignment"]["lease_id"]


async def test_the_terminal_path_comes_first_for_reviewers(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await h.handle.set_terminal_lock(
            REVIEWER_P, terminal_pr=10, decision="request_changes", **WHERE
        )
        picked = await allocate(h, [pr(11, priority=5), pr(10, priority=1)], profile=REVIEWER_P)
        assert picked["selected"]["number"] == 10
        assert picked["terminal_pr"] == 10
        assert [(s["number"], s["code"]) for s in picked["skipped"]] == [
            (11, "terminal_path_first")
        ]
        blocked = await allocate(h, [pr(99)], profile=REVIEWER_P)
        assert blocked["outcome"] == "blocked_by_terminal_path"
        authors = await allocate(h, [pr(12, request_changes_current_head=True)])
        assert authors["outcome"] == "preview"


async def test_a_terminal_state_in_the_database_wins_over_the_inventory(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await h.handle.upsert_work_item(
            CONTROLLER_P, kind="issue", number=5, state="closed", **WHERE
        )
        result = await allocate(h, [issue(5)], apply=True)
        assert result["outcome"] == "no_safe_work"
        assert result["skipped"][0]["code"] == "terminal_state"


async def test_apply_moves_the_stored_head_to_the_inventorys(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await h.handle.upsert_work_item(
            CONTROLLER_P, kind="pr", number=3, current_head_sha="0" * 40, **WHERE
        )
        result = await allocate(h, [pr(3, approval_stale=True)], profile=REVIEWER_P, apply=True)
        assert result["outcome"] == "assigned_work"
        verdict = await check(h, "s-a", 3, "review", kind="pr")
        assert verdict["current_head_sha"] == SHA_1
        assert verdict["success"] is True


async def test_nothing_to_do_is_structured(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        empty = await allocate(h, [], apply=True)
        assert empty["success"] is True
        assert empty["outcome"] == "no_safe_work"
        assert empty["selected"] is None
        assert empty["reasons"]


async def test_bad_candidates_are_refused_before_the_writer(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        for candidates in (
            [{"kind": "sentry_incident", "number": 1}],
            [{"kind": "issue", "number": 1, "blokced": True}],
            [issue(1), issue(1)],
        ):
            refused = await allocate(h, candidates, apply=True)
            assert refused["success"] is False
            assert refused["reasons"]
        assert events(h) == []
