"""The census's look at new processes: a broken event socket hands over to the listing pass.

The kernel's process events come through one netlink socket. If reading it fails for
any reason but lost events, the census logs it, closes the socket and looks at new
processes by listing /proc instead, rather than ending discovery or spinning on a
socket that stays readable. FakeClock; a socket pair stands in for the netlink socket.
"""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import anyio
import pytest

from supervisor.system.proc_events import EventRead
from tests.actors.test_census import census_harness

pytestmark = pytest.mark.anyio


class _BrokenEvents:
    """Readable at once; every read fails as a broken socket does."""

    def __init__(self) -> None:
        self._sock, self._other = socket.socketpair()
        self._other.send(b"x")
        self.closed = False

    def fileno(self) -> int:
        return self._sock.fileno()

    def read(self) -> EventRead:
        raise OSError(errno.EIO, "broken")

    def close(self) -> None:
        self.closed = True
        self._sock.close()
        self._other.close()


async def test_a_broken_event_socket_hands_over_to_the_listing_pass(tmp_path: Path) -> None:
    async with census_harness(tmp_path) as h:
        census = h.supervisor.census
        assert census is not None
        listing = anyio.Event()

        async def listed() -> None:
            listing.set()

        census._first_sighter = listed  # type: ignore[method-assign]
        events = _BrokenEvents()
        async with anyio.create_task_group() as tg:
            tg.start_soon(census._event_sighter, events)  # type: ignore[arg-type]
            await h.settle()
            await h.clock.advance(0.1)  # the batch wait
            with anyio.fail_after(10):  # a hang guard
                await listing.wait()
        assert events.closed
