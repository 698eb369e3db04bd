"""The socket's transport: binding and cleanup, connection limits, framing, timeouts."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from supervisor.client import AsyncClient
from supervisor.errors import ConfigError
from supervisor.handle import SupervisorHandle
from supervisor.policy.control.permissions import Profile
from supervisor.settings.config import SocketConfig
from supervisor.surfaces.socket.bind import SocketInUse, lock_path_for
from supervisor.surfaces.socket.server import serve_socket
from supervisor.system.unix_stream import UnixStream, connect_unix_stream
from supervisor.wire import encode
from tests.actors.helpers_app import harness
from tests.fakes import ScriptedProbes
from tests.integration.socket_helpers import claims, read_frames, served, short_dir

pytestmark = pytest.mark.integration


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


# --- binding ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_socket_mode_and_removal_on_shutdown(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s:
        st = os.stat(s.path)
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert sorted(os.listdir(sock_dir)) == ["s.sock", "s.sock.lock"]
    assert sorted(os.listdir(sock_dir)) == ["s.sock.lock"]


@pytest.mark.anyio
async def test_group_and_mode_are_applied(tmp_path: Path, sock_dir: Path) -> None:
    group = str(os.getgid())
    async with served(tmp_path, sock_dir, mode=0o660, group=group) as s:
        st = os.stat(s.path)
        assert stat.S_IMODE(st.st_mode) == 0o660
        assert st.st_gid == os.getgid()


@pytest.mark.anyio
async def test_missing_parent_directory_is_created_private(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir / "run" / "fs") as s:
        assert s.path.parent == sock_dir / "run" / "fs"
        assert stat.S_IMODE(os.stat(s.path.parent).st_mode) == 0o700


@pytest.mark.anyio
async def test_a_stale_socket_file_is_replaced(tmp_path: Path, sock_dir: Path) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock_dir / "s.sock"))
    stale.close()  # the file stays; nothing listens
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path) as client:
        assert (await client.register(claims()))["ok"] is True


@pytest.mark.anyio
async def test_a_second_server_on_a_live_path_refuses(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s:
        with pytest.raises(SocketInUse):
            await serve_socket(
                s.h.handle, settings=s.config, profiles=s.profiles, probes=s.h.probes
            )
        # The running server is untouched.
        async with AsyncClient(s.path) as client:
            assert (await client.register(claims()))["ok"] is True


@pytest.mark.anyio
async def test_a_foreign_listener_is_not_replaced(tmp_path: Path, sock_dir: Path) -> None:
    path = sock_dir / "s.sock"
    async with await anyio.create_unix_listener(path), harness(tmp_path) as h:
        config = SocketConfig(path=path)
        with pytest.raises(SocketInUse):
            await serve_socket(h.handle, settings=config, profiles=_NoProfiles(), probes=h.probes)
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        assert lock_path_for(path).exists()


@pytest.mark.anyio
async def test_a_regular_file_at_the_path_is_refused(tmp_path: Path, sock_dir: Path) -> None:
    path = sock_dir / "s.sock"
    path.write_text("not a socket")
    async with harness(tmp_path) as h:
        with pytest.raises(ConfigError, match="not a socket"):
            await serve_socket(
                h.handle, settings=SocketConfig(path=path), profiles=_NoProfiles(), probes=h.probes
            )
    assert path.read_text() == "not a socket"


class _NoProfiles:
    error = None

    def authenticate(self, token: str) -> Profile | None:
        return None


# --- limits and bad input --------------------------------------------------------------


@pytest.mark.anyio
async def test_excess_connections_get_server_busy(tmp_path: Path, sock_dir: Path) -> None:
    # Evicting idle connections is kept out of reach: both stay idle far less than this.
    async with served(tmp_path, sock_dir, max_connections=2, evict_idle_after_seconds=3600) as s:
        first, second = await connect_unix_stream(s.path), await connect_unix_stream(s.path)
        for stream in (first, second):  # an answer proves the server counted the connection
            await stream.send(b"{}\n")
            assert b"bad_request" in await stream.receive()
        busy = await read_frames(s.path, b"", count=1)
        assert busy[0]["error"]["code"] == "server_busy"
        await first.aclose()
        for _ in range(100):  # the server notices the close on its next loop turn
            answer = (await read_frames(s.path, b"{}\n", count=1))[0]
            if answer["error"]["code"] != "server_busy":
                break
        assert answer["error"]["code"] == "bad_request"
        await second.aclose()


@pytest.mark.anyio
async def test_an_oversized_frame_is_answered_then_closed(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir, max_frame_bytes=1024) as s:
        async with await connect_unix_stream(s.path) as stream:
            await stream.send(b'{"op":"status","id":"' + b"x" * 2000 + b'"}\n')
            received = await _until_closed(stream)
        assert b'"frame_too_large"' in received
        assert received.count(b"\n") == 1


async def _until_closed(stream: UnixStream) -> bytes:
    """Everything the server sends before it closes (a reset after unread input included)."""
    received = b""
    while True:
        try:
            received += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return received


@pytest.mark.anyio
async def test_pipelined_frames_are_answered_in_order(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s:
        frames: list[dict[str, Any]] = [
            {"id": "a", "op": "nope"},
            {"id": "b", "op": "snapshot"},
            {"id": "c", "op": "register", "args": {"claims": claims()}},
        ]
        payload = b"".join(encode(f) for f in frames) + b"not json\n\n"
        answers = await read_frames(s.path, payload, count=5)
        assert [a["id"] for a in answers] == ["a", "b", "c", None, None]
        assert answers[0]["error"]["code"] == "unknown_op"
        assert answers[1]["error"]["code"] == "unauthenticated"
        assert answers[2]["ok"] is True
        assert answers[2]["result"]["ok"] is True
        assert [a["error"]["code"] for a in answers[3:]] == ["bad_request", "bad_request"]


@pytest.mark.anyio
async def test_a_frame_cut_off_by_eof_is_answered(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s:
        async with await connect_unix_stream(s.path) as stream:
            await stream.send(b'{"op":"status"')
            await stream.send_eof()
            answer = await stream.receive()
        assert b"terminating newline" in answer


@pytest.mark.anyio
async def test_a_request_that_outlives_its_timeout_is_answered(sock_dir: Path) -> None:
    # Inboxes nobody reads: every request waits forever for its answer.
    streams = [anyio.create_memory_object_stream[Any](8) for _ in range(6)]
    handle = SupervisorHandle(
        heartbeat=streams[0][0],
        retirement=streams[1][0],
        liveness=streams[2][0],
        lease_watch=streams[3][0],
        writer=streams[4][0],
        reap=streams[5][0],
    )
    config = SocketConfig(path=sock_dir / "s.sock", request_timeout_seconds=0.05)
    args = {"worker_identity": "w", "pid": os.getpid(), "generation_id": "g", "fencing_epoch": 1}
    frame = encode({"id": "t", "op": "heartbeat", "args": args})
    async with anyio.create_task_group() as tg:
        path = await tg.start(_serve_raw, handle, config, ScriptedProbes())
        answers = await read_frames(path, frame * 2, count=2)
        tg.cancel_scope.cancel()
    assert [a["error"]["code"] for a in answers] == ["timeout", "timeout"]
    assert [a["id"] for a in answers] == ["t", "t"]
    for send, receive in streams:
        send.close()
        # The unanswered requests still hold their reply channels: close them, as an actor would.
        while True:
            try:
                receive.receive_nowait().reply.close()
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        receive.close()


async def _serve_raw(
    handle: SupervisorHandle,
    config: SocketConfig,
    probes: ScriptedProbes,
    *,
    task_status: anyio.abc.TaskStatus[Path],
) -> None:
    await serve_socket(
        handle,
        settings=config,
        profiles=_ExplodingProfiles(),
        probes=probes,
        task_status=task_status,
    )


class _ExplodingProfiles:
    error = None

    def authenticate(self, token: str) -> Profile | None:
        raise RuntimeError("profiles backend is broken")


@pytest.mark.anyio
async def test_a_handler_exception_is_internal_error_and_the_server_lives(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with harness(tmp_path) as h:
        h.probes.set(os.getpid(), alive=True, start_time="ticks-self")
        config = SocketConfig(path=sock_dir / "s.sock")
        async with anyio.create_task_group() as tg:
            path = await tg.start(_serve_raw, h.handle, config, h.probes)
            answers = await read_frames(path, b'{"id":"x","op":"status","token":"t"}\n', count=1)
            assert answers[0]["error"]["code"] == "internal_error"
            assert answers[0]["id"] == "x"
            async with AsyncClient(path) as client:
                assert (await client.register(claims()))["ok"] is True
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_an_idle_connection_is_closed(tmp_path: Path, sock_dir: Path) -> None:
    # Real time, but nothing is asserted about it: the read simply ends when the server closes.
    async with (
        served(tmp_path, sock_dir, request_timeout_seconds=0.05) as s,
        await connect_unix_stream(s.path) as stream,
    ):
        assert await _until_closed(stream) == b""


async def _registered(path: Path) -> dict[str, Any]:
    [answer] = await read_frames(
        path, encode({"id": "r", "op": "register", "args": {"claims": claims()}}), count=1
    )
    assert answer["result"]["ok"] is True
    registration: dict[str, Any] = answer["result"]["registration"]
    return registration


def _beat(registration: dict[str, Any], request_id: str, **changes: Any) -> bytes:
    args = {
        "worker_identity": registration["worker_identity"],
        "pid": registration["pid"],
        "generation_id": registration["generation_id"],
        "fencing_epoch": registration["fencing_epoch"],
    }
    return encode({"id": request_id, "op": "heartbeat", "args": {**args, **changes}})


@pytest.mark.anyio
async def test_pipelined_heartbeats_are_judged_one_by_one_in_order(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir) as s:
        reg = await _registered(s.path)
        foreign_pid = os.getppid()  # neither the peer nor its child
        payload = b"".join(
            [
                _beat(reg, "1"),
                _beat(reg, "2", fencing_epoch=reg["fencing_epoch"] + 1),
                _beat(reg, "3", pid=foreign_pid),
                b'{"id":"4","op":"heartbeat","args":{}}\n',
                encode({"id": "5", "op": "plan"}),
                _beat(reg, "6"),
                _beat(reg, "7", worker_identity="wkr-unknown"),
            ]
        )
        answers = await read_frames(s.path, payload, count=7)
    assert [a["id"] for a in answers] == ["1", "2", "3", "4", "5", "6", "7"]
    results = [a.get("result") or a["error"] for a in answers]
    assert results[0]["ok"] is True
    assert results[1]["code"] == "fencing_mismatch"
    assert results[2]["code"] == "permission_denied"
    assert results[3]["code"] == "bad_request"
    assert results[4]["code"] == "unauthenticated"
    assert results[5]["ok"] is True
    assert results[6]["code"] == "unknown_registration"


@pytest.mark.anyio
async def test_frames_before_an_oversized_one_are_answered_first(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir, max_frame_bytes=1024) as s:
        reg = await _registered(s.path)
        async with await connect_unix_stream(s.path) as stream:
            await stream.send(_beat(reg, "a") + _beat(reg, "b") + b"[" * 3000 + b"\n")
            received = await _until_closed(stream)
    lines = [json.loads(line) for line in received.splitlines()]
    assert [line["id"] for line in lines] == ["a", "b", None]
    assert [line["ok"] for line in lines] == [True, True, False]
    assert lines[2]["error"]["code"] == "frame_too_large"


@pytest.mark.anyio
async def test_a_long_pipeline_is_answered_in_order(tmp_path: Path, sock_dir: Path) -> None:
    # Far more frames than the server queues before it stops reading the socket.
    count = 2000
    payload = b"".join(encode({"id": str(i), "op": "no-such-op"}) for i in range(count))
    async with served(tmp_path, sock_dir) as s:
        answers = await read_frames(s.path, payload, count=count)
    assert [a["id"] for a in answers] == [str(i) for i in range(count)]
    assert {a["error"]["code"] for a in answers} == {"unknown_op"}


@pytest.mark.anyio
async def test_a_peer_that_stops_reading_is_dropped_and_others_are_served(
    tmp_path: Path, sock_dir: Path
) -> None:
    # Megabytes of answers nobody reads: the server's writes back up, and after the
    # request timeout it gives the connection up instead of buffering without end.
    payload = b"".join(encode({"id": str(i), "op": "no-such-op"}) for i in range(40_000))
    async with served(tmp_path, sock_dir, request_timeout_seconds=0.2) as s:
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.settimeout(30.0)
        silent.connect(str(s.path))
        try:
            # sendall blocks once the server stops reading, and fails once it hangs up:
            # a server that buffered answers without end would read the whole payload.
            sent_all = await anyio.to_thread.run_sync(_send_ignoring_hangup, silent, payload)
            assert not sent_all
            answers = await read_frames(s.path, encode({"id": "x", "op": "no-such-op"}), count=1)
            assert answers[0]["id"] == "x"
            received = await anyio.to_thread.run_sync(_drain_until_closed, silent)
        finally:
            silent.close()
    # The connection ended with answers still owed: the server gave up on it.
    assert received.count(b"\n") < 40_000


def _send_ignoring_hangup(sock: socket.socket, payload: bytes) -> bool:
    """True if every byte was sent; False if the server hung up first."""
    try:
        sock.sendall(payload)
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


def _drain_until_closed(sock: socket.socket) -> bytes:
    received = b""
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
