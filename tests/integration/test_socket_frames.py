"""Frames that arrive in pieces, large frames and their answers, over a real socket."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client as McpClient

from supervisor.client import AsyncClient, Client, RemoteProtocolError
from supervisor.settings.profile_edits import create_token
from supervisor.settings.profiles import ProfileBook
from supervisor.surfaces.mcp.bridge import SocketToolBackend
from supervisor.surfaces.mcp.fleet_tools import APPLY_TOOL
from supervisor.surfaces.mcp.tools import build_mcp_server
from supervisor.wire import encode
from tests.actors.helpers_retirement import ensure_swept
from tests.integration.socket_helpers import claims, served, short_dir

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

#: Far more than one read of the socket brings in at once.
_IDENTITIES = [f"wkr-{index:024x}" for index in range(10_000)]

#: Tokens no plan produced: the writer re-plans and refuses, answering for every identity.
_APPLY: dict[str, Any] = {
    "candidate_fingerprint": "candidatefp-x",
    "registry_fingerprint": "registryfp-x",
    "worker_identities": _IDENTITIES,
}

_RETIRER_TOML = """
[profiles.ops-reconciler]
role_kind = "reconciler"
allowed_operations = ["gitea.read", "gitea.worker_registry.retire"]
"""


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


def _send_in_pieces(path: Path, pieces: list[bytes], *, answers: int) -> list[dict[str, Any]]:
    """Write each piece separately with a short pause between (the stimulus, never timed),
    then read ``answers`` frames."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30.0)
        sock.connect(str(path))
        for index, piece in enumerate(pieces):
            if index:
                time.sleep(0.005)
            sock.sendall(piece)
        received = b""
        while received.count(b"\n") < answers:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            received += chunk
    return [json.loads(line) for line in received.splitlines()]


async def test_a_frame_written_in_two_pieces_is_answered(tmp_path: Path, sock_dir: Path) -> None:
    frame = encode({"id": "r", "op": "register", "args": {"claims": claims()}})
    async with served(tmp_path, sock_dir) as s:
        cut = len(frame) // 2
        [answer] = await anyio.to_thread.run_sync(
            lambda: _send_in_pieces(s.path, [frame[:cut], frame[cut:]], answers=1)
        )
    assert answer["id"] == "r"
    assert answer["ok"] is True
    assert answer["result"]["ok"] is True


async def test_a_frame_split_inside_a_pipeline_is_answered_in_order(
    tmp_path: Path, sock_dir: Path
) -> None:
    frames = b"".join(encode({"id": str(i), "op": "no-such-op"}) for i in range(3))
    async with served(tmp_path, sock_dir) as s:
        # The first piece ends inside the second frame and the next adds to it without
        # finishing it: a read that completes no frame must leave the server waiting.
        cut = frames.index(b'"1"') + 1
        pieces = [frames[:cut], frames[cut : cut + 4], frames[cut + 4 :]]
        answers = await anyio.to_thread.run_sync(lambda: _send_in_pieces(s.path, pieces, answers=3))
    assert [a["id"] for a in answers] == ["0", "1", "2"]
    assert {a["error"]["code"] for a in answers} == {"unknown_op"}


async def test_a_frame_larger_than_one_read_is_answered(tmp_path: Path, sock_dir: Path) -> None:
    args = {"candidate_fingerprint": "candidatefp-x", "worker_identities": _IDENTITIES}
    frame = encode({"id": "big", "op": "apply", "args": args, "token": "nope"})
    assert len(frame) > 200_000
    async with served(tmp_path, sock_dir) as s:
        [answer] = await anyio.to_thread.run_sync(
            lambda: _send_in_pieces(s.path, [frame], answers=1)
        )
    assert answer["id"] == "big"
    assert answer["error"]["code"] == "unauthenticated"


async def test_a_frame_over_the_limit_is_refused_and_the_server_goes_on(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir, max_frame_bytes=100_000) as s:
        async with AsyncClient(s.path, token=s.token) as client:
            with pytest.raises(RemoteProtocolError) as refused:
                await client.apply(
                    candidate_fingerprint="candidatefp-x", worker_identities=_IDENTITIES
                )
            assert refused.value.remote_code == "frame_too_large"
            # The cut connection is remade on the next request.
            assert (await client.register(claims()))["ok"] is True
        refusal = await anyio.to_thread.run_sync(_sync_oversized, s.path, s.token)
    assert refusal == "frame_too_large"


