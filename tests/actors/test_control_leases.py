"""The mutation gate, heartbeat, release, expiry on the clock, and terminal locks via the writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.actors.helpers_app import harness
from tests.actors.helpers_control import (
    AUTHOR_P,
    CONTROLLER_P,
    LOOKER_P,
    REVIEWER_P,
    SHA_1,
    SHA_2,
    WHERE,
    active_leases,
    assign,
    at,
    check,
    events,
)
from tests.store.rowdata import raw_query

pytestmark = pytest.mark.anyio

EXPIRY_TICK = 5.0  # LeaseWatchSettings.expiry_interval_seconds (default)


async def test_the_gate_passes_a_covered_action_of_the_holder(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        asn = await assign(h, "s1", 7, allowed_actions=["implement"], forbidden_actions=["merge"])
        proof = await check(h, "s1", 7, "implement")
        assert proof["success"] is True
        assert proof["allowed"] is True
        assert proof["code"] == "assignment_valid"
        assert proof["session_id"] == "s1"
        assert proof["lease_id"] == asn["lease_id"]
        assert proof["assignment_id"] == asn["assignment_id"]


async def test_the_gate_refuses_forbidden_unlisted_and_foreign(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await assign(h, "s1", 7, allowed_actions=["implement"], forbidden_actions=["merge"])
        before = events(h)
        for session, action, code in (
            ("s1", "merge", "action_forbidden"),
            ("s1", "approve", "action_not_allowed"),
            ("s-other", "implement", "no_assignment"),
        ):
            verdict = await check(h, session, 7, action)
            assert verdict["success"] is False, action
            assert verdict["allowed"] is False
            assert verdict["code"] == code
        unknown = await check(h, "s1", 404, "implement")
        assert unknown["code"] == "no_assignment"
        # The gate only reads.
        assert events(h) == before


async def test_the_gate_refuses_once_the_head_moves(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await assign(h, "s1", 42, kind="pr", expected_head_sha=SHA_1, allowed_actions=["push"])
        assert (await check(h, "s1", 42, "push", kind="pr"))["success"] is True
        moved = await h.handle.upsert_work_item(
            CONTROLLER_P, kind="pr", number=42, current_head_sha=SHA_2, **WHERE
        )
        assert moved["success"] is True
        stale = await check(h, "s1", 42, "push", kind="pr")
        assert stale["code"] == "stale_head"
        assert "stale head" in stale["reason"]
        assert (stale["expected_head_sha"], stale["current_head_sha"]) == (SHA_1, SHA_2)
        # Resuming with the new head re-pins the assignment.
        resumed = await assign(h, "s1", 42, kind="pr", expected_head_sha=SHA_2)
        assert resumed["resumed"] is True
        assert (await check(h, "s1", 42, "push", kind="pr"))["success"] is True


@pytest.mark.parametrize(("kind", "state"), [("pr", "merged"), ("issue", "closed")])
async def test_the_gate_refuses_once_the_item_is_terminal(
    tmp_path: Path, kind: str, state: str
) -> None:
    async with harness(tmp_path) as h:
        head = SHA_1 if kind == "pr" else None
        await assign(h, "s1", 55, kind=kind, expected_head_sha=head)
        await h.handle.upsert_work_item(
            CONTROLLER_P, kind=kind, number=55, state=state, current_head_sha=head, **WHERE
        )
        verdict = await check(h, "s1", 55, "implement", kind=kind)
        assert verdict["code"] == "work_item_terminal"
        assert "terminal" in verdict["reason"]


async def test_leases_expire_on_the_clock_and_free_the_item(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        first = await assign(h, "s1", 3, lease_ttl_seconds=12)
        await h.advance(EXPIRY_TICK * 2)  # t=10: not yet
        assert len(active_leases(h)) == 1
        assert (await check(h, "s1", 3, "implement"))["success"] is True
        await h.advance(EXPIRY_TICK)  # t=15: the lease watch tick expires it
        assert active_leases(h) == []
        statuses = raw_query(h.store.path, "SELECT status FROM assignments")
        assert statuses == [("expired",)]
        assert events(h, kind="lease_expired") == [
            ("lease_expired", "issue:prgs/org/repo#3", "s1", first["lease_id"])
        ]
        assert (await check(h, "s1", 3, "implement"))["code"] == "no_assignment"
        second = await assign(h, "s2", 3)
        assert second["outcome"] == "assigned"
        assert second["session_id"] == "s2"


async def test_a_lapsed_lease_does_not_block_even_before_the_sweep(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        first = await assign(h, "s1", 3, lease_ttl_seconds=1)
        await h.clock.advance(2)  # past the deadline, before the next expiry tick
        assert (await check(h, "s1", 3, "implement"))["code"] == "lease_expired"
        second = await assign(h, "s2", 3)
        assert second["outcome"] == "assigned"
        assert events(h, kind="lease_expired")[0][3] == first["lease_id"]
        assert [row[2] for row in active_leases(h)] == ["s2"]


async def test_heartbeats_extend_the_lease_by_its_own_ttl(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        asn = await assign(h, "s1", 1, lease_ttl_seconds=30)
        for step in (1, 2, 3):
            await h.advance(20)
            beat = await h.handle.heartbeat_lease(
                AUTHOR_P, session_id="s1", lease_id=str(asn["lease_id"])
            )
            assert beat["success"] is True
            assert beat["expires_at"] == at(20 * step + 30)
        assert len(active_leases(h)) == 1
        longer = await h.handle.heartbeat_lease(
            AUTHOR_P, session_id="s1", lease_id=str(asn["lease_id"]), lease_ttl_seconds=300
        )
        assert longer["expires_at"] == at(60 + 300)
        assert len(events(h, kind="lease_heartbeat")) == 4


async def test_heartbeats_are_refused_for_others_unknown_and_lapsed_leases(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        asn = await assign(h, "s1", 1, lease_ttl_seconds=EXPIRY_TICK + 1)
        lease_id = str(asn["lease_id"])
        other = await h.handle.heartbeat_lease(AUTHOR_P, session_id="s2", lease_id=lease_id)
        assert other["code"] == "lease_not_owned"
        missing = await h.handle.heartbeat_lease(AUTHOR_P, session_id="s1", lease_id="lease-x")
        assert missing["code"] == "unknown_lease"
        looker = await h.handle.heartbeat_lease(LOOKER_P, session_id="s1", lease_id=lease_id)
        assert looker["denied"] is True
        # Past the deadline but before the next expiry tick, with the last tick settled:
        # the heartbeat itself finds the lease lapsed.
        await h.advance(EXPIRY_TICK)
        await h.clock.advance(EXPIRY_TICK / 2)
        lapsed = await h.handle.heartbeat_lease(AUTHOR_P, session_id="s1", lease_id=lease_id)
        assert lapsed["code"] == "lease_expired"
        assert active_leases(h) == []


async def test_release_frees_the_item_and_is_idempotent(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        asn = await assign(h, "s1", 1)
        lease_id = str(asn["lease_id"])
        foreign = await h.handle.release_lease(AUTHOR_P, session_id="s2", lease_id=lease_id)
        assert foreign["code"] == "lease_not_owned"
        released = await h.handle.release_lease(AUTHOR_P, session_id="s1", lease_id=lease_id)
        assert (released["success"], released["status"]) == (True, "released")
        assert released["released_at"] == at(0)
        again = await h.handle.release_lease(AUTHOR_P, session_id="s1", lease_id=lease_id)
        assert (again["success"], again["code"]) == (True, "already_released")
        assert len(events(h, kind="lease_released")) == 1
        assert (await check(h, "s1", 1, "implement"))["code"] == "no_assignment"
        taken = await assign(h, "s2", 1)
        assert (taken["outcome"], taken["session_id"]) == ("assigned", "s2")


async def test_terminal_lock_set_read_supersede_and_clear(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        none = await h.handle.get_terminal_lock(LOOKER_P, **WHERE)
        assert none == {"success": True, "terminal_lock": None}
        denied = await h.handle.set_terminal_lock(AUTHOR_P, terminal_pr=332, **WHERE)
        assert denied["denied"] is True
        first = await h.handle.set_terminal_lock(
            REVIEWER_P, terminal_pr=332, review_id="rev-1", decision="approve", **WHERE
        )
        lock = first["terminal_lock"]
        assert (lock["terminal_pr"], lock["status"], lock["set_by"]) == (
            332,
            "active",
            "cp-reviewer",
        )
        read = await h.handle.get_terminal_lock(LOOKER_P, **WHERE)
        assert read["terminal_lock"]["terminal_pr"] == 332
        same = await h.handle.set_terminal_lock(
            REVIEWER_P, terminal_pr=332, review_id="rev-1", decision="approve", **WHERE
        )
        assert same["code"] == "unchanged"
        await h.handle.set_terminal_lock(CONTROLLER_P, terminal_pr=340, **WHERE)
        assert (await h.handle.get_terminal_lock(LOOKER_P, **WHERE))["terminal_lock"][
            "terminal_pr"
        ] == 340
        other_repo = await h.handle.get_terminal_lock(
            LOOKER_P, remote="prgs", org="org", repo="other"
        )
        assert other_repo["terminal_lock"] is None
        cleared = await h.handle.set_terminal_lock(CONTROLLER_P, terminal_pr=None, **WHERE)
        assert cleared["terminal_lock"] is None
        assert (await h.handle.get_terminal_lock(LOOKER_P, **WHERE))["terminal_lock"] is None
        assert [e[0] for e in events(h)] == [
            "terminal_lock_set",
            "terminal_lock_superseded",
            "terminal_lock_set",
            "terminal_lock_cleared",
        ]
        statuses = raw_query(h.store.path, "SELECT status FROM terminal_locks ORDER BY created_at")
        assert sorted(s for (s,) in statuses) == ["cleared", "superseded"]
