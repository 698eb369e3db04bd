"""Namespace health verdicts through the writer: recorded per session, and the mutation gate."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from supervisor.policy.control.permissions import OP_READ, Profile
from tests.actors.harness import Harness
from tests.actors.helpers_app import harness
from tests.actors.helpers_control import (
    CONTROLLER_P,
    MERGER_P,
    REVIEWER_P,
    SHA_1,
    WHERE,
    assign,
    events,
)
from tests.store.rowdata import raw_query

pytestmark = pytest.mark.anyio

EOF_PROBE = {"success": False, "error": "client is closing: EOF"}
OK_PROBE = {"success": True, "result": {"login": "merger"}}
NO_GRANTS = Profile(name="cp-nothing", role_kind="merger")


async def assess(
    h: Harness,
    session: str,
    *,
    namespace: str = "gitea-merger",
    probe: Mapping[str, Any] | None = None,
    source: str | None = "client_namespace",
    profile: Profile = MERGER_P,
    **extra: Any,
) -> Mapping[str, Any]:
    return await h.handle.assess_namespace_health(
        profile,
        session_id=session,
        namespace=namespace,
        registered_tools=["gitea_whoami"],
        probe_result=probe,
        probe_source=source,
        **extra,
    )


async def gate(h: Harness, session: str, task: str) -> Mapping[str, Any]:
    return await h.handle.namespace_health_gate(MERGER_P, session_id=session, task=task)


def health_rows(h: Harness) -> list[tuple[Any, ...]]:
    return raw_query(
        h.store.path,
        "SELECT session_id, namespace, probe_source, healthy, error_type FROM namespace_health "
        "ORDER BY session_id, namespace",
    )


async def test_a_recorded_eof_blocks_merge_and_a_healthy_client_probe_clears_it(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        broken = await assess(
            h,
            "s1",
            probe=EOF_PROBE,
            process={"pid": 4321, "env": {"GITEA_MCP_PROFILE": "m", "GITEA_TOKEN": "sekrit"}},
        )
        assert broken["session_id"] == "s1"
        assert (broken["healthy"], broken["error_type"]) == (False, "namespace_eof")
        assert broken["blocks_merge_workflow"] is True
        assert "sekrit" not in repr(broken)
        blocked = await gate(h, "s1", "merge_pr")
        assert blocked["success"] is True
        assert (blocked["allowed"], blocked["namespace"]) == (False, "gitea-merger")
        assert "namespace_eof" in blocked["reasons"][0]
        # Review goes through another namespace, which nobody assessed: no gate.
        assert (await gate(h, "s1", "submit_review"))["allowed"] is True

        healed = await assess(h, "s1", probe=OK_PROBE)
        assert healed["ide_namespace_proven"] is True
        cleared = await gate(h, "s1", "merge_pr")
        assert (cleared["allowed"], cleared["reasons"]) == (True, [])
        # The latest verdict replaced the first: one row, one event per record.
        assert health_rows(h) == [("s1", "gitea-merger", "client_namespace", 1, None)]
        assert [e[2] for e in events(h, kind="namespace_health_recorded")] == ["s1", "s1"]
        stored = raw_query(h.store.path, "SELECT assessment FROM namespace_health")
        assert "sekrit" not in repr(stored)


async def test_offline_success_never_authorizes_and_sessions_are_separate(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        offline = await assess(h, "s1", probe=OK_PROBE, source="offline_spawn")
        assert (offline["healthy"], offline["ide_namespace_proven"]) == (True, False)
        refused = await gate(h, "s1", "merge_pr")
        assert refused["allowed"] is False
        assert "probe_source=offline_spawn" in refused["reasons"][0]
        assert "client_namespace" in refused["reasons"][0]
        # Another session's record changes nothing here, and this one nothing there.
        await assess(h, "s2", probe=EOF_PROBE)
        assert (await gate(h, "s3", "merge_pr"))["allowed"] is True
        assert "probe_source=offline_spawn" in (await gate(h, "s1", "merge_pr"))["reasons"][0]
        # A task without a namespace is never gated.
        assert (await gate(h, "s2", "implement"))["allowed"] is True


async def test_denied_or_invalid_assessments_record_nothing(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        denied = await assess(h, "s1", probe=EOF_PROBE, profile=NO_GRANTS)
        assert (denied["success"], denied["denied"]) == (False, True)
        assert denied["permission"]["missing_operation"] == OP_READ
        for bad, code in (
            ({"session_id": "has space"}, "invalid_session"),
            ({"namespace": ""}, "invalid_argument"),
            ({"configured": "yes"}, "invalid_argument"),
            ({"probe_result": ["not", "an", "object"]}, "invalid_argument"),
            ({"registered_tools": [1, 2]}, "invalid_argument"),
        ):
            args: dict[str, Any] = {"session_id": "s1", "namespace": "gitea-merger", **bad}
            answer = await h.handle.assess_namespace_health(MERGER_P, **args)
            assert (answer["success"], answer["code"]) == (False, code), bad
        assert health_rows(h) == []
        assert events(h, kind="namespace_health_recorded") == []
        no_gate = await h.handle.namespace_health_gate(NO_GRANTS, session_id="s1", task="merge_pr")
        assert no_gate["denied"] is True


async def test_a_restart_keeps_the_block(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await assess(h, "s1", probe=EOF_PROBE)
    async with harness(tmp_path) as h:
        assert (await gate(h, "s1", "merge_pr"))["allowed"] is False


async def _merge_assignment(h: Harness, session: str) -> None:
    await h.handle.upsert_work_item(
        CONTROLLER_P, **WHERE, kind="pr", number=12, current_head_sha=SHA_1
    )
    granted = await assign(h, session, 12, kind="pr", role="merger", expected_head_sha=SHA_1)
    assert granted["outcome"] == "assigned"


async def _check(h: Harness, session: str, action: str, number: int = 12) -> Mapping[str, Any]:
    return await h.handle.require_valid_assignment(
        MERGER_P, session_id=session, **WHERE, kind="pr", number=number, action=action
    )


async def test_the_mutation_gate_refuses_merge_on_an_unhealthy_merger_namespace(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        await _merge_assignment(h, "s1")
        assert (await _check(h, "s1", "merge"))["allowed"] is True  # not assessed: no gate
        await assess(h, "s1", probe=EOF_PROBE)
        refused = await _check(h, "s1", "merge")
        assert (refused["success"], refused["allowed"]) == (False, False)
        assert refused["code"] == "namespace_unhealthy"
        assert any("gitea-merger" in r for r in refused["reasons"])
        # Comment goes through no gated task; the lease checks still run first.
        assert (await _check(h, "s1", "comment"))["allowed"] is True
        assert (await _check(h, "s1", "merge", number=99))["code"] == "no_assignment"
        await assess(h, "s1", probe=OK_PROBE)
        assert (await _check(h, "s1", "merge"))["allowed"] is True


@pytest.mark.parametrize("action", ["approve", "request_changes", "review"])
async def test_review_actions_consult_the_reviewer_namespace(tmp_path: Path, action: str) -> None:
    async with harness(tmp_path) as h:
        await h.handle.upsert_work_item(
            CONTROLLER_P, **WHERE, kind="pr", number=5, current_head_sha=SHA_1
        )
        await assign(h, "r1", 5, kind="pr", role="reviewer", expected_head_sha=SHA_1)
        # A broken merger namespace does not concern a review.
        await assess(h, "r1", probe=EOF_PROBE)
        args = {**WHERE, "session_id": "r1", "kind": "pr", "number": 5, "action": action}
        assert (await h.handle.require_valid_assignment(REVIEWER_P, **args))["allowed"] is True
        await assess(h, "r1", namespace="gitea-reviewer", probe=OK_PROBE, source="  OFFLINE_SPAWN ")
        refused = await h.handle.require_valid_assignment(REVIEWER_P, **args)
        assert refused["code"] == "namespace_unhealthy"
        assert "gitea-reviewer" in refused["reasons"][0]
