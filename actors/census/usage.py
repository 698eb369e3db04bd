"""What one server tree holds at one sweep: memory, CPU, descriptors, its members."""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass

from supervisor.policy.incarnation import same_incarnation
from supervisor.policy.servers.census import ProcessRef, Usage
from supervisor.policy.servers.summary import cpu_percent
from supervisor.system.proc_reads import clock_ticks, page_size, pss_bytes, read_usage

__all__ = ["TreeRead", "descendants", "read_tree", "tree_pss"]

#: A tree deeper or wider than this is cut (a fork bomb must not stall the sweep).
_MAX_MEMBERS = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeRead:
    """One read of a tree: its usage and the leader's CPU ticks plus its members' (kept for
    the next read's CPU%). ``leader_ppid``: the leader's parent now."""

    usage: Usage
    cpu_ticks: int
    leader_ppid: int


def descendants(leader: int, kids: Mapping[int, set[int]], known: Container[int]) -> list[int]:
    """The pids below ``leader`` in the parent links, each a ``known`` process (leader
    excluded), breadth first."""
    found: list[int] = []
    queue = [leader]
    seen = {leader}
    while queue and len(found) < _MAX_MEMBERS:
        parent = queue.pop(0)
        for child in sorted(kids.get(parent, ())):
            if child not in seen and child in known:
                seen.add(child)
                found.append(child)
                queue.append(child)
    return found[:_MAX_MEMBERS]


def read_tree(
    leader: ProcessRef,
    members: Sequence[ProcessRef],
    *,
    previous_ticks: int | None,
    elapsed: float,
    read_io: Callable[[int, str], int | None] | None = None,
) -> TreeRead | None:
    """The tree's usage now; None when the leader is gone (or another process has its pid).

    Members that exited or changed hands since they were listed are left out. PSS is not
    read here (``tree_pss``: it costs the kernel a walk of every page table).
    """
    head = read_usage(leader.pid)
    if head is None or not same_incarnation(head.stat.start, leader.start):
        return None
    reads = [head]
    kept: list[ProcessRef] = []
    for member in members:
        got = read_usage(member.pid)
        if got is not None and same_incarnation(got.stat.start, member.start):
            reads.append(got)
            kept.append(member)
    ticks = sum(r.stat.cpu_ticks for r in reads)
    fds = [r.open_fds for r in reads]
    io = [read_io(ref.pid, ref.start) for ref in (leader, *kept)] if read_io else [None]
    per_second = clock_ticks()
    before = previous_ticks / per_second if previous_ticks is not None else None
    usage = Usage(
        rss_bytes=sum(r.stat.rss_pages for r in reads) * page_size(),
        pss_bytes=None,
        cpu_seconds=round(ticks / per_second, 2),
        cpu_percent=cpu_percent(before, ticks / per_second, elapsed),
        open_fds=sum(f for f in fds if f is not None) if None not in fds else None,
        children=tuple(kept),
        io_bytes=sum(b for b in io if b is not None) if None not in io else None,
    )
    return TreeRead(usage=usage, cpu_ticks=ticks, leader_ppid=head.stat.ppid)


def tree_pss(members: Sequence[int]) -> int | None:
    """The tree's PSS: the sum over its members, only when every one could be read."""
    total = 0
    for pid in members:
        pss = pss_bytes(pid)
        if pss is None:
            return None
        total += pss
    return total
