"""A launcher that execs the real server later, as ``sh -c`` exec'ing ``node`` does.

``python exec_later.py HOLD NAME PYTHON``: waits (at most a minute) until the path HOLD
exists, then execs PYTHON running fake_server.py as NAME: same pid, same start, another
command line.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

_HOLD_SECONDS = 60.0

if __name__ == "__main__":
    hold, name, python = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    deadline = time.monotonic() + _HOLD_SECONDS
    while not hold.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    server = str(Path(__file__).resolve().with_name("fake_server.py"))
    os.execv(python, [name, server])
