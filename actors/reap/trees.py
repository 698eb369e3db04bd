"""Reaping one planned tree: the planned processes only, each signalled as the incarnation
the plan named, SIGTERM, the grace, SIGKILL to what remains."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from actors.server_guard.stopping import stop_tree
from supervisor.clock import Clock
from supervisor.policy.incarnation import same_incarnation
from supervisor.policy.servers.census import ProcessRef
from supervisor.policy.servers.reap_plan import ReapEntry
from supervisor.policy.servers.reap_rules import (
    TARGET_EXITED,
    TARGET_PID_REUSED,
    TARGET_REAPED,
    TARGET_SURVIVED,
    before_signal,
)
from supervisor.system.pidfd import incarnation
from supervisor.system.process_tree import Member, signal_verified, stat_facts

__all__ = [
    "LocalProcesses",
    "ProcessOps",
    "TargetResult",
    "current_incarnation",
    "reap_target",
]


class ProcessOps(Protocol):
    """What a reap asks of the OS; tests swap in scripted processes."""

    def incarnation(self, pid: int) -> str | None:
        """The token of the process holding ``pid`` now, None when none runs there."""
        ...

    def signal(self, member: Member, signum: int) -> bool:
        """Send ``signum`` to exactly the incarnation ``member`` names (False: not sent)."""
        ...


def current_incarnation(pid: int) -> str | None:
    """``pid``'s incarnation token now (with its pidfd inode where the kernel has them),
    None when no running process has it (a zombie never runs again)."""
    facts = stat_facts(pid)
    if facts is None or not facts.running:
        return None
    return incarnation(pid, facts.start)


class LocalProcesses:
    """This host's processes: ``/proc`` and pidfds verified just before each signal."""

    incarnation = staticmethod(current_incarnation)
    signal = staticmethod(signal_verified)


def _still_planned(
    planned: Sequence[ProcessRef], ops: ProcessOps, *_leader: object, **_scope: object
) -> list[Member]:
    """The planned processes still running as the incarnation planned: the tree a stop
    sees (the plan named every member; nothing found since is ever added)."""
    found = []
    for ref in planned:
        now = ops.incarnation(ref.pid)
        if now is not None and same_incarnation(now, ref.start):
            found.append(Member(pid=ref.pid, start=ref.start))
    return found


class _PlannedTree:
    """``TreeOps`` over exactly the planned processes, signalled through ``ops``."""

    def __init__(self, planned: Sequence[ProcessRef], ops: ProcessOps) -> None:
        self.members = partial(_still_planned, tuple(planned), ops)
        self.signal = ops.signal


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetResult:
    """What became of one target: its outcome code, every signal delivered (by pid), whether
    its whole tree was seen gone, and the memory that went with it."""

    entry: ReapEntry
    outcome: str
    signals: Mapping[int, Sequence[str]] = field(default_factory=dict)
    exit_seen: bool = False
    rss_bytes_freed: int | None = None
    #: Planned members still running as planned after SIGKILL.
    survivors: tuple[int, ...] = ()


async def reap_target(
    entry: ReapEntry,
    *,
    ops: ProcessOps,
    clock: Clock,
    grace: float,
    kill_wait: float,
    poll: float,
) -> TargetResult:
    """Reap one target's tree, unless its leader's pid now holds another process: then
    nothing of the tree is signalled (``pid_reused``). A leader that exited on its own
    leaves its other planned members, which are still stopped (each verified)."""
    leader = entry.server.process
    verdict = before_signal(leader, ops.incarnation(leader.pid))
    if verdict == TARGET_PID_REUSED:
        return TargetResult(entry=entry, outcome=TARGET_PID_REUSED)
    tree = _PlannedTree(entry.members, ops)
    stopped = await stop_tree(
        leader.pid, leader.start, ops=tree, clock=clock, grace=grace, kill_wait=kill_wait, poll=poll
    )
    signals = {pid: tuple(names) for pid, names in stopped.signals.items()}
    if not stopped.gone:
        left = tuple(m.pid for m in tree.members())
        return TargetResult(entry=entry, outcome=TARGET_SURVIVED, signals=signals, survivors=left)
    exited = verdict == TARGET_EXITED and not signals
    return TargetResult(
        entry=entry,
        outcome=TARGET_EXITED if exited else TARGET_REAPED,
        signals=signals,
        exit_seen=True,
        rss_bytes_freed=entry.server.usage.rss_bytes,
    )
