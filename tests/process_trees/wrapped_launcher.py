"""Becomes the fake server as the exec wrapper would: the exec marker names this very process.

``python wrapped_launcher.py NAME PYTHON [HOLD]``: sets ``FLEET_SUPERVISOR_EXEC`` to a marker
whose leader is this pid and start and whose client is the parent, then execs PYTHON running
fake_server.py as NAME (same pid, same start: the marker names the server). With HOLD, it
first waits (at most a minute) until that path exists, as the wrapper is seen before its exec.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

_HOLD_SECONDS = 60.0


def _start(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
        return handle.read().rpartition(")")[2].split()[19]


if __name__ == "__main__":
    name, python = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        deadline = time.monotonic() + _HOLD_SECONDS
        while not Path(sys.argv[3]).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    me, parent = os.getpid(), os.getppid()
    marker = (
        f"v1;leader={me}:{_start(me)};client={parent}:{_start(parent)};boot=b;"
        "client_name=claude_code;name=fake;namespace=author;daemon=test"
    )
    server = str(Path(__file__).resolve().with_name("fake_server.py"))  # through a link too
    os.execve(python, [name, server], {**os.environ, "FLEET_SUPERVISOR_EXEC": marker})
