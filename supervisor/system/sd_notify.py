"""systemd's notify protocol: one datagram per state change to $NOTIFY_SOCKET, no library."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

__all__ = ["notify", "watchdog_interval"]


def _address(raw: str) -> str | None:
    # "@name" is the abstract namespace; a path must be absolute. Other forms
    # (vsock:...) are for VMs and not spoken here.
    if raw.startswith("@"):
        return "\0" + raw[1:]
    if raw.startswith("/"):
        return raw
    return None


def notify(state: str, *, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``); False when not under systemd or the send failed.

    Never raises and never blocks: a daemon must not die or stall because its
    service manager went away or fell behind.
    """
    env = os.environ if environ is None else environ
    address = _address(env.get("NOTIFY_SOCKET", ""))
    if address is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            # Non-blocking: a receiver that stopped reading must not stall the event
            # loop once its queue is full; that datagram is dropped instead.
            sock.setblocking(False)
            sock.connect(address)
            sock.send(state.encode())
    except OSError:
        return False
    return True


def watchdog_interval(environ: Mapping[str, str] | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WatchdogSec), or None when not requested.

    systemd sets WATCHDOG_PID too; when it names another process (a child that
    inherited the environment), the watchdog is not ours to feed.
    """
    env = os.environ if environ is None else environ
    usec = env.get("WATCHDOG_USEC", "")
    owner = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) <= 0:
        return None
    if owner and (not owner.isdigit() or int(owner) != os.getpid()):
        return None
    return int(usec) / 2_000_000
