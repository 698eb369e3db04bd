"""A stand-in MCP server process: never reads its stdin, sleeps (bounded), may start a child.

``python fake_server.py [--child PYTHON]``: with ``--child`` it starts one more of itself
under PYTHON (a tree), sharing its stdio as an npx or a shell wrapper would.
"""

from __future__ import annotations

import subprocess
import sys
import time

LIFETIME_SECONDS = 120.0

if __name__ == "__main__":
    child = None
    if "--child" in sys.argv[1:]:
        child = subprocess.Popen([sys.argv[2], __file__])
    # Touch some memory so the tree has a size worth reporting.
    ballast = bytearray(4 << 20)
    time.sleep(LIFETIME_SECONDS)
    sys.exit(0)
