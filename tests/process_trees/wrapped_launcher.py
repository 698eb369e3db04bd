"""Becomes the fake server as the exec wrapper would: the exec marker names this very process.

``python wrapped_launcher.py NAME PYTHON``: sets ``FLEET_SUPERVISOR_EXEC`` to a marker whose
leader is this pid and start and whose client is the parent, then execs PYTHON running
fake_server.py as NAME (same pid, same start: the marker names the server).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _start(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
        return handle.read().rpartition(")")[2].split()[19]


if __name__ == "__main__":
    name, python = sys.argv[1], sys.argv[2]
    me, parent = os.getpid(), os.getppid()
    marker = (
        f"v1;leader={me}:{_start(me)};client={parent}:{_start(parent)};boot=b;"
        "client_name=claude_code;name=fake;namespace=author;daemon=test"
    )
    server = str(Path(__file__).with_name("fake_server.py"))
    os.execve(python, [name, server], {**os.environ, "FLEET_SUPERVISOR_EXEC": marker})
