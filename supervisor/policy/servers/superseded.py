"""Servers a live client has replaced: an older copy of an entry it runs again, idle since.

A server is superseded when all of these hold:

- its owner client (pid and start) is alive;
- a newer server of the same entry runs under that same owner (a wrapped server's name
  label; an observed server's command, working directory and environment names);
- its own tree has done no I/O since the newer one started: the read since which its
  I/O counters have not moved was taken before the newer one started.

Each condition is read from evidence, and evidence that is missing (an owner whose
liveness is unknown, counters that could not be read, a start time or a first read that
is not known) keeps the server: a restarted daemon, whose idle clocks start at its first
sweep, never finds an older copy superseded by a newer one that was already running.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from supervisor.policy.servers.census import PROVENANCE_WRAPPED, ProcessRef, ServerRecord
from supervisor.policy.servers.duplicates import memory_of

__all__ = ["SUPERSEDED", "Superseded", "entry_key", "superseded"]

#: The reason code of a superseded server in a reap plan (and in the guard's audit).
SUPERSEDED = "superseded_by_newer_instance"
#: /proc stamps a start in clock ticks (USER_HZ, 100 a second on Linux) and truncates:
#: a process stamped ``s`` started at ``s`` or up to one tick later.
_START_TICK = 0.01

_EntryKey = tuple[object, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Superseded:
    """One superseded server and its evidence."""

    server: ServerRecord
    #: The newest server of the same entry under the same owner.
    newer: ProcessRef
    #: Seconds after boot when ``newer`` started, and since when ``server`` has been quiet.
    newer_started_since_boot: float
    quiet_since_boot: float
    #: Seconds since its tree last did I/O, at least.
    idle_seconds: float
    memory_bytes: int

    @property
    def since_newer_seconds(self) -> float:
        """How long it has been idle since the newer copy started, at least: now (its quiet
        read plus its idle time, in seconds after boot) less the latest the newer copy
        can have started (its stamp plus one clock tick)."""
        now = self.quiet_since_boot + self.idle_seconds
        return max(0.0, now - (self.newer_started_since_boot + _START_TICK))


def entry_key(server: ServerRecord) -> _EntryKey | None:
    """Which configured entry ``server`` runs, as far as the census can tell; None when it
    cannot (a wrapped server whose name label is not known)."""
    if server.provenance == PROVENANCE_WRAPPED:
        return None if server.label is None else ("label", server.label)
    return ("command", *server.duplicate_key)


def _owner(server: ServerRecord) -> ProcessRef | None:
    owner = server.owner
    return owner.process if owner is not None and owner.alive is True else None


def superseded(servers: Iterable[ServerRecord]) -> tuple[Superseded, ...]:
    """Every superseded server of one census, by pid."""
    groups: dict[tuple[ProcessRef, _EntryKey], list[ServerRecord]] = {}
    for server in servers:
        owner, key = _owner(server), entry_key(server)
        if owner is not None and key is not None and server.started_since_boot is not None:
            groups.setdefault((owner, key), []).append(server)
    found: list[Superseded] = []
    for group in groups.values():
        if len(group) < 2:
            continue
        newest = max(group, key=lambda s: (s.started_since_boot or 0.0, s.process.pid))
        newest_start = newest.started_since_boot
        assert newest_start is not None  # grouped only with a start
        for server in group:
            quiet = server.quiet_since_boot
            started = server.started_since_boot
            if server is newest or quiet is None or server.idle_seconds is None:
                continue
            if started is None or started >= newest_start or quiet > newest_start:
                continue
            found.append(
                Superseded(
                    server=server,
                    newer=newest.process,
                    newer_started_since_boot=newest_start,
                    quiet_since_boot=quiet,
                    idle_seconds=server.idle_seconds,
                    memory_bytes=memory_of(server),
                )
            )
    return tuple(sorted(found, key=lambda s: s.server.process.pid))
