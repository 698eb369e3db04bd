"""Many process-exit watches on one epoll descriptor: one waiting task however many workers."""

from __future__ import annotations

import select

from supervisor.system.epoll_set import EpollSet

__all__ = ["ExitWatchSet", "exit_watch_supported"]


def exit_watch_supported() -> bool:
    """epoll is Linux-only, as are the pidfds it watches."""
    return hasattr(select, "epoll")


class ExitWatchSet:
    """Owns a set of readable-on-exit descriptors (pidfds) keyed by worker identity."""

    def __init__(self) -> None:
        self._fds: EpollSet[str] = EpollSet()
        self._fd_by_key: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._fd_by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._fd_by_key

    def add(self, key: str, fd: int) -> None:
        """Watch ``fd`` (the set now owns it and will close it)."""
        self.discard(key)
        self._fds.add(fd, key)
        self._fd_by_key[key] = fd

    def discard(self, key: str) -> None:
        """Stop watching ``key`` and close its descriptor; unknown keys are fine."""
        fd = self._fd_by_key.pop(key, None)
        if fd is not None:
            self._fds.drop(fd)

    def pending(self) -> frozenset[str]:
        """Keys whose descriptor is readable now but not yet reported by ``exited``.

        Level-triggered, so asking consumes nothing. A pidfd is readable from the
        moment its process has exited (a zombie included), so a key missing here
        names a process that had not exited when this was called.
        """
        return frozenset(key for _, key in self._fds.ready())

    async def exited(self) -> list[str]:
        """Wait until a watched descriptor fires; return those keys, no longer watched."""
        keys = [key for _, key in await self._fds.wait()]
        for key in keys:
            self.discard(key)
        return keys

    def close(self) -> None:
        self._fd_by_key.clear()
        self._fds.close()
