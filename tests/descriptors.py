"""Descriptor facts the tests check: whether this process still holds an fd."""

from __future__ import annotations

import os

__all__ = ["is_closed"]


def is_closed(fd: int) -> bool:
    """True when ``fd`` is no longer open in this process."""
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False
