"""The kernel's process events: an exec on the host is reported, no other event is taken for one."""

from __future__ import annotations

import select
import struct
import subprocess

from supervisor.system.proc_events import ProcEvents, _execs
from tests.unavailable import unavailable

#: Bounded waits for the event of a process this test starts.
_WAITS = 50


def _message(what: int, *fields: int) -> bytes:
    event = struct.pack("=IIQ", what, 0, 0) + struct.pack(f"={len(fields)}i", *fields)
    cn = struct.pack("=IIIIHH", 1, 1, 0, 0, len(event), 0) + event
    return struct.pack("=IHHII", 16 + len(cn), 3, 0, 0, 0) + cn


def test_only_exec_events_name_a_process() -> None:
    fork = _message(0x1, 10, 10, 11, 11)
    execed = _message(0x2, 12, 12)
    thread_exec = _message(0x2, 14, 13)  # a thread's exec: the process is its group
    exited = _message(0x80000000, 15, 15, 0, 0)
    assert _execs(fork + execed + thread_exec + exited) == [12, 13]
    assert _execs(b"") == []
    assert _execs(b"\x00" * 8) == []  # shorter than a header: nothing, no error


def test_an_exec_on_the_host_is_reported() -> None:
    events = ProcEvents.open()
    if events is None:
        unavailable("the kernel's process events need root (CAP_NET_ADMIN)")
    try:
        child = subprocess.Popen(["sleep", "30"])
        try:
            seen: set[int] = set()
            for _ in range(_WAITS):
                if child.pid in seen:
                    break
                select.select([events.fileno()], [], [], 0.1)
                seen |= events.read().execs
            assert child.pid in seen
        finally:
            child.kill()  # our own child, by its Popen
            child.wait()
    finally:
        events.close()
