"""Run a command offline: in a fresh network namespace that has only loopback, brought up.

``tests/run.sh`` starts the suite's offline part (the tests that start a real MCP client)
as ``unshare -n python -m tests.offline -- pytest --part offline`` (``unshare -c -n
--keep-caps`` when not root), so no process those tests start can reach any address but
127.0.0.1: the namespace has no other interface. Unix sockets bound to paths still
connect, and the daemon, its census and the clients share the one namespace, so the
census's socket proofs see both ends.

Real clients start only when ``offline()`` holds (``require_offline``), so a run outside
the namespace fails with the command to use instead of letting a client out.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import sys
from collections.abc import Sequence

__all__ = ["OFFLINE_HINT", "loopback_up", "main", "offline", "require_offline"]

OFFLINE_HINT = (
    "run it offline: bash tests/run.sh [pytest args], or "
    "unshare -n .venv/bin/python -m tests.offline -- COMMAND (as root)"
)

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4


def _others() -> list[str]:
    """The interfaces this namespace has besides ``lo``."""
    return [name for _, name in socket.if_nameindex() if name != "lo"]


def loopback_up() -> None:
    """``ip link set lo up``, without needing iproute2."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def offline() -> bool:
    """True in a namespace whose only interface is loopback."""
    return not _others()


def require_offline(what: str) -> None:
    """Raise unless offline: ``what`` (a real client) must not reach the network."""
    if not offline():
        raise RuntimeError(f"{what} runs only in a loopback-only namespace ({_others()}); "
                           f"{OFFLINE_HINT}")  # fmt: skip


def _drop_ambient_caps() -> None:
    """Give back what ``unshare --keep-caps`` lent to bring ``lo`` up, so a non-root run
    keeps its usual permissions (a file it made unreadable stays unreadable to it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[1:] if args[:1] == ["--"] else args
    if not command:
        sys.stderr.write("usage: unshare -n python -m tests.offline -- COMMAND [ARGS...]\n")
        return 2
    others = _others()
    if others:
        # Not a fresh namespace: starting here would be online, so do not start at all.
        sys.stderr.write(f"tests.offline: this namespace has {others}; start it under "
                         "unshare -n (unshare -c -n --keep-caps when not root)\n")  # fmt: skip
        return 125
    loopback_up()
    if os.geteuid() != 0:
        _drop_ambient_caps()
    return os.execvp(command[0], command)  # replaces this process: no return


if __name__ == "__main__":
    raise SystemExit(main())
