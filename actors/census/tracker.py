"""Discovery's memory of the host: every process seen once, the servers among them, their trees.

A sweep lists ``/proc`` (with each entry's inode, which a new process under an old pid
never shares) and reads in full only the processes it has not seen: the rest cost a
dictionary lookup. A process young enough to be between its fork and its exec (or the
exec wrapper, until its exec) is looked at again at the next sweep; a server too, whose
record then takes what it runs now. Each sweep reads servers' trees and command lines.
Between sweeps, the processes that exec'd (``look_at``, from the kernel's events) or
appeared in a listing (``glance``) are looked at: an owner is recorded while it runs.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from itertools import islice
from typing import Any

import anyio.to_thread

from actors.census.owners import judge_owner, still_unowned
from actors.census.sighting import (
    Wire,
    exec_wrapper,
    link_kind,
    parent_sight,
    sighting,
    stdio_abandoned,
    stdio_moved,
)
from actors.census.survivors import members_seen, nested_servers, topmost_survivors
from actors.census.tracked import (
    Tracked,
    judged_server,
    reread,
    restored,
    started_seconds,
    survivor,
)
from actors.census.unreached import judge_survivors
from actors.census.usage import descendants, read_tree, tree_pss
from supervisor.policy.servers.census import PROVENANCE_OBSERVED, ProcessRef, ServerRecord
from supervisor.policy.servers.discovery import (
    STDIO_KINDS,
    ConfiguredServer,
    classify,
    configured_match,
    plain_argv,
)
from supervisor.policy.servers.rules import DiscoveryRules, mcp_word
from supervisor.system.io_counters import IoCounters
from supervisor.system.proc_reads import (
    NULL_DEVICE,
    FullRead,
    proc_entries,
    proc_names,
    read_argv,
    read_cwd,
    read_full,
    read_stat_facts,
    stdio_link,
    uptime_seconds,
)
from supervisor.system.unix_diag import UnixPeers

__all__ = ["Tracker"]

#: A process whose fd 0 is /dev/null before it is read in full: pid, start, command line
#: and working directory, enough to tell whether it could be a server at all.
_Quiet = tuple[int, str, tuple[str, ...], str | None]
Yield = Callable[[], Awaitable[None]]
Configured = Callable[[list[str | None]], Awaitable[tuple[ConfiguredServer, ...]]]


class Tracker:
    """Every process seen (pid -> /proc inode, start, parent, young) and the servers."""

    def __init__(
        self,
        *,
        rules: DiscoveryRules,
        chunk: int,
        first_chunk: int,
        settle_seconds: float,
        pss_every_seconds: float = 60.0,
        listing_complete: bool = True,
    ) -> None:
        self._rules = rules
        self._chunk = max(1, chunk)
        self._first_chunk = max(1, first_chunk)
        self._settle = settle_seconds
        self._pss_every = pss_every_seconds
        self._complete = listing_complete
        self._seen: dict[int, tuple[int, str, int, bool]] = {}
        self._kids: dict[int, set[int]] = {}
        self._listed: dict[int, int] = {}
        #: The /proc names the latest glance listed.
        self._names: frozenset[str] = frozenset()
        self.servers: dict[int, Tracked] = {}
        #: MCP-named processes on pipes or sockets that no live parent holds, not (yet)
        #: proven abandoned: pid -> start. Judged again every full sweep, since the
        #: process holding their other end may exit later.
        self.unowned: dict[int, str] = {}
        #: Servers seen gone since the caller last took them.
        self.gone: list[Tracked] = []
        #: (pid, start) -> a row recorded by an earlier run: its first sight stands.
        self.recorded: dict[tuple[int, str], Mapping[str, Any]] = {}
        self.peers = UnixPeers()
        #: The I/O counters of every tree member, each through a descriptor kept open.
        self.io = IoCounters()
        self.uptime: float | None = None
        #: The monotonic time of the latest sweep (servers' idle times are told from it).
        self.swept_at: float | None = None
        #: Processes looked at anew by the latest sweep (the rest cost a lookup).
        self.first_sights = 0

    def close(self) -> None:
        self.peers.close()
        self.io.close()

    def _forget(self, pid: int, *, same_process: bool = False) -> None:
        """``same_process``: the pid is looked at again (young, it may have exec'd since),
        so the children it has keep their link to it."""
        old = self._seen.pop(pid, None)
        if old is not None:
            self._unlink(pid, old[2])
        server = self.servers.get(pid)
        if server is not None and not same_process:
            server.members_seen = members_seen(server.process, self._kids, self._seen)
        if not same_process:
            # Its children are no longer below that pid: a process that takes the pid
            # next must not inherit them as members of its tree.
            self._kids.pop(pid, None)
        self.unowned.pop(pid, None)
        server = self.servers.pop(pid, None)
        if server is not None:
            self.gone.append(server)

    def _unlink(self, pid: int, ppid: int) -> None:
        siblings = self._kids.get(ppid)
        if siblings is not None:
            siblings.discard(pid)
            if not siblings:
                del self._kids[ppid]

    async def sweep(self, stamp: str, now: float, pause: Yield, configured: Configured) -> None:
        """List, look at what is new, classify the candidates, read the servers' trees."""
        listed: dict[int, int] = {}
        entries = proc_entries()
        while part := list(islice(entries, self._chunk)):
            listed.update(part)
            await pause()
        self._listed = listed
        seen = self._seen
        fresh = [
            p for p, ino in listed.items() if (s := seen.get(p)) is None or s[0] != ino or s[3]
        ]
        gone_before = len(self.gone)
        for pid in [p for p in seen if p not in listed]:
            self._forget(pid)
        self.uptime, self.swept_at = uptime_seconds(), now
        self.first_sights = len(fresh)
        pending = still_unowned(self.unowned, self.servers)
        await self._first_look(fresh, listed, pending, stamp, pause=pause, configured=configured)
        self._adopt_survivors(self.gone[gone_before:], stamp)
        self._drop_nested()
        gone_before = len(self.gone)
        await self._read_trees(stamp, now, pause)
        # A leader that exited while the trees were read: its survivors are read next time.
        self._adopt_survivors(self.gone[gone_before:], stamp)

    async def glance(self, stamp: str, pause: Yield, configured: Configured) -> None:
        """The listing pass between sweeps: the pids listed since the last glance (names
        only, one ``listdir``: a pid reused meanwhile waits for the sweep) and the young
        processes, looked at as ``look_at`` does."""
        names = proc_names()
        new, self._names = names - self._names, names
        young = {pid for pid, entry in self._seen.items() if entry[3]}
        pids = {int(name) for name in new if name.isdigit()} | young
        if pids:
            await self.look_at(frozenset(pids), stamp, pause, configured)

    async def look_at(
        self, pids: frozenset[int], stamp: str, pause: Yield, configured: Configured
    ) -> None:
        """Processes the kernel says just exec'd, looked at now: one seen before under the
        same start is looked at again (its exec changed what it runs); a server's judgement
        stands, and its record takes what it runs now."""
        listed: dict[int, int] = {}
        for pid in sorted(pids):
            try:
                listed[pid] = os.stat(f"/proc/{pid}").st_ino
            except OSError:
                continue
            old = self._seen.get(pid)
            if old is not None:
                self._seen[pid] = (old[0], old[1], old[2], True)  # as young: read again
        self.uptime = uptime_seconds()
        gone_before = len(self.gone)
        await self._first_look(list(listed), listed, [], stamp, pause=pause, configured=configured)
        self._adopt_survivors(self.gone[gone_before:], stamp)
        self._drop_nested()

    async def _first_look(
        self,
        fresh: list[int],
        listed: dict[int, int],
        pending: list[tuple[int, FullRead]],
        stamp: str,
        *,
        pause: Yield,
        configured: Configured,
    ) -> None:
        """Look at each of ``fresh`` (a pid of ``listed``, with its /proc inode) and judge
        the candidates among them and in ``pending``, a chunk between two yields."""
        quiet: list[_Quiet] = []
        for index in range(0, len(fresh), self._first_chunk):
            for pid in fresh[index : index + self._first_chunk]:
                self._look(pid, listed[pid], pending, quiet, stamp)
            await pause()
        if pending or quiet:
            cwds = [full.cwd for _, full in pending] + [cwd for *_, cwd in quiet]
            entries_ = await configured(cwds)
            for index in range(0, len(quiet), self._first_chunk):
                for pid, start, argv, _ in quiet[index : index + self._first_chunk]:
                    if mcp_word(argv, self._rules) or configured_match(argv, entries_):
                        full = read_full(pid)
                        if full is not None and full.stat.start == start:
                            pending.append((pid, full))
                await pause()
            for index in range(0, len(pending), self._first_chunk):
                for pid, full in pending[index : index + self._first_chunk]:
                    self._judge(pid, full, entries_, stamp)
                await pause()

    def _look(
        self,
        pid: int,
        inode: int,
        pending: list[tuple[int, FullRead]],
        quiet: list[_Quiet],
        stamp: str,
    ) -> None:
        old = self._seen.get(pid)
        stat = read_stat_facts(pid)
        if stat is None:
            if old is not None:
                self._forget(pid)
            return
        if old is not None and old[1] == stat.start and (not old[3] or pid in self.servers):
            if old[3]:  # a server young or just exec'd: what it runs may have changed
                reread(self.servers[pid])
            self._seen[pid] = (inode, old[1], old[2], old[3] and self._young(stat.start))
            return  # the same process: its /proc entry was only made again
        if old is not None:
            # A new process under the pid (the old one is gone), or a young one seen again,
            # which may have exec'd since its first sight.
            self._forget(pid, same_process=old[1] == stat.start)
        self._seen[pid] = (inode, stat.start, stat.ppid, stat.running and self._young(stat.start))
        self._kids.setdefault(stat.ppid, set()).add(pid)
        if not stat.running:
            return
        recorded = self.recorded.pop((pid, stat.start), None)
        if recorded is not None:
            self.servers[pid] = restored(pid, stat.start, recorded, self.peers)
            return
        stdin = stdio_link(pid, 0)
        if stdin == NULL_DEVICE:
            # Perhaps a stdio moved above fd 2 (sighting.stdio_moved), but mostly daemons:
            # only what its command line could make a server is read in full (sweep).
            argv = read_argv(pid)
            if argv is not None:
                quiet.append((pid, stat.start, plain_argv(argv), read_cwd(pid)))
            return
        if link_kind(stdin) not in STDIO_KINDS or link_kind(stdio_link(pid, 1)) not in STDIO_KINDS:
            return
        full = read_full(pid)
        if full is not None and full.stat.start == stat.start:
            pending.append((pid, full))

    def _young(self, start: str) -> bool:
        started = started_seconds(start)
        return (
            self.uptime is not None and started is not None and self.uptime - started < self._settle
        )

    def _judge(
        self, pid: int, full: FullRead, configured: tuple[ConfiguredServer, ...], stamp: str
    ) -> None:
        seen = sighting(pid, full)
        argv = plain_argv(full.argv)
        if not seen.wrapped and exec_wrapper(argv):
            if (entry := self._seen.get(pid)) is not None:  # young: looked at after its exec
                self._seen[pid] = (*entry[:3], True)
            return
        parent = None
        wire: Wire = (full.stdin, full.stdout)
        if not seen.wrapped:
            if configured_match(argv, configured) is None and mcp_word(argv, self._rules) is None:
                return  # nothing but its parent could make it a server, and that is not enough
            parent, wire = parent_sight(pid, full, self.peers)
            if stdio_moved(full):
                seen = sighting(pid, full, wire)
            elif parent is None or parent.connected is not True:
                abandoned = stdio_abandoned(pid, wire, self.peers)
                seen = sighting(pid, full, abandoned=abandoned)
                if not abandoned.abandoned and seen.stdin in STDIO_KINDS:
                    self.unowned[pid] = full.stat.start
        judgement = classify(seen, parent, configured, self._rules)
        if judgement is None:
            return
        self.unowned.pop(pid, None)
        self.servers[pid] = judged_server(seen.process, full, judgement, stamp, wire)

    def _adopt_survivors(self, gone_servers: list[Tracked], stamp: str) -> None:
        """Each observed server whose leader is gone but whose tree is not: each topmost
        member still running (the same incarnation) is the server now, owned as before.
        This is the ``node`` an ``npx`` started, left running when the client stopped
        ``npx`` itself, or when the client died and only the leader exited."""
        for gone in gone_servers:
            if gone.provenance != PROVENANCE_OBSERVED:
                continue
            for member in topmost_survivors(gone, self._seen, self._listed, self.servers):
                full = read_full(member.pid)
                if full is None or full.stat.start != member.start:
                    continue
                self._reparent(member.pid, full.stat.ppid)
                self.servers[member.pid] = survivor(member, full, gone, stamp, self.peers)

    def _reparent(self, pid: int, ppid: int) -> None:
        """Record the parent a process has now (one that outlived its parent was adopted)."""
        inode, start, old_ppid, young = self._seen[pid]
        if old_ppid != ppid:
            self._unlink(pid, old_ppid)
            self._seen[pid] = (inode, start, ppid, young)
            self._kids.setdefault(ppid, set()).add(pid)

    def _drop_nested(self) -> None:
        """A server inside another server's tree is one of its members, not a server."""
        for pid in nested_servers(self.servers, self._seen):
            del self.servers[pid]

    async def _read_trees(self, stamp: str, now: float, pause: Yield) -> None:
        """Each server's tree: its usage every sweep (PSS now and then, off the event
        loop), its owner's incarnation; one tree between two yields."""
        starts = {pid: s[1] for pid, s in self._seen.items()} if self.servers else {}
        owner_ends: dict[ProcessRef, frozenset[str] | None] = {}
        for server in list(self.servers.values()):
            pid = server.process.pid
            members = [
                ProcessRef(pid=p, start=starts[p]) for p in descendants(pid, self._kids, starts)
            ]
            elapsed = now - server.read_at if server.read_at is not None else 0.0
            tree = read_tree(
                server.process,
                members,
                previous_ticks=server.cpu_ticks,
                elapsed=elapsed,
                read_io=self.io.read,
            )
            if tree is None:
                self._forget(pid)
                continue
            reread(server, if_command_moved=True)  # an exec since that no kernel event told of
            if server.pss_at is None or now - server.pss_at >= self._pss_every:
                pids = [pid, *(m.pid for m in tree.usage.children)]
                server.pss = await anyio.to_thread.run_sync(tree_pss, pids)
                server.pss_at = now
            usage = replace(tree.usage, pss_bytes=server.pss)
            server.server = replace(server.server, usage=usage)
            server.cpu_ticks, server.read_at = tree.cpu_ticks, now
            server.saw_io(tree.usage.io_bytes, now, self.uptime)
            judge_owner(server, stamp, owner_ends, self.peers, seen=self._seen,
                        listed=self._listed, complete=self._complete)  # fmt: skip
            await pause()
        judge_survivors(list(self.servers.values()), owner_ends, self.peers)
        # The descriptors of processes no tree holds any more (gone, or left a tree).
        self.io.keep_only(
            {
                (ref.pid, ref.start)
                for server in self.servers.values()
                for ref in (server.process, *server.server.usage.children)
            }
        )

    def start_seen(self, pid: int) -> str | None:
        """The start of the process discovery knows under ``pid``."""
        return seen[1] if (seen := self._seen.get(pid)) is not None else None

    def records(self) -> tuple[ServerRecord, ...]:
        return tuple(
            self.servers[pid].record(self.uptime, self.swept_at) for pid in sorted(self.servers)
        )

    def forget_recorded(self) -> list[Mapping[str, Any]]:
        """Rows of an earlier run whose process was not found again: gone."""
        rows = list(self.recorded.values())
        self.recorded.clear()
        return rows
