"""Which members of a gone server's tree become servers, and which servers are inside another's."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping

from actors.census.tracked import Tracked, started_seconds
from actors.census.usage import descendants
from supervisor.policy.servers.census import ProcessRef

__all__ = ["MAX_DEPTH", "Seen", "members_seen", "nested_servers", "topmost_survivors"]

#: What discovery keeps of each process seen: /proc inode, start, parent pid, young.
Seen = Mapping[int, tuple[int, str, int, bool]]
#: Ancestors followed at most, from a server up to init.
MAX_DEPTH = 64


def members_seen(
    leader: ProcessRef, kids: Mapping[int, set[int]], seen: Seen
) -> tuple[ProcessRef, ...]:
    """The processes below ``leader`` by the parent links seen, each started after it:
    its tree's members as discovery knows them when no tree read was made."""
    began = started_seconds(leader.start)
    refs = []
    for pid in descendants(leader.pid, kids, seen):
        since = started_seconds(seen[pid][1])
        if began is not None and since is not None and since >= began:
            refs.append(ProcessRef(pid=pid, start=seen[pid][1]))
    return tuple(refs)


def topmost_survivors(
    gone: Tracked, seen: Seen, listed: Container[int], servers: Container[int]
) -> list[ProcessRef]:
    """The members of ``gone``'s tree still running as the same incarnation (by the
    latest tree read, or by the parent links seen when no tree was read before its leader
    went), not servers already, and not below another such member."""
    members = list(gone.server.usage.children)
    members += [m for m in gone.members_seen if m not in members]

    def runs(member: ProcessRef) -> bool:
        entry = seen.get(member.pid)
        return member.pid in listed and entry is not None and entry[1] == member.start

    running = {m.pid for m in members if runs(m)}
    return [
        m
        for m in members
        if m.pid in running and m.pid not in servers and seen[m.pid][2] not in running
    ]


def nested_servers(servers: Iterable[int], seen: Seen) -> list[int]:
    """The servers with another server among their ancestors: members of its tree."""
    leaders = set(servers)
    inside = []
    for pid in leaders:
        ancestor, depth = seen.get(pid, (0, "", 0, False))[2], 0
        while ancestor > 1 and depth < MAX_DEPTH:
            if ancestor in leaders and ancestor != pid:
                inside.append(pid)
                break
            ancestor = seen.get(ancestor, (0, "", 0, False))[2]
            depth += 1
    return inside
