"""Linux pidfds: open one on a verified incarnation, its per-process inode, close it."""

from __future__ import annotations

import contextlib
import os
from functools import cache

from supervisor.policy.incarnation import inode_of, start_of, with_inode
from supervisor.system.proc_stat import fields_after_comm, read_stat, start_ticks, valid_pid

__all__ = [
    "close_pidfd",
    "incarnation",
    "inodes_unique",
    "pidfd_inode",
    "pidfd_open",
    "pidfd_supported",
]


def _start_now(pid: int) -> str | None:
    try:
        return start_ticks(fields_after_comm(read_stat(pid)))
    except (OSError, ValueError):
        return None


@cache
def pidfd_supported() -> bool:
    """Whether this interpreter and kernel can open pidfds (Linux >= 5.3, Python >= 3.9)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return False
    try:
        fd = opener(os.getpid())
    except OSError:
        return False
    os.close(fd)
    return True


def _inode(fd: int) -> int | None:
    try:
        return os.fstat(fd).st_ino
    except OSError:
        return None


def _inode_of_pid(pid: int) -> int | None:
    try:
        fd = os.pidfd_open(pid)
    except (OSError, OverflowError):
        return None
    try:
        return _inode(fd)
    finally:
        os.close(fd)


@cache
def inodes_unique() -> bool:
    """Whether each process's pidfds have an inode of their own (pidfs, Linux >= 6.9).

    Older kernels hand every pidfd one shared anonymous inode, which names no process:
    two live processes answering with different inodes is the proof, taken once.
    """
    if not pidfd_supported():
        return False
    mine = _inode_of_pid(os.getpid())
    for other in (os.getppid(), 1):
        if other in (0, os.getpid()):
            continue
        theirs = _inode_of_pid(other)
        if mine is not None and theirs is not None:
            return mine != theirs
    return False


def pidfd_inode(pidfd: int) -> int | None:
    """The inode naming the process ``pidfd`` refers to, or None where inodes name none."""
    return _inode(pidfd) if inodes_unique() else None


def pidfd_open(pid: int, *, expected_start_time: str | None = None) -> int | None:
    """A pidfd for pid, or None if unsupported, gone, forbidden or not the expected incarnation.

    With expected_start_time, the fd is kept only if pid still has that start after the fd
    was opened. That proves the fd refers to a process of that start: it started before the
    open and still holds the pid after it, so it held the pid at the open too. Where the
    token carries a pidfd inode and this kernel's inodes name processes, the fd's inode
    must be that one as well: another process that got the pid within the same clock
    tick has the same start but never the same inode.
    """
    if not valid_pid(pid) or not pidfd_supported():
        return None
    try:
        fd = os.pidfd_open(pid)
    except (OSError, OverflowError):
        return None
    if expected_start_time is None:
        return fd
    expected_inode = inode_of(expected_start_time)
    if _start_now(pid) != start_of(expected_start_time) or (
        expected_inode is not None and pidfd_inode(fd) not in (None, expected_inode)
    ):
        os.close(fd)
        return None
    return fd


def incarnation(pid: int, start: str) -> str:
    """``start`` (read from /proc/<pid>/stat) with the inode of the process that has it now.

    The start alone when inodes name no process here, or the pid no longer has that start
    (that process is gone; what is known of it is its start).
    """
    if not inodes_unique():
        return start
    fd = pidfd_open(pid, expected_start_time=start)
    if fd is None:
        return start
    try:
        return with_inode(start, pidfd_inode(fd))
    finally:
        os.close(fd)


def close_pidfd(pidfd: int) -> None:
    """Close a pidfd; any task waiting on it must have finished or been cancelled first."""
    # close(2) releases the descriptor even when it reports an error, so a failure leaves the
    # caller nothing to retry; a teardown path should not fail over it.
    with contextlib.suppress(OSError):
        os.close(pidfd)
