"""Retirement plan via the actors: fields, read-only, deterministic, repository, leases, audit."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.policy.retirement.fingerprints import registry_fingerprint
from supervisor.policy.retirement.reasons import (
    REASON_ELIGIBLE,
    REASON_FOREIGN_REPOSITORY,
    REASON_PID_ALIVE,
    REASON_PID_REUSED,
    REASON_PID_UNKNOWN,
    REASON_PROTECTED_OWNER,
    REASON_UNTRUSTED_PROVENANCE,
    REASON_WORKER_LIVE,
)
from tests.actors.harness import READER, REPO, harness
from tests.actors.helpers_retirement import (
    PAST_TTL,
    enroll,
    ensure_swept,
    lease,
    plan,
)

pytestmark = pytest.mark.anyio


def _reasons(result: object) -> dict[str, str]:
    assert isinstance(result, dict)
    return {str(p["worker_identity"]): str(p["reason_code"]) for p in result["preserved"]}


async def test_plan_returns_tokens_entries_counts_and_declares_itself_read_only(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        dead = await enroll(h)
        alive = await enroll(h, namespace="reviewer")
        h.probes.kill(int(dead["pid"]))
        await h.clock.advance(PAST_TTL)
        await h.beat(alive)

        result = await plan(h)

        assert result["outcome"] == "planned"
        assert result["read_only"] is True
        assert result["mutation_performed"] is False
        for token, prefix in (
            ("registry_fingerprint", "registryfp-"),
            ("candidate_fingerprint", "candidatefp-"),
            ("scope_fingerprint", "scopefp-"),
        ):
            assert str(result[token]).startswith(prefix), token
        assert result["registry_fingerprint"] == registry_fingerprint(
            await h.store.read_registrations()
        )
        assert result["candidate_worker_identities"] == [dead["worker_identity"]]
        (candidate,) = result["candidates"]
        assert candidate["worker_identity"] == dead["worker_identity"]
        assert candidate["reason_code"] == REASON_ELIGIBLE
        assert candidate["detail"]
        assert candidate["evidence"]["pid"] == dead["pid"]
        assert candidate["evidence"]["pid_alive"] is False
        assert candidate["evidence"]["heartbeat_fresh"] is False
        (kept,) = result["preserved"]
        assert kept["worker_identity"] == alive["worker_identity"]
        assert kept["reason_code"] == REASON_WORKER_LIVE
        assert kept["detail"]
        assert kept["evidence"]["live"] is True
        assert result["assessed_count"] == 2
        assert result["candidate_count"] == 1
        assert result["preserved_count"] == 1
        assert result["preserved_reason_counts"] == {REASON_WORKER_LIVE: 1}
        owners = result["protected_active_workflow_owners"]
        assert owners["session_ids"] == []
        assert owners["pids"] == []
        assert owners["active_lease_count"] == 0
        assert result["canonical_repository"] == REPO


async def test_plan_preserves_rows_it_cannot_prove_stale(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        running = await enroll(h, namespace="author")
        reused = await enroll(h, namespace="reviewer")
        unprobeable = await enroll(h, namespace="merger")
        legacy = await enroll(h, namespace="controller", instance="legacy-pid-77")
        h.probes.revive(int(reused["pid"]), "ticks-someone-else")
        h.probes.forget(int(unprobeable["pid"]))
        h.probes.kill(int(legacy["pid"]))
        await h.clock.advance(PAST_TTL)

        result = await plan(h)

        assert result["candidate_worker_identities"] == []
        assert _reasons(result) == {
            running["worker_identity"]: REASON_PID_ALIVE,
            reused["worker_identity"]: REASON_PID_REUSED,
            unprobeable["worker_identity"]: REASON_PID_UNKNOWN,
            legacy["worker_identity"]: REASON_UNTRUSTED_PROVENANCE,
        }
        assert result["preserved_reason_counts"] == {
            REASON_PID_ALIVE: 1,
            REASON_PID_REUSED: 1,
            REASON_PID_UNKNOWN: 1,
            REASON_UNTRUSTED_PROVENANCE: 1,
        }
        assert result["exact_next_action"].startswith("no registration")


async def test_plan_mutates_nothing_but_the_audit_trail(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        dead = await enroll(h)
        await enroll(h, namespace="reviewer")
        await h.handle.upsert_lease(lease("l-1", session_id="sess-elsewhere"))
        h.probes.kill(int(dead["pid"]))
        await h.clock.advance(PAST_TTL)
        rows_before = await h.store.read_registrations()
        leases_before = await h.store.read_leases()
        audit_before = await h.store.read_audit()

        first = await plan(h)
        second = await plan(h)

        assert first["candidate_count"] == 1
        assert await h.store.read_registrations() == rows_before
        assert await h.store.read_leases() == leases_before
        audit_after = await h.store.read_audit()
        assert audit_after[: len(audit_before)] == audit_before
        assert [e["action"] for e in audit_after[len(audit_before) :]] == ["plan", "plan"]
        assert second["registry_fingerprint"] == first["registry_fingerprint"]


async def test_plan_tokens_do_not_depend_on_when_the_plan_is_taken(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        dead_a = await enroll(h)
        dead_b = await enroll(h)
        # Running but silent: preserved at every later instant for the same reason.
        await enroll(h, namespace="reviewer")
        h.probes.kill(int(dead_a["pid"]))
        h.probes.kill(int(dead_b["pid"]))
        await h.clock.advance(PAST_TTL)
        early = await plan(h)
        await h.clock.advance(3600)
        late = await plan(h)

        for token in ("registry_fingerprint", "candidate_fingerprint", "scope_fingerprint"):
            assert early[token] == late[token], token
        assert early["candidate_worker_identities"] == late["candidate_worker_identities"]
        assert len(early["candidate_worker_identities"]) == 2
        assert early["preserved_reason_counts"] == late["preserved_reason_counts"]
        # The evidence does carry the observation (the heartbeat age grew) ...
        assert (
            late["candidates"][0]["evidence"]["heartbeat_age_seconds"]
            > early["candidates"][0]["evidence"]["heartbeat_age_seconds"]
        )


async def test_a_heartbeat_moves_the_registry_token_but_not_the_candidate_tokens(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        dead = await enroll(h)
        beating = await enroll(h, namespace="reviewer")
        h.probes.kill(int(dead["pid"]))
        await h.clock.advance(PAST_TTL)
        await h.beat(beating)
        before = await plan(h)
        await h.clock.advance(2)
        assert (await h.beat(beating)).ok
        after = await plan(h)

        assert after["registry_fingerprint"] != before["registry_fingerprint"]
        assert after["candidate_fingerprint"] == before["candidate_fingerprint"]
        # The beating worker shares no identity key with the candidate.
        assert after["scope_fingerprint"] == before["scope_fingerprint"]


async def test_plan_uses_the_configured_canonical_repository(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        home = await enroll(h)
        foreign = await enroll(h, repository_binding="/srv/repos/other")
        for worker in (home, foreign):
            h.probes.kill(int(worker["pid"]))
        await h.clock.advance(PAST_TTL)

        configured = await plan(h)
        assert configured["canonical_repository"] == REPO
        assert configured["candidate_worker_identities"] == [home["worker_identity"]]
        assert _reasons(configured) == {foreign["worker_identity"]: REASON_FOREIGN_REPOSITORY}

        overridden = await plan(h, canonical_repository="/srv/repos/other")
        assert overridden["canonical_repository"] == "/srv/repos/other"
        assert overridden["candidate_worker_identities"] == [foreign["worker_identity"]]
        assert _reasons(overridden) == {home["worker_identity"]: REASON_FOREIGN_REPOSITORY}
        assert overridden["candidate_fingerprint"] != configured["candidate_fingerprint"]


async def test_active_lease_owner_is_preserved_and_listed(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        owner = await enroll(h, session_id="sess-owner")
        by_pid = await enroll(h)
        free = await enroll(h)
        for worker in (owner, by_pid, free):
            h.probes.kill(int(worker["pid"]))
        await h.handle.upsert_lease(lease("l-session", session_id="sess-owner"))
        await h.handle.upsert_lease(lease("l-pid", owner_pid=int(by_pid["pid"])))
        await h.handle.upsert_lease(
            lease("l-done", session_id=str(free["session_id"]), status="released")
        )
        await h.clock.advance(PAST_TTL)

        result = await plan(h)

        assert result["candidate_worker_identities"] == [free["worker_identity"]]
        assert _reasons(result) == {
            owner["worker_identity"]: REASON_PROTECTED_OWNER,
            by_pid["worker_identity"]: REASON_PROTECTED_OWNER,
        }
        owners = result["protected_active_workflow_owners"]
        assert owners["session_ids"] == ["sess-owner"]
        assert owners["pids"] == [by_pid["pid"]]
        assert owners["active_lease_count"] == 2
        assert str(owners["lease_fingerprint"]).startswith("leasefp-")
        details = {p["worker_identity"]: p["detail"] for p in result["preserved"]}
        assert "session_id=sess-owner" in details[owner["worker_identity"]]


async def test_plan_is_audited_with_actor_role_tokens_and_counts(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        dead = await enroll(h)
        await enroll(h, namespace="reviewer")
        h.probes.kill(int(dead["pid"]))
        await h.clock.advance(PAST_TTL)

        result = await plan(h)

        (event,) = await h.store.read_audit()
        assert event["action"] == "plan"
        assert event["actor"] == READER.name
        assert event["role"] == READER.role_kind
        assert event["outcome"] == "planned"
        detail = event["detail"]
        assert isinstance(detail, dict)
        for key in (
            "registry_fingerprint",
            "candidate_fingerprint",
            "scope_fingerprint",
            "assessed_count",
            "candidate_count",
            "preserved_count",
        ):
            assert detail[key] == result[key], key
        assert detail["mutation_performed"] is False
