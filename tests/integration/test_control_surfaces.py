"""The control plane over the socket, the CLI, the MCP tools and the stdio bridge's backend."""

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
from supervisor.client import AsyncClient, RemoteProtocolError, RemoteUnauthenticated
from supervisor.policy.control.permissions import Profile
from supervisor.settings.config import SocketConfig
from supervisor.settings.profile_edits import create_token
from supervisor.settings.profiles import ProfileBook
from supervisor.surfaces.mcp.bridge import SocketToolBackend
from supervisor.surfaces.mcp.operation_tools import (
    ALLOCATE_TOOL,
    CHECK_TOOL,
    CONTROL_TOOL_NAMES,
    HEARTBEAT_TOOL,
    RELEASE_TOOL,
)
from supervisor.surfaces.mcp.tools import build_mcp_server
from tests.actors.helpers_app import SettledHarness, harness
from tests.actors.helpers_control import AUTHOR_P, LOOKER_P, MERGER_P, active_leases, events
from tests.integration.helpers_mcp import call, call_error
from tests.integration.socket_helpers import serve, short_dir

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PROFILES = """\
[profiles.cp-author]
role_kind = "author"
allowed_operations = ["gitea.read", "gitea.workflow.lease"]

[profiles.cp-controller]
role_kind = "controller"
allowed_operations = ["gitea.read", "gitea.workflow.lease"]

[profiles.cp-looker]
role_kind = "author"
allowed_operations = ["gitea.read"]
"""

WHERE = {"remote": "prgs", "org": "org", "repo": "repo"}
ISSUE = [{"kind": "issue", "number": 600, "labels": ["status:ready"]}]


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


class Daemon:
    def __init__(self, h: SettledHarness, path: Path, tokens: dict[str, str]) -> None:
        self.h, self.path, self.tokens = h, path, tokens


@asynccontextmanager
async def daemon(tmp_path: Path, sock_dir: Path) -> AsyncIterator[Daemon]:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES, encoding="utf-8")
    tokens = {
        name: create_token(profiles, name) for name in ("cp-author", "cp-controller", "cp-looker")
    }
    config = SocketConfig(path=sock_dir / "s.sock")
    async with harness(tmp_path) as h, serve(h, config, ProfileBook(profiles)) as path:
        yield Daemon(h, path, tokens)


# --- socket -------------------------------------------------------------------------------


