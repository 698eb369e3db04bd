"""Each sweep's word on whose a server is: its owner's incarnation and stdio, or nobody's."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import replace

from actors.census.sighting import stdio_abandoned, stdio_connected
from actors.census.survivors import Seen
from actors.census.tracked import Tracked
from supervisor.policy.incarnation import same_incarnation
from supervisor.policy.servers.census import PROVENANCE_OBSERVED, ProcessRef
from supervisor.system.proc_reads import FullRead, fd_ends, read_full
from supervisor.system.unix_diag import UnixPeers

__all__ = ["judge_owner", "judge_unowned", "still_unowned"]


def still_unowned(unowned: dict[int, str], servers: Container[int]) -> list[tuple[int, FullRead]]:
    """The unowned candidates (pid -> start) still running as the same process and not
    servers, read in full to be judged anew; the rest are dropped from ``unowned``."""
    again = []
    for pid, start in list(unowned.items()):
        full = read_full(pid)
        if full is None or full.stat.start != start or pid in servers:
            del unowned[pid]
            continue
        again.append((pid, full))
    return again


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
    seen: Seen,
    listed: Container[int],
    complete: bool,
) -> None:
    """The owner's incarnation by pid and start (never by the server's parent pid), and
    whether it still holds the server's stdio; with no owner recorded, whether its stdio
    is abandoned (observed servers only). ``seen``: discovery's processes; ``listed``:
    the pids the sweep listed; ``complete``: the listing shows every process (a missing
    pid is gone). ``ends`` caches each live owner's descriptors for the sweep."""
    owner = tracked.server.owner
    if owner is None:
        if tracked.provenance == PROVENANCE_OBSERVED:
            judge_unowned(tracked, peers)
        return
    ref = owner.process
    entry = seen.get(ref.pid)
    alive: bool | None
    if ref.pid in listed and entry is not None:
        alive = same_incarnation(entry[1], ref.start)
    elif ref.pid not in listed:
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
