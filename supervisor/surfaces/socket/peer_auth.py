"""Which pids a socket connection may act for: its peer's own, or a child of it, pinned."""

from __future__ import annotations

from supervisor.errors import PermissionDenied
from supervisor.policy.incarnation import same_incarnation, start_of
from supervisor.system.probes import ProbeBackend

__all__ = ["MAX_VOUCHED", "Conversation", "authorize_pid"]

#: (pid, uid, gid) of a connected peer, or None when the platform cannot say.
Peer = tuple[int, int, int] | None
#: How many child pids one connection may remember having proved.
MAX_VOUCHED = 1024


class Conversation:
    """What one connection has established about its peer."""

    __slots__ = ("credentials", "vouched")

    def __init__(self, credentials: Peer) -> None:
        self.credentials = credentials
        #: Pids proved to be the peer's children earlier on this connection, each with the
        #: start time of the process that held the pid when it was proved.
        self.vouched: dict[int, str] = {}

    def pid(self, op: str) -> int:
        if self.credentials is None:
            raise PermissionDenied(
                f"{op} refused: the connecting process's credentials cannot be read here"
            )
        return self.credentials[0]


def authorize_pid(probes: ProbeBackend, pid: int, peer: Conversation, op: str) -> None:
    """A worker may act only for itself, or for its child (a launcher registering it).

    A child's proof is remembered with the child's start time: once it has exited and
    been reaped its parent can no longer be read, yet the launcher that registered it
    must still be able to release it on this connection. The start time is what keeps
    that memory from outliving the child: should the pid be taken by another process,
    the pid alone would vouch for a stranger.
    """
    peer_pid = peer.pid(op)
    if pid == peer_pid:
        return
    proved = peer.vouched.get(pid)
    if proved is not None:
        seen = probes.identify(pid)
        if seen.alive is False or (
            seen.start_time is not None and same_incarnation(seen.start_time, proved)
        ):
            return  # the same child, or gone (a release after it exited)
        # Another process holds the pid now: the old proof is void, a new one may apply.
        del peer.vouched[pid]
    # Start time on both sides of the parent read: a child that exited in between and
    # whose pid was taken again would show a different one (or none).
    before = probes.probe(pid)
    if before.alive and before.start_time and probes.parent_pid(pid) == peer_pid:
        # Identified: remembered with its pidfd inode where the kernel has one, so even a
        # process that takes the pid within the same clock tick is not vouched for.
        after = probes.identify(pid)
        if after.start_time is not None and start_of(after.start_time) == before.start_time:
            if len(peer.vouched) < MAX_VOUCHED:
                peer.vouched[pid] = after.start_time
            return
    raise PermissionDenied(
        f"{op} for pid {pid} refused: the connecting process (pid {peer_pid}) "
        "is neither that process nor the parent of the process now holding that pid"
    )
