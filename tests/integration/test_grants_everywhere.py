"""One grant decision everywhere: every declared op, every profile, every surface (the
socket, the daemon's MCP tools, the stdio bridge's, the CLI and the page) is allowed or
refused exactly as ``operations.grants.grant`` decides, with one code and one permission."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx2 as httpx
import pytest
from mcp import Client as McpClient
from mcp.types import CallToolResult

from supervisor.cli import main
from supervisor.daemon.ops import OpsState
from supervisor.operations.grants import grant
from supervisor.operations.registry import OPERATIONS
from supervisor.operations.spec import Operation
from supervisor.policy.control.permissions import Profile
from supervisor.settings.config import SocketConfig
from supervisor.settings.profile_edits import create_token
from supervisor.settings.profiles import ProfileBook
from supervisor.surfaces.http.fleet_page import FleetPage
from supervisor.surfaces.http.ops import OpsRoutes, serve_ops_http
from supervisor.surfaces.mcp.bridge import SocketToolBackend
from supervisor.surfaces.mcp.tools import build_mcp_server
from supervisor.wire import PERMISSION_DENIED
from tests.actors.helpers_app import harness
from tests.integration.socket_helpers import serve
from tests.integration.test_operation_reachability import (
    _argv,
    _minimal,
    _socket,
    _tool_minimal,
    sock_dir,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
__all__ = ["sock_dir"]  # the fixture, shared with the reachability tests

_ALL = '["gitea.read", "gitea.workflow.lease", "gitea.worker_registry.retire"]'
PROFILES = (
    Profile(
        name="e-controller",
        role_kind="controller",
        allowed_operations=frozenset(json.loads(_ALL)),
    ),
    Profile(
        name="e-author",
        role_kind="author",
        allowed_operations=frozenset({"gitea.read", "gitea.workflow.lease"}),
    ),
    Profile(name="e-bystander", role_kind="reviewer"),
)
PROFILES_TOML = "\n".join(
    f'[profiles.{p.name}]\nrole_kind = "{p.role_kind}"\n'
    f"allowed_operations = {json.dumps(sorted(p.allowed_operations))}\n"
    for p in PROFILES
)
#: The workers' own ops act for their process by peer credentials, not by a profile's grant.
WORKER_OPS = frozenset({"register", "heartbeat", "release"})
#: The page's routes, by the op whose grant each needs.
PAGE_ROUTES = {
    "snapshot": ("GET", "/api/fleet"),
    "plan": ("GET", "/api/plan"),
    "reap_plan": ("GET", "/api/reap/plan"),
    "reap_apply": ("POST", "/api/reap/apply"),
}
#: The page's census route needs the snapshot grant too.
SERVERS_ROUTE = ("GET", "/api/servers")


def _ops() -> list[Operation]:
    return [op for name, op in OPERATIONS.items() if name not in WORKER_OPS]


def _expected(profile: Profile, op: Operation) -> bool:
    """Whether ``grant`` refuses ``profile`` the op as its minimal request asks it."""
    if not op.tasks:
        return False  # any authenticated profile (host_status)
    # allocate declares a preview and an apply task; the minimal request previews.
    task = "allocate_preview" if op.name == "allocate" else None
    return grant(profile, op.name, task=task) is not None


def _resolver(profile: Profile) -> Callable[[], Profile]:
    return lambda: profile


def _code(answer: Any) -> str | None:
    """The code an answer of any surface carries (None when it carries none)."""
    if not isinstance(answer, dict):
        return None
    if answer.get("ok") is False and isinstance(answer.get("error"), dict):
        return str(answer["error"]["code"])
    body = answer.get("result", answer)
    if not isinstance(body, dict):
        return None
    code = body.get("code", body.get("error"))
    return str(code) if code is not None else None


def _permission(answer: Any) -> Any:
    body = answer.get("result", answer) if isinstance(answer, dict) else None
    return body.get("permission") if isinstance(body, dict) else None


@asynccontextmanager
async def _surfaces(tmp_path: Path, sock_dir: Path) -> AsyncIterator[dict[str, Any]]:
    path_of_profiles = tmp_path / "profiles.toml"
    path_of_profiles.write_text(PROFILES_TOML, encoding="utf-8")
    tokens = {p.name: create_token(path_of_profiles, p.name) for p in PROFILES}
    book = ProfileBook(path_of_profiles)
    async with AsyncExitStack() as stack:
        h = await stack.enter_async_context(harness(tmp_path))
        # The supervisor reads a grant again before each write from its profile source,
        # which must know these profiles as the daemon's profiles file does.
        h.profiles.by_name.update({p.name: p for p in PROFILES})
        path = await stack.enter_async_context(
            serve(h, SocketConfig(path=sock_dir / "s.sock"), book, hosts=h.supervisor.hosts)
        )
        daemon_side, bridge = {}, {}
        for profile in PROFILES:
            server = build_mcp_server(h.handle, profile_resolver=_resolver(profile))
            daemon_side[profile.name] = await stack.enter_async_context(McpClient(server))
            backend = await stack.enter_async_context(
                SocketToolBackend(path, tokens[profile.name], timeout=10.0)
            )
            relay = build_mcp_server(backend, profile_resolver=lambda: None)
            bridge[profile.name] = await stack.enter_async_context(McpClient(relay))
        state = OpsState(h.supervisor, h.supervisor.metrics, book)
        routes = OpsRoutes(h.handle, h.supervisor.metrics, state.health, FleetPage(h.handle, book))
        tg = await stack.enter_async_context(anyio.create_task_group())
        url = await tg.start(
            lambda task_status: serve_ops_http(
                routes, host="127.0.0.1", port=0, peer_uid=lambda *_: None, task_status=task_status
            )
        )
        stack.callback(tg.cancel_scope.cancel)
        yield {"path": path, "tokens": tokens, "daemon": daemon_side, "bridge": bridge, "url": url}


async def _tool(client: McpClient, op: Operation) -> Any:
    assert op.tool is not None
    result = await client.call_tool(op.tool.name, _tool_minimal(op))
    assert isinstance(result, CallToolResult)
    return result.structured_content


async def _cli(
    path: Path, token: str, op: Operation, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Any:
    assert op.command is not None
    words = [op.command.group, op.command.name] if op.command.group else [op.command.name]
    argv = ["--socket", str(path), *words, *_argv(op, tmp_path), "--token", token, "--json"]
    capsys.readouterr()
    await anyio.to_thread.run_sync(main, argv)
    out = capsys.readouterr().out
    # The supervisor's own log lines share stdout in this process; the answer is the
    # indented JSON object the command printed.
    answer, _ = json.JSONDecoder().raw_decode(out[out.index("{\n") :])
    return answer


async def _page(url: str, token: str, route: tuple[str, str]) -> Any:
    method, where = route
    headers = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=30.0) as client:
        if method == "POST":
            response = await client.post(f"{url}{where}", json={"plan_token": "x"}, headers=headers)
        else:
            response = await client.get(f"{url}{where}", headers=headers)
    return response.json()


async def test_every_op_gets_the_same_grant_decision_on_every_surface(
    tmp_path: Path, sock_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions: set[bool] = set()
    surfaces: set[str] = set()
    async with _surfaces(tmp_path, sock_dir) as s:
        for op in _ops():
            for profile in PROFILES:
                token = s["tokens"][profile.name]
                answers = {"socket": await _socket(s["path"], op.name, token, _minimal(op))}
                if op.tool is not None:
                    answers["mcp daemon"] = await _tool(s["daemon"][profile.name], op)
                    answers["mcp bridge"] = await _tool(s["bridge"][profile.name], op)
                if op.command is not None:
                    answers["cli"] = await _cli(s["path"], token, op, tmp_path, capsys)
                if op.name in PAGE_ROUTES:
                    answers["page"] = await _page(s["url"], token, PAGE_ROUTES[op.name])
                if op.name == "snapshot":
                    answers["page servers"] = await _page(s["url"], token, SERVERS_ROUTE)
                denied = _expected(profile, op)
                decisions.add(denied)
                where = (op.name, profile.name)
                surfaces.update(answers)
                for surface, answer in answers.items():
                    code = _code(answer)
                    assert (code == PERMISSION_DENIED) is denied, (*where, surface, answer)
                # One decision: every surface that names the missing permission names the same.
                named = {
                    json.dumps(p, sort_keys=True)
                    for p in map(_permission, answers.values())
                    if p is not None
                }
                assert len(named) <= 1, (*where, named)
                assert bool(named) is denied or op.name in PAGE_ROUTES, (*where, answers)
    # The walk saw both decisions (a table of only refusals or only grants proves nothing).
    assert decisions == {True, False}
    assert surfaces == {"socket", "mcp daemon", "mcp bridge", "cli", "page", "page servers"}
