"""Stopping one server tree: SIGTERM, a grace period, SIGKILL, each to a verified incarnation."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from supervisor.clock import Clock
from supervisor.system.process_tree import Member, find_members, signal_verified

__all__ = ["LocalTree", "StopOutcome", "TreeOps", "stop_tree"]


class TreeOps(Protocol):
    """The two things a stop does to the OS; tests swap in a scripted tree."""

    def members(
        self,
        leader_pid: int,
        leader_start: str,
        *,
        uid: int | None = None,
        cgroup: str | None = None,
    ) -> Sequence[Member]: ...

    def signal(self, member: Member, signum: int) -> bool: ...


class LocalTree:
    """This host's processes, read from ``/proc`` and signalled through pidfds."""

    # The OS functions themselves: their signatures are the protocol's (mypy checks).
    members = staticmethod(find_members)
    signal = staticmethod(signal_verified)


@dataclass(slots=True, kw_only=True)
class StopOutcome:
    """Whether the tree is gone, and every signal that was delivered, per pid."""

    gone: bool = False
    signals: dict[int, list[str]] = field(default_factory=dict)
    pids: list[int] = field(default_factory=list)

    def record(self, member: Member, signum: int) -> None:
        self.signals.setdefault(member.pid, []).append(signal.Signals(signum).name)


async def _wait_gone(
    members: Callable[[], Sequence[Member]], *, clock: Clock, until: float, poll: float
) -> Sequence[Member]:
    """The tree's members once none are left or ``until`` has come, read every ``poll``."""
    left = members()
    while left and clock.monotonic() < until:
        await clock.sleep(min(poll, max(until - clock.monotonic(), 0.0)))
        left = members()
    return left


async def stop_tree(
    leader_pid: int,
    leader_start: str,
    *,
    ops: TreeOps,
    clock: Clock,
    grace: float,
    kill_wait: float,
    poll: float,
    uid: int | None = None,
    cgroup: str | None = None,
) -> StopOutcome:
    """Stop every live process of the tree the server at ``leader_pid`` leads.

    SIGTERM to each, up to ``grace`` seconds for all to go, SIGKILL to what is left, up
    to ``kill_wait`` more seconds. Each signal goes through a pidfd checked against the
    member's start time at that moment: a pid reused in between is never signalled.
    """
    outcome = StopOutcome()
    read_members = partial(ops.members, leader_pid, leader_start, uid=uid, cgroup=cgroup)
    members = read_members()
    outcome.pids = sorted(m.pid for m in members)
    for signum, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
        if not members:
            break
        for member in members:
            if ops.signal(member, signum):
                outcome.record(member, signum)
        members = await _wait_gone(
            read_members, clock=clock, until=clock.monotonic() + wait, poll=poll
        )
    outcome.gone = not members
    return outcome
