"""Whether what survived a server's leader is out of its live client's reach.

A client talks to its server over the stdio it started the server with. When the client
stops the leader (a reconnect, ``/mcp``), a member of the tree can outlive it: the
browser a Playwright server started, in a session of its own, its stdin on /dev/null and
its only pipes to the leader that is gone. Its client still runs, so the owner's rule
keeps it, for days. It is out of reach when its tree holds nothing of that stdio, and
nothing connects it to anyone who could still use it: no end its owner holds, no Unix
socket it listens on, no connection from another server (a daemon shared with the newer
copy), no network socket (one cannot tell who is at the other end). Everything else, and
every descriptor that cannot be read, keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import Protocol

from actors.census.sighting import Wire, link_inode
from actors.census.tracked import SURVIVED_LEADER, Tracked
from supervisor.policy.servers.census import ProcessRef
from supervisor.system.pipe_ends import ACCESS_READ, fd_access
from supervisor.system.proc_reads import fd_ends, fd_links, netlink_sockets

__all__ = ["judge_survivors", "out_of_reach"]

Ends = dict[ProcessRef, frozenset[str] | None]
Reach = tuple[bool | None, str]
Links = Callable[[], frozenset[str] | None]
#: Whether the owner holds a pipe so that it can write into it (None: cannot tell).
Writes = Callable[[str], bool | None]


class Peers(Protocol):
    """What is asked of the kernel's sock_diag (system.unix_diag.UnixPeers)."""

    def listening(self, inode: int) -> bool | None: ...

    def peer(self, inode: int) -> int | None: ...


def _ends(refs: Iterable[ProcessRef], ends: Ends) -> frozenset[str] | None:
    """Every pipe and socket the processes hold (None when one's cannot be read)."""
    held: set[str] = set()
    for ref in refs:
        if ref not in ends:
            ends[ref] = fd_ends(ref.pid)
        found = ends[ref]
        if found is None:
            return None
        held |= found
    return frozenset(held)


def out_of_reach(
    held: frozenset[str] | None,
    leader_wire: Wire,
    owner: frozenset[str] | None,
    others: Links,
    peers: Peers,
    *,
    owner_writes: Writes,
    netlink: Links = netlink_sockets,
) -> Reach:
    """(True, why) when a survivor's tree (``held``: its pipes and sockets) is out of its
    owner's reach; (None, why not) otherwise. ``leader_wire``: the stdio the leader had;
    ``owner``: its owner's pipes and sockets (a pipe the owner only reads, such as the
    stderr it collects, carries nothing into the tree); ``others``: those of every other
    server's tree, read only when a connection leaves the tree; ``netlink``: the netlink
    sockets, read only for a socket sock_diag does not describe."""
    if not leader_wire:
        return None, "its server's stdio was not seen, so what is left of it cannot be told"
    if held is None or owner is None:
        return None, "the descriptors of its tree or of its owner could not be read"
    if held & set(leader_wire):
        return None, "its tree still holds an end of its server's stdio"
    for link in sorted(held & owner):
        if not link.startswith("pipe:") or owner_writes(link) is not False:
            return None, f"its owner holds {link}, through which it may be reached"
    lines: frozenset[str] | None = None
    outside: list[str] = [link for link in held if link.startswith("pipe:")]
    for link in sorted(link for link in held if link.startswith("socket:")):
        inode = link_inode(link)
        if inode is None or (listening := peers.listening(inode)) is None:
            lines = netlink() if lines is None else lines
            if lines is not None and link in lines:
                continue  # a line to the kernel, never to another process
            return None, f"{link} is no Unix socket the kernel describes (a network socket?)"
        if listening:
            return None, f"it listens on a Unix socket ({link}) that others may connect to"
        peer = peers.peer(inode)
        other = f"socket:[{peer}]" if peer is not None else None
        if other is not None and other not in held:
            if other in owner:
                return None, f"its owner is connected to it ({link})"
            outside.append(other)
    if outside:
        theirs = others()
        if theirs is None:
            return None, "the descriptors of another server's tree could not be read"
        if shared := sorted(set(outside) & theirs):
            return None, f"another server's tree is connected to it ({shared[0]})"
    return True, (
        "nothing of its server's stdio is left in its tree, and neither its owner nor "
        "another server is connected to it"
    )


def judge_survivors(servers: Sequence[Tracked], ends: Ends, peers: Peers) -> None:
    """Each survivor whose owner runs but holds none of its stdio: out of reach or not,
    and why (its record's ``stdio_abandoned`` and ``stdio_detail``). ``ends``: the
    sweep's cache of each process's pipes and sockets."""
    for tracked in servers:
        owner = tracked.server.owner
        if owner is None or not any(e.startswith(SURVIVED_LEADER) for e in tracked.server.evidence):
            continue
        found: Reach = (None, "")
        if owner.alive is True and owner.stdio_open is None:
            found = out_of_reach(
                _ends(_tree(tracked), ends),
                tracked.leader_wire,
                _ends([owner.process], ends),  # read by judge_owner this sweep
                partial(_others, servers, tracked, ends),
                peers,
                owner_writes=partial(_writes, owner.process.pid),
            )
        tracked.server = replace(
            tracked.server, stdio_abandoned=found[0], stdio_detail=found[1] or None
        )


def _tree(tracked: Tracked) -> tuple[ProcessRef, ...]:
    return (tracked.process, *tracked.server.usage.children)


def _writes(pid: int, link: str) -> bool | None:
    """Whether ``pid`` holds the pipe ``link`` other than read-only; None when its
    descriptors or their flags cannot be read (asked only of a pipe both hold)."""
    links = fd_links(pid)
    modes = [fd_access(pid, fd) for fd, held in (links or {}).items() if held == link]
    if links is None or not modes or None in modes:
        return None
    return any(mode != ACCESS_READ for mode in modes)


def _others(servers: Sequence[Tracked], but: Tracked, ends: Ends) -> frozenset[str] | None:
    return _ends((ref for s in servers if s is not but for ref in _tree(s)), ends)
