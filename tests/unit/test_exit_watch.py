"""The epoll exit-watch set: readable descriptors report their keys once, and are closed."""

from __future__ import annotations

import os
import sys

import anyio
import pytest

from supervisor.system.exit_watch import ExitWatchSet, exit_watch_supported
from tests.descriptors import is_closed

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not exit_watch_supported(), reason="epoll is Linux-only"),
]


async def test_an_exit_reports_its_key_once_and_closes_the_descriptor() -> None:
    watches = ExitWatchSet()
    try:
        reader_a, writer_a = os.pipe()
        reader_b, writer_b = os.pipe()
        watches.add("a", reader_a)
        watches.add("b", reader_b)
        assert len(watches) == 2
        os.close(writer_a)  # a pipe's read end turns readable at EOF, like a pidfd at exit
        with anyio.fail_after(5):  # hang guard only
            assert await watches.exited() == ["a"]
        assert "a" not in watches
        assert "b" in watches
        assert is_closed(reader_a)
        os.close(writer_b)
    finally:
        watches.close()
    assert is_closed(reader_b)


async def test_a_member_added_while_waiting_wakes_the_waiter() -> None:
    watches = ExitWatchSet()
    try:
        found: list[str] = []

        async def wait() -> None:
            found.extend(await watches.exited())

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                reader, writer = os.pipe()
                watches.add("late", reader)
                os.close(writer)
        assert found == ["late"]
    finally:
        watches.close()


async def test_discard_closes_and_forgets() -> None:
    watches = ExitWatchSet()
    reader, writer = os.pipe()
    try:
        watches.add("x", reader)
        watches.discard("x")
        watches.discard("never-added")
        assert len(watches) == 0
        assert is_closed(reader)
    finally:
        os.close(writer)
        watches.close()


async def test_pending_names_every_readable_member_and_consumes_nothing() -> None:
    watches = ExitWatchSet()
    writers: list[int] = []
    try:
        assert watches.pending() == frozenset()
        # More members than epoll's default batch (FD_SETSIZE - 1), all readable at once.
        for index in range(1100):
            reader, writer = os.pipe()
            watches.add(f"k{index}", reader)
            writers.append(writer)
        assert watches.pending() == frozenset()
        for writer in writers[1:]:
            os.close(writer)
        expected = frozenset(f"k{index}" for index in range(1, 1100))
        assert watches.pending() == expected
        assert watches.pending() == expected  # level-triggered: still there
        with anyio.fail_after(5):  # hang guard only
            assert set(await watches.exited()) <= expected
        assert "k0" in watches
        assert "k0" not in watches.pending()
    finally:
        os.close(writers[0])
        watches.close()


def test_platform_flag_matches_linux() -> None:
    assert exit_watch_supported() == sys.platform.startswith("linux")
