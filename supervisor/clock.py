"""Time for the supervisor: the Clock protocol, the real clock, a virtual clock, monotonic wall."""

from __future__ import annotations

import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

import anyio
import anyio.lowlevel

__all__ = ["Clock", "FakeClock", "MonotonicWall", "SystemClock"]

# Chains of wakeups (A wakes, sends to B, B replies to C) settle within a few
# plain yields. Yielding first means `wait_all_tasks_blocked` usually finds
# every task already blocked; on asyncio it otherwise polls in 0.1 s real
# sleeps, which would turn a virtual hour of actor traffic into minutes.
_SETTLE_YIELDS = 8

_DEFAULT_WALL = datetime(2025, 1, 1, tzinfo=UTC)


class Clock(Protocol):
    """What every actor uses for protocol time, so tests can substitute virtual time."""

    def now(self) -> datetime:
        """Aware UTC wall-clock time."""
        ...

    def monotonic(self) -> float:
        """Seconds on a scale that never goes backwards; only differences are meaningful."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Sleep until `monotonic()` reaches `deadline`."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Sleep for `seconds` on the monotonic scale."""
        ...


class SystemClock:
    """The real clock: the OS monotonic clock, the OS wall clock, anyio sleeps."""

    __slots__ = ()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep_until(self, deadline: float) -> None:
        # anyio.sleep_until uses the event loop's clock, which on some backends
        # has a different origin than time.monotonic; convert to a duration.
        await anyio.sleep(max(0.0, deadline - time.monotonic()))

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(max(0.0, seconds))


class _Sleeper:
    """One task waiting on a FakeClock deadline; mutable because it is woken or abandoned."""

    __slots__ = ("done", "event")

    def __init__(self) -> None:
        self.event = anyio.Event()
        # True once it has left the queue's live count (woken or cancelled),
        # so the count is decremented exactly once.
        self.done = False


class FakeClock:
    """Virtual time for tests: nothing moves until `advance()` is awaited."""

    def __init__(self, *, wall: datetime | None = None, monotonic: float = 1_000.0) -> None:
        if wall is None:
            wall = _DEFAULT_WALL
        elif wall.tzinfo is None or wall.utcoffset() is None:
            raise ValueError("FakeClock wall time must be timezone-aware")
        self._mono = float(monotonic)
        # Wall time is derived from one base pair rather than accumulated per
        # step, so many small advances cannot drift by microsecond rounding.
        self._wall_base = wall.astimezone(UTC)
        self._mono_base = self._mono
        # Entries are (deadline, sequence, sleeper); the unique sequence breaks
        # ties in registration order and keeps sleepers out of comparisons.
        self._heap: list[tuple[float, int, _Sleeper]] = []
        self._sequence = itertools.count()
        self._pending = 0
        self._advancing = False

    def now(self) -> datetime:
        return self._wall_base + timedelta(seconds=self._mono - self._mono_base)

    def monotonic(self) -> float:
        return self._mono

    @property
    def pending_sleepers(self) -> int:
        """Number of tasks currently waiting on a deadline."""
        return self._pending

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self._mono:
            # Still a checkpoint, so a loop of due sleeps cannot starve the loop
            # and cancellation is honoured as with a real sleep.
            await anyio.lowlevel.checkpoint()
            return
        sleeper = _Sleeper()
        heapq.heappush(self._heap, (deadline, next(self._sequence), sleeper))
        self._pending += 1
        try:
            await sleeper.event.wait()
        finally:
            if not sleeper.done:
                # Cancelled before being woken: its heap entry is skipped when
                # popped (lazy deletion keeps cancellation O(1)).
                sleeper.done = True
                self._pending -= 1
                self._compact_if_mostly_dead()

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self._mono + max(0.0, seconds))

    async def advance(self, seconds: float) -> None:
        """Move virtual time forward, waking due sleepers one at a time in deadline order.

        Sleepers registered while advancing (a periodic task going back to
        sleep) are woken too when their deadline is within the target.
        """
        if seconds < 0:
            raise ValueError("cannot advance a clock backwards")
        if self._advancing:
            raise RuntimeError("FakeClock.advance() is already running")
        self._advancing = True
        try:
            # Tasks started just before this call get to register their sleeps.
            await self._settle()
            target = self._mono + seconds
            while (sleeper := self._pop_due(target)) is not None:
                sleeper.event.set()
                await self._settle()
            self._mono = target
            await self._settle()
        finally:
            self._advancing = False

    def step_wall(self, seconds: float) -> None:
        """Jump only the wall clock, as an NTP step would; monotonic time and sleepers stay."""
        self._wall_base += timedelta(seconds=seconds)

    def _pop_due(self, target: float) -> _Sleeper | None:
        """Remove the earliest live sleeper due by `target`, moving time to its deadline."""
        while self._heap and self._heap[0][0] <= target:
            deadline, _, sleeper = heapq.heappop(self._heap)
            if sleeper.done:
                continue
            sleeper.done = True
            self._pending -= 1
            # Never backwards: every live deadline was in the future when it
            # was registered, and entries leave the heap in deadline order.
            self._mono = deadline
            return sleeper
        return None

    def _compact_if_mostly_dead(self) -> None:
        # Bounds memory when many sleepers with far deadlines are cancelled
        # (actor restarts, shutdown) and never reach the top of the heap.
        if len(self._heap) > 64 and self._pending * 2 < len(self._heap):
            self._heap = [entry for entry in self._heap if not entry[2].done]
            heapq.heapify(self._heap)

    @staticmethod
    async def _settle() -> None:
        for _ in range(_SETTLE_YIELDS):
            await anyio.lowlevel.checkpoint()
        await anyio.wait_all_tasks_blocked()


class MonotonicWall:
    """Protocol time: a wall clock that advances with the monotonic clock from one anchor.

    Liveness and staleness inside the process must not flip when the OS wall
    clock is stepped (NTP, an operator's `date -s`), so stamps the supervisor
    writes and compares come from here: wall time read once at construction,
    then moved only by monotonic time.
    """

    __slots__ = ("_anchor_mono", "_anchor_wall", "_clock")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._anchor_wall = clock.now()
        self._anchor_mono = clock.monotonic()

    def now(self) -> datetime:
        return self._anchor_wall + timedelta(seconds=self._clock.monotonic() - self._anchor_mono)

    def monotonic(self) -> float:
        return self._clock.monotonic()

    async def sleep_until(self, deadline: float) -> None:
        await self._clock.sleep_until(deadline)

    async def sleep(self, seconds: float) -> None:
        await self._clock.sleep(seconds)
