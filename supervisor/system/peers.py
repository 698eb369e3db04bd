"""Who is at the other end of a socket: SO_PEERCRED (Unix) or /proc/net/tcp{,6} (loopback TCP)."""

from __future__ import annotations

import ipaddress
import socket
import struct
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["PeerUidLookup", "loopback_peer_uid", "peer_credentials", "proc_address"]

#: (our address, peer address) of an accepted connection -> the peer's uid, or None.
PeerUidLookup = Callable[[tuple[str, int], tuple[str, int]], int | None]

_PROC = Path("/proc/net")
_LINUX = sys.platform.startswith("linux")
_PEERCRED_FORMAT = "3i"


def proc_address(host: str, port: int) -> str:
    """``host:port`` as /proc/net/tcp{,6} prints it: the address in host byte order words."""
    packed = ipaddress.ip_address(host).packed
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


def loopback_peer_uid(
    ours: tuple[str, int], peer: tuple[str, int], *, proc: Path = _PROC
) -> int | None:
    """The uid of the socket whose local end is ``peer`` and remote end ``ours``.

    Only for loopback peers: on this host the client's own socket is in the same
    table, with the uid that created it (like SO_PEERCRED for Unix sockets).
    None when it cannot be told (not Linux, not loopback, not found).
    """
    try:
        if not ipaddress.ip_address(peer[0]).is_loopback:
            return None
        family = "tcp6" if ":" in peer[0] else "tcp"
        want_local, want_remote = proc_address(*peer), proc_address(*ours)
        lines = (proc / family).read_text().splitlines()[1:]
    except (OSError, ValueError):
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 7 and fields[1] == want_local and fields[2] == want_remote:
            try:
                return int(fields[7])
            except ValueError:
                return None
    return None


def peer_credentials(sock: socket.socket) -> tuple[int, int, int] | None:
    """(pid, uid, gid) of the peer of a connected Unix domain socket, Linux only; else None."""
    so_peercred = getattr(socket, "SO_PEERCRED", None)
    if not _LINUX or so_peercred is None:
        return None
    try:
        if sock.family != socket.AF_UNIX:
            return None
        raw = sock.getsockopt(socket.SOL_SOCKET, so_peercred, struct.calcsize(_PEERCRED_FORMAT))
        pid, uid, gid = struct.unpack(_PEERCRED_FORMAT, raw)
    except (OSError, ValueError, struct.error):
        return None
    # pid 0 means the peer is outside our pid namespace (or unset): no usable identity.
    if pid <= 0:
        return None
    return (pid, uid, gid)
