"""The registry writer alone, one acknowledged beat per sender message, against raw executemany."""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import aiosqlite
import anyio
from anyio.streams.memory import MemoryObjectSendStream

from actors.mailbox import Reply, ask, post
from actors.replies import HeartbeatResult
from actors.writer.actor import RegistryWriter
from actors.writer.inbox import HeartbeatWrite, TouchHeartbeats, WriterInbox
from bench.fixtures import live_rows, make_db, sqlite_connect
from bench.processes import short_tempdir
from bench.report import Figure
from supervisor.clock import MonotonicWall, SystemClock
from supervisor.policy.stamps import format_stamp
from supervisor.store import sql
from supervisor.store.dialect import SQLITE
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.store.sqlite.tx import begin_immediate, commit, executemany
from supervisor.system.probes import LocalProbes

__all__ = ["run"]


def _stamps(count: int) -> list[str]:
    """Distinct, increasing stamps so every UPDATE really changes its row."""
    base = datetime.now(UTC)
    return [format_stamp(base + timedelta(microseconds=i)) for i in range(count)]


def _touch(beat: HeartbeatWrite, reply: Reply[tuple[HeartbeatResult, ...]]) -> TouchHeartbeats:
    return TouchHeartbeats(beats=(beat,), reply=reply)


async def _send_all(
    outbox: MemoryObjectSendStream[WriterInbox],
    beats: Sequence[HeartbeatWrite],
    *,
    senders: int,
    total: int,
    limit: float,
) -> tuple[int, float]:
    """``senders`` tasks, each sending TouchHeartbeats with one beat and awaiting its reply."""
    acked = 0
    refused = 0
    per_sender = max(1, total // senders)
    started = time.perf_counter()
    deadline = started + limit

    async def sender(index: int) -> None:
        nonlocal acked, refused
        # Sender i owns beats i, i+S, i+2S, ...: a batch never holds one row twice.
        mine = beats[index::senders]
        for k in range(per_sender):
            results: tuple[HeartbeatResult, ...] = await ask(
                outbox, partial(_touch, mine[k % len(mine)]), actor="registry_writer"
            )
            if results[0].ok:
                acked += 1
            else:
                refused += 1
            if time.perf_counter() > deadline:
                return

    async with anyio.create_task_group() as tg:
        for index in range(senders):
            tg.start_soon(sender, index)
    elapsed = time.perf_counter() - started
    if refused:
        raise RuntimeError(f"{refused} well-formed beats were refused")
    return acked, elapsed


async def _writer_rate(
    path: Path, beats: Sequence[HeartbeatWrite], *, senders: int, total: int, limit: float
) -> tuple[int, float, int]:
    """The real RegistryWriter on a real store."""
    store = await open_sqlite_store(path)
    try:
        outbox, inbox = anyio.create_memory_object_stream[WriterInbox](8192)
        clock = MonotonicWall(SystemClock())
        writer = RegistryWriter(store=store, inbox=inbox, clock=clock, probes=LocalProbes())
        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)
            with outbox:
                acked, elapsed = await _send_all(
                    outbox, beats, senders=senders, total=total, limit=limit
                )
        return acked, elapsed, writer.batches_committed
    finally:
        await store.close()


async def _writer_unacked_rate(
    path: Path, beats: Sequence[HeartbeatWrite], *, senders: int, total: int
) -> tuple[int, float]:
    """The same writer and beats with nobody waiting for an answer: row updates through one
    writer, the DESIGN §10 reference for what acknowledging every sender may cost."""
    store = await open_sqlite_store(path)
    try:
        outbox, inbox = anyio.create_memory_object_stream[WriterInbox](8192)
        clock = MonotonicWall(SystemClock())
        writer = RegistryWriter(store=store, inbox=inbox, clock=clock, probes=LocalProbes())
        per_sender = max(1, total // senders)
        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)
            with outbox:
                started = time.perf_counter()

                async def sender(index: int) -> None:
                    mine = beats[index::senders]
                    for k in range(per_sender):
                        await post(
                            outbox,
                            _touch(mine[k % len(mine)], Reply.discarding()),
                            actor="registry_writer",
                        )

                async with anyio.create_task_group() as senders_tg:
                    for index in range(senders):
                        senders_tg.start_soon(sender, index)
                # The writer handles its inbox in order: this answer means every beat
                # before it was committed.
                last: tuple[HeartbeatResult, ...] = await ask(
                    outbox, partial(_touch, beats[0]), actor="registry_writer"
                )
                elapsed = time.perf_counter() - started
                if not last[0].ok:
                    raise RuntimeError(f"a well-formed beat was refused: {last[0]}")
        return per_sender * senders + 1, elapsed
    finally:
        await store.close()


