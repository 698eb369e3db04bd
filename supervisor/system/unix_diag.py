"""The peer of a Unix socket by inode, from the kernel's sock_diag netlink (as ``ss -x``)."""

from __future__ import annotations

import socket
import struct

__all__ = ["UnixPeers"]

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_UDIAG_SHOW_PEER = 0x04
_UNIX_DIAG_PEER = 2
_UNIX_DIAG_SHUTDOWN = 6
#: ``sk_state`` of a socket that listens for connections (the kernel's TCP_LISTEN).
_LISTEN = 10
#: ``sk_shutdown`` of a stream socket whose peer was released: no reads, no writes.
_SHUTDOWN_BOTH = 3
_ALL_STATES = 0xFFFFFFFF
_NO_COOKIE = 0xFFFFFFFF
_HEADER = struct.Struct("=IHHII")
# struct unix_diag_req: family, protocol, pad, states, ino, show, cookie[2].
_REQUEST = struct.Struct("=BBHIIIII")
# struct unix_diag_msg: family, type, state, pad, ino, cookie[2].
_MESSAGE = struct.Struct("=BBBBIII")
_ATTR = struct.Struct("=HH")


class UnixPeers:
    """One netlink socket, asked once per inode: ``peer(inode)`` is the inode of the other
    end of a connected Unix socket (a socket pair's other half), or None when the kernel
    does not say (no such socket, not connected, sock_diag unavailable); ``peer_closed``
    tells a released peer from one the kernel does not name; ``listening`` whether it
    waits for connections."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._seq = 0
        self._broken = False

    def _socket(self) -> socket.socket | None:
        if self._sock is None and not self._broken:
            try:
                self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
                self._sock.settimeout(1.0)
            except OSError:
                self._broken = True
        return self._sock

    def peer(self, inode: int) -> int | None:
        found = self._query(inode)
        return None if found is None else _peer_of(found[1])

    def listening(self, inode: int) -> bool | None:
        """Whether the Unix socket ``inode`` listens (a path or name others connect to);
        None when the kernel does not say (not a Unix socket, or sock_diag unavailable)."""
        found = self._query(inode)
        return None if found is None else found[0] == _LISTEN

    def peer_closed(self, inode: int) -> bool | None:
        """Whether the other end of a socket pair's half is gone: True when the kernel
        names no peer and has shut the socket both ways (what releasing its peer does),
        False when it names a peer, None when it does not say."""
        found = self._query(inode)
        if found is None:
            return None
        attrs = found[1]
        if _peer_of(attrs) is not None:
            return False
        shutdown = attrs.get(_UNIX_DIAG_SHUTDOWN, b"")
        return True if shutdown[:1] == bytes([_SHUTDOWN_BOTH]) else None

    def _query(self, inode: int) -> tuple[int, dict[int, bytes]] | None:
        """The kernel's state and attributes of the Unix socket ``inode``, or None."""
        sock = self._socket()
        if sock is None or not 0 < inode <= 0xFFFFFFFF:
            return None
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        body = _REQUEST.pack(
            socket.AF_UNIX, 0, 0, _ALL_STATES, inode, _UDIAG_SHOW_PEER, _NO_COOKIE, _NO_COOKIE
        )
        header = _HEADER.pack(
            _HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, self._seq, 0
        )
        try:
            sock.send(header + body)
            data = sock.recv(8192)
        except OSError:
            return None
        return _attributes(data, inode)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _peer_of(attrs: dict[int, bytes]) -> int | None:
    """The peer's inode the kernel names (0, for none, is None)."""
    raw = attrs.get(_UNIX_DIAG_PEER, b"")
    return (struct.unpack_from("=I", raw)[0] or None) if len(raw) >= 4 else None


def _attributes(data: bytes, inode: int) -> tuple[int, dict[int, bytes]] | None:
    if len(data) < _HEADER.size + _MESSAGE.size:
        return None
    length, kind, _flags, _seq, _pid = _HEADER.unpack_from(data)
    if kind == _NLMSG_ERROR or kind != _SOCK_DIAG_BY_FAMILY:
        return None
    _family, _type, state, _pad, found, *_ = _MESSAGE.unpack_from(data, _HEADER.size)
    if found != inode:
        return None
    attrs: dict[int, bytes] = {}
    offset = _HEADER.size + _MESSAGE.size
    end = min(length, len(data))
    while offset + _ATTR.size <= end:
        size, attr = _ATTR.unpack_from(data, offset)
        if size < _ATTR.size:
            return None
        attrs[attr] = data[offset + _ATTR.size : offset + size]
        offset += (size + 3) & ~3
    return state, attrs
