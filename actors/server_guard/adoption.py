"""What a guard finds running: wrapped servers sent to this daemon that nobody watches yet."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from actors.server_guard.identity import ServerFacts
from actors.server_guard.watches import Key
from supervisor.policy.canonical import canon
from supervisor.policy.identity.exec_marker import ExecMarker
from supervisor.policy.incarnation import same_incarnation
from supervisor.system.pidfd import incarnation
from supervisor.system.process_tree import stat_facts, ticks

__all__ = ["Found", "inspect_found", "unwatched"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """One server tree found by its marker, and what this host says about it now."""

    facts: ServerFacts
    leader_alive: bool
    client_alive: bool
    #: Its active row on this host and boot, when it ever registered.
    row: Mapping[str, Any] | None

    @property
    def key(self) -> Key:
        return (self.facts.pid, self.facts.start)


def unwatched(
    markers: Collection[ExecMarker],
    *,
    daemon_key: str | None,
    boot: str | None,
    watched: Collection[Key],
    pending: Collection[int],
) -> list[tuple[Key, ExecMarker]]:
    """One marker per tree (by its leader's incarnation) that names this daemon and this
    boot and is neither watched nor being registered; sorted, so scans are repeatable."""
    if daemon_key is None or not boot:
        return []
    groups: dict[Key, ExecMarker] = {}
    for marker in markers:
        key = (marker.leader_pid, ticks(marker.leader_start))
        if marker.daemon != daemon_key or marker.boot_id != boot:
            continue
        if key in watched or marker.leader_pid in pending:
            continue
        groups.setdefault(key, marker)
    return sorted(groups.items())


def _alive_as(pid: int, start: str) -> bool:
    facts = stat_facts(pid)
    return facts is not None and facts.start == start and facts.running


def inspect_found(key: Key, marker: ExecMarker, rows: Collection[Mapping[str, Any]]) -> Found:
    """Whether the leader and its client still run as the marker's incarnations, and the
    tree's row among ``rows`` (matched by pid and start, never by a self-declared id)."""
    client = (marker.client_pid, ticks(marker.client_start))
    # The row's token may carry the pidfd inode the registration recorded; the scan read
    # the leader's start alone, so the live leader is identified to be compared with it
    # (a tree whose leader got the pid of a row's process within one tick is not its).
    leader = incarnation(*key)
    row = next(
        (
            r
            for r in rows
            if r.get("pid") == key[0]
            and same_incarnation(canon(r.get("process_start_time")), leader)
        ),
        None,
    )
    return Found(
        facts=ServerFacts(
            pid=key[0],
            start=key[1],
            client_pid=client[0],
            client_start=client[1],
            client_label=marker.client,
            name=marker.name,
            namespace=marker.namespace,
        ),
        leader_alive=_alive_as(*key),
        client_alive=_alive_as(*client),
        row=row,
    )
