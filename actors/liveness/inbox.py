"""The liveness actor's inbox: watch a new process, probe pids now, report status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from actors.mailbox import Reply
from actors.replies import DeadChanges, LivenessCounts, LivenessStatus
from supervisor.policy.evidence import PidEvidence

__all__ = [
    "LivenessCountsQuery",
    "LivenessInbox",
    "LivenessStatusQuery",
    "ProbeNow",
    "TakeDead",
    "Watch",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Watch:
    """Start watching a freshly registered process (pidfd where available)."""

    worker_identity: str
    pid: int
    start_time: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeNow:
    """Evidence for every distinct pid, as a probe of each made on receipt would give it.

    Fresh: never an old sweep's result. A pid whose exit watch (a pidfd opened on a
    verified start time) has not fired is answered from the watch, since a pidfd that is
    not readable names a process that has not exited, so still holds its pid, and the
    probe would find it running; the watch is checked when the request is handled. A pid
    missing from a complete /proc listing is dead. Anything unsure is probed, and what
    the probe cannot tell stays unknown. An exit a watch observed overrules a probe that
    still finds that same incarnation; a live process of the same start is identified by
    its pidfd inode, and answered alive with its own token, or unknown where no inode
    tells the two apart (a pid reused within one clock tick is never called dead).

    Identity: where a pid's evidence equals the previous ProbeNow answer's for it, it is
    that same object, so ``is`` tells unchanged evidence from changed; a pid the previous
    answer lacked gets no promise. Receivers must not mutate the Mapping.
    """

    pids: tuple[int, ...]
    reply: Reply[Mapping[int, PidEvidence]]


@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessStatusQuery:
    reply: Reply[LivenessStatus]


@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessCountsQuery:
    """The status figures without the verdicts (``status``, the health check)."""

    reply: Reply[LivenessCounts]


@dataclass(frozen=True, slots=True, kw_only=True)
class TakeDead:
    """The verdicts that turned dead or stopped being dead since ``cursor``'s take (0:
    none yet), for the one reader that keeps fleet counts."""

    cursor: int
    reply: Reply[DeadChanges]


LivenessInbox = Watch | ProbeNow | LivenessStatusQuery | LivenessCountsQuery | TakeDead
