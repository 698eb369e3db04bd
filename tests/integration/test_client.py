"""The client library against a real socket server: round trips, failures, the heartbeat keeper."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from supervisor.client import (
    AsyncClient,
    Client,
    HeartbeatKeeper,
    RemoteError,
    RemotePermissionDenied,
    RemoteProtocolError,
    RemoteUnauthenticated,
    RemoteUnavailable,
    keep_registered,
    remote_error,
    start_heartbeat_thread,
)
from supervisor.clock import FakeClock
from supervisor.errors import PermissionDenied, ProtocolError, Unavailable
from supervisor.policy.stamps import format_stamp
from supervisor.settings.config import SocketConfig
from tests.actors.harness import REPO
from tests.actors.helpers_app import harness
from tests.integration.socket_helpers import (
    SELF_START,
    claims,
    serve,
    served,
    short_dir,
    write_profiles,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


# --- request/response ------------------------------------------------------------------


async def test_async_client_round_trip(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path, token=s.token) as client:
        registered = await client.register(claims())
        registration = registered["registration"]
        assert (await client.heartbeat(registration))["ok"] is True
        status = await client.status()
        assert status["success"] is True
        plan = await client.plan(canonical_repository=REPO)
        assert plan["assessed_count"] == 1
        snapshot = await client.snapshot()
        assert snapshot["live_worker_count"] == 1
        assert (await client.release(registration))["ok"] is True
        row = await s.h.row(registration["worker_identity"])
        assert row["status"] == "released"


async def test_sync_client_round_trip(tmp_path: Path, sock_dir: Path) -> None:
    def flow(path: Path, token: str) -> dict[str, Any]:
        with Client(path, token=token) as client:
            registration: dict[str, Any] = client.register(claims())["registration"]
            assert client.heartbeat(registration)["ok"] is True
            assert client.status()["success"] is True
            assert client.plan()["success"] is True
            refused = client.apply(
                candidate_fingerprint="c", scope_fingerprint="s", worker_identities=["w"]
            )
            assert refused["success"] is False
            assert client.release(registration)["ok"] is True
            return registration

    async with served(tmp_path, sock_dir) as s:
        registration = await anyio.to_thread.run_sync(flow, s.path, s.token)
        assert (await s.h.row(registration["worker_identity"]))["status"] == "released"


async def test_unreachable_supervisor_is_unavailable(sock_dir: Path) -> None:
    missing = sock_dir / "missing.sock"
    stale = sock_dir / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(stale))  # a socket file nobody listens on
    for path in (missing, stale):
        with pytest.raises(Unavailable, match="cannot reach"):
            async with AsyncClient(path):
                pass  # pragma: no cover
        with pytest.raises(Unavailable, match="cannot reach"):
            await AsyncClient(path).status()
        with pytest.raises(Unavailable, match="cannot reach"):
            Client(path).status()


async def test_clients_reconnect_after_a_server_restart(tmp_path: Path, sock_dir: Path) -> None:
    book, _ = write_profiles(tmp_path)
    config = SocketConfig(path=sock_dir / "s.sock")
    async with harness(tmp_path) as h:
        h.probes.set(os.getpid(), alive=True, start_time=SELF_START, cwd=REPO)
        aclient, sclient = AsyncClient(config.path), Client(config.path)
        try:
            async with serve(h, config, book):
                registration = (await aclient.register(claims()))["registration"]
                beat = await anyio.to_thread.run_sync(sclient.heartbeat, registration)
                assert beat["ok"] is True
            with pytest.raises(Unavailable):
                await aclient.heartbeat(registration)
            with pytest.raises(Unavailable):
                await anyio.to_thread.run_sync(sclient.heartbeat, registration)
            async with serve(h, config, book):
                assert (await aclient.heartbeat(registration))["ok"] is True
                beat = await anyio.to_thread.run_sync(sclient.heartbeat, registration)
                assert beat["ok"] is True
        finally:
            await aclient.aclose()
            sclient.close()


async def test_error_frames_raise_typed_errors(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path) as client:
        with pytest.raises(RemoteUnauthenticated) as unauthenticated:
            await client.snapshot()
        assert isinstance(unauthenticated.value, PermissionDenied)
        assert unauthenticated.value.to_dict()["error"] == "unauthenticated"
        with pytest.raises(RemoteProtocolError) as unknown:
            await client.request("reboot")
        assert unknown.value.remote_code == "unknown_op"
        assert isinstance(unknown.value, ProtocolError)
        # The connection survives error frames.
        assert (await client.register(claims()))["ok"] is True


def test_error_codes_map_to_exception_classes() -> None:
    assert isinstance(remote_error("permission_denied", "x"), RemotePermissionDenied)
    assert isinstance(remote_error("server_busy", "x"), Unavailable)
    assert isinstance(remote_error("actor_stopped", "x"), RemoteUnavailable)
    other = remote_error("store_error", "disk full")
    assert type(other) is RemoteError
    assert other.remote_code == "store_error"
    assert other.detail == "disk full"


# --- the heartbeat keeper --------------------------------------------------------------


async def test_keeper_reregisters_after_retirement_and_releases_on_exit(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir) as s:
        async with keep_registered(s.path, claims(), clock=s.h.clock, jitter=0) as keeper:
            first = keeper.registration
            assert first is not None
            assert keeper.registrations_made == 1
            assert keeper.next_delay == first["heartbeat_interval_seconds"] == 10.0
            await s.h.advance(10)
            await keeper.wait_until(lambda k: k.beats_sent == 1)
            row = await s.h.row(first["worker_identity"])
            async with s.h.store.write() as tx:
                retired = await tx.retire_guarded(
                    row, retired_at=format_stamp(s.h.clock.now()), retired_by="test", reason="test"
                )
            assert retired
            await s.h.advance(10)
            await keeper.wait_until(lambda k: k.registrations_made == 2)
            second = keeper.registration
            assert second is not None
            assert second["worker_identity"] != first["worker_identity"]
            assert keeper.beats_sent == 1
            assert keeper.consecutive_failures == 0
        assert keeper.registration is None
        assert (await s.h.row(second["worker_identity"]))["status"] == "released"
        assert (await s.h.row(first["worker_identity"]))["status"] == "retired"


async def test_keeper_backs_off_while_the_supervisor_is_down(
    tmp_path: Path, sock_dir: Path
) -> None:
    book, _ = write_profiles(tmp_path)
    config = SocketConfig(path=sock_dir / "s.sock")
    async with harness(tmp_path) as h:
        h.probes.set(os.getpid(), alive=True, start_time=SELF_START, cwd=REPO)
        keeper = keep_registered(
            config.path, claims(), clock=h.clock, initial_backoff=1.0, max_backoff=8.0, jitter=0
        )
        # Entering never fails the worker: the first attempt just schedules a retry.
        async with keeper:
            assert keeper.registrations_made == 0
            assert keeper.consecutive_failures == 1
            assert keeper.last_error is not None
            assert keeper.last_error.startswith("supervisor_unavailable")
            delays = [keeper.next_delay]
            for failures in range(2, 6):
                await _retry_now(h.clock, keeper)
                await keeper.wait_until(_failed(failures))
                delays.append(keeper.next_delay)
            assert delays == [1.0, 2.0, 4.0, 8.0, 8.0]
            # Short of the delay nothing happens.
            attempts = keeper.attempts
            await h.clock.advance(7.99)
            assert keeper.attempts == attempts

            async with serve(h, config, book):
                await h.clock.advance(0.01)
                await keeper.wait_until(lambda k: k.registration is not None)
                assert keeper.registrations_made == 1
                assert keeper.consecutive_failures == 0
                assert keeper.next_delay == 10.0
            registration = keeper.registration
            assert registration is not None

            # Down again while registered: retries start small and never exceed the interval.
            await _retry_now(h.clock, keeper)
            await keeper.wait_until(_failed(1))
            assert keeper.next_delay == 1.0
            assert keeper.registration == registration

            async with serve(h, config, book):
                await _retry_now(h.clock, keeper)
                await keeper.wait_until(_failed(0))
                # The row was still active: the same registration goes on beating.
                assert keeper.registration == registration
                assert keeper.registrations_made == 1
                assert keeper.beats_sent == 1
        # The supervisor is gone again: the release on exit fails quietly.
        assert _current(keeper) is None
        row = await h.row(registration["worker_identity"])
        assert row["status"] == "active"


def _current(keeper: HeartbeatKeeper) -> Mapping[str, Any] | None:
    # A call, so mypy keeps no narrowing of the property from earlier asserts.
    return keeper.registration


def _failed(times: int) -> Callable[[HeartbeatKeeper], bool]:
    return lambda keeper: keeper.consecutive_failures == times


async def _retry_now(clock: FakeClock, keeper: HeartbeatKeeper) -> None:
    assert keeper.next_delay is not None
    await clock.advance(keeper.next_delay)


async def test_keeper_releases_even_when_cancelled(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s:
        registration: Mapping[str, Any] = {}
        with anyio.CancelScope() as scope:
            async with keep_registered(s.path, claims(), clock=s.h.clock) as keeper:
                registration = keeper.registration or {}
                assert registration
                scope.cancel()
                await anyio.sleep_forever()
        assert (await s.h.row(registration["worker_identity"]))["status"] == "released"


async def test_heartbeat_thread_registers_and_stop_releases(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s:
        stop = await anyio.to_thread.run_sync(start_heartbeat_thread, s.path, claims())
        registration = stop.keeper.registration
        assert registration is not None
        assert registration["pid"] == os.getpid()
        await anyio.to_thread.run_sync(stop)
        await anyio.to_thread.run_sync(stop)  # idempotent
        assert (await s.h.row(registration["worker_identity"]))["status"] == "released"


async def test_an_abandoned_registration_is_not_released(tmp_path: Path, sock_dir: Path) -> None:
    async with served(tmp_path, sock_dir) as s:
        async with keep_registered(s.path, claims(), clock=s.h.clock) as keeper:
            registration = keeper.registration or {}
            assert registration
            keeper.abandon()
            await s.h.advance(30)
            assert keeper.beats_sent == 0  # no more beats once abandoned
        row = await s.h.row(registration["worker_identity"])
        assert row["status"] == "active"


async def test_the_workers_own_exception_passes_through_unwrapped(sock_dir: Path) -> None:
    with pytest.raises(KeyError, match="the worker's"):
        async with keep_registered(sock_dir / "none.sock", claims(), clock=FakeClock()):
            raise KeyError("the worker's")
