"""Registry writer: a write that fails for one message or beat fails only that one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from actors.replies import HeartbeatResult, WriteAck
from actors.writer.actor import WriterSettings
from actors.writer.inbox import TouchHeartbeats, UpsertLease
from supervisor.errors import StoreError
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import CommitChain, Store, WriteTx
from tests.actors.harness import START
from tests.actors.helpers_actors import ReplyBox, registration_row, reply_boxes, running_writer
from tests.actors.helpers_store import RecordingStore, RecordingTx
from tests.actors.test_writer import LATER, beat_for, by_identity, lease, real_store, seed

pytestmark = pytest.mark.anyio

BeatReplies = tuple[HeartbeatResult, ...]
#: An identity no database can store: a lone UTF-16 surrogate is not encodable as UTF-8.
POISONED = "wkr-\ud800"


def _rows(count: int) -> list[dict[str, Any]]:
    namespaces = ("author", "reviewer", "merger", "controller", "reconciler")
    return [registration_row(pid=700 + i, namespace=namespaces[i]) for i in range(count)]


async def test_a_poisoned_beat_fails_alone_among_the_beats_of_its_batch(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        rows = _rows(3)
        await seed(db, *rows)
        poisoned = beat_for(rows[0], worker_identity=POISONED)
        with reply_boxes() as boxes:
            group: ReplyBox[BeatReplies] = boxes.new()
            single: ReplyBox[BeatReplies] = boxes.new()
            lease_box: ReplyBox[WriteAck] = boxes.new()
            async with running_writer(RecordingStore(db)) as rig:
                # One message holds the beats of several connections, the poisoned one
                # among them, as the heartbeat actor coalesces them.
                beats = (beat_for(rows[0]), poisoned, beat_for(rows[1]))
                rig.inbox.send_nowait(TouchHeartbeats(beats=beats, reply=group.reply))
                rig.inbox.send_nowait(
                    TouchHeartbeats(beats=(beat_for(rows[2]),), reply=single.reply)
                )
                rig.inbox.send_nowait(UpsertLease(lease=lease("L1"), reply=lease_box.reply))
                grouped, alone, leased = (
                    await group.get(),
                    await single.get(),
                    await lease_box.get(),
                )
        assert [(r.worker_identity, r.ok) for r in grouped] == [
            (rows[0]["worker_identity"], True),
            (POISONED, False),
            (rows[1]["worker_identity"], True),
        ]
        assert grouped[1].code == "store_error"
        assert alone[0].ok
        assert leased.ok
        stored = await by_identity(db)
        assert {stored[r["worker_identity"]]["last_heartbeat_at"] for r in rows} == {LATER}
        assert [r["lease_id"] for r in await db.read_leases()] == ["L1"]


async def test_a_message_whose_write_raises_fails_alone(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        rows = _rows(3)
        await seed(db, *rows)
        store = _ExplodingStore(db, explode_for=rows[1]["worker_identity"])
        with reply_boxes() as boxes:
            replies: list[ReplyBox[BeatReplies]] = [boxes.new() for _ in rows]
            async with running_writer(store) as rig:
                for row, box in zip(rows, replies, strict=True):
                    rig.inbox.send_nowait(TouchHeartbeats(beats=(beat_for(row),), reply=box.reply))
                results = [(await box.get())[0] for box in replies]
        assert [(r.ok, r.code) for r in results] == [
            (True, "ok"),
            (False, "store_error"),
            (True, "ok"),
        ]
        assert "exploded" in results[1].detail
        stored = await by_identity(db)
        assert stored[rows[0]["worker_identity"]]["last_heartbeat_at"] == LATER
        assert stored[rows[2]["worker_identity"]]["last_heartbeat_at"] == LATER
        assert stored[rows[1]["worker_identity"]]["last_heartbeat_at"] != LATER


async def test_a_store_that_cannot_write_is_not_retried_piece_by_piece(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        rows = _rows(5)
        await seed(db, *rows)
        store = RecordingStore(db)
        store.commit_error = StoreError("disk I/O error (injected)")
        with reply_boxes() as boxes:
            replies: list[ReplyBox[BeatReplies]] = [boxes.new() for _ in rows]
            async with running_writer(store) as rig:
                for row, box in zip(rows, replies, strict=True):
                    rig.inbox.send_nowait(TouchHeartbeats(beats=(beat_for(row),), reply=box.reply))
                results = [(await box.get())[0] for box in replies]
        assert {(r.ok, r.code) for r in results} == {(False, "store_error")}
        # The batch, then one empty transaction that shows the store itself is failing.
        assert store.writes_started == 2


async def test_a_queued_job_that_fails_is_redone_by_the_full_transaction(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        [row] = _rows(1)
        await seed(db, row)
        store = _FailingJobStore(db)
        settings = WriterSettings(beats_per_job=1, jobs_in_flight=2)
        with reply_boxes() as boxes:
            async with running_writer(store, settings=settings) as rig:
                first: ReplyBox[BeatReplies] = boxes.new()  # read from the table: remembered
                rig.inbox.send_nowait(TouchHeartbeats(beats=(beat_for(row),), reply=first.reply))
                assert (await first.get())[0].ok
                store.fail_jobs = 1
                later = beat_for(row, stamp=format_stamp(START.replace(minute=6)))
                box: ReplyBox[BeatReplies] = boxes.new()
                rig.inbox.send_nowait(TouchHeartbeats(beats=(later,), reply=box.reply))
                [result] = await box.get()
        assert store.fail_jobs == 0  # the job was queued, and failed
        assert (result.ok, result.last_heartbeat_at) == (True, later.stamp)
        assert (await by_identity(db))[row["worker_identity"]]["last_heartbeat_at"] == later.stamp


class _ExplodingStore(RecordingStore):
    """Its transactions raise on any touch that includes one worker's beat."""

    def __init__(self, inner: Store, *, explode_for: str) -> None:
        super().__init__(inner)
        self.explode_for = explode_for

    @asynccontextmanager
    async def write(self, *, durable: bool = True) -> AsyncIterator[WriteTx]:
        async with super().write(durable=durable) as tx:
            yield _ExplodingTx(tx, self)


class _ExplodingTx(RecordingTx):
    _owner: _ExplodingStore

    async def touch_heartbeats(self, beats: Sequence[tuple[str, str]]) -> int:
        if any(identity == self._owner.explode_for for identity, _ in beats):
            raise StoreError(f"write exploded for {self._owner.explode_for}")
        return await super().touch_heartbeats(beats)


class _FailingJobStore(RecordingStore):
    """The next ``fail_jobs`` queued heartbeat jobs fail as a database error would."""

    fail_jobs = 0

    def submit_heartbeats(
        self, beats: Sequence[tuple[str, str]], chain: CommitChain
    ) -> Awaitable[bool]:
        if self.fail_jobs:
            self.fail_jobs -= 1
            chain.broken = True
            failed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            failed.set_exception(StoreError("job failed (injected)"))
            return failed
        return super().submit_heartbeats(beats, chain)