def _sync_oversized(path: Path, token: str) -> str:
    with Client(path, token=token) as client:
        try:
            client.apply(candidate_fingerprint="candidatefp-x", worker_identities=_IDENTITIES)
        except RemoteProtocolError as exc:
            return exc.remote_code
    return "answered"


def _add_retirer(book: ProfileBook) -> str:
    """Grant apply to a new profile in the served book's file; its token."""
    with book.path.open("a", encoding="utf-8") as file:
        file.write(_RETIRER_TOML)
    return create_token(book.path, "ops-reconciler")


async def test_an_apply_of_ten_thousand_identities_is_answered_by_both_clients(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir) as s:
        token = _add_retirer(s.profiles)
        await ensure_swept(s.h)  # so the apply gets past its gates to the writer
        async with AsyncClient(s.path, token=token) as client:
            answered = await client.apply(**_APPLY)
        synced = await anyio.to_thread.run_sync(_sync_apply, s.path, token)
    for result in (answered, synced):
        # Refused for drift, as it must be, with a row per identity: an answer of
        # megabytes, read back across many reads of the socket.
        assert result["outcome"] == "registry_revision_moved"
        assert result["mutation_performed"] is False
        assert [p["worker_identity"] for p in result["preserved"]] == _IDENTITIES


def _sync_apply(path: Path, token: str) -> dict[str, Any]:
    with Client(path, token=token) as client:
        return dict(client.apply(**_APPLY))


async def test_an_apply_of_ten_thousand_identities_is_answered_through_the_mcp_tool(
    tmp_path: Path, sock_dir: Path
) -> None:
    # The stdio bridge's backend, in process: MCP tool -> socket client -> the real socket.
    async with served(tmp_path, sock_dir) as s:
        token = _add_retirer(s.profiles)
        await ensure_swept(s.h)
        async with (
            SocketToolBackend(s.path, token) as backend,
            McpClient(build_mcp_server(backend, profile_resolver=lambda: None)) as client,
        ):
            result = await client.call_tool(APPLY_TOOL, _APPLY)
    body = result.structured_content
    assert isinstance(body, dict), result.content
    assert body["outcome"] == "registry_revision_moved"
    assert body["mutation_performed"] is False
    # Every identity reached the daemon and has a row in its answer; the MCP answer
    # itself is cut to the tool size limit and says how many rows there were.
    assert body["truncated"]["preserved"]["total"] == len(_IDENTITIES)
    assert len(body["preserved"]) == body["truncated"]["preserved"]["shown"] > 0


async def test_a_poisoned_beat_in_a_pipeline_fails_alone(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s:
        [registered] = await anyio.to_thread.run_sync(
            lambda: _send_in_pieces(
                s.path,
                [encode({"id": "r", "op": "register", "args": {"claims": claims()}})],
                answers=1,
            )
        )
        reg = registered["result"]["registration"]
        await s.h.clock.advance(5.0)
        good = {k: reg[k] for k in ("worker_identity", "pid", "generation_id", "fencing_epoch")}
        beat = json.dumps({"id": "a", "op": "heartbeat", "args": good}).encode() + b"\n"
        # The identity ends in an escape that decodes to half a surrogate pair.
        poisoned = beat.replace(b'"a"', b'"b"').replace(
            good["worker_identity"].encode(), good["worker_identity"].encode() + rb"\ud800"
        )
        last = beat.replace(b'"a"', b'"c"')
        answers = await anyio.to_thread.run_sync(
            lambda: _send_in_pieces(s.path, [beat + poisoned + last], answers=3)
        )
        row = await s.h.row(reg["worker_identity"])
    assert [a["id"] for a in answers] == ["a", "b", "c"]
    assert answers[0]["result"]["ok"] is True
    assert answers[1]["error"]["code"] == "bad_request"
    assert "surrogate" in answers[1]["error"]["detail"]
    assert answers[2]["result"]["ok"] is True
    assert row["last_heartbeat_at"] == answers[2]["result"]["last_heartbeat_at"]
    assert row["last_heartbeat_at"] != reg["last_heartbeat_at"]
