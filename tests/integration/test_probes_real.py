"""Integration tests for supervisor.probes against real child processes and pidfds."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import anyio
import pytest

from supervisor.exit_watch import ExitWatchSet
from supervisor.probes import (
    ProcessEvidence,
    close_pidfd,
    parent_pid,
    pid_alive,
    pidfd_open,
    pidfd_supported,
    probe_many,
    probe_process,
    process_start_time,
)

pytestmark = pytest.mark.integration

needs_pidfd = pytest.mark.skipif(not pidfd_supported(), reason="pidfd_open unavailable")

_SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    with subprocess.Popen(_SLEEPER) as proc:
        try:
            yield proc
        finally:
            # Always reap, or the Popen object warns (and filterwarnings=error fails the test).
            proc.kill()
            proc.wait()


def test_child_alive_then_dead_after_kill(sleeper: subprocess.Popen[bytes]) -> None:
    pid = sleeper.pid
    start = process_start_time(pid)
    assert start is not None
    assert start != process_start_time(os.getpid())
    assert pid_alive(pid) is True
    assert probe_process(pid) == ProcessEvidence(pid=pid, alive=True, start_time=start)
    assert parent_pid(pid) == os.getpid()

    sleeper.kill()
    sleeper.wait()

    assert pid_alive(pid) is False
    assert process_start_time(pid) is None
    assert probe_process(pid) == ProcessEvidence(pid=pid, alive=False, start_time=None)
    assert probe_many([os.getpid(), pid]) == [
        ProcessEvidence(pid=os.getpid(), alive=True, start_time=process_start_time(os.getpid())),
        ProcessEvidence(pid=pid, alive=False, start_time=None),
    ]


@needs_pidfd
@pytest.mark.anyio
async def test_pidfd_reports_exit(sleeper: subprocess.Popen[bytes]) -> None:
    fd = pidfd_open(sleeper.pid)
    assert fd is not None
    watches = ExitWatchSet()  # the liveness actor's way of waiting on pidfds
    try:
        watches.add("sleeper", fd)
        sleeper.kill()
        # A hang guard only: the exit is expected at once, but a bug must fail, not hang.
        with anyio.fail_after(10):
            assert await watches.exited() == ["sleeper"]
    finally:
        watches.close()


@needs_pidfd
@pytest.mark.anyio
async def test_zombie_counts_as_alive_until_reaped(sleeper: subprocess.Popen[bytes]) -> None:
    pid = sleeper.pid
    start = process_start_time(pid)
    fd = pidfd_open(pid)
    assert fd is not None
    watches = ExitWatchSet()
    try:
        watches.add("sleeper", fd)
        sleeper.kill()
        with anyio.fail_after(10):
            assert await watches.exited() == ["sleeper"]
        # Exited but not yet waited for: the pid is still taken, so it must not read as dead.
        assert pid_alive(pid) is True
        assert probe_process(pid) == ProcessEvidence(pid=pid, alive=True, start_time=start)
    finally:
        watches.close()
    sleeper.wait()
    assert probe_process(pid) == ProcessEvidence(pid=pid, alive=False, start_time=None)


@needs_pidfd
def test_pidfd_open_checks_incarnation(sleeper: subprocess.Popen[bytes]) -> None:
    pid = sleeper.pid
    start = process_start_time(pid)
    assert start is not None
    assert pidfd_open(pid, expected_start_time="ticks-0") is None
    fd = pidfd_open(pid, expected_start_time=start)
    assert fd is not None
    close_pidfd(fd)


@needs_pidfd
def test_pidfd_open_on_reaped_pid_is_none(sleeper: subprocess.Popen[bytes]) -> None:
    sleeper.kill()
    sleeper.wait()
    assert pidfd_open(sleeper.pid) is None
