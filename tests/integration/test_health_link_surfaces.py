"""Namespace health and incident links over the socket, the CLI, the MCP tools and the bridge."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from mcp import Client

from supervisor.cli import EXIT_OK, EXIT_REFUSED, main
from supervisor.client import AsyncClient, RemoteProtocolError
from supervisor.settings.config import SocketConfig
from supervisor.settings.profile_edits import create_token
from supervisor.settings.profiles import ProfileBook
from supervisor.surfaces.mcp.bridge import SocketToolBackend
from supervisor.surfaces.mcp.operation_tools import (
    ASSESS_HEALTH_TOOL,
    CHECK_TOOL,
    GET_LINK_TOOL,
    HEALTH_GATE_TOOL,
    HEALTH_TOOL_NAMES,
    UPSERT_LINK_TOOL,
)
from supervisor.surfaces.mcp.tools import build_mcp_server
from tests.actors.helpers_app import SettledHarness, harness
from tests.actors.helpers_control import CONTROLLER_P, MERGER_P, SHA_1, events
from tests.integration.helpers_mcp import call, call_error
from tests.integration.socket_helpers import serve, short_dir

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PROFILES = """\
[profiles.cp-merger]
role_kind = "merger"
allowed_operations = ["gitea.read", "gitea.workflow.lease"]

