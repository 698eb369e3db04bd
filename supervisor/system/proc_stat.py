"""Reading and parsing one /proc/<pid>/stat line: state, parent, thread count, start time."""

from __future__ import annotations

import os

__all__ = [
    "EXITED_STATES",
    "PPID_INDEX",
    "exited",
    "fields_after_comm",
    "read_stat",
    "start_ticks",
    "valid_pid",
]

# /proc/<pid>/stat is one short line; fields up to starttime (22) sit well inside this even
# with a 64-byte kernel-thread comm, so one read() always reaches the fields we parse.
_STAT_READ_SIZE = 4096

# Fields after the closing ')' of comm start at field 3 (state); these are offsets into them.
_STATE_INDEX = 3 - 3
PPID_INDEX = 4 - 3
_THREADS_INDEX = 20 - 3
_STARTTIME_INDEX = 22 - 3

# Task states of a process that has exited: zombie (exited, not yet reaped) and dead (being
# released); kernels before 3.14 spelled the latter 'x'.
EXITED_STATES = frozenset({"Z", "X", "x"})


def valid_pid(pid: int) -> bool:
    """Whether ``pid`` can name one process: a positive int (bool is an int, never a pid)."""
    # pid 0 and negatives address process groups in kill(2), never a single process.
    return isinstance(pid, int) and not isinstance(pid, bool) and pid > 0


def read_stat(pid: int) -> str:
    """The text of ``/proc/<pid>/stat``; raises OSError for the caller to classify."""
    # os.open/os.read rather than open(): no buffered text wrapper per pid, which matters when
    # a sweep reads thousands of these.
    fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, _STAT_READ_SIZE)
    finally:
        os.close(fd)
    # latin-1 cannot fail, and comm may hold arbitrary bytes; the fields we parse are ASCII.
    return data.decode("latin-1")


def fields_after_comm(text: str) -> list[str] | None:
    # comm (field 2) is "(name)" where name may itself contain spaces and parentheses, so only
    # the LAST ')' reliably ends it.
    head, sep, tail = text.rpartition(")")
    if not sep or "(" not in head:
        return None
    # Nothing past starttime is parsed, so leave the ~30 later fields unsplit.
    return tail.split(None, _STARTTIME_INDEX + 1)


def start_ticks(fields: list[str] | None) -> str | None:
    if fields is None or len(fields) <= _STARTTIME_INDEX:
        return None
    raw = fields[_STARTTIME_INDEX]
    if not raw.isdigit():
        return None
    return f"ticks-{int(raw)}"


def exited(fields: list[str] | None) -> bool:
    """Whether a stat line says the whole process has exited; unparsable is 'not proven'."""
    if fields is None or len(fields) <= _THREADS_INDEX:
        return False
    if fields[_STATE_INDEX] not in EXITED_STATES:
        return False
    # The state is the thread-group leader's: a leader that called pthread_exit shows Z
    # while its other threads run on, and those count here. Only a zombie left alone in
    # its thread group is a process that has exited.
    threads = fields[_THREADS_INDEX]
    return threads.isdigit() and int(threads) <= 1
