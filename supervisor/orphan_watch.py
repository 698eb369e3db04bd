"""The exec sidecar's watch on its launching client (pidfd, stdin hang-up) and the reaper."""

from __future__ import annotations

import os
import select
import signal
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import Process

from supervisor.logs import get_logger
from supervisor.probes import close_pidfd, pidfd_open, probe_process

__all__ = [
    "CLIENT_EXITED",
    "STDIN_CLOSED",
    "ClientWatch",
    "LaunchingClient",
    "OrphanGuard",
    "launching_client",
    "reap_process_group",
]

_log = get_logger()

#: Why the client counts as gone: its process exited, or it hung up the server's stdin.
CLIENT_EXITED = "client_exited"
STDIN_CLOSED = "stdin_closed"

# HUP and ERR are always reported; RDHUP adds a socketpair peer's shutdown(SHUT_WR).
# EPOLLIN is deliberately not asked for: the child reads stdin, this process never does.
_HANGUP = select.EPOLLHUP | select.EPOLLERR | select.EPOLLRDHUP


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchingClient:
    pid: int
    start_time: str | None

    def claims(self) -> dict[str, Any]:
        claims: dict[str, Any] = {"client_pid": self.pid}
        if self.start_time:
            claims["client_process_start_time"] = self.start_time
        return claims


def launching_client() -> LaunchingClient | None:
    """This process's parent (the MCP client that started it), or None when there is
    none to watch (already reparented to init)."""
    parent = os.getppid()
    if parent <= 1:
        return None
    return LaunchingClient(pid=parent, start_time=probe_process(parent).start_time)


class ClientWatch:
    """One epoll set: the client's pidfd (readable on exit) and stdin (hang-up on EOF)."""

    def __init__(self, client: LaunchingClient | None, *, stdin_fd: int = 0) -> None:
        self._epoll = select.epoll()
        self._pidfd: int | None = None
        self._stdin: int | None = None
        #: The client was gone before the watch could start.
        self.gone_already = False
        if client is not None:
            self._pidfd = pidfd_open(client.pid, expected_start_time=client.start_time)
            if self._pidfd is not None:
                self._epoll.register(self._pidfd, select.EPOLLIN)
            # Reparented already: the pidfd (if any) may name another process.
            self.gone_already = os.getppid() != client.pid
        try:
            self._epoll.register(stdin_fd, _HANGUP)
            self._stdin = stdin_fd
        except OSError:
            pass  # /dev/null, a regular file or a closed fd: nothing to hang up

    async def wait(self) -> str:
        """Wait until the client is gone; which of the two ways it went."""
        if self.gone_already:
            return CLIENT_EXITED
        while True:
            for fd, _events in self._epoll.poll(0):
                if fd == self._pidfd:
                    return CLIENT_EXITED
                if fd == self._stdin:
                    return STDIN_CLOSED
            await anyio.wait_readable(self._epoll.fileno())

    def close(self) -> None:
        if self._pidfd is not None:
            close_pidfd(self._pidfd)
            self._pidfd = None
        self._epoll.close()


async def reap_process_group(process: Process, *, grace: float) -> None:
    """SIGTERM the child's process group, SIGKILL it after ``grace`` seconds if the child
    still runs. The child must lead its own group (started with a new session)."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        if process.returncode is not None:
            return
        _log.warning("orphan_reaping", pid=process.pid, signal=signal.Signals(signum).name)
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        # Real time on purpose: the grace is what a server gets to exit, an OS deadline.
        with anyio.move_on_after(grace):
            await process.wait()


class OrphanGuard:
    """Watches the launching client for the sidecar and reaps the child when told to."""

    def __init__(
        self,
        process: Process,
        client: LaunchingClient | None,
        *,
        reap: bool,
        grace: float,
        stdin_fd: int = 0,
    ) -> None:
        self._process = process
        self._client = client
        self._reap = reap
        self._grace = grace
        self._stdin_fd = stdin_fd
        #: The child was stopped by this guard: its row is released, not abandoned.
        self.reaped = False

    async def run(self) -> None:
        watch = ClientWatch(self._client, stdin_fd=self._stdin_fd)
        try:
            reason = await watch.wait()
        finally:
            watch.close()
        _log.warning(
            "launching_client_gone",
            reason=reason,
            client_pid=self._client.pid if self._client else None,
            pid=self._process.pid,
            reap=self._reap,
        )
        if not self._reap:
            return
        if reason == STDIN_CLOSED:
            # An MCP server exits on stdin EOF; only one that ignores it is reaped.
            with anyio.move_on_after(self._grace):
                await self._process.wait()
            if self._process.returncode is not None:
                return
        self.reaped = True
        await reap_process_group(self._process, grace=self._grace)
