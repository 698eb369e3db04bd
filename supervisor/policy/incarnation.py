"""Incarnation tokens: which process ran under a pid, and whether two tokens name one process.

A token is the process's start (``ticks-<n>`` on Linux, ``ctime-<t>`` elsewhere), plus, on
kernels that give every process its own pidfd inode (pidfs, Linux >= 6.9), that inode:
``ticks-<n>@ino-<i>``. Start ticks have a 10 ms resolution, so a pid reused within one
tick gives two processes one start; the inode still tells them apart. A token without an
inode (an older row, an older kernel, a probe that only read ``/proc/<pid>/stat``) is
compared by its start alone, as before inodes were recorded.
"""

from __future__ import annotations

__all__ = [
    "INODE_MARK",
    "inode_of",
    "same_incarnation",
    "start_of",
    "told_apart",
    "with_inode",
]

#: Between the start and the pidfd inode; appears in no start token of either format.
INODE_MARK = "@ino-"


def with_inode(token: str, inode: int | None) -> str:
    """``token``'s start with ``inode`` attached (None: the start alone)."""
    start = start_of(token)
    return start if inode is None else f"{start}{INODE_MARK}{inode}"


def start_of(token: str) -> str:
    """The start part of a token (the whole of an inode-less one)."""
    start, _, _ = token.partition(INODE_MARK)
    return start


def inode_of(token: str) -> int | None:
    """The pidfd inode a token carries, or None (none recorded, or not a number)."""
    _, mark, raw = token.partition(INODE_MARK)
    return int(raw) if mark and raw.isdigit() else None


def told_apart(a: str, b: str) -> bool:
    """Whether the tokens decide the question: different starts, or both carry an inode.

    Equal starts with an inode missing on either side is the one case no token can
    settle: the same process, or another that got the pid within the same tick.
    """
    return start_of(a) != start_of(b) or (inode_of(a) is not None and inode_of(b) is not None)


def same_incarnation(a: str, b: str) -> bool:
    """Whether two tokens may name one process: equal starts, and equal inodes where both
    carry one. True also when they cannot be told apart (see ``told_apart``): a caller for
    whom that ambiguity is unsafe asks ``told_apart`` too.
    """
    if a == b:
        return True
    if start_of(a) != start_of(b):
        return False
    mine, theirs = inode_of(a), inode_of(b)
    return mine is None or theirs is None or mine == theirs
