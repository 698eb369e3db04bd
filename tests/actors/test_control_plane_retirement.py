"""Leases from assign-and-lease protect their owners from retirement, at plan and at apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.policy.retirement.reasons import (
    OUTCOME_APPLIED,
    OUTCOME_CANDIDATES_MOVED,
    REASON_ELIGIBLE,
    REASON_PROTECTED_OWNER,
)
from tests.actors.helpers_app import harness
from tests.actors.helpers_control import AUTHOR_P, assign
from tests.actors.helpers_retirement import (
    PAST_TTL,
    apply_plan,
    enroll,
    ensure_swept,
    plan,
    status_of,
)

pytestmark = pytest.mark.anyio


def _reasons(planned: object) -> dict[str, str]:
    assert isinstance(planned, dict)
    entries = [*planned["candidates"], *planned["preserved"]]
    return {str(e["worker_identity"]): str(e["reason_code"]) for e in entries}


async def test_a_lease_holder_is_preserved_as_an_active_workflow_owner(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        holder = await enroll(h, session_id="sess-holder")
        free = await enroll(h, session_id="sess-free")
        for worker in (holder, free):
            h.probes.kill(int(worker["pid"]))
        granted = await assign(h, "sess-holder", 21, lease_ttl_seconds=3600)
        assert granted["outcome"] == "assigned"
        await h.clock.advance(PAST_TTL)

        planned = await plan(h)

        assert _reasons(planned) == {
            holder["worker_identity"]: REASON_PROTECTED_OWNER,
            free["worker_identity"]: REASON_ELIGIBLE,
        }
        owners = planned["protected_active_workflow_owners"]
        assert "sess-holder" in owners["session_ids"]
        result = await apply_plan(h, planned)
        assert result["outcome"] == OUTCOME_APPLIED
        assert await status_of(h, str(holder["worker_identity"])) == "active"
        assert await status_of(h, str(free["worker_identity"])) == "retired"


async def test_a_lease_taken_between_plan_and_apply_stops_the_retirement(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        worker = await enroll(h, session_id="sess-late")
        h.probes.kill(int(worker["pid"]))
        await h.clock.advance(PAST_TTL)
        planned = await plan(h)
        assert planned["candidate_worker_identities"] == [worker["worker_identity"]]

        taken = await h.handle.allocate_next_work(
            AUTHOR_P,
            session_id="sess-late",
            candidates=[{"kind": "issue", "number": 5}],
            apply=True,
            remote="prgs",
            org="org",
            repo="repo",
        )
        assert taken["outcome"] == "assigned_work"
        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_CANDIDATES_MOVED
        assert result["retired_count"] == 0
        assert await status_of(h, str(worker["worker_identity"])) == "active"
        assert _reasons(await plan(h)) == {worker["worker_identity"]: REASON_PROTECTED_OWNER}


async def test_the_owner_pid_protects_a_worker_whose_session_differs(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        worker = await enroll(h, session_id="sess-registry")
        h.probes.kill(int(worker["pid"]))
        await assign(h, "sess-elsewhere", 8, owner_pid=int(worker["pid"]))
        await h.clock.advance(PAST_TTL)
        assert _reasons(await plan(h)) == {worker["worker_identity"]: REASON_PROTECTED_OWNER}


async def test_once_the_lease_expires_the_worker_can_be_retired(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        worker = await enroll(h, session_id="sess-brief")
        h.probes.kill(int(worker["pid"]))
        await assign(h, "sess-brief", 9, lease_ttl_seconds=10)
        # Tick by tick (the lease watch runs every 5 s) past the heartbeat TTL and the lease.
        for _ in range(int(PAST_TTL // 5) + 1):
            await h.advance(5)
        planned = await plan(h)
        assert _reasons(planned) == {worker["worker_identity"]: REASON_ELIGIBLE}
