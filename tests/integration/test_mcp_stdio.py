"""The stdio bridge as a subprocess under the SDK's stdio client, against a fake daemon."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, StdioServerParameters

from supervisor.surfaces.mcp.bridge import SocketToolBackend
from supervisor.surfaces.mcp.fleet_tools import APPLY_TOOL, PLAN_TOOL, SNAPSHOT_TOOL, TOOL_NAMES
from supervisor.surfaces.mcp.tools import build_mcp_server
from supervisor.surfaces.socket.answers import to_wire
from supervisor.surfaces.socket.frame import Frame
from supervisor.surfaces.socket.protocol import decode_request
from supervisor.wire import TOKEN_ENV, encode, error_frame, ok_frame
from tests.integration.helpers_mcp import call, call_error

# The daemon here is a stand-in speaking the socket protocol: these tests pin what the
# bridge sends and how it relays answers. The run against the real daemon is the CLI's.
pytestmark = [pytest.mark.integration, pytest.mark.anyio]

TOKEN = "operator-token"
DEFAULT_REPO = "/srv/repos/daemon-default"


@dataclass
class FakeDaemon:
    """Answers snapshot, plan and apply for TOKEN; records every frame it received."""

    frames: list[dict[str, Any]] = field(default_factory=list)
    #: Answer every request with a frame for some other request id.
    misdirect: bool = False

    def answer(self, request: Frame) -> dict[str, Any]:
        if self.misdirect:
            return ok_frame("someone-else", {"success": True})
        if request.token != TOKEN:
            return error_frame(request.id, "unauthenticated", "the token proves no profile")
        args = to_wire(request.args) if request.args is not None else {}
        result: dict[str, Any] = {"success": True, "received": args}
        if request.op == "plan":
            result["canonical_repository"] = args["canonical_repository"] or DEFAULT_REPO
        if request.op == "apply":
            result.update(outcome="applied", retired_count=len(args["worker_identities"]))
        return ok_frame(request.id, result)

    async def serve(self, stream: SocketStream) -> None:
        async with stream:
            reader = BufferedByteReceiveStream(stream)
            while True:
                try:
                    line = await reader.receive_until(b"\n", 1 << 20)
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    return
                self.frames.append(json.loads(line))
                await stream.send(encode(self.answer(decode_request(line))))


@pytest.fixture
def socket_path() -> Iterator[Path]:
    # Short on purpose: a Unix socket path must fit in ~107 bytes, tmp_path may not.
    with tempfile.TemporaryDirectory(prefix="mcp-", dir="/tmp") as directory:
        yield Path(directory) / "sock"


@asynccontextmanager
async def fake_daemon(path: Path, *, misdirect: bool = False) -> AsyncIterator[FakeDaemon]:
    daemon = FakeDaemon(misdirect=misdirect)
    async with await anyio.create_unix_listener(path) as listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, daemon.serve)
        yield daemon
        tg.cancel_scope.cancel()


def bridge(path: Path, *, token: str | None = TOKEN, env: dict[str, str] | None = None) -> Client:
    args = ["-m", "supervisor.surfaces.mcp.bridge", "--socket", str(path)]
    if token is not None:
        args += ["--token", token]
    return Client(StdioServerParameters(command=sys.executable, args=args, env=env))


async def test_tool_calls_reach_the_daemon_with_the_token(socket_path: Path) -> None:
    async with fake_daemon(socket_path) as daemon, bridge(socket_path) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        planned = await call(client, PLAN_TOOL, remote="prgs", org="ops")
        applied = await call(
            client,
            APPLY_TOOL,
            candidate_fingerprint="candidatefp-1",
            scope_fingerprint="scopefp-1",
            worker_identities="w-1, w-2",
        )
        snapshot = await call(
            client,
            SNAPSHOT_TOOL,
            canonical_repository="/srv/repos/fleet",
            expected_manifest=[{"client_instance_id": "inst-a", "namespaces": ["author"]}],
        )

    assert set(TOOL_NAMES) <= names
    assert [frame["op"] for frame in daemon.frames] == ["plan", "apply", "snapshot"]
    assert {frame["token"] for frame in daemon.frames} == {TOKEN}
    assert planned["repository"] == {
        "remote": "prgs",
        "host": None,
        "org": "ops",
        "repo": None,
        "canonical_repository": DEFAULT_REPO,
    }
    assert applied["outcome"] == "applied"
    assert applied["received"] == {
        "registry_fingerprint": None,
        "scope_fingerprint": "scopefp-1",
        "candidate_fingerprint": "candidatefp-1",
        "worker_identities": ["w-1", "w-2"],
        "canonical_repository": None,
        "override_mass_guard": False,
    }
    assert snapshot["received"]["canonical_repository"] == "/srv/repos/fleet"
    assert snapshot["received"]["expected_manifest"] == [
        {
            "client_instance_id": "inst-a",
            "client_type": None,
            "fleet_run_id": None,
            "namespaces": ["author"],
        }
    ]


async def test_the_token_may_come_from_the_environment(socket_path: Path) -> None:
    async with (
        fake_daemon(socket_path) as daemon,
        bridge(socket_path, token=None, env={TOKEN_ENV: TOKEN}) as client,
    ):
        planned = await call(client, PLAN_TOOL)

    assert planned["success"] is True
    assert daemon.frames[0]["token"] == TOKEN


async def test_a_refused_token_is_a_structured_refusal(socket_path: Path) -> None:
    async with fake_daemon(socket_path), bridge(socket_path, token="stolen") as client:
        planned = await call_error(client, PLAN_TOOL)
        applied = await call_error(
            client,
            APPLY_TOOL,
            candidate_fingerprint="candidatefp-1",
            registry_fingerprint="registryfp-1",
            worker_identities=["w-1"],
        )

    for refused in (planned, applied):
        assert refused["success"] is False
        assert refused["outcome"] == "refused"
        assert refused["error"] == "unauthenticated"
    # The daemon's own refusal: nothing ran, so the bridge may say nothing was retired.
    assert applied["mutation_performed"] is False
    assert applied["retired_count"] == 0


async def test_an_unreachable_daemon_is_reported_not_raised(socket_path: Path) -> None:
    async with bridge(socket_path) as client:
        planned = await call_error(client, PLAN_TOOL)
        applied = await call_error(
            client,
            APPLY_TOOL,
            candidate_fingerprint="candidatefp-1",
            registry_fingerprint="registryfp-1",
            worker_identities=["w-1"],
        )

    assert planned["success"] is False
    assert planned["error"] == "supervisor_unavailable"
    assert planned["mutation_performed"] is False
    # Without an answer the bridge cannot know whether an apply ran, and says so.
    assert applied["outcome"] == "outcome_unknown"
    assert "mutation_performed" not in applied
    assert applied["error"] == "supervisor_unavailable"


async def test_an_apply_of_ten_thousand_identities_crosses_the_bridge(socket_path: Path) -> None:
    # Hundreds of kilobytes each way: the tool call on stdio, the frame on the socket.
    identities = [f"wkr-{index:024x}" for index in range(10_000)]
    async with fake_daemon(socket_path) as daemon, bridge(socket_path) as client:
        applied = await call(
            client,
            APPLY_TOOL,
            candidate_fingerprint="candidatefp-1",
            registry_fingerprint="registryfp-1",
            worker_identities=identities,
        )
    assert applied["outcome"] == "applied"
    assert applied["retired_count"] == len(identities)
    assert daemon.frames[0]["args"]["worker_identities"] == identities


async def test_an_unreadable_answer_is_never_reported_as_a_refusal(socket_path: Path) -> None:
    # In-process: the bridge's backend over the real socket client, without a subprocess.
    async with (
        fake_daemon(socket_path, misdirect=True),
        SocketToolBackend(socket_path, TOKEN, timeout=10.0) as backend,
        Client(build_mcp_server(backend, profile_resolver=lambda: None)) as client,
    ):
        planned = await call_error(client, PLAN_TOOL)
        applied = await call_error(
            client,
            APPLY_TOOL,
            candidate_fingerprint="candidatefp-1",
            registry_fingerprint="registryfp-1",
            worker_identities=["w-1"],
        )

    assert planned["success"] is False
    assert planned["error"] == "supervisor_unavailable"
    assert "could not be read" in planned["reasons"][0]
    # The request went out and an answer came back that the bridge cannot trust: the
    # apply may have run, so the result must not say that nothing was retired.
    assert applied["outcome"] == "outcome_unknown"
    assert "mutation_performed" not in applied
