"""One ``/proc`` listing answers "is this pid absent?" for a whole sweep chunk at once."""

from __future__ import annotations

import os
from functools import lru_cache

__all__ = ["complete_per_mountinfo", "listing_is_complete", "visible_pids"]


@lru_cache(maxsize=1)
def listing_is_complete() -> bool:
    """Whether ``/proc`` lists every process of this pid namespace (checked once)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            complete = complete_per_mountinfo(handle.read())
        # A /proc mounted for another pid namespace (a container given the host's)
        # numbers processes differently: its entries say nothing about our pids.
        return complete and os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False


def complete_per_mountinfo(text: str) -> bool:
    """Read ``/proc``'s mount options: with ``hidepid`` set, other users' processes
    are missing from the listing and absence would be misread as death."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[4] != "/proc" or " - proc " not in line:
            continue
        super_options = line.split(" - ", 1)[1].split()[-1].split(",")
        for option in super_options:
            if option.startswith("hidepid=") and option.split("=", 1)[1] not in ("0", "off"):
                return False
        return True
    return False


def visible_pids() -> frozenset[int] | None:
    """Every process id listed in ``/proc`` now, or ``None`` when the listing can't be trusted.

    A process that is alive throughout the read is always listed, so a
    registered pid that is missing cannot belong to that (still running)
    incarnation. Thread ids are not listed; worker pids are process ids.
    """
    if not listing_is_complete():
        return None
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    # C-level loops: on a host running ten thousand workers this is one entry each.
    return frozenset(map(int, filter(str.isdigit, names)))