def _ok(beat: HeartbeatWrite) -> HeartbeatResult:
    return HeartbeatResult(ok=True, code="ok", detail="", worker_identity=beat.worker_identity)


async def _echo_rate(
    beats: Sequence[HeartbeatWrite], *, senders: int, total: int, limit: float
) -> tuple[int, float]:
    """The messaging floor: an actor that drains like the writer and acks without a database."""
    outbox, inbox = anyio.create_memory_object_stream[WriterInbox](8192)

    async def echo() -> None:
        async for first in inbox:
            batch = [first]
            while len(batch) < 4096:
                try:
                    batch.append(inbox.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            for message in batch:
                assert isinstance(message, TouchHeartbeats)
                message.reply.send(tuple(_ok(b) for b in message.beats))

    async with anyio.create_task_group() as tg:
        tg.start_soon(echo)
        with outbox:
            result = await _send_all(outbox, beats, senders=senders, total=total, limit=limit)
    return result


def _raw_sqlite3(path: Path, pairs: Sequence[tuple[str, str]], batch: int, total: int) -> float:
    """BEGIN IMMEDIATE; executemany(the writer's UPDATE, ``batch`` pairs); COMMIT, repeated."""
    statement = sql.touch_heartbeats(SQLITE)
    conn = sqlite_connect(path)
    try:
        started = time.perf_counter()
        done = 0
        offset = 0
        while done < total:
            chunk = [pairs[(offset + j) % len(pairs)] for j in range(batch)]
            offset += batch
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(statement, chunk)
            conn.execute("COMMIT")
            done += batch
        return done / (time.perf_counter() - started)
    finally:
        conn.close()


async def _raw_aiosqlite(
    path: Path, pairs: Sequence[tuple[str, str]], batch: int, total: int
) -> float:
    """The same batches over one aiosqlite connection (the store's driver): three hops a batch."""
    conn = await aiosqlite.connect(path, isolation_level=None)
    try:
        for pragma in ("busy_timeout = 5000", "journal_mode = WAL", "synchronous = NORMAL"):
            await conn.execute(f"PRAGMA {pragma}")
        statement = sql.touch_heartbeats(SQLITE)
        started = time.perf_counter()
        done = 0
        offset = 0
        while done < total:
            chunk = [pairs[(offset + j) % len(pairs)] for j in range(batch)]
            offset += batch
            await begin_immediate(conn)
            await executemany(conn, statement, chunk)
            await commit(conn)
            done += batch
        return done / (time.perf_counter() - started)
    finally:
        await conn.close()


def run(quick: bool) -> list[Figure]:
    rows_count = 2_000 if quick else 10_000
    senders = 64 if quick else 512
    total = 5_000 if quick else 60_000
    rounds_count = 1 if quick else 3
    limit = 5.0 if quick else 20.0
    rows = live_rows(rows_count, first_pid=300_000)
    stamps = _stamps(rows_count)
    beats = [
        HeartbeatWrite(
            worker_identity=str(r["worker_identity"]),
            pid=int(r["pid"]),
            generation_id=str(r["generation_id"]),
            fencing_epoch=int(r["fencing_epoch"]),
            stamp=stamps[i],
        )
        for i, r in enumerate(rows)
    ]
    pairs = [(b.worker_identity, b.stamp) for b in beats]
    with short_tempdir("fsb-wr-") as work:
        template = work / "template.sqlite3"
        anyio.run(make_db, template, rows)
        copies = {}
        for name in ("writer", "unacked", "raw", "raw_async"):
            copies[name] = work / f"{name}.sqlite3"
            shutil.copyfile(template, copies[name])
        # Acked and unacked alternate for a few rounds and the ratio is the median of the
        # per-round ratios: a burst of load elsewhere on the machine hits one round of
        # both, not one side of the comparison.
        rounds: list[tuple[int, float, int, int, float]] = []
        for _ in range(rounds_count):
            acked, elapsed, batches = anyio.run(
                partial(
                    _writer_rate, copies["writer"], beats, senders=senders, total=total, limit=limit
                )
            )
            unacked_beats, unacked_elapsed = anyio.run(
                partial(
                    _writer_unacked_rate, copies["unacked"], beats, senders=senders, total=acked
                )
            )
            rounds.append((acked, elapsed, batches, unacked_beats, unacked_elapsed))
        acked = sum(r[0] for r in rounds)
        elapsed = sum(r[1] for r in rounds)
        batches = sum(r[2] for r in rounds)
        writer_rate = acked / elapsed
        unacked_rate = sum(r[3] for r in rounds) / sum(r[4] for r in rounds)
        ratios = [(r[0] / r[1]) / (r[3] / r[4]) for r in rounds]
        raw_rate = _raw_sqlite3(copies["raw"], pairs, senders, acked)
        echo = partial(_echo_rate, senders=senders, total=total, limit=limit)
        echo_acked, echo_elapsed = anyio.run(echo, beats)
        raw_async_rate = anyio.run(_raw_aiosqlite, copies["raw_async"], pairs, senders, acked)
    judged = not quick
    return [
        Figure(
            name="writer.acked_per_s",
            label=f"writer actor, {senders} senders, 1 beat/ack",
            value=writer_rate,
            unit="/s",
            judged=judged,
            detail={
                "beats": acked,
                "seconds": elapsed,
                "batches": batches,
                "mean_batch": acked / max(1, batches),
                "rows": rows_count,
            },
        ),
        Figure(
            name="writer.echo_floor_per_s",
            label=f"floor: echo actor, no database, {senders} senders",
            value=echo_acked / echo_elapsed,
            unit="/s",
            judged=judged,
            detail={"beats": echo_acked, "seconds": echo_elapsed},
        ),
        Figure(
            name="writer.raw_executemany_per_s",
            label=f"raw sqlite3 executemany, batches of {senders}",
            value=raw_rate,
            unit="/s",
            judged=judged,
            detail={"batch": senders, "raw_aiosqlite_per_s": raw_async_rate},
        ),
        Figure(
            name="writer.unacked_per_s",
            label=f"writer actor, {senders} senders, no acks",
            value=unacked_rate,
            unit="/s",
            judged=judged,
            detail={"beats": unacked_beats, "seconds": unacked_elapsed},
        ),
        Figure(
            name="writer.vs_unacked_ratio",
            label="writer acked / same writer unacked (median of rounds)",
            value=statistics.median(ratios),
            unit="x",
            goal=0.7,
            op=">=",
            judged=judged,
            detail={"rounds": ratios},
        ),
        Figure(
            name="writer.echo_vs_raw_ratio",
            label="ceiling: echo actor (acks, no database) / raw executemany",
            value=(echo_acked / echo_elapsed) / raw_rate,
            unit="x",
            judged=judged,
            detail={
                "why": "an acknowledged writer cannot outrun an actor that only acknowledges; "
                "when this is below 0.7, the raw-executemany goal is out of reach here"
            },
        ),
        Figure(
            name="writer.vs_raw_ratio",
            label="writer actor / raw executemany",
            value=writer_rate / raw_rate,
            unit="x",
            goal=0.7,
            op=">=",
            judged=judged,
            detail={"vs_raw_aiosqlite": writer_rate / raw_async_rate},
        ),
    ]
