"""A grant revoked between plan and apply refuses the apply, alike for the three mutations:
retiring rows, reaping servers and retiring a silent host's rows. Each caller passed the
entry check (``grant``) with the profile it presented; ``regrant`` reads the grant again by
name just before the mutation, and nothing is changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supervisor.operations.grants import grant, regrant
from supervisor.policy.retirement.host_leases import HostRetirementPlan
from supervisor.wire import PERMISSION_DENIED
from tests.actors.harness import READER, RETIRER, Profiles, harness
from tests.actors.helpers_retirement import apply_plan, plan, status_of
from tests.actors.test_multi_host import fall_silent, host, statuses
from tests.actors.test_reap import reaping
from tests.actors.test_retirement_permissions import _one_stale_candidate
from tests.unit.policy.test_reap_plan import server

pytestmark = pytest.mark.anyio

#: Every apply is refused with the same code and names what regrant found missing.
MISSING = "'gitea.worker_registry.retire' is not granted for profile 'prgs-reconciler'"


def _refused_by_regrant(code: str, reason: str) -> None:
    assert code == PERMISSION_DENIED
    assert MISSING in reason


def test_the_entry_check_passes_and_the_re_read_refuses() -> None:
    # What the three applies below rely on: the presented profile still holds the grant
    # at entry, while the profile book (read again by name) no longer does.
    book = Profiles()
    book.revoke(RETIRER.name)
    for op in ("apply", "reap_apply", "host_apply"):
        assert grant(RETIRER, op) is None
        reason = regrant(book, RETIRER.name, op)
        assert reason is not None
        assert MISSING in reason


async def test_retirement(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        candidate = await _one_stale_candidate(h)
        planned = await plan(h, READER)
        h.profiles.revoke(RETIRER.name)
        answer: Any = await apply_plan(h, planned, profile=RETIRER)
        _refused_by_regrant(answer["code"], answer["reasons"][0])
        assert answer["retired_count"] == 0
        assert await status_of(h, candidate) == "active"


async def test_reap(tmp_path: Path) -> None:
    async with reaping(tmp_path) as w:
        w.add(server(100, alive=False))
        planned = await w.rig.plan()
        w.rig.profiles.revoke(RETIRER.name)
        answer = await w.rig.apply(planned["plan_token"])
    _refused_by_regrant(answer["code"], answer["reasons"][0])
    assert w.procs.sent == []


async def test_host_leases(pg_url: str) -> None:
    async with (
        host(pg_url, "host-a", supervisor_id="sup-a", pid_base=1000) as a,
        host(pg_url, "host-c", supervisor_id="sup-c", pid_base=3000) as c,
    ):
        await fall_silent(c, seen_by=a)
        planned = await a.supervisor.hosts.plan_retirement(RETIRER, "host-c")
        assert isinstance(planned, HostRetirementPlan)
        a.profiles.revoke(RETIRER.name)
        ack = await a.supervisor.hosts.apply_retirement(
            RETIRER,
            host_id="host-c",
            host_token=planned.host_token,
            candidate_fingerprint=planned.candidate_fingerprint,
            worker_identities=[e.worker_identity for e in planned.candidates],
        )
        _refused_by_regrant(ack.code, ack.detail)
        assert not ack.ok
        assert {s for s, _, _ in (await statuses(a)).values()} == {"active"}
