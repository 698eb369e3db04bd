"""Who may snapshot, plan and apply; the grant re-read before mutation; auto retirement; audit."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from supervisor.policy.control.permissions import OP_READ, OP_RETIRE, Profile
from supervisor.policy.identity.worker_env import NAMESPACES
from supervisor.policy.retirement.reasons import OUTCOME_APPLIED, OUTCOME_REFUSED
from supervisor.store.base import Row
from tests.actors.harness import READER, RETIRER, Harness, default_settings, harness
from tests.actors.helpers_retirement import (
    PAST_TTL,
    AuditSpy,
    apply_plan,
    enroll,
    ensure_swept,
    plan,
    status_of,
)

pytestmark = pytest.mark.anyio

OPERATOR_ROLES = frozenset({"controller", "reconciler"})
TASKS = ("snapshot", "plan", "apply")


def _profile(role: str, *, retire: bool) -> Profile:
    grants = {OP_READ, OP_RETIRE} if retire else {OP_READ}
    return Profile(
        name=f"test-{role}-{'retire' if retire else 'read'}",
        role_kind=role,
        allowed_operations=frozenset(grants),
    )


async def _one_stale_candidate(h: Harness) -> str:
    await ensure_swept(h)
    worker = await enroll(h)
    h.probes.kill(int(worker["pid"]))
    await h.clock.advance(PAST_TTL)
    return str(worker["worker_identity"])


async def _run(h: Harness, task: str, profile: Profile | None) -> Mapping[str, Any]:
    if task == "snapshot":
        return await h.handle.snapshot(profile)
    if task == "plan":
        return await h.handle.plan(profile)
    planned = await plan(h, READER)
    return await apply_plan(h, planned, profile=profile)


def _last(audit: list[Row], action: str) -> Row:
    matching = [e for e in audit if e["action"] == action]
    assert matching, f"no {action} audit event in {audit}"
    return matching[-1]


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("retire", [False, True], ids=["read-only", "retire-granted"])
@pytest.mark.parametrize("role", NAMESPACES)
async def test_permission_matrix(tmp_path: Path, role: str, retire: bool, task: str) -> None:
    profile = _profile(role, retire=retire)
    allowed = role in OPERATOR_ROLES and (task != "apply" or retire)
    async with harness(tmp_path) as h:
        h.profiles.by_name[profile.name] = profile
        candidate = await _one_stale_candidate(h)

        result = await _run(h, task, profile)

        audit = await h.store.read_audit()
        if allowed:
            assert result["success"] is True, result
            assert "permission" not in result
            if task == "apply":
                assert result["outcome"] == OUTCOME_APPLIED
                assert await status_of(h, candidate) == "retired"
                event = _last(audit, "apply")
                assert event["outcome"] == OUTCOME_APPLIED
                assert event["actor"] == profile.name
            elif task == "plan":
                assert result["candidate_worker_identities"] == [candidate]
                assert _last(audit, "plan")["outcome"] == "planned"
            else:
                assert result["stale_worker_count"] == 1
            return

        assert result["success"] is False
        assert result["outcome"] == OUTCOME_REFUSED
        assert result["denied"] is True
        assert result["mutation_performed"] is False
        permission = result["permission"]
        assert permission["allowed"] is False
        assert permission["task"] == task
        assert permission["profile"] == profile.name
        assert permission["role_kind"] == role
        assert permission["required_roles"] == sorted(OPERATOR_ROLES)
        assert permission["role_denied"] is (role not in OPERATOR_ROLES)
        expected_missing = OP_RETIRE if task == "apply" and not retire else None
        assert permission["missing_operation"] == expected_missing
        if expected_missing:
            assert OP_RETIRE in result["reasons"][0]
        if permission["role_denied"]:
            assert role in result["reasons"][0]
        assert await status_of(h, candidate) == "active"
        event = _last(audit, task)
        assert event["outcome"] == OUTCOME_REFUSED
        assert event["actor"] == profile.name
        assert event["role"] == role
        assert event["detail"]["reasons"] == result["reasons"]


@pytest.mark.parametrize("task", TASKS)
async def test_no_profile_is_denied_everything(tmp_path: Path, task: str) -> None:
    async with harness(tmp_path) as h:
        candidate = await _one_stale_candidate(h)

        result = await _run(h, task, None)

        assert result["outcome"] == OUTCOME_REFUSED
        assert result["permission"]["profile"] is None
        assert "no authenticated profile" in result["reasons"][0]
        assert await status_of(h, candidate) == "active"
        event = _last(await h.store.read_audit(), task)
        assert event["actor"] is None
        assert event["outcome"] == OUTCOME_REFUSED


async def test_a_forbidden_operation_wins_over_an_allowed_one(tmp_path: Path) -> None:
    conflicted = Profile(
        name="test-reconciler-forbidden",
        role_kind="reconciler",
        allowed_operations=frozenset({OP_READ, OP_RETIRE}),
        forbidden_operations=frozenset({OP_RETIRE}),
    )
    async with harness(tmp_path) as h:
        h.profiles.by_name[conflicted.name] = conflicted
        candidate = await _one_stale_candidate(h)

        result = await _run(h, "apply", conflicted)

        assert result["outcome"] == OUTCOME_REFUSED
        assert result["permission"]["missing_operation"] == OP_RETIRE
        assert "forbidden" in result["reasons"][0]
        assert await status_of(h, candidate) == "active"


async def test_the_grant_is_re_read_immediately_before_the_mutation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path) as h:
        candidate = await _one_stale_candidate(h)
        planned = await plan(h)
        looked_up: list[str] = []
        original = h.profiles.get

        def revoke_on_first_lookup(name: str) -> Profile | None:
            # The entry check already passed on the profile the caller presented;
            # the operator revokes the grant while the apply is under way.
            if not looked_up:
                h.profiles.revoke(RETIRER.name)
            looked_up.append(name)
            return original(name)

        monkeypatch.setattr(h.profiles, "get", revoke_on_first_lookup)

        result = await apply_plan(h, planned, profile=RETIRER)

        assert looked_up == [RETIRER.name]
        assert result["outcome"] == OUTCOME_REFUSED
        assert result["success"] is False
        assert result["retired_count"] == 0
        assert result["mutation_performed"] is False
        assert "immediately before mutation" in result["reasons"][0]
        assert OP_RETIRE in result["reasons"][0]
        assert await status_of(h, candidate) == "active"
        event = _last(await h.store.read_audit(), "apply")
        assert event["outcome"] == OUTCOME_REFUSED
        assert event["actor"] == RETIRER.name
        # Plan is untouched by the revocation.
        assert (await h.handle.plan(RETIRER))["success"] is True


def _supervisor_profile(*, retire: bool) -> Profile:
    grants = {OP_READ, OP_RETIRE} if retire else {OP_READ}
    return Profile(name="supervisor", role_kind="reconciler", allowed_operations=frozenset(grants))


AUTO = default_settings(auto_enabled=True, auto_interval_seconds=60.0)


async def test_automatic_retirement_without_the_grant_is_refused_and_audited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path, settings=AUTO) as h:
        h.profiles.by_name["supervisor"] = _supervisor_profile(retire=False)
        spy = AuditSpy(monkeypatch, h)
        await ensure_swept(h)
        worker = await enroll(h)
        h.probes.kill(int(worker["pid"]))

        await h.clock.advance(61.0)
        event = await spy.wait_for(lambda e: e["action"] == "apply")

        assert event["actor"] == "supervisor"
        assert event["outcome"] == OUTCOME_REFUSED
        assert OP_RETIRE in event["detail"]["reasons"][0]
        assert await status_of(h, str(worker["worker_identity"])) == "active"
        planned = [e for e in spy.events if e["action"] == "plan"]
        assert planned
        assert planned[-1]["detail"]["candidate_count"] == 1


async def test_automatic_retirement_without_any_supervisor_profile_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path, settings=AUTO) as h:
        spy = AuditSpy(monkeypatch, h)
        await ensure_swept(h)
        worker = await enroll(h)
        h.probes.kill(int(worker["pid"]))

        await h.clock.advance(61.0)
        event = await spy.wait_for(lambda e: True)

        assert event["action"] == "plan"
        assert event["outcome"] == OUTCOME_REFUSED
        assert event["actor"] is None
        assert await status_of(h, str(worker["worker_identity"])) == "active"


async def test_automatic_retirement_with_the_grant_retires_stale_rows_on_the_timer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = default_settings(auto_enabled=True, auto_interval_seconds=20.0)
    async with harness(tmp_path, settings=settings) as h:
        h.profiles.by_name["supervisor"] = _supervisor_profile(retire=True)
        spy = AuditSpy(monkeypatch, h)
        await ensure_swept(h)
        worker = await enroll(h)
        survivor = await enroll(h, namespace="reviewer")
        h.probes.kill(int(worker["pid"]))

        # First tick (t=20): the dead worker's heartbeat has not expired yet.
        await h.clock.advance(20.0)
        first = await spy.wait_for(lambda e: e["action"] == "plan")
        assert first["actor"] == "supervisor"
        assert first["detail"]["candidate_count"] == 0
        assert await status_of(h, str(worker["worker_identity"])) == "active"

        # Second tick (t=40): stale now, planned and applied by the supervisor itself.
        await h.clock.advance(20.0)
        event = await spy.wait_for(lambda e: e["action"] == "apply")

        assert event["actor"] == "supervisor"
        assert event["outcome"] == OUTCOME_APPLIED
        assert event["detail"]["retired"] == [worker["worker_identity"]]
        assert [e["action"] for e in spy.events] == ["plan", "plan", "apply"]
        row = await h.row(str(worker["worker_identity"]))
        assert row["status"] == "retired"
        assert row["retired_by"] == "supervisor"
        assert await status_of(h, str(survivor["worker_identity"])) == "active"


async def test_every_plan_apply_and_denial_is_audited_without_secrets(tmp_path: Path) -> None:
    secret = "tokfp-SECRET-4f1d"
    async with harness(tmp_path) as h:
        candidate = await _one_stale_candidate(h)
        template = await h.row(candidate)
        stray = dict(template)
        stray.update(
            worker_identity="wkr-with-token",
            token_fingerprint=secret,
            pid=99999,
            session_id="sess-stray",
            generation_id="gen-stray",
            process_identity="host-a:99999:ticks-x",
            client_instance_id="pid-99999",
        )
        async with h.store.write() as tx:
            await tx.insert_registration(stray)
        h.probes.kill(99999)

        planned = await plan(h, RETIRER)
        denied = await apply_plan(h, planned, profile=READER)
        applied = await apply_plan(h, planned, profile=RETIRER)
        replay = await apply_plan(h, planned, profile=RETIRER)

        assert denied["outcome"] == OUTCOME_REFUSED
        assert applied["outcome"] == OUTCOME_APPLIED
        assert replay["outcome"] == "already_retired"
        audit = await h.store.read_audit()
        assert [(e["action"], e["actor"], e["role"], e["outcome"]) for e in audit] == [
            ("plan", RETIRER.name, "reconciler", "planned"),
            ("apply", READER.name, "controller", OUTCOME_REFUSED),
            ("apply", RETIRER.name, "reconciler", OUTCOME_APPLIED),
            ("apply", RETIRER.name, "reconciler", "already_retired"),
        ]
        for event in audit:
            assert event["at"]
            assert secret not in json.dumps(event)
        plan_event, _, applied_event, replay_event = audit
        assert plan_event["detail"]["registry_fingerprint"] == planned["registry_fingerprint"]
        assert plan_event["detail"]["candidate_count"] == 1
        assert applied_event["detail"]["retired"] == [candidate]
        assert applied_event["detail"]["retired_count"] == 1
        assert replay_event["detail"]["retired_count"] == 0
        for event in (applied_event, replay_event):
            # Which tokens the apply was judged against belongs in the trail.
            assert event["detail"]["compared_token"] == "registry_fingerprint"
            assert (
                event["detail"]["expected_registry_fingerprint"]
                == (planned["registry_fingerprint"])
            )
            assert (
                event["detail"]["expected_candidate_fingerprint"]
                == (planned["candidate_fingerprint"])
            )
            assert event["detail"]["requested_count"] == 1
        assert secret not in json.dumps(planned)
