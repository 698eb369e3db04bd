"""The local socket: peer-credential and token authentication, and fuzzed bad input."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.client import (
    AsyncClient,
    Client,
    RemotePermissionDenied,
    RemoteUnauthenticated,
)
from supervisor.operations.fleet import OPERATOR_OPS, WORKER_OPS
from supervisor.policy.control.permissions import OP_RETIRE
from tests.actors.harness import INSTANCE
from tests.integration.socket_helpers import Served, claims, served, short_dir

pytestmark = pytest.mark.integration


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


def _fenced(registration: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    return {**registration, **changes}


# --- workers ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_register_heartbeat_release_over_the_socket(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path) as client:
        registered = await client.register(claims())
        assert registered["ok"] is True
        assert registered["code"] == "registered"
        registration = registered["registration"]
        assert registration["pid"] == os.getpid()
        assert registration["process_start_time"] == "ticks-self"
        beat = await client.heartbeat(registration)
        assert beat["ok"] is True
        assert beat["worker_identity"] == registration["worker_identity"]
        released = await client.release(registration)
        assert released["ok"] is True
        row = await s.h.row(registration["worker_identity"])
        assert row["status"] == "released"
        after = await client.heartbeat(registration)
        # A result, not a transport error: the worker must register again.
        assert after["ok"] is False
        assert after["code"] == "registration_not_active"


@pytest.mark.anyio
async def test_actor_refusals_are_results_not_errors(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path) as client:
        result = await client.register(claims(namespace="janitor"))
        assert result["ok"] is False
        assert result["code"] == "invalid_registration"
        assert await s.h.store.read_registrations() == []


@pytest.mark.anyio
async def test_a_worker_cannot_act_for_another_process(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path) as client:
        registration = (await client.register(claims()))["registration"]
        with pytest.raises(RemotePermissionDenied) as beat:
            await client.heartbeat(_fenced(registration, pid=1))
        assert beat.value.remote_code == "permission_denied"
        assert "pid 1" in beat.value.detail
        with pytest.raises(RemotePermissionDenied):
            await client.release(_fenced(registration, pid=1))
        with pytest.raises(RemotePermissionDenied):
            await client.register(claims(), pid=1)
        row = await s.h.row(registration["worker_identity"])
        assert row["status"] == "active"
        assert len(await s.h.store.read_registrations()) == 1


@pytest.mark.anyio
async def test_a_parent_may_register_its_child(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path) as client:
        child = s.h.spawn(start="ticks-child")
        s.h.probes.set(child, alive=True, start_time="ticks-child", parent=os.getpid())
        registered = await client.register(claims(), pid=child)
        assert registered["ok"] is True
        assert registered["registration"]["pid"] == child
        assert (await client.heartbeat(registered["registration"]))["ok"] is True


@pytest.mark.anyio
async def test_a_parent_may_release_its_child_after_it_was_reaped(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir) as s:
        child = s.h.spawn(start="ticks-child")
        s.h.probes.set(child, alive=True, start_time="ticks-child", parent=os.getpid())
        async with AsyncClient(s.path) as sidecar:
            registration = (await sidecar.register(claims(), pid=child))["registration"]
            s.h.probes.kill(child)  # exited and reaped: its parent can no longer be read
            async with AsyncClient(s.path) as stranger:
                with pytest.raises(RemotePermissionDenied):
                    await stranger.release(registration)
            # The connection that proved parenthood while the child lived may still release.
            assert (await sidecar.release(registration))["ok"] is True


@pytest.mark.anyio
async def test_a_childs_pid_taken_by_another_process_is_no_longer_vouched_for(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path) as sidecar:
        child = s.h.spawn(start="ticks-child")
        s.h.probes.set(child, alive=True, start_time="ticks-child", parent=os.getpid())
        registration = (await sidecar.register(claims(), pid=child))["registration"]
        assert (await sidecar.heartbeat(registration))["ok"] is True
        # The child exits and an unrelated process (not ours) is given the same pid.
        s.h.probes.set(child, alive=True, start_time="ticks-stranger", parent=1)
        with pytest.raises(RemotePermissionDenied) as beat:
            await sidecar.heartbeat(registration)
        assert "pid" in beat.value.detail
        with pytest.raises(RemotePermissionDenied):
            await sidecar.register(claims(), pid=child)
        # Should a new child of ours take the pid, the proof is made afresh for it.
        s.h.probes.set(child, alive=True, start_time="ticks-second-child", parent=os.getpid())
        assert (await sidecar.register(claims(), pid=child))["ok"] is True


@pytest.mark.anyio
async def test_a_child_whose_start_time_cannot_be_read_is_not_vouched_for(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path) as sidecar:
        child = s.h.spawn(start="ticks-child")
        s.h.probes.set(child, alive=True, start_time=None, parent=os.getpid())
        with pytest.raises(RemotePermissionDenied):
            await sidecar.register(claims(), pid=child)


# --- operators -------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["snapshot", "plan", "status", "apply"])
@pytest.mark.anyio
async def test_operator_ops_need_a_valid_token(tmp_path: Path, sock_dir: Path, op: str) -> None:
    args = {"candidate_fingerprint": "c", "scope_fingerprint": "s"} if op == "apply" else {}
    async with served(tmp_path, sock_dir) as s:
        # The socket's owner may read status without a token (see the tests below).
        tokens = ("not-a-token",) if op == "status" else (None, "not-a-token", "")
        for token in tokens:
            async with AsyncClient(s.path, token=token) as client:
                with pytest.raises(RemoteUnauthenticated) as refused:
                    await client.request(op, args)
            assert refused.value.remote_code == "unauthenticated"


@pytest.mark.anyio
async def test_plan_with_a_valid_token(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path, token=s.token) as client:
        await client.register(claims())
        plan = await client.plan()
        assert plan["success"] is True
        assert plan["outcome"] == "planned"
        assert plan["profile"] == "ops-controller"
        assert plan["assessed_count"] == 1
        assert plan["candidate_count"] == 0


@pytest.mark.anyio
async def test_apply_without_the_retire_grant_is_a_structured_refusal(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path, token=s.token) as client:
        plan = await client.plan()
        result = await client.apply(
            candidate_fingerprint=plan["candidate_fingerprint"],
            scope_fingerprint=plan["scope_fingerprint"],
            worker_identities=["wkr-nobody"],
        )
        assert result["success"] is False
        assert result["mutation_performed"] is False
        assert result["permission"]["missing_operation"] == OP_RETIRE
        assert OP_RETIRE in result["reasons"][0]


@pytest.mark.anyio
async def test_snapshot_takes_a_manifest(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path, token=s.token) as client:
        await client.register(claims())
        manifest = [{"client_instance_id": "inst-other", "namespaces": ["author"], "extra": 1}]
        snap = await client.snapshot(expected_manifest=manifest)
        assert snap["live_worker_count"] == 1
        assert snap["missing_expected_instance_ids"] == ["inst-other"]
        assert snap["unmanifested_instance_ids"] == [INSTANCE]


@pytest.mark.anyio
async def test_status_summarises_the_supervisor(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s:
        async with AsyncClient(s.path, token=s.tokens["ops-author"]) as client:
            await client.register(claims())
            await s.h.advance(5)  # one more liveness sweep, finished
            status = await client.status()
        assert status["success"] is True
        assert status["server"]["protocol_version"] == 1
        assert status["server"]["pid"] == os.getpid()
        assert status["server"]["socket_path"] == str(s.path)
        assert status["liveness"]["sweeps_completed"] >= 1
        assert status["liveness"]["watched_pids"] == 0  # the harness runs without pidfds
        assert status["liveness"]["verdicts"] == {"alive": 1}
        assert status["leases"] == {"readable": True, "active_lease_count": 0, "detail": ""}
        async with AsyncClient(s.path, token=s.tokens["ops-bystander"]) as client:
            refused = await client.status()
        assert refused["success"] is False
        assert refused["permission"]["missing_operation"] == "gitea.read"


@pytest.mark.anyio
async def test_status_without_a_token_is_answered_for_the_sockets_owner(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir) as s:
        async with AsyncClient(s.path, token=s.tokens["ops-author"]) as worker:
            await worker.register(claims())
        async with AsyncClient(s.path) as owner:
            status = await owner.status()
    assert status["success"] is True
    assert status["authenticated_by"] == "peer_uid"
    assert status["profile"] is None
    assert status["fleet"]["available"] is True
    assert status["fleet"]["by_ownership"] == {"live": 1}
    assert status["fleet"]["active_by_namespace"] == {"author": 1}


@pytest.mark.anyio
async def test_status_without_a_token_from_another_uid_is_unauthenticated(
    tmp_path: Path, sock_dir: Path
) -> None:
    def stranger(sock: socket.socket) -> tuple[int, int, int]:
        return os.getpid(), os.geteuid() + 1, os.getegid()

    async with served(tmp_path, sock_dir, credentials=stranger) as s:
        async with AsyncClient(s.path) as client:
            with pytest.raises(RemoteUnauthenticated) as refused:
                await client.status()
        assert "uid that runs the supervisor" in refused.value.detail
        async with AsyncClient(s.path, token=s.token) as client:
            assert (await client.status())["authenticated_by"] == "token"


# --- fuzzing ---------------------------------------------------------------------------

_FUZZ_FRAME_LIMIT = 4096
_ERROR_CODES = {"bad_request", "unknown_op", "unauthenticated", "frame_too_large"}


@dataclass
class _LiveServer:
    portal: BlockingPortal
    served: Served
    registration: dict[str, Any]


@pytest.fixture
def live_server(tmp_path: Path, sock_dir: Path) -> Iterator[_LiveServer]:
    """One server for all examples, on an event loop in a thread; the test talks blocking I/O."""
    with start_blocking_portal("asyncio") as portal:
        context = served(tmp_path, sock_dir, max_frame_bytes=_FUZZ_FRAME_LIMIT)
        with portal.wrap_async_context_manager(context) as s:
            with Client(s.path, timeout=30) as client:
                registration = client.register(claims())["registration"]
            yield _LiveServer(portal=portal, served=s, registration=registration)


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_deep = st.integers(min_value=1, max_value=5000).map(lambda n: "[" * n + "]" * n)
_not_str = _json.filter(lambda v: not isinstance(v, str))
_bad_pid = (
    _json.filter(lambda v: isinstance(v, bool) or not isinstance(v, int))
    | st.integers(max_value=0)
    | st.integers(min_value=2**63)
)


def _heartbeat(pid: int) -> dict[str, Any]:
    args = {"worker_identity": "wkr-fuzz", "pid": pid, "generation_id": "gen", "fencing_epoch": 1}
    return {"v": 1, "id": "f", "op": "heartbeat", "args": args}


def _compact(frame: Any) -> bytes:
    return json.dumps(frame, separators=(",", ":")).encode()


@st.composite
def _bad_frames(draw: st.DrawFn) -> tuple[str, bytes]:
    """(kind, frame without its newline): each one invalid by construction."""
    pid = os.getpid()
    kind = draw(
        st.sampled_from(
            ["junk", "truncated", "wrong_type", "unknown_op", "huge_id", "nested", "deep", "big"]
        )
    )
    if kind == "junk":
        raw = draw(st.binary(max_size=200))
        # "null", "1" and friends are valid JSON but not objects: still an error.
        return kind, raw.replace(b"\n", b"")
    if kind == "truncated":
        whole = _compact(_heartbeat(pid))
        return kind, whole[: draw(st.integers(min_value=0, max_value=len(whole) - 1))]
    if kind == "wrong_type":
        frame = _heartbeat(pid)
        field = draw(st.sampled_from(["v", "op", "id", "token", "args", *frame["args"]]))
        if field in frame["args"]:
            if field == "pid":
                frame["args"]["pid"] = draw(_bad_pid)
            elif field == "fencing_epoch":
                frame["args"][field] = draw(_bad_pid.filter(lambda v: v != 0))
            else:
                frame["args"][field] = draw(_not_str | st.just(""))
        elif field == "v":
            frame["v"] = draw(_json.filter(lambda v: type(v) is not int or v != 1))
        elif field == "id":
            frame["id"] = draw(_not_str.filter(lambda v: v is not None))
        elif field == "args":
            frame["args"] = draw(_json.filter(lambda v: not isinstance(v, dict)))
        else:
            frame[field] = draw(_not_str.filter(lambda v: v is not None))
        return kind, _compact(frame)
    if kind == "unknown_op":
        op = draw(st.text(max_size=30).filter(lambda o: o not in WORKER_OPS | OPERATOR_OPS))
        return kind, _compact({"op": op, "args": draw(_json)})
    if kind == "huge_id":
        big_id = draw(st.integers(min_value=2**64) | st.text(min_size=129, max_size=300))
        return kind, _compact({**_heartbeat(pid), "id": big_id})
    if kind == "nested":
        op = draw(st.sampled_from(["register", "snapshot", "apply", "status", "plan"]))
        junk = draw(
            st.lists(_json, min_size=1, max_size=3)
            | st.dictionaries(st.text(max_size=5), _json, min_size=1, max_size=3)
        )
        args = {
            "register": {"claims": {"client_name": junk}},
            "snapshot": {"expected_manifest": [junk]},
            "apply": {"candidate_fingerprint": "c", "worker_identities": [junk]},
        }.get(op, {"canonical_repository": junk})
        # status ignores its args and needs no token from the socket's owner (this test):
        # a token that proves nothing keeps it a refusal.
        token = {"token": "proves-nothing"} if op == "status" else {}
        return kind, _compact({"op": op, "args": args, **token})
    if kind == "deep":
        return kind, b'{"op":"heartbeat","args":' + draw(_deep).encode() + b"}"
    size = draw(st.integers(min_value=_FUZZ_FRAME_LIMIT + 1, max_value=3 * _FUZZ_FRAME_LIMIT))
    filler = draw(st.binary(min_size=1, max_size=16)).replace(b"\n", b"") or b"x"
    return kind, (filler * (size // len(filler) + 1))[:size]


def _exchange(path: Path, frame: bytes, *, until_closed: bool = False) -> list[bytes]:
    """Send one frame on a fresh connection; the answer lines (all of them up to the server's
    close with ``until_closed``, else up to the first newline)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)  # a hang guard only; nothing here measures time
        sock.connect(str(path))
        sock.sendall(frame + b"\n")
        received = b""
        while until_closed or b"\n" not in received:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:  # closed with our unread input still queued
                break
            if not chunk:
                break
            received += chunk
    return [line for line in received.split(b"\n") if line]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=_bad_frames())
