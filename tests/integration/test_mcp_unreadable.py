"""A tools/call the MCP transports cannot read is answered with a JSON-RPC error, not silence."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from supervisor.surfaces.mcp.fleet_tools import APPLY_TOOL, PLAN_TOOL
from tests.actors.harness import READER, harness
from tests.integration.test_mcp_http import _HEADERS, _INITIALIZE, TOKENS, http_tools

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

#: Cut off mid-object: not JSON at all.
_TRUNCATED = (
    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"%s","arguments":{'
    % PLAN_TOOL.encode()
)
#: JSON, but an argument holds a lone surrogate escape.
_SURROGATE = (
    b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"%s",'
    b'"arguments":{"candidate_fingerprint":"c\\ud800","registry_fingerprint":"r",'
    b'"worker_identities":["w\\udc00"]}}}' % APPLY_TOOL.encode()
)
#: A generous guard so a missing answer fails the test instead of hanging the run;
#: nothing is asserted about how long the answer took.
_GUARD_SECONDS = 60


@pytest.fixture
def socket_path() -> Iterator[Path]:
    # Nobody listens here: the bridge starts anyway, and nothing here reaches a daemon.
    with tempfile.TemporaryDirectory(prefix="mcp-", dir="/tmp") as directory:
        yield Path(directory) / "sock"


@asynccontextmanager
async def _bridge(socket_path: Path) -> AsyncIterator[tuple[Process, BufferedByteReceiveStream]]:
    command = [
        sys.executable,
        "-m",
        "supervisor.surfaces.mcp.bridge",
        "--socket",
        str(socket_path),
        "--token",
        "t",
    ]
    async with await anyio.open_process(command) as process:
        assert process.stdout is not None
        try:
            yield process, BufferedByteReceiveStream(process.stdout)
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()


async def _send(process: Process, line: bytes) -> None:
    assert process.stdin is not None
    await process.stdin.send(line + b"\n")


async def _answer(reader: BufferedByteReceiveStream) -> dict[str, Any]:
    with anyio.fail_after(_GUARD_SECONDS):
        answer: dict[str, Any] = json.loads(await reader.receive_until(b"\n", 1 << 22))
    return answer


async def test_stdio_answers_unreadable_calls_and_keeps_serving(socket_path: Path) -> None:
    async with _bridge(socket_path) as (process, reader):
        await _send(process, json.dumps(_INITIALIZE).encode())
        assert (await _answer(reader))["id"] == 1
        await _send(process, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        await _send(process, _TRUNCATED)
        parse_error = await _answer(reader)
        await _send(process, _SURROGATE)
        invalid = await _answer(reader)
        await _send(process, b'{"jsonrpc":"2.0","id":4,"method":"tools/list"}')
        listed = await _answer(reader)
    assert parse_error["id"] is None
    assert parse_error["error"]["code"] == -32700
    assert invalid["id"] == 3
    assert invalid["error"]["code"] == -32600
    assert "surrogate" in invalid["error"]["message"]
    assert listed["id"] == 4
    assert {tool["name"] for tool in listed["result"]["tools"]} >= {PLAN_TOOL, APPLY_TOOL}


async def test_http_answers_unreadable_calls_with_a_json_rpc_error(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, http_tools(h, tmp_path) as (url, _):
        headers = {**_HEADERS, "Authorization": f"Bearer {TOKENS[READER.name]}"}
        async with httpx2.AsyncClient(timeout=30.0) as http:
            opened = await http.post(url, json=_INITIALIZE, headers=headers)
            session = {
                **headers,
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-06-18",
            }
            answers = [
                await http.post(url, content=body, headers=session)
                for body in (_TRUNCATED, _SURROGATE)
            ]
    for response in answers:
        assert response.status_code == 400
        assert response.json()["jsonrpc"] == "2.0"
    # Not JSON: a parse error without an id. JSON with a readable id that the SDK's strict
    # parser refuses (a lone surrogate): invalid request, answered by that id, as on stdio.
    truncated, surrogate = (response.json() for response in answers)
    assert (truncated["id"], truncated["error"]["code"]) == (None, -32700)
    assert (surrogate["id"], surrogate["error"]["code"]) == (3, -32600)
    assert "surrogate" in surrogate["error"]["message"]


async def test_stdio_answers_a_request_whose_params_are_not_an_object(socket_path: Path) -> None:
    # Valid JSON with a readable id: the answer carries that id, so the client can match
    # it; before, the SDK's refusal of the params value was taken for the line itself.
    async with _bridge(socket_path) as (process, reader):
        await _send(process, json.dumps(_INITIALIZE).encode())
        assert (await _answer(reader))["id"] == 1
        await _send(process, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        answers = []
        for line in (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"x"}',
            b'{"jsonrpc":"2.0","id":"eight","method":"tools/list","params":5}',
            b'{"jsonrpc":"2.0","id":9,"params":{}}',
            b'{"jsonrpc":"2.0","id":10,"method":"ping"}',
        ):
            await _send(process, line)
            answers.append(await _answer(reader))
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [
        (7, -32602),
        ("eight", -32602),
        (9, -32600),
        (10, None),
    ]
    assert answers[3]["result"] == {}
