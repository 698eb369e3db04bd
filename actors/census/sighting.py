"""A first sight turned into discovery's evidence: the process, its parent, where its stdio goes."""

from __future__ import annotations

from supervisor.policy.servers.census import ProcessRef
from supervisor.policy.servers.discovery import ParentSight, Sighting
from supervisor.system.proc_census import (
    FullRead,
    fd_ends,
    marker_names_self,
    read_stat_facts,
)
from supervisor.system.process_tree import client_argv
from supervisor.system.unix_diag import UnixPeers

__all__ = ["link_kind", "parent_sight", "sighting", "stdio_connected"]


def link_kind(link: str | None) -> str | None:
    """What a descriptor's link names: ``pipe``, ``socket``, ``tty``, ``null``, ``file``."""
    if link is None:
        return None
    if link.startswith("pipe:"):
        return "pipe"
    if link.startswith("socket:"):
        return "socket"
    if link == "/dev/null":
        return "null"
    if link.startswith(("/dev/pts/", "/dev/tty", "/dev/console")):
        return "tty"
    if link.startswith("anon_inode:"):
        return "anon"
    return "file"


def _inode(link: str) -> int | None:
    raw = link[link.find("[") + 1 : link.rfind("]")]
    return int(raw) if raw.isdigit() else None


def stdio_connected(
    links: tuple[str | None, ...], ends: frozenset[str] | None, peers: UnixPeers
) -> bool | None:
    """Whether another process's descriptors (``ends``, from ``fd_ends``) hold the other
    end of every link: the same pipe (both ends share its inode), or the peer of a socket
    (a socket pair's halves have inodes of their own; the kernel names the peer). None
    when the descriptors could not be read."""
    if ends is None:
        return None
    for link in links:
        if link is None:
            return False
        if link.startswith("pipe:"):
            if link not in ends:
                return False
            continue
        inode = _inode(link) if link.startswith("socket:") else None
        peer = peers.peer(inode) if inode is not None else None
        if peer is None or f"socket:[{peer}]" not in ends:
            return False
    return True


def sighting(pid: int, full: FullRead) -> Sighting:
    start = full.stat.start
    return Sighting(
        process=ProcessRef(pid=pid, start=start),
        ppid=full.stat.ppid,
        argv=full.argv,
        comm=full.stat.comm,
        env_keys=full.env_keys,
        stdin=link_kind(full.stdin),
        stdout=link_kind(full.stdout),
        wrapped=marker_names_self(full.marker, pid, start),
    )


def parent_sight(child: FullRead, peers: UnixPeers) -> ParentSight | None:
    """The child's parent as it is now, with whether it holds the child's stdio; None when
    it is gone (or changed hands while it was being read)."""
    ppid = child.stat.ppid
    stat = read_stat_facts(ppid) if ppid > 0 else None
    if stat is None or not stat.running:
        return None
    argv = tuple(client_argv(ppid))
    ends = fd_ends(ppid)
    again = read_stat_facts(ppid)
    if again is None or again.start != stat.start:
        return None
    return ParentSight(
        process=ProcessRef(pid=ppid, start=stat.start),
        argv=argv,
        comm=stat.comm,
        connected=stdio_connected((child.stdin, child.stdout), ends, peers),
    )
