"""Many process-exit watches on one epoll descriptor: one waiting task however many workers."""

from __future__ import annotations

import select

import anyio

from supervisor.system.pidfd import close_pidfd

__all__ = ["ExitWatchSet", "exit_watch_supported"]


def exit_watch_supported() -> bool:
    """epoll is Linux-only, as are the pidfds it watches."""
    return hasattr(select, "epoll")


class ExitWatchSet:
    """Owns a set of readable-on-exit descriptors (pidfds) keyed by worker identity.

    A task and a future per watched process cost several kilobytes each; at
    ten thousand workers that is most of the daemon's memory. One epoll set
    costs a few dozen bytes per descriptor, and the kernel's ready list says
    which processes exited.
    """

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._key_by_fd: dict[int, str] = {}
        self._fd_by_key: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._fd_by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._fd_by_key

    def add(self, key: str, fd: int) -> None:
        """Watch ``fd`` (the set now owns it and will close it)."""
        self.discard(key)
        self._epoll.register(fd, select.EPOLLIN)
        self._key_by_fd[fd] = key
        self._fd_by_key[key] = fd

    def discard(self, key: str) -> None:
        """Stop watching ``key`` and close its descriptor; unknown keys are fine."""
        fd = self._fd_by_key.pop(key, None)
        if fd is None:
            return
        del self._key_by_fd[fd]
        try:
            self._epoll.unregister(fd)
        finally:
            close_pidfd(fd)

    def pending(self) -> frozenset[str]:
        """Keys whose descriptor is readable now but not yet reported by ``exited``.

        Level-triggered, so asking consumes nothing. A pidfd is readable from the
        moment its process has exited (a zombie included), so a key missing here
        names a process that had not exited when this was called.
        """
        if not self._fd_by_key:
            return frozenset()
        # maxevents defaults to FD_SETSIZE - 1; every member may be ready at once.
        ready = self._epoll.poll(0, len(self._fd_by_key))
        keys = self._key_by_fd
        return frozenset(keys[fd] for fd, _ in ready if fd in keys)

    async def exited(self) -> list[str]:
        """Wait until a watched descriptor fires; return those keys, no longer watched."""
        while True:
            ready = [fd for fd, _ in self._epoll.poll(0) if fd in self._key_by_fd]
            if ready:
                keys = [self._key_by_fd[fd] for fd in ready]
                for key in keys:
                    self.discard(key)
                return keys
            # The epoll descriptor itself turns readable when any member does,
            # including members added while this task waits.
            await anyio.wait_readable(self._epoll.fileno())

    def close(self) -> None:
        for key in list(self._fd_by_key):
            self.discard(key)
        self._epoll.close()
