"""A grant revoked between plan and apply refuses the apply, alike for the three mutations:
retiring rows, reaping servers and retiring a silent host's rows; and a grant revoked after
a control-plane call's entry refuses its write in the writer. Each caller passed the entry
check (``grant``) with the profile it presented; ``regrant`` reads the grant again by name
just before the mutation, and nothing is changed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from supervisor.handle import SupervisorHandle
from supervisor.operations.grants import grant, regrant
from supervisor.policy.control.permissions import OP_READ, Profile
from supervisor.policy.retirement.host_leases import HostRetirementPlan
from supervisor.wire import PERMISSION_DENIED
from tests.actors.harness import READER, RETIRER, Profiles, harness
from tests.actors.helpers_app import harness as control_harness
from tests.actors.helpers_control import (
    AUTHOR_P,
    CONTROLLER_P,
    WHERE,
    active_leases,
    events,
)
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


_ControlCall = Callable[[SupervisorHandle], Awaitable[Mapping[str, Any]]]

#: Control-plane writes, each by a profile whose lease grant the source then revokes.
_CONTROL_WRITES: dict[str, tuple[Profile, _ControlCall]] = {
    "assign": (
        CONTROLLER_P,
        lambda handle: handle.assign_and_lease(
            CONTROLLER_P, session_id="s-1", role="author", kind="issue", number=7, **WHERE
        ),
    ),
    "allocate": (
        AUTHOR_P,
        lambda handle: handle.allocate_next_work(
            AUTHOR_P,
            session_id="s-1",
            candidates=[{"kind": "issue", "number": 7, "labels": ["status:ready"]}],
            apply=True,
            **WHERE,
        ),
    ),
    "session_upsert": (
        CONTROLLER_P,
        lambda handle: handle.upsert_session(CONTROLLER_P, session_id="s-1"),
    ),
}


@pytest.mark.parametrize("op", sorted(_CONTROL_WRITES))
@pytest.mark.parametrize("revoked", [False, True])
async def test_control_plane_write(tmp_path: Path, op: str, revoked: bool) -> None:
    profile, call = _CONTROL_WRITES[op]
    async with control_harness(tmp_path) as h:
        if revoked:
            # The presented profile still holds the lease grant; its source no longer does.
            h.profiles.by_name[profile.name] = replace(
                profile, allowed_operations=frozenset({OP_READ})
            )
            assert grant(profile, op, task="allocate_apply" if op == "allocate" else None) is None
        answer = await call(h.handle)
        audited = [e for e in await h.store.read_audit() if e["action"] == op]
        if not revoked:
            # The same call with the grant intact writes: the refusal below is the re-read's.
            assert answer["success"] is True
            assert events(h)
            return
        assert answer["success"] is False
        assert answer["code"] == PERMISSION_DENIED
        (reason,) = answer["reasons"]
        assert reason.startswith("grant re-checked immediately before mutation: ")
        assert f"for profile {profile.name!r}" in reason
        assert active_leases(h) == []
        assert events(h) == []
        (row,) = audited
        assert row["actor"] == profile.name
        assert row["detail"]["code"] == PERMISSION_DENIED
