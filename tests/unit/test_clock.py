"""Tests for supervisor.clock: virtual time ordering, cancellation, wall steps, real clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import anyio
import pytest

from supervisor.clock import Clock, FakeClock, MonotonicWall, SystemClock

pytestmark = pytest.mark.anyio

START_WALL = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)


def _as_clock(clock: Clock) -> Clock:
    """Static check that each implementation satisfies the protocol."""
    return clock


async def test_implementations_satisfy_protocol() -> None:
    fake = FakeClock()
    for clock in (SystemClock(), fake, MonotonicWall(fake)):
        assert _as_clock(clock).now().tzinfo is not None


async def test_wakeups_follow_deadline_order_not_registration_order() -> None:
    clock = FakeClock(wall=START_WALL, monotonic=0.0)
    woke: list[tuple[str, float, datetime]] = []

    async def sleeper(name: str, deadline: float) -> None:
        await clock.sleep_until(deadline)
        woke.append((name, clock.monotonic(), clock.now()))

    async with anyio.create_task_group() as tg:
        for name, deadline in (("c", 30.0), ("a", 10.0), ("b", 20.0)):
            tg.start_soon(sleeper, name, deadline)
        await clock.advance(100)

    # Each sleeper sees time set to its own deadline, wall time moved alike.
    assert woke == [
        ("a", 10.0, START_WALL + timedelta(seconds=10)),
        ("b", 20.0, START_WALL + timedelta(seconds=20)),
        ("c", 30.0, START_WALL + timedelta(seconds=30)),
    ]
    assert clock.monotonic() == 100.0
    assert clock.now() == START_WALL + timedelta(seconds=100)


async def test_equal_deadlines_wake_in_registration_order() -> None:
    clock = FakeClock()
    woke: list[int] = []

    async def sleeper(index: int) -> None:
        await clock.sleep(5.0)
        woke.append(index)

    async with anyio.create_task_group() as tg:
        for index in range(20):
            tg.start_soon(sleeper, index)
            # Registration order is the order the tasks reach sleep_until.
            await anyio.wait_all_tasks_blocked()
        assert clock.pending_sleepers == 20
        await clock.advance(5.0)

    assert woke == list(range(20))


async def test_advance_stops_at_target_and_leaves_later_sleepers() -> None:
    clock = FakeClock(monotonic=0.0)
    woke: list[str] = []

    async def sleeper(name: str, deadline: float) -> None:
        await clock.sleep_until(deadline)
        woke.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper, "due", 5.0)
        tg.start_soon(sleeper, "at-target", 10.0)
        tg.start_soon(sleeper, "later", 10.5)
        await clock.advance(10.0)
        assert woke == ["due", "at-target"]
        assert clock.pending_sleepers == 1
        await clock.advance(0.5)

    assert woke == ["due", "at-target", "later"]


async def test_chain_of_tasks_settles_before_the_next_wake() -> None:
    clock = FakeClock(monotonic=0.0)
    requests, inbox = anyio.create_memory_object_stream[float](1)
    replies, reply_inbox = anyio.create_memory_object_stream[float](1)
    handled_at: list[float] = []

    async def periodic() -> None:
        for _ in range(10):
            await clock.sleep(1.0)
            await requests.send(clock.monotonic())
            await reply_inbox.receive()

    async def actor() -> None:
        async for sent_at in inbox:
            # Handled at the virtual instant it was sent: advance waited for
            # the whole hop chain before moving time to the next deadline.
            handled_at.append(clock.monotonic() - sent_at)
            await replies.send(sent_at)

    with requests, inbox, replies, reply_inbox:
        async with anyio.create_task_group() as tg:
            tg.start_soon(periodic)
            tg.start_soon(actor)
            await clock.advance(10.0)
            tg.cancel_scope.cancel()

    assert handled_at == [0.0] * 10


async def test_deadline_already_reached_returns_without_registering() -> None:
    clock = FakeClock(monotonic=50.0)
    await clock.sleep_until(50.0)
    await clock.sleep_until(10.0)
    await clock.sleep(0.0)
    await clock.sleep(-3.0)
    assert clock.pending_sleepers == 0
    assert clock.monotonic() == 50.0


async def test_cancelled_sleeper_is_removed_and_never_woken() -> None:
    clock = FakeClock(monotonic=0.0)
    woke: list[str] = []
    doomed = anyio.CancelScope()

    async def sleeper(name: str, deadline: float) -> None:
        await clock.sleep_until(deadline)
        woke.append(name)

    async def cancellable() -> None:
        with doomed:
            await sleeper("cancelled", 10.0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper, "kept", 20.0)
        tg.start_soon(cancellable)
        await anyio.wait_all_tasks_blocked()
        assert clock.pending_sleepers == 2

        doomed.cancel()
        await anyio.wait_all_tasks_blocked()
        assert clock.pending_sleepers == 1

        await clock.advance(30.0)

    assert woke == ["kept"]
    assert clock.pending_sleepers == 0


async def test_many_cancelled_sleepers_do_not_leak() -> None:
    clock = FakeClock(monotonic=0.0)
    async with anyio.create_task_group() as tg:
        for index in range(500):
            tg.start_soon(clock.sleep_until, 1_000.0 + index)
        await anyio.wait_all_tasks_blocked()
        assert clock.pending_sleepers == 500
        tg.cancel_scope.cancel()
    assert clock.pending_sleepers == 0
    # Nothing left to wake: advancing past every old deadline is a no-op.
    await clock.advance(2_000.0)
    assert clock.monotonic() == 2_000.0


async def test_step_wall_moves_only_now() -> None:
    clock = FakeClock(wall=START_WALL, monotonic=0.0)
    woke: list[str] = []

    async def sleeper() -> None:
        await clock.sleep_until(5.0)
        woke.append("woke")

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper)
        await anyio.wait_all_tasks_blocked()

        clock.step_wall(3_600.0)
        await anyio.wait_all_tasks_blocked()
        assert woke == []
        assert clock.pending_sleepers == 1
        assert clock.monotonic() == 0.0
        assert clock.now() == START_WALL + timedelta(hours=1)

        clock.step_wall(-7_200.0)
        assert clock.now() == START_WALL - timedelta(hours=1)

        await clock.advance(5.0)

    assert woke == ["woke"]
    assert clock.now() == START_WALL - timedelta(hours=1) + timedelta(seconds=5)


async def test_advance_rejects_negative_and_fake_clock_rejects_naive_wall() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError, match="backwards"):
        await clock.advance(-1.0)
    with pytest.raises(ValueError, match="timezone-aware"):
        FakeClock(wall=datetime(2030, 1, 1))


async def test_fake_clock_normalises_wall_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    clock = FakeClock(wall=datetime(2030, 1, 1, 14, 0, tzinfo=plus_two))
    assert clock.now() == datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    assert clock.now().utcoffset() == timedelta(0)


async def test_monotonic_wall_ignores_wall_steps() -> None:
    clock = FakeClock(wall=START_WALL)
    protocol_time = MonotonicWall(clock)
    assert protocol_time.now() == START_WALL

    clock.step_wall(-86_400.0)
    assert protocol_time.now() == START_WALL

    await clock.advance(90.0)
    assert protocol_time.now() == START_WALL + timedelta(seconds=90)
    assert protocol_time.monotonic() == clock.monotonic()


async def test_monotonic_wall_delegates_sleeping() -> None:
    clock = FakeClock(monotonic=0.0)
    protocol_time = MonotonicWall(clock)
    woke: list[float] = []

    async def sleeper() -> None:
        await protocol_time.sleep(3.0)
        woke.append(protocol_time.monotonic())
        await protocol_time.sleep_until(7.0)
        woke.append(protocol_time.monotonic())

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper)
        await clock.advance(10.0)

    assert woke == [3.0, 7.0]


async def test_system_clock_basic_sanity() -> None:
    clock = SystemClock()
    before = clock.monotonic()
    # A deadline in the past (and a non-positive duration) must return at once.
    await clock.sleep_until(before - 60.0)
    await clock.sleep(-1.0)
    assert clock.monotonic() >= before
    now = clock.now()
    assert now.utcoffset() == timedelta(0)
    assert abs(now - datetime.now(UTC)) < timedelta(minutes=1)


async def test_virtual_hour_of_periodic_work_runs_without_real_sleeps() -> None:
    clock = FakeClock()
    ticks = 0
    start = clock.monotonic()

    async def periodic() -> None:
        nonlocal ticks
        for _ in range(3_600):
            await clock.sleep(1.0)
            ticks += 1

    # Real sleeps would take an hour and trip the suite's timeout; how fast a virtual
    # hour runs is a speed figure, not something a test asserts on a loaded machine.
    async with anyio.create_task_group() as tg:
        tg.start_soon(periodic)
        await clock.advance(3_600.0)

    assert ticks == 3_600
    assert clock.monotonic() - start == 3_600.0
