"""What the census benchmarks share: a stand-in client with servers over pipes, and a
census actor wired to a registry writer on one store."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from actors.census.actor import CensusActor, CensusSettings
from actors.census.inbox import CensusInbox
from actors.writer.actor import RegistryWriter
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock, MonotonicWall, SystemClock
from supervisor.store.base import Store
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.system.probes import LocalProbes, ProbeBackend

__all__ = ["StandInClient", "census_and_writer", "sweeps_with_and_without"]

#: The stand-in client: starts COUNT servers named NAME running PROGRAM ARGS..., their
#: stdio pipes to it, prints their pids, and sleeps.
_CLIENT = """
import subprocess, sys, time
count, name, program, *args = sys.argv[1:]
kids = [subprocess.Popen([name, *args], executable=program, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE) for _ in range(int(count))]
print(" ".join(str(k.pid) for k in kids), flush=True)
time.sleep(900)
"""


class StandInClient:
    """A client named ``claude`` with ``servers`` servers over pipes, each a process named
    ``name`` running ``program``; every one is killed by pid on ``close``."""

    def __init__(self, servers: int, *, name: str, program: Sequence[str]) -> None:
        self.proc = subprocess.Popen(
            ["claude", "-c", _CLIENT, str(servers), name, *program],
            executable=sys.executable,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self.servers = [int(p) for p in self.proc.stdout.readline().split()]

    def close(self) -> None:
        for pid in [*self.servers, self.proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def census_and_writer(
    store: Store, clock: Clock, probes: ProbeBackend, home: Path
) -> tuple[CensusActor, RegistryWriter, MemoryObjectSendStream[WriterInbox]]:
    """A census actor that settles no process (every one is read at first sight) and
    reads no home but ``home``, and the writer it records through; the caller runs the
    writer (``tg.start(writer.run)``) and closes its inbox when done."""
    writer_tx, writer_rx = anyio.create_memory_object_stream[WriterInbox](64)
    _census_tx, census_rx = anyio.create_memory_object_stream[CensusInbox](16)
    writer = RegistryWriter(store=store, inbox=writer_rx, clock=clock, probes=probes)
    census = CensusActor(
        inbox=census_rx,
        writer=writer_tx,
        store=store,
        clock=clock,
        probes=probes,
        settings=CensusSettings(home=home, settle_seconds=0.0),
    )
    return census, writer, writer_tx


async def sweeps_with_and_without(
    db: Path,
    home: Path,
    rounds: int,
    without: Callable[[], AbstractContextManager[Any]],
    *,
    warm_sweeps: int = 1,
    look: Callable[[CensusActor], dict[str, Any]] = lambda _census: {},
) -> dict[str, Any]:
    """A census actor on a real SQLite store at ``db``: ``warm_sweeps`` sweeps (every
    process read once), then ``rounds`` rounds of one sweep as the code is and one inside
    ``without()``, their order alternating; the CPU time of each sweep under ``"with"``
    and ``"without"``, and what ``look`` reads of the census after one more plain sweep."""
    store = await open_sqlite_store(db)
    clock = MonotonicWall(SystemClock())
    try:
        census, writer, writer_tx = census_and_writer(store, clock, LocalProbes(), home)
        got: dict[str, Any] = {"with": [], "without": []}
        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)
            for _ in range(warm_sweeps):
                await census.sweep()
            for index in range(rounds):
                order = ("with", "without") if index % 2 == 0 else ("without", "with")
                for mode in order:
                    with without() if mode == "without" else contextlib.nullcontext():
                        began = time.process_time()
                        await census.sweep()
                        got[mode].append(time.process_time() - began)
                    await anyio.sleep(0.02)
            await census.sweep()
            got.update(look(census))
            writer_tx.close()
            tg.cancel_scope.cancel()
        return got
    finally:
        await store.close()
