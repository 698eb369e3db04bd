"""Processes a test starts, each killed at the end through a pidfd (by pid, never a reused one)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Spawned", "spawning", "wait_exec_of"]

#: Waits for a child to set itself up are bounded: this many polls, 10 ms apart.
_POLLS = 1000


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def wait_exec_of(pid: int) -> None:
    """Until ``pid``'s new program is in place: Popen returns once the exec began; the new
    image's argument and environment pages are set up a moment later, and /proc reads
    them as empty until then."""
    for _ in range(_POLLS):
        if _cmdline(pid) != b"":
            return
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} never finished its exec")


class Spawned:
    """Every process started or tracked here is SIGKILLed by ``close`` (grandchildren first,
    so their parents reap them), and every ``Popen`` is waited for and its pipes closed."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pidfds: dict[int, int] = {}

    def popen(
        self, argv: list[str], *, wait_exec: bool = False, **kwargs: Any
    ) -> subprocess.Popen[bytes]:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(argv, **kwargs)
        self.procs.append(proc)
        self.track(proc.pid)
        if wait_exec:
            wait_exec_of(proc.pid)
        return proc

    def popen_exec(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """``popen``, returning once the child's new program is in place."""
        return self.popen(argv, wait_exec=True, **kwargs)

    def track(self, pid: int) -> None:
        if pid not in self.pidfds:
            with contextlib.suppress(OSError):
                self.pidfds[pid] = os.pidfd_open(pid)

    def forget(self, pid: int) -> None:
        """Drop the pidfd of ``pid``, whose process the caller has reaped: a process that
        gets the pid later is tracked afresh (and killed at the end) when tracked."""
        fd = self.pidfds.pop(pid, None)
        if fd is not None:
            os.close(fd)

    def run(self, argv: list[str], **kwargs: Any) -> tuple[int, bytes, bytes]:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        proc = self.popen(argv, **kwargs)
        out, err = proc.communicate(timeout=60)
        return proc.returncode, out or b"", err or b""

    def close(self) -> None:
        direct = {p.pid for p in self.procs}
        for pid in sorted(self.pidfds, key=lambda p: p in direct):
            fd = self.pidfds.pop(pid)
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


@contextmanager
def spawning() -> Iterator[Spawned]:
    """A ``Spawned`` whose every process is killed by pid on the way out."""
    spawned = Spawned()
    try:
        yield spawned
    finally:
        spawned.close()
