"""Descriptors on one epoll, each with a tag: one waiting task however many there are."""

from __future__ import annotations

import contextlib
import select
from typing import Generic, TypeVar

import anyio

from supervisor.system.pidfd import close_pidfd

__all__ = ["EpollSet"]

_Tag = TypeVar("_Tag")


class EpollSet(Generic[_Tag]):
    """Owns readable-on-event descriptors (pidfds, stdin duplicates) and what each stands for.

    A task and a future per watched descriptor cost several kilobytes each; at ten
    thousand workers that is most of the daemon's memory. One epoll set costs a few
    dozen bytes per descriptor, and the kernel's ready list says which fired.
    """

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._tags: dict[int, _Tag] = {}

    def __len__(self) -> int:
        return len(self._tags)

    def add(self, fd: int, tag: _Tag, mask: int = select.EPOLLIN) -> None:
        """Watch ``fd`` for ``mask`` (the set owns it from here on and will close it)."""
        self._epoll.register(fd, mask)
        self._tags[fd] = tag

    def drop(self, fd: int) -> _Tag | None:
        """Stop watching ``fd`` and close it; its tag, or None for a descriptor not held."""
        tag = self._tags.pop(fd, None)
        if tag is None:
            return None
        try:
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)
        finally:
            close_pidfd(fd)
        return tag

    def ready(self) -> list[tuple[int, _Tag]]:
        """The held descriptors that fired, now (level-triggered: asking consumes nothing)."""
        if not self._tags:
            return []
        # maxevents defaults to FD_SETSIZE - 1; every member may be ready at once.
        tags = self._tags
        return [(fd, tags[fd]) for fd, _ in self._epoll.poll(0, len(tags)) if fd in tags]

    async def wait(self) -> list[tuple[int, _Tag]]:
        """Wait until a held descriptor fires; what ``ready`` then says (still held)."""
        while True:
            fired = self.ready()
            if fired:
                return fired
            # The epoll descriptor itself turns readable when any member does,
            # including members added while this task waits.
            await anyio.wait_readable(self._epoll.fileno())

    def close(self) -> None:
        """Close every held descriptor, then the epoll."""
        for fd in list(self._tags):
            self.drop(fd)
        self._epoll.close()
