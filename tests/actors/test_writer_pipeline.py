"""Registry writer: heartbeat batches judged from memory are queued back to back, in order."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from anyio.streams.memory import MemoryObjectSendStream

from actors.replies import HeartbeatResult
from actors.writer.actor import WriterSettings
from actors.writer.inbox import HeartbeatWrite, TouchHeartbeats, WriterInbox
from supervisor.errors import StoreError
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import CommitChain, WriteTx
from tests.actors.harness import START
from tests.actors.helpers_actors import (
    ReplyBox,
    ReplyBoxes,
    registration_row,
    reply_boxes,
    running_writer,
)
from tests.actors.helpers_store import RecordingStore
from tests.actors.test_writer import beat_for, by_identity, real_store, seed

pytestmark = pytest.mark.anyio

BeatReplies = tuple[HeartbeatResult, ...]
#: One message per job and two jobs in flight: every test queues a job behind another.
PIPELINED = WriterSettings(beats_per_job=1, jobs_in_flight=2)
T1, T2, T3 = (format_stamp(START.replace(minute=m)) for m in (1, 2, 3))


async def test_beats_known_to_the_writer_commit_as_one_job_each(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        rows = [registration_row(pid=500 + i) for i in range(4)]
        await seed(db, *rows)
        async with running_writer(db, settings=PIPELINED) as rig:
            with reply_boxes() as boxes:
                await _remember(rig.inbox, boxes, tuple(beat_for(r, T1) for r in rows))
                before = rig.writer.batches_committed
                replies: list[ReplyBox[BeatReplies]] = [boxes.new() for _ in rows]
                for row, box in zip(rows, replies, strict=True):
                    rig.inbox.send_nowait(
                        TouchHeartbeats(beats=(beat_for(row, T2),), reply=box.reply)
                    )
                results = [await box.get() for box in replies]
                assert rig.writer.batches_committed == before + len(rows)
        assert all(r[0].ok and r[0].last_heartbeat_at == T2 for r in results)
        assert {r["last_heartbeat_at"] for r in (await by_identity(db)).values()} == {T2}


async def test_a_row_retired_behind_the_writers_back_is_judged_from_the_table(
    tmp_path: Path,
) -> None:
    async with real_store(tmp_path) as db:
        gone, kept = registration_row(pid=601), registration_row(pid=602, namespace="reviewer")
        await seed(db, gone, kept)
        async with running_writer(db, settings=PIPELINED) as rig:
            with reply_boxes() as boxes:
                await _remember(rig.inbox, boxes, (beat_for(gone, T1), beat_for(kept, T1)))
                _set_status(db.path, str(gone["worker_identity"]), "retired")
                first: ReplyBox[BeatReplies] = boxes.new()
                second: ReplyBox[BeatReplies] = boxes.new()
                rig.inbox.send_nowait(
                    TouchHeartbeats(beats=(beat_for(gone, T2),), reply=first.reply)
                )
                rig.inbox.send_nowait(
                    TouchHeartbeats(beats=(beat_for(kept, T2),), reply=second.reply)
                )
                [refused], [accepted] = await first.get(), await second.get()
        assert (refused.ok, refused.code) == (False, "registration_not_active")
        assert (accepted.ok, accepted.last_heartbeat_at) == (True, T2)
        stamps = {k: v["last_heartbeat_at"] for k, v in (await by_identity(db)).items()}
        assert stamps == {gone["worker_identity"]: T1, kept["worker_identity"]: T2}


async def test_a_redone_job_never_moves_a_stamp_backwards(tmp_path: Path) -> None:
    """Job 1 finds a row retired and is redone from the table; job 2, queued behind it and
    holding a newer beat of another worker, must not commit first."""
    async with real_store(tmp_path) as db:
        gone, kept = registration_row(pid=701), registration_row(pid=702, namespace="reviewer")
        await seed(db, gone, kept)
        settings = WriterSettings(beats_per_job=2, jobs_in_flight=2)
        async with running_writer(db, settings=settings) as rig:
            with reply_boxes() as boxes:
                await _remember(rig.inbox, boxes, (beat_for(gone, T1), beat_for(kept, T1)))
                _set_status(db.path, str(gone["worker_identity"]), "retired")
                older: ReplyBox[BeatReplies] = boxes.new()
                newer: ReplyBox[BeatReplies] = boxes.new()
                both = (beat_for(gone, T2), beat_for(kept, T2))
                rig.inbox.send_nowait(TouchHeartbeats(beats=both, reply=older.reply))
                rig.inbox.send_nowait(
                    TouchHeartbeats(beats=(beat_for(kept, T3),), reply=newer.reply)
                )
                old_results, [new_result] = await older.get(), await newer.get()
        assert [r.code for r in old_results] == ["registration_not_active", "ok"]
        assert (new_result.ok, new_result.last_heartbeat_at) == (True, T3)
        assert (await by_identity(db))[kept["worker_identity"]]["last_heartbeat_at"] == T3


async def test_a_failed_job_answers_store_error_and_the_writer_carries_on(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        rows = [registration_row(pid=800 + i) for i in range(2)]
        await seed(db, *rows)
        store = RecordingStore(db)
        async with running_writer(store, settings=PIPELINED) as rig:
            with reply_boxes() as boxes:
                await _remember(rig.inbox, boxes, tuple(beat_for(r, T1) for r in rows))
                store.commit_error = RuntimeError("disk on fire")
                failing: list[ReplyBox[BeatReplies]] = [boxes.new() for _ in rows]
                for row, box in zip(rows, failing, strict=True):
                    rig.inbox.send_nowait(
                        TouchHeartbeats(beats=(beat_for(row, T2),), reply=box.reply)
                    )
                failed = [(await box.get())[0] for box in failing]
                store.commit_error = None
                again: ReplyBox[BeatReplies] = boxes.new()
                rig.inbox.send_nowait(
                    TouchHeartbeats(beats=(beat_for(rows[0], T3),), reply=again.reply)
                )
                [recovered] = await again.get()
        assert [(r.ok, r.code) for r in failed] == [(False, "store_error")] * 2
        assert (recovered.ok, recovered.last_heartbeat_at) == (True, T3)
        stamps = {k: v["last_heartbeat_at"] for k, v in (await by_identity(db)).items()}
        assert stamps == {rows[0]["worker_identity"]: T3, rows[1]["worker_identity"]: T1}


async def _remember(
    inbox: MemoryObjectSendStream[WriterInbox],
    boxes: ReplyBoxes,
    beats: tuple[HeartbeatWrite, ...],
) -> None:
    """Beats the writer accepts, read from the table: afterwards it judges these rows
    from memory, which is what queues their later beats as jobs."""
    box: ReplyBox[BeatReplies] = boxes.new()
    inbox.send_nowait(TouchHeartbeats(beats=beats, reply=box.reply))
    assert all(result.ok for result in await box.get())


def _set_status(path: Path, identity: str, status: str) -> None:
    """Another process changing a row: the writer does not see it happen."""
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE worker_registrations SET status = ? WHERE worker_identity = ?",
            (status, identity),
        )
    conn.close()


async def test_a_store_that_refuses_to_queue_answers_store_error(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        row = registration_row(pid=901)
        await seed(db, row)
        store = _RefusingStore(db)
        async with running_writer(store, settings=PIPELINED) as rig:
            with reply_boxes() as boxes:
                await _remember(rig.inbox, boxes, (beat_for(row, T1),))
                store.refuse = True
                box: ReplyBox[BeatReplies] = boxes.new()
                rig.inbox.send_nowait(TouchHeartbeats(beats=(beat_for(row, T2),), reply=box.reply))
                [result] = await box.get()
                store.refuse = False
                again: ReplyBox[BeatReplies] = boxes.new()
                rig.inbox.send_nowait(
                    TouchHeartbeats(beats=(beat_for(row, T3),), reply=again.reply)
                )
                [later] = await again.get()
        assert (result.ok, result.code) == (False, "store_error")
        assert "queue refused" in result.detail
        assert (later.ok, later.last_heartbeat_at) == (True, T3)


class _RefusingStore(RecordingStore):
    """Refuses to queue heartbeat jobs while ``refuse`` is set, as a closed store does;
    its full transactions fail too, so the redo cannot hide the refusal."""

    refuse = False

    def submit_heartbeats(
        self, beats: Sequence[tuple[str, str]], chain: CommitChain
    ) -> Awaitable[bool]:
        if self.refuse:
            raise StoreError("queue refused")
        return super().submit_heartbeats(beats, chain)

    @asynccontextmanager
    async def write(self, *, durable: bool = True) -> AsyncIterator[WriteTx]:
        if self.refuse:
            raise StoreError("queue refused")
        async with super().write(durable=durable) as tx:
            yield tx


async def test_a_row_forgotten_mid_batch_is_judged_from_the_table_in_later_jobs(
    tmp_path: Path,
) -> None:
    """Jobs 1 and 4 name a row retired behind the writer's back. Job 1's redo makes the
    writer forget the row, so job 4 must not be judged from memory (it would read as an
    unknown registration) but from the table."""
    async with real_store(tmp_path) as db:
        gone = registration_row(pid=1001)
        kept = [
            registration_row(pid=1002 + i, namespace=ns)
            for i, ns in enumerate(("reviewer", "merger"))
        ]
        await seed(db, gone, *kept)
        async with running_writer(db, settings=PIPELINED) as rig:
            with reply_boxes() as boxes:
                await _remember(rig.inbox, boxes, tuple(beat_for(row, T1) for row in (gone, *kept)))
                _set_status(db.path, str(gone["worker_identity"]), "retired")
                order = (gone, kept[0], kept[1], gone)
                replies: list[ReplyBox[BeatReplies]] = [boxes.new() for _ in order]
                for row, box in zip(order, replies, strict=True):
                    rig.inbox.send_nowait(
                        TouchHeartbeats(beats=(beat_for(row, T2),), reply=box.reply)
                    )
                codes = [(await box.get())[0].code for box in replies]
        assert codes == ["registration_not_active", "ok", "ok", "registration_not_active"]
