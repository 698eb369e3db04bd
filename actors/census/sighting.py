"""A first sight turned into discovery's evidence: the process, its parent, where its stdio goes."""

from __future__ import annotations

from collections.abc import Sequence

from supervisor.client_configs.entries import is_wrapped
from supervisor.policy.servers.abandoned import (
    STDIO_ABANDONED,
    Abandonment,
    EndState,
    judge_abandoned,
)
from supervisor.policy.servers.census import ProcessRef
from supervisor.policy.servers.discovery import ParentSight, Sighting
from supervisor.system.pipe_ends import probe_pipe
from supervisor.system.proc_reads import (
    NULL_DEVICE,
    FullRead,
    fd_ends,
    fd_links,
    marker_names_self,
    read_stat_facts,
)
from supervisor.system.process_tree import client_argv
from supervisor.system.unix_diag import UnixPeers

__all__ = [
    "Wire",
    "exec_wrapper",
    "link_inode",
    "link_kind",
    "moved_wire",
    "parent_sight",
    "sighting",
    "stdio_abandoned",
    "stdio_connected",
    "stdio_moved",
    "stdio_wire",
]

#: The descriptors that carry a server's stdio, as links (``pipe:[n]``, ``socket:[n]``).
Wire = tuple[str | None, ...]


def exec_wrapper(argv: Sequence[str]) -> bool:
    """The exec wrapper itself, before its ``execve`` into the server it wraps (its script,
    or ``fleet-supervisor exec`` as its interpreter runs it): a moment in a wrapped server's
    start, never a server of its own. Same pid, same start after the exec, so a sight taken
    now would stand for the server unless it is taken again."""
    # The client-file check of a wrapped entry, read from the command or, under an
    # interpreter, from its script.
    return any(is_wrapped(argv[i], list(argv[i + 1 :])) for i in range(min(2, len(argv))))


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


def link_inode(link: str) -> int | None:
    """The inode of a ``socket:[n]`` (or ``pipe:[n]``) link, else None."""
    raw = link[link.find("[") + 1 : link.rfind("]")]
    return int(raw) if raw.isdigit() else None


def stdio_connected(
    links: tuple[str | None, ...], ends: frozenset[str] | None, peers: UnixPeers
) -> bool | None:
    """Whether another process's descriptors (``ends``, from ``fd_ends``) hold the other
    end of every link: the same pipe (both ends share its inode), or the peer of a socket
    (a socket pair's halves have inodes of their own; the kernel names the peer). None
    when the descriptors could not be read, or there are no links to judge."""
    if ends is None or not links:
        return None
    for link in links:
        if link is None:
            return False
        if link.startswith("pipe:"):
            if link not in ends:
                return False
            continue
        inode = link_inode(link) if link.startswith("socket:") else None
        peer = peers.peer(inode) if inode is not None else None
        if peer is None or f"socket:[{peer}]" not in ends:
            return False
    return True


def stdio_moved(full: FullRead) -> bool:
    """Whether the process may have moved its stdio off fd 0 and fd 1.

    The MCP Python SDK (v2) does: its stdio server keeps the wire on private copies above
    fd 2 and points fd 0 at /dev/null (and fd 1 at a copy of stderr), so that a stray
    print cannot corrupt the protocol. Such a server's wire is found by its other ends.
    """
    return full.stdin == NULL_DEVICE


def moved_wire(links: dict[int, str] | None, ends: frozenset[str] | None, peers: UnixPeers) -> Wire:
    """Those of a process's pipes and sockets above fd 2 (``links``, from ``fd_links``)
    whose other end another process's descriptors (``ends``) hold: a moved stdio's wire.
    Empty when either side could not be read, or fewer than two are found: a moved stdio
    is two descriptors (stdin's copy and stdout's), and one alone to that process is a
    control channel, such as node's IPC to a relaunched self."""
    if links is None or ends is None:
        return ()
    wire = tuple(
        link
        for fd, link in sorted(links.items())
        if fd > 2 and stdio_connected((link,), ends, peers)
    )
    return wire if len(wire) >= 2 else ()


