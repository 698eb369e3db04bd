"""The tagged epoll set: what fired says its tag, nothing is consumed by asking, all is closed."""

from __future__ import annotations

import os
import select
import socket

import anyio
import pytest

from supervisor.system.epoll_set import EpollSet
from tests.descriptors import is_closed

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not hasattr(select, "epoll"), reason="epoll is Linux-only"),
]


async def test_fired_descriptors_say_their_tags_until_dropped() -> None:
    held: EpollSet[tuple[str, int]] = EpollSet()
    reader_a, writer_a = os.pipe()
    reader_b, writer_b = os.pipe()
    try:
        held.add(reader_a, ("a", 1))
        held.add(reader_b, ("b", 2))
        assert len(held) == 2
        assert held.ready() == []
        os.close(writer_a)  # EOF: the read end turns readable, as a pidfd at exit
        with anyio.fail_after(5):  # hang guard only
            assert await held.wait() == [(reader_a, ("a", 1))]
        assert held.ready() == [(reader_a, ("a", 1))]  # level-triggered: still there
        assert held.drop(reader_a) == ("a", 1)
        assert is_closed(reader_a)
        assert held.drop(reader_a) is None  # not held any more: nothing closed twice
        assert held.ready() == []
    finally:
        held.close()
        os.close(writer_b)
    assert is_closed(reader_b)


async def test_a_mask_without_epollin_fires_on_hang_up_only() -> None:
    held: EpollSet[str] = EpollSet()
    left, right = socket.socketpair()
    fd = os.dup(left.fileno())
    left.close()
    try:
        held.add(fd, "stdin", select.EPOLLHUP | select.EPOLLRDHUP)
        right.send(b"data")  # readable, but readability was not asked for
        assert held.ready() == []
        right.close()
        with anyio.fail_after(5):
            assert await held.wait() == [(fd, "stdin")]
    finally:
        held.close()
