"""The server guard's descriptors: pidfds of servers and clients, stdin duplicates, one epoll."""

from __future__ import annotations

import os
import select
from dataclasses import dataclass, field

from supervisor.system.epoll_set import EpollSet
from supervisor.system.pidfd import pidfd_open

__all__ = [
    "EXIT_CLIENT",
    "EXIT_LEADER_UNWATCHED",
    "EXIT_SERVER",
    "EXIT_STDIN",
    "WatchEvent",
    "Watched",
    "Watches",
]

#: Exit reason codes, recorded on the audit event written with each release.
EXIT_SERVER = "server_exited"
EXIT_CLIENT = "client_exited"
EXIT_STDIN = "stdin_closed"
#: The leader was already gone when the guard first saw the tree (nobody watched it go).
EXIT_LEADER_UNWATCHED = "leader_gone_unwatched"

# HUP and ERR are always reported; RDHUP adds a socketpair peer's shutdown(SHUT_WR).
# EPOLLIN is deliberately not asked for: the server reads its stdin, the guard never does.
_HANGUP = select.EPOLLHUP | select.EPOLLERR | select.EPOLLRDHUP

Key = tuple[int, str]


@dataclass(slots=True, kw_only=True)
class Watched:
    """One watched server: its row's fencing, its incarnation and its client's."""

    worker_identity: str | None
    pid: int
    start: str
    client: Key
    name: str
    #: The server's user: only that user's processes are ever counted in its tree.
    uid: int | None = None
    #: The cgroup v2 the server was given of its own, if any: its processes are the tree's.
    cgroup: str | None = None
    generation_id: str = ""
    fencing_epoch: int = 0
    ttl: float = 30.0
    pidfd: int | None = None
    stdin_fd: int | None = None
    stopping: bool = False
    #: When the next beat for this row is due (clock monotonic); 0 = at once.
    due: float = 0.0

    @property
    def key(self) -> Key:
        return (self.pid, self.start)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """``server`` exited, its ``client`` exited, or its ``stdin`` hung up."""

    kind: str
    server: Watched


@dataclass(slots=True)
class _Client:
    pidfd: int
    servers: set[Key] = field(default_factory=set)


class Watches:
    """Every descriptor the guard holds, keyed so one readiness names what happened."""

    def __init__(self) -> None:
        self.servers: dict[Key, Watched] = {}
        self._clients: dict[Key, _Client] = {}
        self._fds: EpollSet[tuple[str, Key]] = EpollSet()

    def add(self, server: Watched, stdin_fd: int | None) -> str | None:
        """Watch ``server`` (``stdin_fd`` is owned from here on). Returns the exit reason
        when the server or its client is already gone, so the caller stops it at once."""
        self.servers[server.key] = server
        server.pidfd = pidfd_open(server.pid, expected_start_time=server.start)
        if server.pidfd is None:
            # Gone already (or a different process holds the pid): the exit was missed by
            # microseconds, which is still an exit of the watched incarnation.
            if stdin_fd is not None:
                os.close(stdin_fd)
            return EXIT_SERVER
        self._add(server.pidfd, select.EPOLLIN, "server", server.key)
        if stdin_fd is not None:
            try:
                self._add(stdin_fd, _HANGUP, "stdin", server.key)
            except OSError:
                os.close(stdin_fd)  # /dev/null or a file: nothing that can hang up
            else:
                server.stdin_fd = stdin_fd
        watch = self._clients.get(server.client)
        if watch is None:
            pidfd = pidfd_open(server.client[0], expected_start_time=server.client[1])
            if pidfd is None:
                return EXIT_CLIENT
            watch = self._clients[server.client] = _Client(pidfd=pidfd)
            self._add(pidfd, select.EPOLLIN, "client", server.client)
        watch.servers.add(server.key)
        return None

    def drop_stdin(self, server: Watched) -> None:
        self._drop(server.stdin_fd)
        server.stdin_fd = None

    def forget(self, server: Watched) -> None:
        """Stop watching ``server``; its client's pidfd goes with its last server."""
        self.servers.pop(server.key, None)
        self._drop(server.pidfd)
        self._drop(server.stdin_fd)
        server.pidfd = server.stdin_fd = None
        watch = self._clients.get(server.client)
        if watch is not None:
            watch.servers.discard(server.key)
            if not watch.servers:
                self._clients.pop(server.client, None)
                self._drop(watch.pidfd)

    async def events(self) -> list[WatchEvent]:
        """Wait until something happened; each descriptor reports once (it is dropped)."""
        while True:
            found: list[WatchEvent] = []
            for fd, (kind, key) in await self._fds.wait():
                if self._fds.drop(fd) is None:
                    continue  # dropped above with its server (a stdin that hung up too)
                if kind == "client":
                    watch = self._clients.pop(key, None)
                    servers = [self.servers.get(k) for k in sorted(watch.servers if watch else ())]
                    found += [WatchEvent("client", s) for s in servers if s is not None]
                    continue
                server = self.servers.get(key)
                if server is None:
                    continue
                if kind == "server":
                    server.pidfd = None
                    # The server is gone: a reader kept here must not keep its client's
                    # writes from failing (EPIPE) while the rest of the tree is stopped.
                    self.drop_stdin(server)
                else:
                    server.stdin_fd = None
                found.append(WatchEvent(kind, server))
            if found:
                return found

    def close(self) -> None:
        self.servers.clear()
        self._clients.clear()
        self._fds.close()

    def _add(self, fd: int, mask: int, kind: str, key: Key) -> None:
        self._fds.add(fd, (kind, key), mask)

    def _drop(self, fd: int | None) -> None:
        if fd is not None:
            self._fds.drop(fd)