def test_fuzzed_frames_get_structured_errors_and_change_nothing(
    live_server: _LiveServer, case: tuple[str, bytes]
) -> None:
    kind, frame = case
    # An oversized frame must be answered and then the connection closed (the read ends).
    lines = _exchange(live_server.served.path, frame, until_closed=kind == "big")
    assert len(lines) == 1, (kind, lines)
    answer = json.loads(lines[0])
    assert answer["ok"] is False, (kind, answer)
    assert answer["v"] == 1
    assert answer["error"]["code"] in _ERROR_CODES, (kind, answer)
    assert isinstance(answer["error"]["detail"], str)
    assert answer["error"]["detail"]
    if kind == "unknown_op":
        assert answer["error"]["code"] == "unknown_op"
    if kind == "big":
        assert answer["error"]["code"] == "frame_too_large"
    # Whatever came before, a well-formed request on a new connection still works.
    with Client(live_server.served.path, timeout=30) as client:
        assert client.heartbeat(live_server.registration)["ok"] is True


def test_fuzzing_left_the_registry_and_actors_alone(live_server: _LiveServer) -> None:
    for _, frame in (("big", b"x" * (2 * _FUZZ_FRAME_LIMIT)), ("junk", b"\xff{")):
        _exchange(live_server.served.path, frame)
    rows = live_server.portal.call(live_server.served.h.store.read_registrations)
    assert [r["worker_identity"] for r in rows] == [live_server.registration["worker_identity"]]
    assert live_server.served.h.supervisor.restarts == {}
