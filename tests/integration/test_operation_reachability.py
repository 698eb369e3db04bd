"""Every declared operation is reachable on every surface it declares: the socket op, the MCP
tool on both MCP surfaces and the CLI subcommand, with the same argument names and refusals."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client as McpClient
from mcp.types import CallToolResult

from supervisor.cli import build_parser
from supervisor.cli.operations import commands_of, operation_request
from supervisor.errors import ProtocolError
from supervisor.operations import spec
from supervisor.operations.registry import CONTROL_OPS, HOST_OPS, OPERATIONS, TOOLS
from supervisor.operations.spec import Operation
from supervisor.policy.control.permissions import Profile
from supervisor.settings.config import SocketConfig
from supervisor.settings.profile_edits import create_token
from supervisor.settings.profiles import ProfileBook
from supervisor.surfaces.mcp.bridge import SocketToolBackend
from supervisor.surfaces.mcp.tools import build_mcp_server
from supervisor.surfaces.socket.protocol import CONTROL_SCHEMAS, decode_request
from tests.actors.helpers_app import harness
from tests.integration.socket_helpers import read_frames, serve, short_dir

pytestmark = pytest.mark.integration

#: A well-shaped value of each wire shape (the permission check comes before any other).
SAMPLES: dict[str, Any] = {
    spec.TEXT: "x",
    spec.INT: 1,
    spec.INT_OR_NULL: None,
    spec.NUMBER: 1.0,
    spec.BOOL: False,
    spec.TEXTS: [],
    spec.OBJECTS: [],
    spec.OBJECT: {},
    spec.INTS: [],
    spec.TEXT_OR_TEXTS: "x",
}
#: Wrong-shaped values: refused as bad_request before anything runs, on every surface.
WRONG: dict[str, Any] = {
    spec.TEXT: 5,
    spec.INT: "x",
    spec.OBJECTS: "x",
    spec.OBJECT: "x",
    spec.INT_OR_NULL: "x",
}
#: Wire arguments a tool does not offer (the CLI and socket do).
NOT_ON_MCP = {"plan": {"examples"}}
BYSTANDER = Profile(name="r-bystander", role_kind="reviewer")
PROFILES = '[profiles.r-bystander]\nrole_kind = "reviewer"\nallowed_operations = []\n'


def _minimal(op: Operation) -> dict[str, Any]:
    return {arg.name: SAMPLES[arg.shape] for arg in op.args if arg.required}


def _tool_minimal(op: Operation) -> dict[str, Any]:
    assert op.tool is not None
    params = (op.tool.param(op, name) for name, _ in op.tool.params)
    return {arg.name: SAMPLES[arg.shape] for arg in params if arg.required}


def _served() -> list[Operation]:
    return [op for op in OPERATIONS.values() if op.tool is not None]


# --- socket ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_op_is_a_socket_op_with_the_declared_arguments(name: str) -> None:
    op = OPERATIONS[name]
    frame = {"v": 1, "id": "1", "op": name, "token": "t", "args": _minimal(op)}
    # A minimal well-shaped frame of every declared op decodes (none is an unknown op).
    assert decode_request(json.dumps(frame).encode()).op == name
    if name in CONTROL_OPS:
        assert list(CONTROL_SCHEMAS[name]) == [arg.name for arg in op.args]
    if name in CONTROL_OPS | HOST_OPS:
        unknown = {**frame, "args": {**_minimal(op), "not_an_argument": 1}}
        with pytest.raises(ProtocolError) as refused:
            decode_request(json.dumps(unknown).encode())
        assert refused.value.code == "bad_request"


# --- MCP ------------------------------------------------------------------------------


async def _listed(server: Any) -> dict[str, Any]:
    async with McpClient(server) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


@pytest.mark.anyio
async def test_every_tool_is_listed_on_both_mcp_surfaces_with_the_declared_arguments(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        daemon_side = await _listed(build_mcp_server(h.handle, profile_resolver=lambda: None))
    async with SocketToolBackend(tmp_path / "absent.sock", "token") as backend:
        bridge = await _listed(build_mcp_server(backend, profile_resolver=lambda: None))
    assert set(daemon_side) == set(bridge) == set(TOOLS)
    for name, op in TOOLS.items():
        for listed in (daemon_side, bridge):
            schema = listed[name].input_schema
            properties = set(schema["properties"])
            declared = {arg.name for arg in op.args}
            assert op.tool is not None
            assert properties == {p for p, _ in op.tool.params}, name
            if op.tool.own:
                # Parameters of its own (audit context): every wire argument is still a
                # tool argument of the same name.
                assert declared - NOT_ON_MCP.get(op.name, set()) <= properties, name
            else:
                assert properties == declared, name
            required = [p for p, _ in op.tool.params if op.tool.param(op, p).required]
            assert schema.get("required", []) == required, name


# --- the same refusals everywhere ------------------------------------------------------


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


@asynccontextmanager
async def _surfaces(tmp_path: Path, sock_dir: Path) -> AsyncIterator[dict[str, Any]]:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES, encoding="utf-8")
    token = create_token(profiles, BYSTANDER.name)
    config = SocketConfig(path=sock_dir / "s.sock")
    async with (
        harness(tmp_path) as h,
        serve(h, config, ProfileBook(profiles), hosts=h.supervisor.hosts) as path,
        SocketToolBackend(path, token, timeout=10.0) as backend,
        McpClient(build_mcp_server(h.handle, profile_resolver=lambda: BYSTANDER)) as daemon_side,
        McpClient(build_mcp_server(backend, profile_resolver=lambda: None)) as bridge,
    ):
        yield {"path": path, "token": token, "daemon": daemon_side, "bridge": bridge}


async def _socket(path: Path, op: str, token: str | None, args: dict[str, Any]) -> Any:
    frame = {"v": 1, "id": "1", "op": op, "args": args}
    if token is not None:
        frame["token"] = token
    [answer] = await read_frames(path, json.dumps(frame).encode() + b"\n", count=1)
    return answer


async def _tool(client: McpClient, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert isinstance(result, CallToolResult)
    assert result.is_error is True, (name, result.content)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


@pytest.mark.anyio
async def test_every_tool_refuses_as_its_socket_op_does(tmp_path: Path, sock_dir: Path) -> None:
    async with _surfaces(tmp_path, sock_dir) as s:
        for op in _served():
            assert op.tool is not None
            args, tool_args = _minimal(op), _tool_minimal(op)
            # A profile without the grant: the same denial, naming the same permission.
            socket = (await _socket(s["path"], op.name, s["token"], args))["result"]
            assert socket["denied"] is True, op.name
            for side in ("daemon", "bridge"):
                tool = await _tool(s[side], op.tool.name, tool_args)
                assert (tool["denied"], tool["permission"]) == (True, socket["permission"])
            # A wrong-shaped argument: bad_request on every surface (snapshot, plan and reap_plan
            # require no argument to get wrong).
            wrong = next((a for a in op.args if a.required and a.shape in WRONG), None)
            assert wrong is not None or op.name in ("snapshot", "plan", "reap_plan"), op.name
            if wrong is not None:
                bad = {**args, wrong.name: WRONG[wrong.shape]}
                refused = await _socket(s["path"], op.name, s["token"], bad)
                assert refused["error"]["code"] == "bad_request", op.name
                for side in ("daemon", "bridge"):
                    bad_tool = {**tool_args, wrong.name: WRONG[wrong.shape]}
                    assert (await _tool(s[side], op.tool.name, bad_tool))["error"] == "bad_request"
            # No token: unauthenticated on the socket, and through the bridge that forwards it.
            unauthenticated = await _socket(s["path"], op.name, None, args)
            assert unauthenticated["error"]["code"] == "unauthenticated", op.name


# --- CLI ------------------------------------------------------------------------------


def _argv(op: Operation, tmp_path: Path) -> list[str]:
    argv: list[str] = []
    selectors = set(op.when)
    # One flag of each group the command needs one of (apply: a fingerprint).
    needed = op.command.required_groups if op.command is not None else ()
    for arg in op.args:
        flag = arg.cli
        if flag is None:
            continue
        first_of_group = flag.group in needed and flag.group not in selectors
        if first_of_group:
            selectors.add(str(flag.group))
        if not (arg.required or flag.required or flag.flag in selectors or first_of_group):
            continue
        if flag.kind in ("json", "json_object"):
            source = tmp_path / f"{arg.name}.json"
            source.write_text("[]" if flag.kind == "json" else "{}", encoding="utf-8")
            value = str(source)
        else:
            value = "1" if flag.type in (int, float) else "x"
        argv += [value] if not flag.flag.startswith("-") else [flag.flag, value]
    return argv


@pytest.mark.parametrize("group", ["", "work", "hosts", "reap"])
def test_every_command_reaches_its_op_with_the_declared_arguments(
    group: str, tmp_path: Path
) -> None:
    for command, ops in commands_of(group).items():
        for op in ops:
            words = [group, command] if group else [command]
            args = build_parser().parse_args([*words, *_argv(op, tmp_path)])
            name, request = operation_request(group, command, args)
            assert name == op.name, (command, name)
            assert set(request) == {a.name for a in op.args if a.cli is not None}, name
            assert {a.name for a in op.args if a.required} <= set(request), name


def test_every_declared_command_exists() -> None:
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    groups = {op.command.group for op in OPERATIONS.values() if op.command is not None}
    for group in groups:
        names = set(commands_of(group))
        if not group:
            assert names <= set(top.choices)
            continue
        sub = top.choices[group]
        [subs] = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        assert names == set(subs.choices), group
