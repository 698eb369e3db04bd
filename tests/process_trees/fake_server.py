"""A stand-in MCP server process: never reads its stdin, sleeps (bounded), may start a child.

``python fake_server.py [--child PYTHON] [--move-stdio]``: with ``--child`` it starts one
more of itself under PYTHON (a tree), sharing its stdio as an npx or a shell wrapper would.
With ``--move-stdio`` it does what the MCP Python SDK's stdio server does: keeps its stdin
and stdout on private copies above fd 2, then points fd 0 at /dev/null and fd 1 at a copy
of stderr. ``--move-stdio-one`` keeps only stdin's copy: one descriptor to the client,
as a control channel (node's IPC) is. ``--io-on-usr1`` writes one line to /dev/null on
each SIGUSR1: the kernel's I/O counters of the process move only then.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time

LIFETIME_SECONDS = 120.0


def move_stdio(fds: tuple[int, ...] = (0, 1)) -> list[int]:
    kept = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in fds]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return kept


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
    # Touch some memory so the tree has a size worth reporting.
    ballast = bytearray(4 << 20)
    time.sleep(LIFETIME_SECONDS)
    sys.exit(0)
