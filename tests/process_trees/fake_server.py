"""A stand-in MCP server process: never reads its stdin, sleeps (bounded), may start a child.

``python fake_server.py [--child PYTHON] [--move-stdio]``: with ``--child`` it starts one
more of itself under PYTHON (a tree), sharing its stdio as an npx or a shell wrapper would.
With ``--move-stdio`` it does what the MCP Python SDK's stdio server does: keeps its stdin
and stdout on private copies above fd 2, then points fd 0 at /dev/null and fd 1 at a copy
of stderr. ``--move-stdio-one`` keeps only stdin's copy: one descriptor to the client,
as a control channel (node's IPC) is. ``--io-on-usr1`` writes one line to /dev/null on
each SIGUSR1: the kernel's I/O counters of the process move only then.
``--browser-child PYTHON`` starts its child as Playwright starts Chromium: in a session of
its own, stdin and stdout on /dev/null, stderr inherited, and two private pipes to this
process above fd 2 (the DevTools pipes); nothing of the client's wire. ``--child-listen
PATH`` or ``--child-connect PATH`` give that child ``--listen PATH`` (it listens on a Unix
socket there and keeps every connection it accepts) or ``--connect PATH`` (it connects to
one there, waiting at most a minute for it, and keeps the connection).
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading
import time

LIFETIME_SECONDS = 120.0


def move_stdio(fds: tuple[int, ...] = (0, 1)) -> list[int]:
    kept = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in fds]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return kept


def _value(flag: str) -> str | None:
    return sys.argv[sys.argv.index(flag) + 1] if flag in sys.argv[1:] else None


def listen(path: str) -> list[socket.socket]:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    accepted = [server]

    def accept() -> None:
        while True:
            accepted.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    return accepted


def connect(path: str) -> socket.socket:
    deadline = time.monotonic() + 60.0
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(path)
    return client


if __name__ == "__main__":
    wire = move_stdio() if "--move-stdio" in sys.argv[1:] else []
    if "--move-stdio-one" in sys.argv[1:]:
        wire = move_stdio((0,))
    if "--io-on-usr1" in sys.argv[1:]:
        sink = os.open(os.devnull, os.O_WRONLY)
        signal.signal(signal.SIGUSR1, lambda *_: os.write(sink, b"activity\n"))
    child = None
    if "--child" in sys.argv[1:]:
        child = subprocess.Popen([sys.argv[sys.argv.index("--child") + 1], __file__])
    held = listen(path) if (path := _value("--listen")) else []
    held += [connect(path)] if (path := _value("--connect")) else []
    if (python := _value("--browser-child")) is not None:
        to_child, from_child = os.pipe(), os.pipe()
        way = [[f"--{w}", p] for w in ("listen", "connect") if (p := _value(f"--child-{w}"))]
        child = subprocess.Popen(
            [python, __file__, *(arg for pair in way for arg in pair)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            pass_fds=(to_child[0], from_child[1]),
            start_new_session=True,
        )
        os.close(to_child[0])
        os.close(from_child[1])
    # Touch some memory so the tree has a size worth reporting.
    ballast = bytearray(4 << 20)
    time.sleep(LIFETIME_SECONDS)
    sys.exit(0)
