"""A daemon whose stderr reader has gone keeps serving, and a SIGTERM still exits 0."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.daemon import Daemon, running_daemon, wait_ready
from tests.integration.socket_helpers import claims
from tests.integration.test_end_to_end import snapshot, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Children of the test to register as workers; every one is stopped by pid."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def _live(daemon: Daemon, pid: int) -> list[bool]:
    return [w["live"] for w in snapshot(daemon, include_history=True)["workers"] if w["pid"] == pid]


async def _register_and_kill(
    daemon: Daemon, sleepers: list[subprocess.Popen[bytes]], session: str
) -> None:
    """A worker whose process exits: liveness notices and logs ``worker_exited``."""
    child = subprocess.Popen(SLEEPER, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    sleepers.append(child)
    with daemon.client() as client:
        registered: Any = client.register(claims(session_id=session), pid=child.pid)
    assert registered["ok"] is True
    child.kill()
    child.wait()
    await wait_for(lambda: _live(daemon, child.pid) == [False], what="the exit to be seen")


async def test_logging_into_a_closed_stderr_pipe_kills_nothing(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    # Buffered stderr, as a daemon started by a client has: the failed lines stay
    # in Python's buffer and the interpreter's exit flush fails on them (exit 120).
    with running_daemon(stderr=subprocess.PIPE, unset_env=("PYTHONUNBUFFERED",)) as daemon:
        await wait_ready(daemon)
        assert daemon.process.stderr is not None
        # The client that read our stderr has gone: every log line from now meets EPIPE.
        daemon.process.stderr.close()
        await _register_and_kill(daemon, sleepers, "first")
        # The actor that logged the first exit must still be there for the second.
        await _register_and_kill(daemon, sleepers, "second")
        with daemon.client() as client:
            assert client.status()["success"] is True
        assert daemon.process.poll() is None
        daemon.process.send_signal(signal.SIGTERM)
        assert daemon.process.wait(timeout=30) == 0