def stdio_abandoned(pid: int, links: Wire, peers: UnixPeers) -> Abandonment:
    """Whether no process holds the other end of any of ``pid``'s stdio ``links``: a
    socket's peer released (sock_diag), a pipe with no write end left for fd 0 and no read
    end left for fd 1 (``system.pipe_ends``, through ``pid``'s own descriptors 0 and 1;
    the probe checks that they still are these pipes). Anything else keeps it."""
    ends = []
    for fd, link in enumerate(links):
        if link is not None and link.startswith("pipe:"):
            probe = probe_pipe(pid, fd, link)
            ends.append(EndState(link=link, released=probe.released, why=probe.why))
            continue
        inode = link_inode(link) if link is not None and link.startswith("socket:") else None
        closed = peers.peer_closed(inode) if inode is not None else None
        why = {
            True: "its peer is released",
            False: "its peer is open",
            None: "the kernel does not say whether its other end is held",
        }[closed]
        ends.append(EndState(link=link, released=closed, why=why))
    return judge_abandoned(ends)


def sighting(
    pid: int, full: FullRead, wire: Wire | None = None, *, abandoned: Abandonment | None = None
) -> Sighting:
    """``wire``: a moved stdio's descriptors (see ``stdio_moved``); their kinds stand for
    fd 0 and fd 1, and none found leaves the stdio at /dev/null. ``abandoned``: see
    ``stdio_abandoned``."""
    start = full.stat.start
    stdin, stdout = full.stdin, full.stdout
    if wire:
        stdin, stdout = wire[0], wire[-1]
    return Sighting(
        process=ProcessRef(pid=pid, start=start),
        ppid=full.stat.ppid,
        argv=full.argv,
        comm=full.stat.comm,
        env_keys=full.env_keys,
        stdin=link_kind(stdin),
        stdout=link_kind(stdout),
        wrapped=marker_names_self(full.marker, pid, start),
        moved=bool(wire),
        abandoned=abandoned is not None and abandoned.abandoned,
        abandoned_via=(abandoned.evidence if abandoned and abandoned.evidence else STDIO_ABANDONED),
    )


def stdio_wire(
    pid: int, stdin: str | None, stdout: str | None, ends: frozenset[str] | None, peers: UnixPeers
) -> Wire:
    """The descriptors that carry a process's stdio: fd 0 and fd 1 (their links ``stdin``
    and ``stdout``), or, when fd 0 is /dev/null (``stdio_moved``), its descriptors above
    fd 2 whose other ends ``ends`` (the client's descriptors) hold."""
    if stdin != NULL_DEVICE:
        return (stdin, stdout)
    return () if ends is None else moved_wire(fd_links(pid), ends, peers)


def parent_sight(pid: int, child: FullRead, peers: UnixPeers) -> tuple[ParentSight | None, Wire]:
    """The child's parent as it is now, with whether it holds the child's stdio, and the
    child's wire (``stdio_wire`` with the parent's descriptors). The parent is None when
    it is gone (or changed hands while it was read)."""
    ppid = child.stat.ppid
    stat = read_stat_facts(ppid) if ppid > 0 else None
    if stat is None or not stat.running:
        return None, stdio_wire(pid, child.stdin, child.stdout, None, peers)
    argv = tuple(client_argv(ppid))
    ends = fd_ends(ppid)
    again = read_stat_facts(ppid)
    if again is None or again.start != stat.start:
        return None, stdio_wire(pid, child.stdin, child.stdout, None, peers)
    wire = stdio_wire(pid, child.stdin, child.stdout, ends, peers)
    parent = ParentSight(
        process=ProcessRef(pid=ppid, start=stat.start),
        argv=argv,
        comm=stat.comm,
        # A moved stdio with no wire to this parent is not connected to it.
        connected=stdio_connected(wire, ends, peers) if wire or ends is None else False,
    )
    return parent, wire
