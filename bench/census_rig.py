"""What the census benchmarks share: a stand-in client with servers over pipes, and a
census actor wired to a registry writer on one store."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from actors.census.actor import CensusActor, CensusSettings
from actors.census.inbox import CensusInbox
from actors.writer.actor import RegistryWriter
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.store.base import Store
from supervisor.system.probes import ProbeBackend

__all__ = ["StandInClient", "census_and_writer"]

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
