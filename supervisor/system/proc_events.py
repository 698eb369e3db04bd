"""The kernel's process events connector (netlink ``cn_proc``): each exec on the host as it happens.

Subscribing needs ``CAP_NET_ADMIN`` (root); elsewhere ``ProcEvents.open`` answers None
and the census looks for new processes by listing ``/proc`` instead. Events can be lost
when the socket's buffer fills (``ENOBUFS``): ``read`` then says so, and the caller looks
at every process again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import struct
from dataclasses import dataclass

__all__ = ["EventRead", "ProcEvents"]

_NETLINK_CONNECTOR = 11
_CN_IDX_PROC = 1
_CN_VAL_PROC = 1
_NLMSG_DONE = 3
_PROC_CN_MCAST_LISTEN = 1
_PROC_CN_MCAST_IGNORE = 2
_PROC_EVENT_EXEC = 0x00000002
# struct nlmsghdr: len, type, flags, seq, pid.
_NLMSGHDR = struct.Struct("=IHHII")
# struct cn_msg: id.idx, id.val, seq, ack, len, flags.
_CN_MSG = struct.Struct("=IIIIHH")
# struct proc_event head: what, cpu, timestamp_ns; then exec's process_pid, process_tgid.
_EVENT = struct.Struct("=IIQ")
_EXEC = struct.Struct("=ii")
_BUFFER = 1 << 16
#: The socket's receive buffer: room for bursts of execs between two reads.
_RCVBUF = 1 << 20


@dataclass(frozen=True, slots=True)
class EventRead:
    """What one read drained: the processes that exec'd (thread group ids), and whether
    events were lost since the last read (the caller must look at everything)."""

    execs: frozenset[int]
    lost: bool


class ProcEvents:
    """One subscribed netlink socket; ``fileno`` is for waiting until it is readable
    (``anyio.wait_readable`` takes the object itself)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    @classmethod
    def open(cls) -> ProcEvents | None:
        """Subscribed to the host's process events, or None without the right (or the
        kernel's connector)."""
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_CONNECTOR)
        except OSError:
            return None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RCVBUF)
            sock.bind((0, _CN_IDX_PROC))
            sock.send(_control(_PROC_CN_MCAST_LISTEN))
            sock.setblocking(False)
        except OSError:
            sock.close()
            return None
        return cls(sock)

    def fileno(self) -> int:
        return self._sock.fileno()

    def read(self) -> EventRead:
        """Every event waiting now, without blocking."""
        execs: set[int] = set()
        lost = False
        while True:
            try:
                data = self._sock.recv(_BUFFER)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    lost = True
                    continue
                raise
            execs.update(_execs(data))
        return EventRead(execs=frozenset(execs), lost=lost)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.send(_control(_PROC_CN_MCAST_IGNORE))
        self._sock.close()


def _control(op: int) -> bytes:
    body = struct.pack("=I", op)
    cn = _CN_MSG.pack(_CN_IDX_PROC, _CN_VAL_PROC, 0, 0, len(body), 0) + body
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(cn), _NLMSG_DONE, 0, 0, os.getpid()) + cn


def _execs(data: bytes) -> list[int]:
    """The exec'd thread group ids of one datagram (one or more netlink messages)."""
    found = []
    offset = 0
    while offset + _NLMSGHDR.size <= len(data):
        length = _NLMSGHDR.unpack_from(data, offset)[0]
        if length < _NLMSGHDR.size:
            break
        at = offset + _NLMSGHDR.size + _CN_MSG.size
        if at + _EVENT.size + _EXEC.size <= offset + length:
            what = _EVENT.unpack_from(data, at)[0]
            if what == _PROC_EVENT_EXEC:
                _pid, tgid = _EXEC.unpack_from(data, at + _EVENT.size)
                found.append(tgid)
        offset += (length + 3) & ~3
    return found
