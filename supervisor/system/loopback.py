"""TCP listeners on loopback only (the MCP HTTP surface, the ops listener), claimed at start."""

from __future__ import annotations

import ipaddress
import socket

from supervisor.errors import ConfigError, Unavailable

__all__ = ["loopback_address", "loopback_listener"]


def loopback_address(host: str) -> str | None:
    """``host`` as a loopback IP literal (normalized), or None when it is not one.

    Only IP literals: a name such as "localhost" can be re-pointed in /etc/hosts, and
    these surfaces must never be reachable from another machine.
    """
    try:
        address = ipaddress.ip_address(host.strip())
    except ValueError:
        return None
    return str(address) if address.is_loopback else None


def loopback_listener(host: str, port: int, *, what: str) -> socket.socket:
    """A listening socket on loopback ``host:port``: ``ConfigError`` when ``host`` is not a
    loopback IP literal, ``Unavailable`` when the port cannot be had (``what`` names the
    surface in both)."""
    address = loopback_address(host)
    if address is None:
        raise ConfigError(f"{what} host must be a loopback IP address, got {host!r}")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen()
    except OSError as exc:
        sock.close()
        raise Unavailable(f"{what} cannot listen on {address}:{port}: {exc.strerror}") from exc
    return sock
