"""Registry writer on PostgreSQL: queued heartbeat jobs, spoiled and failing jobs redone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from anyio.streams.memory import MemoryObjectSendStream

from actors.replies import HeartbeatResult
from actors.writer.actor import WriterSettings
from actors.writer.inbox import HeartbeatWrite, TouchHeartbeats, WriterInbox
from supervisor.policy.stamps import format_stamp
from supervisor.store.postgres.open import postgres_store
from supervisor.store.postgres.store import PostgresStore
from tests.actors.harness import START
from tests.actors.helpers_actors import (
    ReplyBox,
    ReplyBoxes,
    registration_row,
    reply_boxes,
    running_writer,
)
from tests.actors.test_writer import beat_for

pytestmark = pytest.mark.anyio

BeatReplies = tuple[HeartbeatResult, ...]
PIPELINED = WriterSettings(beats_per_job=1, jobs_in_flight=2)
T1, T2 = (format_stamp(START.replace(minute=m)) for m in (1, 2))
#: A stamp PostgreSQL refuses to store (text cannot hold NUL): its job fails on the server.
POISONED_STAMP = "2026-01-01T00:02:00\x00Z"


@asynccontextmanager
async def _store(pg_url: str, *rows: Mapping[str, Any]) -> AsyncIterator[PostgresStore]:
    async with postgres_store(pg_url) as store:
        async with store.write() as tx:
            for row in rows:
                await tx.insert_registration(row)
        yield store


async def _stamps(store: PostgresStore) -> dict[str, str]:
    return {
        str(r["worker_identity"]): str(r["last_heartbeat_at"])
        for r in await store.read_registrations()
    }


async def _remember(
    inbox: MemoryObjectSendStream[WriterInbox], boxes: ReplyBoxes, rows: Sequence[Any]
) -> None:
    """Beats judged from the table, so the writer judges these rows' later beats from
    memory, and queues them as jobs."""
    box: ReplyBox[BeatReplies] = boxes.new()
    inbox.send_nowait(TouchHeartbeats(beats=tuple(beat_for(r, T1) for r in rows), reply=box.reply))
    assert all(result.ok for result in await box.get())


def _send(
    inbox: MemoryObjectSendStream[WriterInbox], boxes: ReplyBoxes, beats: Sequence[HeartbeatWrite]
) -> list[ReplyBox[BeatReplies]]:
    replies: list[ReplyBox[BeatReplies]] = [boxes.new() for _ in beats]
    for beat, box in zip(beats, replies, strict=True):
        inbox.send_nowait(TouchHeartbeats(beats=(beat,), reply=box.reply))
    return replies


async def test_beats_known_to_the_writer_commit_as_queued_jobs(pg_url: str) -> None:
    rows = [registration_row(pid=500 + i) for i in range(4)]
    async with _store(pg_url, *rows) as db, running_writer(db, settings=PIPELINED) as rig:
        with reply_boxes() as boxes:
            await _remember(rig.inbox, boxes, rows)
            before = rig.writer.batches_committed
            replies = _send(rig.inbox, boxes, [beat_for(r, T2) for r in rows])
            results = [(await box.get())[0] for box in replies]
            assert rig.writer.batches_committed == before + len(rows)
        assert all(r.ok and r.last_heartbeat_at == T2 for r in results)
        assert set((await _stamps(db)).values()) == {T2}


async def test_a_row_another_host_retired_spoils_its_job_and_is_judged_from_the_table(
    pg_url: str,
) -> None:
    gone, kept = registration_row(pid=601), registration_row(pid=602, namespace="reviewer")
    async with _store(pg_url, gone, kept) as db, running_writer(db, settings=PIPELINED) as rig:
        with reply_boxes() as boxes:
            await _remember(rig.inbox, boxes, (gone, kept))
            other_host = await asyncpg.connect(pg_url)
            try:
                await other_host.execute(
                    "UPDATE worker_registrations SET status = 'retired' WHERE worker_identity = $1",
                    gone["worker_identity"],
                )
            finally:
                await other_host.close()
            # One job holding both beats: the spoiled statement must not stamp either.
            box: ReplyBox[BeatReplies] = boxes.new()
            beats = (beat_for(gone, T2), beat_for(kept, T2))
            rig.inbox.send_nowait(TouchHeartbeats(beats=beats, reply=box.reply))
            refused, accepted = await box.get()
        assert (refused.ok, refused.code) == (False, "registration_not_active")
        assert (accepted.ok, accepted.last_heartbeat_at) == (True, T2)
        assert await _stamps(db) == {gone["worker_identity"]: T1, kept["worker_identity"]: T2}


async def test_a_job_the_server_refuses_is_redone_so_only_the_poisoned_beat_fails(
    pg_url: str,
) -> None:
    namespaces = ("author", "reviewer", "merger")
    rows = [registration_row(pid=700 + i, namespace=namespaces[i]) for i in range(3)]
    settings = WriterSettings(beats_per_job=256, jobs_in_flight=2)
    async with _store(pg_url, *rows) as db, running_writer(db, settings=settings) as rig:
        with reply_boxes() as boxes:
            await _remember(rig.inbox, boxes, rows)
            before = rig.writer.batches_committed
            beats = [
                beat_for(rows[0], T2),
                beat_for(rows[1], POISONED_STAMP),
                beat_for(rows[2], T2),
            ]
            box: ReplyBox[BeatReplies] = boxes.new()
            rig.inbox.send_nowait(TouchHeartbeats(beats=tuple(beats), reply=box.reply))
            results = await box.get()
            # The job failed; the full transaction, retried in halves, committed the rest.
            assert rig.writer.batches_committed > before
        assert [(r.ok, r.code) for r in results] == [
            (True, "ok"),
            (False, "store_error"),
            (True, "ok"),
        ]
        stamps = await _stamps(db)
        assert [stamps[str(r["worker_identity"])] for r in rows] == [T2, T1, T2]
