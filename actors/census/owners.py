"""Each sweep's word on whose a server is: its owner's incarnation and stdio, or nobody's."""

from __future__ import annotations

from dataclasses import replace

from actors.census.sighting import stdio_abandoned, stdio_connected
from actors.census.tracked import Tracked
from supervisor.policy.incarnation import same_incarnation
from supervisor.policy.servers.census import ProcessRef
from supervisor.system.proc_census import fd_ends
from supervisor.system.unix_diag import UnixPeers

__all__ = ["judge_owner", "judge_unowned"]


def judge_unowned(tracked: Tracked, peers: UnixPeers) -> None:
    """A server with no owner recorded: whether the kernel says no process holds the
    other end of any of its stdio (sockets and pipes), and why in words."""
    found = stdio_abandoned(tracked.process.pid, tracked.stdio, peers)
    tracked.server = replace(
        tracked.server, stdio_abandoned=found.abandoned, stdio_detail=found.detail
    )


def judge_owner(
    tracked: Tracked,
    stamp: str,
    ends: dict[ProcessRef, frozenset[str] | None],
    peers: UnixPeers,
    *,
    start: str | None,
    listed: bool,
    complete: bool,
) -> None:
    """The owner's incarnation by pid and start (never by the server's parent pid), and
    whether it still holds the server's stdio. ``start``: the start of the process the
    sweep listed under the owner's pid (None: none, or not read); ``listed``: the pid was
    listed; ``complete``: the listing shows every process (a missing pid is gone).
    ``ends`` caches each live owner's descriptors for the sweep."""
    owner = tracked.server.owner
    if owner is None:
        return
    ref = owner.process
    alive: bool | None
    if listed and start is not None:
        alive = same_incarnation(start, ref.start)
    elif not listed:
        alive = False if complete else None
    else:
        alive = None
    stdio_open: bool | None = None
    if alive is False:
        stdio_open = False
        tracked.owner_gone_at = tracked.owner_gone_at or stamp
    elif alive:
        if ref not in ends:
            ends[ref] = fd_ends(ref.pid)
        stdio_open = stdio_connected(tracked.stdio, ends[ref], peers)
    tracked.server = replace(
        tracked.server, owner=replace(owner, alive=alive, stdio_open=stdio_open)
    )
