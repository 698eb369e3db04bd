"""Stopping a server tree on virtual time: SIGTERM, the grace, SIGKILL, verified signals only."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import pytest

from actors.server_guard.stopping import StopOutcome, TreeOps, stop_tree
from supervisor.clock import FakeClock
from supervisor.system.process_tree import Member

pytestmark = pytest.mark.anyio

LEADER = 100
LEADER_START = "ticks-5000"
GRACE = 5.0
KILL_WAIT = 3.0
POLL = 0.25


@dataclass(slots=True)
class Proc:
    """One scripted process: what it does with each signal."""

    pid: int
    start: str = "ticks-5000"
    #: Seconds after SIGTERM it exits; None: it ignores SIGTERM.
    term_exit_after: float | None = 0.0
    #: False: even SIGKILL leaves it (a process stuck in the kernel, uninterruptible).
    killable: bool = True
    #: The pid now names another incarnation: every signal to this one is refused.
    replaced: bool = False
    #: Processes it starts when it gets SIGTERM (a shutdown hook spawning a helper).
    spawns_on_term: tuple[Proc, ...] = ()
    exits_at: float | None = None


@dataclass(slots=True)
class ScriptedTree:
    """A ``TreeOps`` over scripted processes; every attempted signal is logged with its time."""

    clock: FakeClock
    procs: dict[int, Proc]
    attempts: list[tuple[float, int, str, bool]] = field(default_factory=list)
    member_reads: int = 0

    def _alive(self, proc: Proc) -> bool:
        return proc.exits_at is None or self.clock.monotonic() < proc.exits_at

    def members(
        self,
        leader_pid: int,
        leader_start: str,
        *,
        uid: int | None = None,
        cgroup: str | None = None,
    ) -> Sequence[Member]:
        assert (leader_pid, leader_start) == (LEADER, LEADER_START)
        self.member_reads += 1
        return [
            Member(pid=p.pid, start=p.start)
            for p in sorted(self.procs.values(), key=lambda p: p.pid)
            if self._alive(p) and not p.replaced
        ]

    def signal(self, member: Member, signum: int) -> bool:
        proc = self.procs[member.pid]
        delivered = not proc.replaced and member.start == proc.start and self._alive(proc)
        now = self.clock.monotonic()
        self.attempts.append((now, member.pid, signal.Signals(signum).name, delivered))
        if not delivered:
            return False
        if signum == signal.SIGTERM:
            if proc.term_exit_after is not None:
                proc.exits_at = now + proc.term_exit_after
            for child in proc.spawns_on_term:
                self.procs[child.pid] = child
        elif signum == signal.SIGKILL and proc.killable:
            proc.exits_at = now
        return True

    def sent(self, pid: int) -> list[tuple[float, str]]:
        return [(at, name) for at, p, name, ok in self.attempts if p == pid and ok]


async def _stop(tree: TreeOps, clock: FakeClock, *, advance: float) -> tuple[StopOutcome, float]:
    """Run ``stop_tree`` while virtual time moves on by ``advance``; (outcome, finished at)."""
    result: list[tuple[StopOutcome, float]] = []

    async def stop() -> None:
        outcome = await stop_tree(
            LEADER, LEADER_START, ops=tree, clock=clock, grace=GRACE, kill_wait=KILL_WAIT, poll=POLL
        )
        result.append((outcome, clock.monotonic()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop)
        await clock.advance(advance)
    (done,) = result
    return done


async def _stop_with(
    tree: ScriptedTree, clock: FakeClock, *, grace: float, poll: float
) -> StopOutcome:
    result: list[StopOutcome] = []

    async def stop() -> None:
        result.append(
            await stop_tree(
                LEADER, LEADER_START, ops=tree, clock=clock, grace=grace, kill_wait=1.0, poll=poll
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop)
        await clock.advance(grace + 10)
    return result[0]


def _tree(clock: FakeClock, *procs: Proc) -> ScriptedTree:
    return ScriptedTree(clock=clock, procs={p.pid: p for p in procs})


async def test_a_polite_tree_gets_only_sigterm_and_is_gone_at_once() -> None:
    clock = FakeClock()
    began = clock.monotonic()
    tree = _tree(clock, Proc(LEADER), Proc(101), Proc(102))
    outcome, finished = await _stop(tree, clock, advance=GRACE + KILL_WAIT + 10)
    assert outcome.gone
    assert outcome.pids == [LEADER, 101, 102]
    assert outcome.signals == {LEADER: ["SIGTERM"], 101: ["SIGTERM"], 102: ["SIGTERM"]}
    assert [name for _, _, name, _ in tree.attempts] == ["SIGTERM"] * 3
    assert finished == began  # nothing to wait for: no virtual time passed


async def test_a_tree_that_takes_a_while_is_waited_for_within_the_grace() -> None:
    clock = FakeClock()
    began = clock.monotonic()
    tree = _tree(clock, Proc(LEADER, term_exit_after=1.0), Proc(101, term_exit_after=GRACE - POLL))
    outcome, finished = await _stop(tree, clock, advance=GRACE + KILL_WAIT + 10)
    assert outcome.gone
    assert outcome.signals == {LEADER: ["SIGTERM"], 101: ["SIGTERM"]}
    # Seen gone at the first poll after the last exit, before the grace ran out.
    assert finished == began + GRACE - POLL


async def test_a_stubborn_member_is_killed_exactly_when_the_grace_ends() -> None:
    clock = FakeClock()
    began = clock.monotonic()
    tree = _tree(clock, Proc(LEADER), Proc(101, term_exit_after=None))
    outcome, finished = await _stop(tree, clock, advance=GRACE + KILL_WAIT + 10)
    assert outcome.gone
    assert outcome.signals == {LEADER: ["SIGTERM"], 101: ["SIGTERM", "SIGKILL"]}
    assert tree.sent(LEADER) == [(began, "SIGTERM")]
    assert tree.sent(101) == [(began, "SIGTERM"), (began + GRACE, "SIGKILL")]
    assert finished == began + GRACE


async def test_a_grace_that_is_not_a_multiple_of_the_poll_still_ends_on_time() -> None:
    clock = FakeClock()
    began = clock.monotonic()
    tree = _tree(clock, Proc(LEADER, term_exit_after=None))
    outcome = await _stop_with(tree, clock, grace=1.1, poll=0.25)
    assert outcome.gone
    assert tree.sent(LEADER) == [(began, "SIGTERM"), (began + 1.1, "SIGKILL")]


async def test_a_member_that_appears_after_sigterm_is_killed_too() -> None:
    clock = FakeClock()
    began = clock.monotonic()
    late = Proc(103, term_exit_after=None)
    tree = _tree(clock, Proc(LEADER, term_exit_after=None, spawns_on_term=(late,)), Proc(101))
    outcome, _ = await _stop(tree, clock, advance=GRACE + KILL_WAIT + 10)
    assert outcome.gone
    assert outcome.signals == {LEADER: ["SIGTERM", "SIGKILL"], 101: ["SIGTERM"], 103: ["SIGKILL"]}
    assert tree.sent(103) == [(began + GRACE, "SIGKILL")]
    # The pids recorded are those the stop started with.
    assert outcome.pids == [LEADER, 101]


async def test_an_unkillable_member_leaves_the_tree_not_gone() -> None:
    clock = FakeClock()
    began = clock.monotonic()
    tree = _tree(clock, Proc(LEADER), Proc(101, term_exit_after=None, killable=False))
    outcome, finished = await _stop(tree, clock, advance=GRACE + KILL_WAIT + 10)
    assert not outcome.gone
    assert outcome.signals == {LEADER: ["SIGTERM"], 101: ["SIGTERM", "SIGKILL"]}
    # One SIGKILL only, then the kill wait, then the verdict: no signal loop.
    assert [name for _, pid, name, _ in tree.attempts if pid == 101] == ["SIGTERM", "SIGKILL"]
    assert finished == began + GRACE + KILL_WAIT


async def test_a_member_whose_incarnation_changed_is_not_recorded_as_signalled() -> None:
    clock = FakeClock()
    began = clock.monotonic()
    replaced = Proc(101)
    tree = _tree(clock, Proc(LEADER), replaced)
    # Listed as a member, then its pid passes to another process before the signal.
    listed = tree.members(LEADER, LEADER_START)
    assert Member(pid=101, start="ticks-5000") in listed

    class ReplacedAfterListing:
        def members(
            self,
            leader_pid: int,
            leader_start: str,
            *,
            uid: int | None = None,
            cgroup: str | None = None,
        ) -> Sequence[Member]:
            found = tree.members(leader_pid, leader_start)
            replaced.replaced = True
            return found

        def signal(self, member: Member, signum: int) -> bool:
            return tree.signal(member, signum)

    outcome, _ = await _stop(ReplacedAfterListing(), clock, advance=GRACE + KILL_WAIT + 10)
    assert outcome.gone
    assert outcome.pids == [LEADER, 101]
    assert outcome.signals == {LEADER: ["SIGTERM"]}
    assert (began, 101, "SIGTERM", False) in tree.attempts


async def test_a_tree_already_gone_is_gone_without_a_signal() -> None:
    clock = FakeClock()
    tree = _tree(clock)
    outcome, _ = await _stop(tree, clock, advance=1.0)
    assert outcome.gone
    assert outcome.pids == []
    assert outcome.signals == {}
    assert tree.attempts == []


async def test_polling_is_bounded_by_the_poll_interval() -> None:
    clock = FakeClock()
    tree = _tree(clock, Proc(LEADER, term_exit_after=None, killable=False))
    outcome, _ = await _stop(tree, clock, advance=GRACE + KILL_WAIT + 10)
    assert not outcome.gone
    # One read to start, then per phase one read after the signals and one per poll: no
    # busy loop, however long the grace.
    assert tree.member_reads == 1 + (1 + round(GRACE / POLL)) + (1 + round(KILL_WAIT / POLL))
