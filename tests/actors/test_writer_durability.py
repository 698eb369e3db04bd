"""Acknowledged writes are flushed at commit; heartbeat stamps alone are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.replies import HeartbeatResult, WriteAck
from actors.writer.inbox import InsertRegistration, TouchHeartbeats
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import CommitChain
from supervisor.store.sqlite.connection import fetchall
from supervisor.store.sqlite.store import SQLiteStore
from tests.actors.harness import START
from tests.actors.helpers_actors import ReplyBox, registration_row, reply_boxes, running_writer
from tests.actors.helpers_store import RecordingStore
from tests.actors.test_writer import beat_for, real_store, seed

pytestmark = pytest.mark.anyio

FULL, NORMAL = 2, 1
STAMP = format_stamp(START.replace(minute=5))


async def _level(store: SQLiteStore) -> int:
    rows = await fetchall(store._writer, "PRAGMA synchronous")
    return int(rows[0][0])


async def test_a_write_transaction_is_flushed_unless_it_says_otherwise(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        async with db.write():
            assert await _level(db) == FULL
        async with db.write(durable=False):
            assert await _level(db) == NORMAL
        async with db.write():
            assert await _level(db) == FULL


async def test_a_heartbeat_job_commits_unflushed_and_the_next_write_is_flushed_again(
    tmp_path: Path,
) -> None:
    async with real_store(tmp_path) as db:
        row = registration_row(pid=4100)
        await seed(db, row)
        assert await db.submit_heartbeats([(str(row["worker_identity"]), STAMP)], CommitChain())
        assert await _level(db) == NORMAL
        async with db.write():
            assert await _level(db) == FULL


async def test_the_writer_flushes_a_registration_but_not_a_batch_of_stamps(
    tmp_path: Path,
) -> None:
    async with real_store(tmp_path) as db:
        known = registration_row(pid=4200)
        await seed(db, known)
        store = RecordingStore(db)
        async with running_writer(store) as rig:
            with reply_boxes() as boxes:
                beat: ReplyBox[tuple[HeartbeatResult, ...]] = boxes.new()
                rig.inbox.send_nowait(
                    TouchHeartbeats(beats=(beat_for(known, STAMP),), reply=beat.reply)
                )
                [result] = await beat.get()
                assert result.ok
                stamps_only = list(store.durable_writes)
                ack: ReplyBox[WriteAck] = boxes.new()
                new_row = registration_row(pid=4201, namespace="reviewer")
                rig.inbox.send_nowait(InsertRegistration(row=new_row, reply=ack.reply))
                assert (await ack.get()).ok
    # The first beat of a row the writer has not seen takes the transaction path.
    assert stamps_only == [False]
    assert store.durable_writes[len(stamps_only) :] == [True]
