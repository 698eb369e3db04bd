"""The exec wrapper's old path: runs ``supervisor/exec/exec_in_place.py`` for older wraps.

``clients wrap`` used to write ``python -I -S <package>/sidecar/exec_in_place.py`` into
MCP clients' config files, so entries wrapped then still name this file. It bootstraps
its imports as the wrapper does (no site-packages under ``-I -S``) and hands over.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    # Run as a script: the package root is three levels up, as for the wrapper itself.
    sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from supervisor.exec.exec_in_place import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
