"""The fleet MCP tools through the SDK's real client against a running supervisor (fake clock)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client

from supervisor.policy.control.permissions import Profile
from supervisor.policy.retirement.reasons import REASON_ELIGIBLE
from supervisor.surfaces.mcp.fleet_tools import APPLY_TOOL, PLAN_TOOL, SNAPSHOT_TOOL, TOOL_NAMES
from supervisor.surfaces.mcp.tools import build_mcp_server
from tests.actors.harness import AUTHOR, READER, REPO, RETIRER, Harness, harness
from tests.actors.helpers_retirement import status_of
from tests.integration.helpers_mcp import (
    call,
    call_error,
    plan_tokens,
    refused_arguments,
    stale_fleet,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@asynccontextmanager
async def tools_as(h: Harness, profile: Profile | None) -> AsyncIterator[Client]:
    server = build_mcp_server(h.handle, profile_resolver=lambda: profile)
    async with Client(server) as client:
        yield client


async def test_the_three_tools_are_listed_with_their_hints(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, tools_as(h, READER) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert set(TOOL_NAMES) <= set(listed)
    for name in TOOL_NAMES:
        assert listed[name].output_schema is not None, name
        assert listed[name].description, name
    snapshot, plan, apply = listed[SNAPSHOT_TOOL], listed[PLAN_TOOL], listed[APPLY_TOOL]
    hints = {
        name: (tool.annotations.read_only_hint, tool.annotations.destructive_hint)
        for name, tool in ((SNAPSHOT_TOOL, snapshot), (PLAN_TOOL, plan), (APPLY_TOOL, apply))
        if tool.annotations is not None
    }
    assert hints == {
        SNAPSHOT_TOOL: (True, False),
        PLAN_TOOL: (True, False),
        APPLY_TOOL: (False, True),
    }
    assert set(apply.input_schema["required"]) == {"candidate_fingerprint", "worker_identities"}


async def test_snapshot_returns_structured_counts(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        dead, alive = await stale_fleet(h)
        async with tools_as(h, READER) as client:
            result = await call(client, SNAPSHOT_TOOL)

    assert result["success"] is True
    assert result["read_only"] is True
    assert result["live_worker_count"] == 1
    assert result["stale_worker_count"] == 1
    assert result["historical_worker_count"] == 0
    assert str(result["registry_fingerprint"]).startswith("registryfp-")
    assert {w["worker_identity"] for w in result["workers"]} == {
        dead["worker_identity"],
        alive["worker_identity"],
    }


async def test_snapshot_carries_the_worker_partitions_and_observation_stamps(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        dead, alive = await stale_fleet(h)
        async with tools_as(h, READER) as client:
            first = await call(client, SNAPSHOT_TOOL)
            await h.clock.advance(1)
            second = await call(client, SNAPSHOT_TOOL)
            planned = await call(client, PLAN_TOOL)
        async with tools_as(h, RETIRER) as client:
            # The stamp is no compare-and-swap token: given as one, apply refuses it.
            stamped = await call_error(
                client,
                APPLY_TOOL,
                registry_fingerprint=first["registry_revision"],
                candidate_fingerprint=planned["candidate_fingerprint"],
                worker_identities=planned["candidate_worker_identities"],
            )
        assert await status_of(h, str(dead["worker_identity"])) == "active"

    assert [w["worker_identity"] for w in first["live_workers"]] == [alive["worker_identity"]]
    assert [w["worker_identity"] for w in first["stale_workers"]] == [dead["worker_identity"]]
    assert first["historical_workers"] == []
    assert first["live_workers"][0]["live"] is True
    assert str(first["consistency_token"]).startswith("fleetrev-")
    assert first["registry_revision"] == first["consistency_token"]
    # Nothing changed but the time of observation: the stamp moved, the fingerprint did not.
    assert second["registry_revision"] != first["registry_revision"]
    assert second["registry_fingerprint"] == first["registry_fingerprint"]
    assert stamped["outcome"] == "registry_revision_moved"
    assert stamped["retired_count"] == 0


async def test_snapshot_compares_the_live_fleet_with_a_manifest(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        _, alive = await stale_fleet(h)
        gone = "inst-codex-20261130T120000Z-000000000000"
        manifest = [
            {
                "client_instance_id": alive["client_instance_id"],
                "client_type": "codex",
                "namespaces": ["reviewer"],
            },
            {"client_instance_id": gone},
        ]
        async with tools_as(h, READER) as client:
            result = await call(client, SNAPSHOT_TOOL, expected_manifest=manifest)

    assert result["missing_expected_instance_ids"] == [gone]
    assert result["unmanifested_instance_ids"] == []
    assert result["live_fleet_safe"] is False


async def test_snapshot_refuses_manifest_entries_without_an_instance_id(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, tools_as(h, READER) as client:
        body = await refused_arguments(
            client,
            SNAPSHOT_TOOL,
            expected_manifest=[{"client_type": "codex"}, {"client_instance_id": "  "}],
        )

    assert body["tool"] == SNAPSHOT_TOOL
    (reason,) = body["reasons"]
    assert reason.startswith("expected_manifest[0]: client_instance_id")


async def test_plan_returns_tokens_candidates_and_the_audit_context(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        dead, alive = await stale_fleet(h)
        async with tools_as(h, READER) as client:
            result = await call(client, PLAN_TOOL, remote="prgs", org="ops", repo="fleet")

    assert result["success"] is True
    assert result["outcome"] == "planned"
    assert result["read_only"] is True
    assert result["mutation_performed"] is False
    for token, prefix in (
        ("registry_fingerprint", "registryfp-"),
        ("scope_fingerprint", "scopefp-"),
        ("candidate_fingerprint", "candidatefp-"),
    ):
        assert str(result[token]).startswith(prefix), token
    assert result["candidate_worker_identities"] == [dead["worker_identity"]]
    (candidate,) = result["candidates"]
    assert candidate["reason_code"] == REASON_ELIGIBLE
    # Compact by default: preserved rows as counts per reason with examples, no entries.
    assert "preserved" not in result
    assert [
        e["worker_identity"] for group in result["preserved_summary"] for e in group["examples"]
    ] == [alive["worker_identity"]]
    assert result["profile"] == READER.name
    assert result["repository"] == {
        "remote": "prgs",
        "host": None,
        "org": "ops",
        "repo": "fleet",
        "canonical_repository": REPO,
    }


async def test_apply_with_the_plan_tokens_retires_the_dead_worker(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        dead, alive = await stale_fleet(h)
        async with tools_as(h, RETIRER) as client:
            planned = await call(client, PLAN_TOOL)
            result = await call(
                client,
                APPLY_TOOL,
                registry_fingerprint=planned["registry_fingerprint"],
                **plan_tokens(planned),
            )
        assert await status_of(h, dead["worker_identity"]) == "retired"
        assert await status_of(h, alive["worker_identity"]) == "active"

    assert result["success"] is True
    assert result["outcome"] == "applied"
    assert result["mutation_performed"] is True
    assert result["retired_count"] == 1
    assert [r["worker_identity"] for r in result["retired"]] == [dead["worker_identity"]]
    assert result["profile"] == RETIRER.name
    assert result["post_apply"]["stale_worker_count"] == 0
    assert result["repository"]["remote"] == "dadeschools"


async def test_scoped_apply_survives_heartbeats_outside_the_scope(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        dead, alive = await stale_fleet(h)
        async with tools_as(h, RETIRER) as client:
            planned = await call(client, PLAN_TOOL)
            # A live worker's heartbeat moves the whole-registry token, not the scope token.
            await h.clock.advance(1.0)
            await h.beat(alive)
            result = await call(
                client,
                APPLY_TOOL,
                scope_fingerprint=planned["scope_fingerprint"],
                # The customer's tools also take the identities as one comma-separated string.
                candidate_fingerprint=planned["candidate_fingerprint"],
                worker_identities=",".join(planned["candidate_worker_identities"]),
            )
        assert await status_of(h, dead["worker_identity"]) == "retired"

    assert result["outcome"] == "applied"
    assert result["retired_count"] == 1


async def test_author_is_refused_with_a_structured_denial(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        dead, _ = await stale_fleet(h)
        async with tools_as(h, RETIRER) as client:
            planned = await call(client, PLAN_TOOL)
        async with tools_as(h, AUTHOR) as client:
            plan_denied = await call_error(client, PLAN_TOOL)
            apply_denied = await call_error(
                client,
                APPLY_TOOL,
                registry_fingerprint=planned["registry_fingerprint"],
                **plan_tokens(planned),
            )
        assert await status_of(h, dead["worker_identity"]) == "active"

    for denied in (plan_denied, apply_denied):
        assert denied["success"] is False
        assert denied["outcome"] == "refused"
        assert denied["denied"] is True
        assert denied["permission"]["role_denied"] is True
        assert denied["permission"]["role_kind"] == "author"
    assert apply_denied["mutation_performed"] is False
    assert apply_denied["retired_count"] == 0


async def test_reader_without_the_retire_grant_cannot_apply(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        dead, _ = await stale_fleet(h)
        async with tools_as(h, READER) as client:
            planned = await call(client, PLAN_TOOL)
            denied = await call_error(
                client,
                APPLY_TOOL,
                registry_fingerprint=planned["registry_fingerprint"],
                **plan_tokens(planned),
            )
        assert await status_of(h, dead["worker_identity"]) == "active"

    assert denied["denied"] is True
    assert denied["permission"]["missing_operation"] == "gitea.worker_registry.retire"


async def test_unauthenticated_caller_is_refused(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, tools_as(h, None) as client:
        result = await call_error(client, PLAN_TOOL)

    assert result["success"] is False
    assert result["denied"] is True


@pytest.mark.parametrize(
    "identities",
    ['["unterminated', [""], "[1, 2]"],
    ids=["bad-json", "empty-string", "json-numbers"],
)
async def test_unparseable_worker_identities_are_a_structured_error(
    tmp_path: Path, identities: object
) -> None:
    async with harness(tmp_path) as h:
        dead, _ = await stale_fleet(h)
        async with tools_as(h, RETIRER) as client:
            planned = await call(client, PLAN_TOOL)
            body = await refused_arguments(
                client,
                APPLY_TOOL,
                registry_fingerprint=planned["registry_fingerprint"],
                candidate_fingerprint=planned["candidate_fingerprint"],
                worker_identities=identities,
            )
        assert await status_of(h, dead["worker_identity"]) == "active"

    assert body["tool"] == APPLY_TOOL
    assert body["retired_count"] == 0
    assert "worker_identities" in body["reasons"][0]


async def test_arguments_of_the_wrong_type_are_a_structured_error(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, tools_as(h, RETIRER) as client:
        body = await refused_arguments(client, APPLY_TOOL, worker_identities=[7])

    reasons = " ".join(body["reasons"])
    assert "candidate_fingerprint: Field required" in reasons
    assert "worker_identities" in reasons


async def test_both_or_neither_registry_token_is_refused_by_the_supervisor(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        dead, _ = await stale_fleet(h)
        async with tools_as(h, RETIRER) as client:
            planned = await call(client, PLAN_TOOL)
            both = await call_error(
                client,
                APPLY_TOOL,
                registry_fingerprint=planned["registry_fingerprint"],
                scope_fingerprint=planned["scope_fingerprint"],
                **plan_tokens(planned),
            )
            neither = await call_error(client, APPLY_TOOL, **plan_tokens(planned))
        assert await status_of(h, dead["worker_identity"]) == "active"

    for refused in (both, neither):
        assert refused["success"] is False
        assert refused["outcome"] == "refused"
        assert refused["retired_count"] == 0


async def test_the_plan_tool_lists_entries_on_request_and_stays_under_its_size(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        _, alive = await stale_fleet(h)
        async with tools_as(h, READER) as client:
            listed = await call(client, PLAN_TOOL, reason="worker_live", limit=5)
        tiny = build_mcp_server(h.handle, profile_resolver=lambda: READER, max_result_bytes=6000)
        async with Client(tiny) as client:
            cut = await call(client, SNAPSHOT_TOOL)
            raw = await client.call_tool(SNAPSHOT_TOOL, {})
            refused = await call_error(client, PLAN_TOOL, reason="not_a_reason")

    assert [e["worker_identity"] for e in listed["preserved"]] == [alive["worker_identity"]]
    assert listed["preserved"][0]["evidence"]["live"] is True
    assert listed["next_cursor"] is None
    assert listed["listing"]["mode"] == "page"
    assert "truncated" in cut
    # The whole tool result: the structured answer and its JSON text together.
    text = "".join(getattr(block, "text", "") for block in raw.content)
    assert len(text.encode()) + len(json.dumps(raw.structured_content).encode()) <= 6000
    assert cut["live_worker_count"] == 1
    assert refused["success"] is False