async def test_allocate_heartbeat_check_release_over_the_socket(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with daemon(tmp_path, sock_dir) as d:
        async with AsyncClient(d.path, token=d.tokens["cp-author"]) as client:
            base = {**WHERE, "session_id": "s-sock", "candidates": ISSUE}
            preview = await client.request("allocate", base)
            assert preview["outcome"] == "preview"
            taken = await client.request("allocate", {**base, "apply": True})
            assert taken["outcome"] == "assigned_work"
            lease_id = taken["lease_proof"]["lease_id"]
            lease = {"session_id": "s-sock", "lease_id": lease_id}
            beat = await client.request("lease_heartbeat", {**lease, "lease_ttl_seconds": 120})
            assert beat["success"] is True
            gate = {**WHERE, "session_id": "s-sock", "kind": "issue", "number": 600}
            allowed = await client.request("assignment_check", {**gate, "action": "implement"})
            assert allowed["allowed"] is True
            refused = await client.request("assignment_check", {**gate, "action": "merge"})
            assert (refused["success"], refused["code"]) == (False, "action_forbidden")
            released = await client.request("lease_release", lease)
            assert released["status"] == "released"
        assert active_leases(d.h) == []
        assert [e[0] for e in events(d.h)][-3:] == [
            "lease_granted",
            "lease_heartbeat",
            "lease_released",
        ]


async def test_allocate_over_the_socket_takes_defaults_for_null_candidate_fields(
    tmp_path: Path, sock_dir: Path
) -> None:
    # The socket's own decoding (shape check, then the handle's candidate parsing)
    # must not turn an exported inventory's nulls into a refusal of the request.
    nulls = {"priority": None, "state": None, "blocked": None, "labels": None}
    candidates = [
        {"kind": "issue", "number": 600, **nulls},
        {"kind": "issue", "number": 601, "priority": 2},
    ]
    async with (
        daemon(tmp_path, sock_dir) as d,
        AsyncClient(d.path, token=d.tokens["cp-author"]) as client,
    ):
        base = {**WHERE, "session_id": "s-nulls", "candidates": candidates}
        preview = await client.request("allocate", base)
        assert preview["outcome"] == "preview", preview
        assert preview["selected"]["number"] == 601
        taken = await client.request("allocate", {**base, "apply": True})
        assert taken["outcome"] == "assigned_work", taken
        again = await client.request(
            "allocate",
            {**WHERE, "session_id": "s-other", "candidates": candidates[:1]},
        )
        # The null-priority, null-state, null-blocked issue is open, unblocked work.
        assert again["outcome"] == "preview", again
        assert again["selected"]["number"] == 600


async def test_socket_permissions_and_shapes(tmp_path: Path, sock_dir: Path) -> None:
    async with daemon(tmp_path, sock_dir) as d:
        async with AsyncClient(d.path) as anonymous:
            with pytest.raises(RemoteUnauthenticated):
                await anonymous.request("allocate", {**WHERE, "session_id": "s", "candidates": []})
        async with AsyncClient(d.path, token=d.tokens["cp-looker"]) as looker:
            denied = await looker.request(
                "allocate", {**WHERE, "session_id": "s", "candidates": ISSUE, "apply": True}
            )
            assert denied["denied"] is True
            assert denied["permission"]["missing_operation"] == "gitea.workflow.lease"
            lock = await looker.request("terminal_lock_get", WHERE)
            assert lock == {"success": True, "terminal_lock": None}
        async with AsyncClient(d.path, token=d.tokens["cp-author"]) as author:
            for args in (
                {**WHERE, "session_id": "s", "candidates": "600"},
                {**WHERE, "session_id": "s", "candidates": [], "surprise": 1},
                {**WHERE, "candidates": []},
            ):
                with pytest.raises(RemoteProtocolError):
                    await author.request("allocate", args)
            incident = await author.request(
                "allocate",
                {
                    **WHERE,
                    "session_id": "s",
                    "candidates": [{"kind": "sentry_incident", "number": 1}],
                },
            )
            assert (incident["success"], incident["code"]) == (False, "invalid_work_kind")
            with pytest.raises(RemoteProtocolError, match="terminal_pr"):
                await author.request("terminal_lock_set", WHERE)
        async with AsyncClient(d.path, token=d.tokens["cp-controller"]) as controller:
            assigned = await controller.request(
                "assign",
                {**WHERE, "session_id": "s-op", "role": "author", "kind": "issue", "number": 1},
            )
            assert assigned["outcome"] == "assigned"
            locked = await controller.request("terminal_lock_set", {**WHERE, "terminal_pr": 10})
            assert locked["terminal_lock"]["terminal_pr"] == 10
            cleared = await controller.request("terminal_lock_set", {**WHERE, "terminal_pr": None})
            assert cleared["terminal_lock"] is None


# --- CLI ------------------------------------------------------------------------------------


async def test_the_work_commands(
    tmp_path: Path, sock_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    candidates = tmp_path / "candidates.json"
    candidates.write_text(json.dumps(ISSUE), encoding="utf-8")
    async with daemon(tmp_path, sock_dir) as d:

        async def cli(token: str, *argv: str) -> tuple[int, dict[str, Any]]:
            args = ["--socket", str(d.path), "work", *argv, "--token", d.tokens[token], "--json"]
            code = await anyio.to_thread.run_sync(main, args)
            out = capsys.readouterr().out
            # The supervisor's own log lines share stdout in this process; the answer is
            # the indented JSON object the command printed.
            answer, _ = json.JSONDecoder().raw_decode(out[out.index("{\n") :])
            return code, answer

        repo = ["--remote", "prgs", "--org", "org", "--repo", "repo"]
        code, preview = await cli(
            "cp-author", "allocate", *repo, "--session", "s-cli", "--candidates", str(candidates)
        )
        assert (code, preview["outcome"]) == (EXIT_OK, "preview")
        code, taken = await cli(
            "cp-author",
            "allocate",
            *repo,
            "--session",
            "s-cli",
            "--candidates",
            str(candidates),
            "--apply",
        )
        assert (code, taken["outcome"]) == (EXIT_OK, "assigned_work")
        lease_id = taken["lease_proof"]["lease_id"]
        item = [*repo, "--kind", "issue", "--number", "600"]
        code, _ = await cli(
            "cp-author", "check", *item, "--session", "s-cli", "--action", "implement"
        )
        assert code == EXIT_OK
        code, _ = await cli("cp-author", "check", *item, "--session", "s-cli", "--action", "merge")
        assert code == EXIT_REFUSED
        code, waited = await cli(
            "cp-controller", "assign", *item, "--session", "s-other", "--role", "author"
        )
        assert (code, waited["outcome"], waited["owner_session_id"]) == (
            EXIT_REFUSED,
            "wait",
            "s-cli",
        )
        code, _ = await cli("cp-author", "heartbeat", "--session", "s-cli", "--lease", lease_id)
        assert code == EXIT_OK
        code, released = await cli(
            "cp-author", "release", "--session", "s-cli", "--lease", lease_id
        )
        assert (code, released["status"]) == (EXIT_OK, "released")
        code, locked = await cli(
            "cp-controller", "lock", *repo, "--set", "12", "--decision", "approve"
        )
        assert (code, locked["terminal_lock"]["terminal_pr"]) == (EXIT_OK, 12)
        code, shown = await cli("cp-author", "lock", *repo)
        assert shown["terminal_lock"]["decision"] == "approve"
        code, merged = await cli("cp-author", "item", *item, "--state", "closed")
        assert (code, merged["work_item"]["state"]) == (EXIT_OK, "closed")


# --- MCP ------------------------------------------------------------------------------------


@asynccontextmanager
async def tools_as(h: SettledHarness, profile: Profile | None) -> AsyncIterator[Client]:
    async with Client(build_mcp_server(h.handle, profile_resolver=lambda: profile)) as client:
        yield client


async def test_the_control_tools_are_listed(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, tools_as(h, AUTHOR_P) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(CONTROL_TOOL_NAMES) <= set(listed)
    hints = listed[CHECK_TOOL].annotations
    assert hints is not None
    assert hints.read_only_hint is True
    assert {"session_id", "candidates", "remote", "org", "repo"} <= set(
        listed[ALLOCATE_TOOL].input_schema["required"]
    )


async def test_allocate_through_the_mcp_tools(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        async with tools_as(h, AUTHOR_P) as author:
            preview = await call(author, ALLOCATE_TOOL, session_id="s-1", candidates=ISSUE, **WHERE)
            assert preview["outcome"] == "preview"
            taken = await call(
                author, ALLOCATE_TOOL, session_id="s-1", candidates=ISSUE, apply=True, **WHERE
            )
            assert taken["outcome"] == "assigned_work"
            waiting = await call(
                author, ALLOCATE_TOOL, session_id="s-2", candidates=ISSUE, apply=True, **WHERE
            )
            assert (waiting["outcome"], waiting["owner_session_id"]) == ("wait", "s-1")
            lease = {"session_id": "s-1", "lease_id": taken["lease_proof"]["lease_id"]}
            assert (await call(author, HEARTBEAT_TOOL, **lease))["success"] is True
            push = {"session_id": "s-1", "kind": "issue", "number": 600, "action": "push"}
            assert (await call(author, CHECK_TOOL, **push, **WHERE))["allowed"] is True
            assert (await call(author, RELEASE_TOOL, **lease))["status"] == "released"
            # The gate's "no" is a denial: flagged, so a caller that reads only isError stops.
            closed = await call_error(author, CHECK_TOOL, **push, **WHERE)
            assert closed["allowed"] is False
            assert closed["code"]
            incident = await call_error(
                author,
                ALLOCATE_TOOL,
                session_id="s-1",
                candidates=[{"kind": "glitchtip_incident", "number": 3}],
                **WHERE,
            )
            assert incident["code"] == "invalid_work_kind"
            other_role = await call_error(
                author, ALLOCATE_TOOL, session_id="s-1", candidates=ISSUE, role="merger", **WHERE
            )
            assert other_role["outcome"] == "role_ineligible"
        async with tools_as(h, LOOKER_P) as looker:
            denied = await call_error(
                looker, ALLOCATE_TOOL, session_id="s-3", candidates=ISSUE, apply=True, **WHERE
            )
            assert denied["denied"] is True
        async with tools_as(h, MERGER_P) as merger:
            nothing = await call(merger, ALLOCATE_TOOL, session_id="s-4", candidates=ISSUE, **WHERE)
            assert nothing["outcome"] == "no_safe_work"


async def test_the_stdio_bridge_backend_forwards_control_calls(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with (
        daemon(tmp_path, sock_dir) as d,
        SocketToolBackend(d.path, d.tokens["cp-author"], timeout=10.0) as backend,
        Client(build_mcp_server(backend, profile_resolver=lambda: None)) as client,
    ):
        taken = await call(
            client, ALLOCATE_TOOL, session_id="s-b", candidates=ISSUE, apply=True, **WHERE
        )
        assert taken["outcome"] == "assigned_work"
        lease = {"session_id": "s-b", "lease_id": taken["lease_proof"]["lease_id"]}
        assert (await call(client, HEARTBEAT_TOOL, **lease))["success"] is True
        assert (await call(client, RELEASE_TOOL, **lease))["status"] == "released"
        bad = await call_error(
            client, ALLOCATE_TOOL, session_id="s-b", candidates=[], remote="", org="o", repo="r"
        )
        assert bad["success"] is False
