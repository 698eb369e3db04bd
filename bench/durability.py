"""What flushing acknowledged writes costs: registrations through the real writer, each
acknowledged, committed flushed (now) and unflushed (the commit path before), same run."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path
from typing import Any, cast

import anyio

from actors.mailbox import Reply, ask
from actors.replies import WriteAck
from actors.writer.actor import RegistryWriter
from actors.writer.inbox import InsertRegistration, WriterInbox
from bench.fixtures import live_rows
from bench.processes import short_tempdir
from bench.report import Figure
from supervisor.clock import MonotonicWall, SystemClock
from supervisor.store.base import Store, WriteTx
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.system.probes import LocalProbes

__all__ = ["run"]


class _Unflushed:
    """The store as it committed before: no transaction flushed (``synchronous = NORMAL``)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def write(self, *, durable: bool = True) -> AbstractAsyncContextManager[WriteTx]:
        del durable
        return self._store.write(durable=False)


def _insert(row: dict[str, Any], reply: Reply[WriteAck]) -> InsertRegistration:
    return InsertRegistration(row=row, reply=reply)


async def _register_all(
    path: Path, rows: Sequence[dict[str, Any]], *, senders: int, flushed: bool
) -> float:
    """Seconds for ``senders`` tasks to insert ``rows``, each awaiting its acknowledgement."""
    store = await open_sqlite_store(path)
    try:
        outbox, inbox = anyio.create_memory_object_stream[WriterInbox](8192)
        writer = RegistryWriter(
            store=store if flushed else cast(Store, _Unflushed(store)),
            inbox=inbox,
            clock=MonotonicWall(SystemClock()),
            probes=LocalProbes(),
        )

        async def sender(mine: Sequence[dict[str, Any]]) -> None:
            for row in mine:
                ack: WriteAck = await ask(outbox, partial(_insert, row), actor="registry_writer")
                if not ack.ok:
                    raise RuntimeError(f"a registration was refused: {ack}")

        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)
            with outbox:
                started = time.perf_counter()
                async with anyio.create_task_group() as senders_tg:
                    for index in range(senders):
                        senders_tg.start_soon(sender, rows[index::senders])
                elapsed = time.perf_counter() - started
        return elapsed
    finally:
        await store.close()


async def _rounds(
    work: Path, count: int, senders: int, rounds: int, label: str
) -> tuple[float, float, list[float]]:
    """Flushed and unflushed alternate, each round on fresh databases; rates per second
    summed over rounds, and the per-round ratios (flushed / unflushed)."""
    flushed_s = unflushed_s = 0.0
    ratios = []
    for n in range(rounds):
        seconds = {}
        for flushed in (True, False):
            rows = live_rows(count, first_pid=500_000)
            path = work / f"{label}-{n}-{'flushed' if flushed else 'unflushed'}.sqlite3"
            seconds[flushed] = await _register_all(path, rows, senders=senders, flushed=flushed)
        flushed_s += seconds[True]
        unflushed_s += seconds[False]
        ratios.append(seconds[True] / seconds[False])  # time flushed / time unflushed
    return count * rounds / flushed_s, count * rounds / unflushed_s, ratios


def _fsync_seconds(work: Path, count: int) -> float:
    """Median time of one 4 KiB write and its fsync on the benchmark's filesystem."""
    times = []
    with (work / "fsync-probe").open("wb") as probe:
        for _ in range(count):
            started = time.perf_counter()
            probe.write(b"\0" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(quick: bool) -> list[Figure]:
    one_by_one = 200 if quick else 1_000
    together, senders = (2_000, 32) if quick else (10_000, 64)
    rounds = 1 if quick else 3
    with short_tempdir("fsb-dur-") as work:
        fsync_s = _fsync_seconds(work, 50)
        seq_flushed, seq_unflushed, seq_ratios = anyio.run(
            _rounds, work, one_by_one, 1, rounds, "one"
        )
        par_flushed, par_unflushed, par_ratios = anyio.run(
            _rounds, work, together, senders, rounds, "many"
        )
    figures = [
        Figure(
            name="durability.fsync_ms",
            label="one 4 KiB write + fsync on this filesystem (median of 50)",
            value=fsync_s * 1000,
            unit="ms",
        )
    ]
    for kind, flushed, unflushed, ratios, detail in (
        ("one_sender", seq_flushed, seq_unflushed, seq_ratios, "1 sender"),
        ("many_senders", par_flushed, par_unflushed, par_ratios, f"{senders} senders"),
    ):
        figures += [
            Figure(
                name=f"durability.{kind}.flushed_per_s",
                label=f"acked registrations, flushed commits, {detail}",
                value=flushed,
                unit="/s",
            ),
            Figure(
                name=f"durability.{kind}.unflushed_per_s",
                label=f"acked registrations, unflushed commits (before), {detail}",
                value=unflushed,
                unit="/s",
            ),
            Figure(
                name=f"durability.{kind}.cost_ratio",
                label=f"cost of flushing, unflushed rate / flushed rate, {detail}",
                value=statistics.median(ratios),
                unit="x",
                detail={"per_round": ratios},
            ),
        ]
    return figures
