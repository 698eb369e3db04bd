"""The systemd notify sender against a real datagram socket, and the health-gated watchdog."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from supervisor.clock import FakeClock
from supervisor.daemon.ops import feed_watchdog
from supervisor.surfaces.http.health import HealthReport
from supervisor.system.sd_notify import notify, watchdog_interval


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5.0)
    with sock:
        yield sock, path


def test_notify_sends_one_datagram_to_the_socket(notify_socket: tuple[socket.socket, str]) -> None:
    sock, path = notify_socket
    assert notify("READY=1\nSTATUS=serving", environ={"NOTIFY_SOCKET": path})
    assert sock.recv(4096) == b"READY=1\nSTATUS=serving"


def test_notify_speaks_the_abstract_namespace() -> None:
    name = f"fleet-supervisor-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5.0)
        assert notify("WATCHDOG=1", environ={"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(4096) == b"WATCHDOG=1"


@pytest.mark.parametrize("value", ["", "relative/path", "vsock:2:1234"])
def test_notify_without_a_usable_socket_is_a_quiet_no(value: str) -> None:
    assert notify("READY=1", environ={"NOTIFY_SOCKET": value} if value else {}) is False


def test_notify_to_a_socket_nobody_listens_on_does_not_raise(tmp_path: Path) -> None:
    assert notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "gone.sock")}) is False


def test_notify_to_a_full_queue_drops_the_datagram_instead_of_blocking(
    notify_socket: tuple[socket.socket, str],
) -> None:
    _, path = notify_socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as filler:
        filler.setblocking(False)
        filler.connect(path)
        with contextlib.suppress(BlockingIOError):
            for _ in range(100_000):  # until the receiver's queue is full
                filler.send(b"x" * 64)
    # A blocking send would wait here until someone reads (pytest-timeout would fire).
    assert notify("WATCHDOG=1", environ={"NOTIFY_SOCKET": path}) is False


def test_watchdog_interval_is_half_of_watchdog_usec_and_only_for_this_pid() -> None:
    me = str(os.getpid())
    assert watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": me}) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "soon"}) is None
    assert watchdog_interval({}) is None


class _ScriptedHealth:
    def __init__(self) -> None:
        self.healthy = True
        self.checks = 0

    async def health(self) -> HealthReport:
        self.checks += 1
        return HealthReport(healthy=self.healthy, ready=self.healthy)


@pytest.mark.anyio
async def test_watchdog_is_fed_only_while_the_actors_are_healthy(
    notify_socket: tuple[socket.socket, str],
) -> None:
    sock, path = notify_socket
    sock.setblocking(False)
    clock = FakeClock()
    state = _ScriptedHealth()
    sent: list[str] = []

    def send(message: str) -> bool:
        sent.append(message)
        return notify(message, environ={"NOTIFY_SOCKET": path})

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: feed_watchdog(state, clock=clock, interval=10.0, send=send))
        await clock.advance(0)
        await clock.advance(10.0)
        assert sent == ["WATCHDOG=1", "WATCHDOG=1"]
        state.healthy = False
        await clock.advance(10.0)
        await clock.advance(10.0)
        assert state.checks == 4
        assert sent == ["WATCHDOG=1", "WATCHDOG=1"]
        state.healthy = True
        await clock.advance(10.0)
        assert sent == ["WATCHDOG=1"] * 3
        tg.cancel_scope.cancel()
    received = []
    while True:
        try:
            received.append(sock.recv(4096))
        except BlockingIOError:
            break
    assert received == [b"WATCHDOG=1"] * 3
