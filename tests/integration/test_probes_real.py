"""Integration tests for supervisor.system.probes against real child processes and pidfds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import anyio
import pytest

from supervisor.system import probes
from supervisor.system.exit_watch import ExitWatchSet
from supervisor.system.pidfd import close_pidfd, pidfd_open, pidfd_supported
from supervisor.system.probes import (
    ProcessEvidence,
    parent_pid,
    pid_alive,
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
@pytest.mark.parametrize("linux", [True, False], ids=["proc-stat", "portable-psutil"])
async def test_zombie_is_dead_with_its_incarnation_before_it_is_reaped(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch, linux: bool
) -> None:
    monkeypatch.setattr(probes, "_LINUX", linux)
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
        # Exited but not waited for: the pid is still taken (kill(2) finds it), yet the
        # process will never run again, so the probe calls that same incarnation dead.
        assert pid_alive(pid) is True
        assert process_start_time(pid) == start
        assert probe_process(pid) == ProcessEvidence(pid=pid, alive=False, start_time=start)
        assert probe_many([pid]) == [ProcessEvidence(pid=pid, alive=False, start_time=start)]
    finally:
        watches.close()
    sleeper.wait()
    assert probe_process(pid) == ProcessEvidence(pid=pid, alive=False, start_time=None)


def test_orphaned_zombie_grandchild_is_dead() -> None:
    # The middle process forks a grandchild that exits at once, reports its pid, and never
    # waits for it: the grandchild stays a zombie for as long as the middle process lives.
    script = (
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0)\n"
        "print(pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE) as parent:
        try:
            assert parent.stdout is not None
            grandchild = int(parent.stdout.readline())
            assert parent_pid(grandchild) == parent.pid
            seen = _wait_for_state(grandchild, "Z")
            assert seen.alive is False
            assert seen.start_time is not None
            assert pid_alive(grandchild) is True  # still occupies its pid
        finally:
            parent.kill()
            parent.wait()


def test_process_whose_main_thread_exited_is_alive() -> None:
    # The leader shows state Z once its own thread has gone, but the process runs on in its
    # other thread: a zombie *leader* is not a dead process.
    script = (
        "import ctypes, threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,)).start()\n"
        "print('ready', flush=True)\n"
        "ctypes.CDLL(None).pthread_exit(None)\n"
    )
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == b"ready"
            seen = _wait_for_state(proc.pid, "Z")
            assert seen == ProcessEvidence(
                pid=proc.pid, alive=True, start_time=process_start_time(proc.pid)
            )
        finally:
            proc.kill()
            proc.wait()


def _wait_for_state(pid: int, state: str) -> ProcessEvidence:
    """Probe pid once its /proc state letter is ``state`` (a hang guard, not a timing)."""
    for _ in range(10_000):
        with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
            if handle.read().rpartition(")")[2].split()[0] == state:
                return probe_process(pid)
        time.sleep(0.001)
    raise AssertionError(f"pid {pid} never reached state {state!r}")


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
