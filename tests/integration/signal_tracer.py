"""A process that records every signal it receives: one line per signal in the file it is given.

Standard library only. It installs a handler for every catchable signal (all but SIGKILL
and SIGSTOP, which no handler sees: a tracer killed by SIGKILL is simply gone, which the
tests check too), writes ``ready`` once they are in place, and otherwise sleeps; every
wait is bounded, after ``LIFETIME_SECONDS`` it exits. Usage: signal_tracer.py FILE
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from types import FrameType

__all__ = ["LIFETIME_SECONDS", "READY", "main"]

LIFETIME_SECONDS = 600.0
READY = "ready"


def main(path: str) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def note(signum: int, frame: FrameType | None) -> None:
        os.write(fd, f"{signal.Signals(signum).name}\n".encode())

    for signum in signal.valid_signals():
        if signum in (signal.SIGKILL, signal.SIGSTOP):
            continue
        # A signal the platform reserves cannot be caught; every other one is.
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signum, note)
    os.write(fd, f"{READY}\n".encode())
    deadline = time.monotonic() + LIFETIME_SECONDS
    while time.monotonic() < deadline:
        time.sleep(1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
