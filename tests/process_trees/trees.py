"""Real process trees for discovery tests: a stand-in client and the children it starts."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tests.spawned import Spawned, spawning, wait_exec_of

__all__ = [
    "EXEC_LATER",
    "FAKE_CLIENT",
    "FAKE_SERVER",
    "Tree",
    "child",
    "gone",
    "kids_of",
    "parent_of",
    "processes",
    "running",
    "start_tree",
    "until",
    "wait_stdio_moved",
]

_HERE = Path(__file__).resolve().parent
FAKE_CLIENT = _HERE / "fake_client.py"
FAKE_SERVER = _HERE / "fake_server.py"
WRAPPED_LAUNCHER = _HERE / "wrapped_launcher.py"
EXEC_LATER = _HERE / "exec_later.py"
_POLLS = 1000


@dataclass(frozen=True, slots=True)
class Tree:
    client: int
    children: tuple[int, ...]


def child(
    name: str,
    *,
    stdio: str = "pipe",
    tree: bool = False,
    args: Sequence[str] = (),
    wrapped: bool = False,
) -> dict[str, Any]:
    """A child the client starts: this interpreter running the fake server, named ``name``
    (``wrapped``: through a launcher that leaves the exec wrapper's marker, as ``exec``)."""
    if wrapped:
        argv = [name, str(WRAPPED_LAUNCHER), name, sys.executable]
    else:
        argv = [name, str(FAKE_SERVER), *(["--child", sys.executable] if tree else []), *args]
    return {"argv": argv, "stdio": stdio, "executable": sys.executable}


def kids_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` now."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="latin-1") as handle:
                text = handle.read()
        except OSError:
            continue
        if int(text.rpartition(")")[2].split()[1]) == pid:
            found.append(int(name))
    return sorted(found)


def wait_stdio_moved(pid: int) -> None:
    """Until ``pid`` has pointed its fd 0 at /dev/null (moved its stdio above fd 2)."""
    until(lambda: os.readlink(f"/proc/{pid}/fd/0") == os.devnull, f"pid {pid} to move its stdio")


def gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


def until(check: Callable[[], object], what: str) -> None:
    """Poll real processes until ``check`` holds: bounded in count, never protocol time."""
    for _ in range(_POLLS):
        if check():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (one nobody has waited for yet)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
            return handle.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid`` now, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
            return int(handle.read().rpartition(")")[2].split()[1])
    except OSError:
        return None


def start_tree(spawned: Spawned, client_name: str, children: Sequence[dict[str, Any]]) -> Tree:
    """Start the fake client as ``client_name`` with ``children``; every process of the
    tree (grandchildren included) is tracked by ``spawned`` and so killed at its close."""
    proc = spawned.popen(
        [client_name, str(FAKE_CLIENT), json.dumps(list(children))],
        executable=sys.executable,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        assert selector.select(timeout=30), "the fake client printed nothing"
    pids = tuple(json.loads(proc.stdout.readline())["children"])
    for pid in pids:
        spawned.track(pid)
        wait_exec_of(pid)
    for pid, spec in zip(pids, children, strict=True):
        if "--child" in spec["argv"] or "--browser-child" in spec["argv"]:
            until(partial(kids_of, pid), f"pid {pid} to start its child")
            for grandchild in kids_of(pid):
                spawned.track(grandchild)
    return Tree(client=proc.pid, children=pids)


processes = spawning


def io_quiet(pid: int) -> None:
    """Wait (bounded in count) until ``pid``'s I/O counters stop moving for a tenth of a
    second: a new process reads its modules first, and a test that measures idle time
    must start from a quiet process. Real process time, never protocol time."""
    from supervisor.system.io_counters import read_io_bytes

    last = read_io_bytes(pid)
    for _ in range(100):
        time.sleep(0.1)
        now = read_io_bytes(pid)
        if now == last:
            return
        last = now
    raise AssertionError(f"pid {pid} never went quiet")