[profiles.cp-controller]
role_kind = "controller"
allowed_operations = ["gitea.read", "gitea.workflow.lease"]
"""
WHERE: dict[str, Any] = {"remote": "prgs", "org": "org", "repo": "repo"}
PR: dict[str, Any] = {**WHERE, "kind": "pr", "number": 12}
EOF_PROBE = {"success": False, "error": "client is closing: EOF"}
LINK: dict[str, Any] = {
    "provider": "sentry",
    "provider_issue_id": "12345",
    "gitea_org": "org",
    "gitea_repo": "repo",
    "gitea_issue_number": 9001,
}


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


@asynccontextmanager
async def daemon(tmp_path: Path, sock_dir: Path) -> AsyncIterator[tuple[Path, dict[str, str]]]:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES, encoding="utf-8")
    tokens = {name: create_token(profiles, name) for name in ("cp-merger", "cp-controller")}
    config = SocketConfig(path=sock_dir / "s.sock")
    async with harness(tmp_path) as h, serve(h, config, ProfileBook(profiles)) as path:
        yield path, tokens


async def test_assess_gate_and_links_over_the_socket(tmp_path: Path, sock_dir: Path) -> None:
    async with daemon(tmp_path, sock_dir) as (path, tokens):
        async with AsyncClient(path, token=tokens["cp-controller"]) as controller:
            await controller.request("work_item_upsert", {**PR, "current_head_sha": SHA_1})
            granted = await controller.request(
                "assign",
                {**PR, "session_id": "s-m", "role": "merger", "expected_head_sha": SHA_1},
            )
            assert granted["outcome"] == "assigned"
            made = await controller.request("incident_link_upsert", {**LINK, "provider_org": " "})
            assert made["incident_link"]["provider_org"] == ""
        async with AsyncClient(path, token=tokens["cp-merger"]) as merger:
            check = {**PR, "session_id": "s-m", "action": "merge"}
            assert (await merger.request("assignment_check", check))["allowed"] is True
            verdict = await merger.request(
                "namespace_health_assess",
                {
                    "session_id": "s-m",
                    "namespace": "gitea-merger",
                    "registered_tools": ["gitea_whoami"],
                    "probe_result": EOF_PROBE,
                    "probe_source": "client_namespace",
                },
            )
            assert (verdict["error_type"], verdict["session_id"]) == ("namespace_eof", "s-m")
            gate = await merger.request(
                "namespace_health_gate", {"session_id": "s-m", "task": "merge_pr"}
            )
            assert (gate["allowed"], gate["namespace"]) == (False, "gitea-merger")
            refused = await merger.request("assignment_check", check)
            assert (refused["success"], refused["code"]) == (False, "namespace_unhealthy")
            found = await merger.request(
                "incident_link_get",
                {"gitea_org": "org", "gitea_repo": "repo", "gitea_issue_number": 9001},
            )
            assert found["incident_link"]["provider_issue_id"] == "12345"
            denied = await merger.request("incident_link_upsert", LINK)
            assert denied["denied"] is True
            for op, args in (
                ("namespace_health_assess", {"session_id": "s", "namespace": "n", "process": []}),
                ("namespace_health_gate", {"session_id": "s"}),
                ("incident_link_upsert", {**LINK, "linked_pr_numbers": ["12"]}),
                ("incident_link_get", {"gitea_org": "o", "gitea_repo": "r"}),
            ):
                with pytest.raises(RemoteProtocolError):
                    await merger.request(op, args)


async def test_the_health_and_link_commands(
    tmp_path: Path, sock_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(EOF_PROBE), encoding="utf-8")
    async with daemon(tmp_path, sock_dir) as (path, tokens):

        async def cli(token: str, *argv: str) -> tuple[int, dict[str, Any]]:
            args = ["--socket", str(path), "work", *argv, "--token", tokens[token], "--json"]
            code = await anyio.to_thread.run_sync(main, args)
            out = capsys.readouterr().out
            answer, _ = json.JSONDecoder().raw_decode(out[out.index("{\n") :])
            return code, answer

        health = ["health", "--session", "s-c", "--namespace", "gitea-merger"]
        code, broken = await cli(
            "cp-merger", *health, "--probe-source", "client_namespace", "--probe-result", str(probe)
        )
        assert (code, broken["error_type"]) == (EXIT_REFUSED, "namespace_eof")
        gate = ["health-gate", "--session", "s-c", "--task", "merge_pr"]
        code, blocked = await cli("cp-merger", *gate)
        assert (code, blocked["allowed"]) == (EXIT_REFUSED, False)
        probe.write_text(json.dumps({"success": True, "result": {}}), encoding="utf-8")
        code, healed = await cli(
            "cp-merger", *health, "--probe-source", "client_namespace", "--probe-result", str(probe)
        )
        assert (code, healed["ide_namespace_proven"]) == (EXIT_OK, True)
        assert (await cli("cp-merger", *gate))[0] == EXIT_OK
        issue = ["link", "--gitea-org", "org", "--gitea-repo", "repo", "--gitea-issue", "7"]
        code, none = await cli("cp-merger", *issue)
        assert (code, none["incident_link"]) == (EXIT_OK, None)
        code, made = await cli(
            "cp-controller", *issue, "--provider", "glitchtip", "--issue-id", "g-1", "--prs", "3,4"
        )
        assert (code, made["incident_link"]["linked_pr_numbers"]) == (EXIT_OK, [3, 4])
        code, shown = await cli("cp-merger", *issue)
        assert shown["incident_link"]["provider"] == "glitchtip"


@asynccontextmanager
async def tools(h: SettledHarness, profile: Any) -> AsyncIterator[Client]:
    async with Client(build_mcp_server(h.handle, profile_resolver=lambda: profile)) as client:
        yield client


async def test_the_tools_through_the_mcp_client(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await h.handle.upsert_work_item(CONTROLLER_P, **PR, current_head_sha=SHA_1)
        await h.handle.assign_and_lease(
            CONTROLLER_P, **PR, session_id="s-t", role="merger", expected_head_sha=SHA_1
        )
        async with tools(h, MERGER_P) as merger:
            listed = {tool.name: tool for tool in (await merger.list_tools()).tools}
            assert set(HEALTH_TOOL_NAMES) <= set(listed)
            hints = listed[ASSESS_HEALTH_TOOL].annotations
            assert hints is not None
            assert hints.read_only_hint is False
            offline = await call(
                merger,
                ASSESS_HEALTH_TOOL,
                session_id="s-t",
                namespace="gitea-merger",
                probe_result={"success": True, "result": {}},
                probe_source="offline_spawn",
            )
            assert (offline["healthy"], offline["ide_namespace_proven"]) == (True, False)
            gate = await call(merger, HEALTH_GATE_TOOL, session_id="s-t", task="merge_pr")
            assert "probe_source=offline_spawn" in gate["reasons"][0]
            refused = await call_error(merger, CHECK_TOOL, session_id="s-t", action="merge", **PR)
            assert refused["code"] == "namespace_unhealthy"
            proven = await call(
                merger,
                ASSESS_HEALTH_TOOL,
                session_id="s-t",
                namespace="gitea-merger",
                registered_tools="gitea_whoami",
                probe_result={"success": True, "result": {}},
                probe_source="client_namespace",
            )
            assert proven["ide_namespace_proven"] is True
            allowed = await call(merger, CHECK_TOOL, session_id="s-t", action="merge", **PR)
            assert allowed["allowed"] is True
            denied = await call_error(merger, UPSERT_LINK_TOOL, **LINK)
            assert denied["denied"] is True
        async with tools(h, CONTROLLER_P) as controller:
            made = await call(controller, UPSERT_LINK_TOOL, **LINK, linked_pr_numbers=[12])
            again = await call(controller, UPSERT_LINK_TOOL, **LINK, provider_base_url="")
            assert made["incident_link"]["link_id"] == again["incident_link"]["link_id"]
            found = await call(
                controller,
                GET_LINK_TOOL,
                gitea_org="org",
                gitea_repo="repo",
                gitea_issue_number=9001,
            )
            assert found["incident_link"]["linked_pr_numbers"] == [12]
        assert [e[0] for e in events(h) if e[0].startswith("namespace_health")] == [
            "namespace_health_recorded",
            "namespace_health_recorded",
        ]


async def test_the_stdio_bridge_backend_forwards_health_and_link_calls(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with (
        daemon(tmp_path, sock_dir) as (path, tokens),
        SocketToolBackend(path, tokens["cp-controller"], timeout=10.0) as backend,
        Client(build_mcp_server(backend, profile_resolver=lambda: None)) as client,
    ):
        verdict = await call(
            client,
            ASSESS_HEALTH_TOOL,
            session_id="s-b",
            namespace="gitea-reviewer",
            registered_tools=["gitea_whoami"],
            probe_result=EOF_PROBE,
            process={"pid": 7, "env": {"GITEA_MCP_PROFILE": "r", "GITEA_TOKEN": "x-secret"}},
            probe_source="client_namespace",
        )
        assert verdict["error_type"] == "namespace_eof"
        assert "x-secret" not in json.dumps(verdict)
        gate = await call(client, HEALTH_GATE_TOOL, session_id="s-b", task="submit_review")
        assert gate["allowed"] is False
        made = await call(client, UPSERT_LINK_TOOL, **LINK, status="open")
        found = await call(
            client, GET_LINK_TOOL, gitea_org="org", gitea_repo="repo", gitea_issue_number=9001
        )
        assert found["incident_link"]["link_id"] == made["incident_link"]["link_id"]
