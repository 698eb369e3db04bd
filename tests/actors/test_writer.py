"""Registry writer: group commit, acknowledgement only after COMMIT, failure isolation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.replies import HeartbeatResult, WriteAck
from actors.writer.inbox import (
    AppendAudit,
    HeartbeatWrite,
    InsertRegistration,
    ReleaseRegistration,
    TouchHeartbeats,
    UpsertLease,
)
from supervisor.errors import StoreError
from supervisor.policy.stamps import format_stamp
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.store.sqlite.store import SQLiteStore
from tests.actors.harness import START
from tests.actors.helpers_actors import (
    ReplyBox,
    registration_row,
    reply_boxes,
    running_writer,
)
from tests.actors.helpers_store import RecordingStore

pytestmark = pytest.mark.anyio

BeatReplies = tuple[HeartbeatResult, ...]


def by_worker(results: BeatReplies) -> dict[str, HeartbeatResult]:
    """Writer replies come one per beat, in order; tests look them up by worker."""
    return {r.worker_identity: r for r in results}


LATER = format_stamp(START.replace(minute=5))


@asynccontextmanager
async def real_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    store = await open_sqlite_store(tmp_path / "registry.sqlite3")
    try:
        yield store
    finally:
        await store.close()


async def seed(store: SQLiteStore, *rows: Mapping[str, Any]) -> None:
    async with store.write() as tx:
        for row in rows:
            await tx.insert_registration(row)


def beat_for(row: Mapping[str, Any], stamp: str = LATER, **change: Any) -> HeartbeatWrite:
    fields: dict[str, Any] = {
        "worker_identity": row["worker_identity"],
        "pid": row["pid"],
        "generation_id": row["generation_id"],
        "fencing_epoch": row["fencing_epoch"],
        "stamp": stamp,
    }
    fields.update(change)
    return HeartbeatWrite(**fields)


def lease(lease_id: str) -> dict[str, Any]:
    return {"lease_id": lease_id, "work_item_key": f"issue:{lease_id}", "status": "active"}


async def by_identity(store: SQLiteStore) -> dict[str, dict[str, Any]]:
    return {str(r["worker_identity"]): r for r in await store.read_registrations()}


async def test_replies_are_delivered_only_after_commit_returns(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        existing = registration_row(pid=101)
        await seed(db, existing)
        store = RecordingStore(db)
        delivered_before_commit: list[bool] = []
        with reply_boxes() as boxes:
            insert_box: ReplyBox[WriteAck] = boxes.new()
            lease_box: ReplyBox[WriteAck] = boxes.new()
            beat_box: ReplyBox[BeatReplies] = boxes.new()
            every: list[ReplyBox[Any]] = [insert_box, lease_box, beat_box]

            async def at_commit() -> None:
                # Inside the transaction, after every write of the batch: nothing answered yet.
                delivered_before_commit.append(any(box.ready() for box in every))

            store.before_commit = at_commit
            async with running_writer(store) as rig:
                new = registration_row(pid=102, namespace="reviewer")
                rig.inbox.send_nowait(InsertRegistration(row=new, reply=insert_box.reply))
                rig.inbox.send_nowait(UpsertLease(lease=lease("L1"), reply=lease_box.reply))
                rig.inbox.send_nowait(
                    TouchHeartbeats(beats=(beat_for(existing),), reply=beat_box.reply)
                )

                async def receive(name: str, box: ReplyBox[Any]) -> None:
                    await box.get()
                    store.events.append(f"reply:{name}")

                async with anyio.create_task_group() as tg:
                    for name, box in (("insert", insert_box), ("lease", lease_box)):
                        tg.start_soon(receive, name, box)
                    tg.start_soon(receive, "beat", beat_box)
                assert rig.writer.batches_committed == 1

        assert delivered_before_commit == [False]
        assert store.events[:3] == [
            "insert:" + new["worker_identity"],
            "commit:start",
            "commit:done",
        ]
        assert sorted(store.events[3:]) == ["reply:beat", "reply:insert", "reply:lease"]
        rows = await by_identity(db)
        assert rows[new["worker_identity"]]["status"] == "active"
        assert rows[existing["worker_identity"]]["last_heartbeat_at"] == LATER
        assert [r["lease_id"] for r in await db.read_leases()] == ["L1"]


async def test_failed_commit_fails_every_message_of_the_batch_and_writes_nothing(
    tmp_path: Path,
) -> None:
    async with real_store(tmp_path) as db:
        existing = registration_row(pid=101)
        await seed(db, existing)
        store = RecordingStore(db)
        store.commit_error = StoreError("disk I/O error (injected)")
        with reply_boxes() as boxes:
            insert_box: ReplyBox[WriteAck] = boxes.new()
            lease_box: ReplyBox[WriteAck] = boxes.new()
            audit_box: ReplyBox[WriteAck] = boxes.new()
            release_box: ReplyBox[WriteAck] = boxes.new()
            beat_box: ReplyBox[BeatReplies] = boxes.new()
            async with running_writer(store) as rig:
                new = registration_row(pid=102, namespace="reviewer")
                rig.inbox.send_nowait(InsertRegistration(row=new, reply=insert_box.reply))
                rig.inbox.send_nowait(
                    TouchHeartbeats(beats=(beat_for(existing),), reply=beat_box.reply)
                )
                rig.inbox.send_nowait(UpsertLease(lease=lease("L1"), reply=lease_box.reply))
                rig.inbox.send_nowait(
                    AppendAudit(
                        event={"at": LATER, "action": "test", "outcome": "x"},
                        reply=audit_box.reply,
                    )
                )
                rig.inbox.send_nowait(
                    ReleaseRegistration(
                        worker_identity=existing["worker_identity"],
                        pid=existing["pid"],
                        generation_id=existing["generation_id"],
                        fencing_epoch=existing["fencing_epoch"],
                        stamp=LATER,
                        reply=release_box.reply,
                    )
                )
                acks = [await b.get() for b in (insert_box, lease_box, audit_box, release_box)]
                beats = by_worker(await beat_box.get())
                assert rig.writer.batches_committed == 0
                # The batch, then the empty transaction that shows the store cannot write.
                assert store.events == [
                    "insert:" + new["worker_identity"],
                    "commit:start",
                    "commit:start",
                ]

                # The writer is not poisoned: the next batch commits normally.
                store.commit_error = None
                retry: ReplyBox[WriteAck] = boxes.new()
                rig.inbox.send_nowait(UpsertLease(lease=lease("L2"), reply=retry.reply))
                assert (await retry.get()).ok
                assert rig.writer.batches_committed == 1

        assert [(a.ok, a.code) for a in acks] == [(False, "store_error")] * 4
        assert all("commit failed" in a.detail for a in acks)
        assert set(beats) == {existing["worker_identity"]}
        assert beats[existing["worker_identity"]].ok is False
        assert beats[existing["worker_identity"]].code == "store_error"
        rows = await by_identity(db)
        assert set(rows) == {existing["worker_identity"]}
        assert rows[existing["worker_identity"]]["status"] == "active"
        assert (
            rows[existing["worker_identity"]]["last_heartbeat_at"] == existing["last_heartbeat_at"]
        )
        assert rows[existing["worker_identity"]]["released_at"] is None
        assert [r["lease_id"] for r in await db.read_leases()] == ["L2"]
        assert await db.read_audit() == []


async def test_failing_message_is_isolated_from_the_rest_of_its_batch(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        # The bad registration is the same process incarnation as this row, so it
        # would supersede it: that write must be undone together with its insert.
        existing = registration_row(pid=101)
        await seed(db, existing)
        store = RecordingStore(db)
        with reply_boxes() as boxes:
            good_a: ReplyBox[WriteAck] = boxes.new()
            bad_column: ReplyBox[WriteAck] = boxes.new()
            duplicate: ReplyBox[WriteAck] = boxes.new()
            good_b: ReplyBox[WriteAck] = boxes.new()
            lease_box: ReplyBox[WriteAck] = boxes.new()
            beat_box: ReplyBox[BeatReplies] = boxes.new()
            row_a = registration_row(pid=201, namespace="reviewer")
            row_bad = registration_row(pid=101, no_such_column="x")
            row_dup = registration_row(pid=202, namespace="merger")
            row_dup["worker_identity"] = row_a["worker_identity"]
            row_b = registration_row(pid=203, namespace="controller")
            async with running_writer(store) as rig:
                before = rig.writer.batches_committed
                rig.inbox.send_nowait(InsertRegistration(row=row_a, reply=good_a.reply))
                rig.inbox.send_nowait(InsertRegistration(row=row_bad, reply=bad_column.reply))
                rig.inbox.send_nowait(
                    TouchHeartbeats(beats=(beat_for(existing),), reply=beat_box.reply)
                )
                rig.inbox.send_nowait(InsertRegistration(row=row_dup, reply=duplicate.reply))
                rig.inbox.send_nowait(UpsertLease(lease=lease("L1"), reply=lease_box.reply))
                rig.inbox.send_nowait(InsertRegistration(row=row_b, reply=good_b.reply))
                answers = {
                    "a": await good_a.get(),
                    "bad": await bad_column.get(),
                    "dup": await duplicate.get(),
                    "b": await good_b.get(),
                    "lease": await lease_box.get(),
                }
                beats = by_worker(await beat_box.get())
                assert rig.writer.batches_committed == before + 1

        assert answers["a"].ok
        assert answers["b"].ok
        assert answers["lease"].ok
        assert (answers["bad"].ok, answers["bad"].code) == (False, "store_error")
        assert "no_such_column" in answers["bad"].detail
        assert (answers["dup"].ok, answers["dup"].code) == (False, "store_error")
        assert beats[existing["worker_identity"]].ok
        rows = await by_identity(db)
        assert set(rows) == {
            existing["worker_identity"],
            row_a["worker_identity"],
            row_b["worker_identity"],
        }
        # Neither the failed insert nor its superseding of the old row survived.
        assert rows[existing["worker_identity"]]["status"] == "active"
        assert rows[existing["worker_identity"]]["last_heartbeat_at"] == LATER
        # The duplicate did not overwrite the first row under that identity.
        assert rows[row_a["worker_identity"]]["pid"] == 201
        assert rows[row_a["worker_identity"]]["namespace"] == "reviewer"
        assert [r["lease_id"] for r in await db.read_leases()] == ["L1"]


async def test_beats_of_many_workers_in_one_batch_are_one_touch_statement(tmp_path: Path) -> None:
    async with real_store(tmp_path) as db:
        rows = [
            registration_row(pid=300 + i, namespace=ns)
            for i, ns in enumerate(("author", "reviewer", "merger", "controller", "reconciler"))
        ]
        await seed(db, *rows)
        store = RecordingStore(db)
        with reply_boxes() as boxes:
            replies: list[ReplyBox[BeatReplies]] = [boxes.new() for _ in rows]
            async with running_writer(store) as rig:
                for row, box in zip(rows, replies, strict=True):
                    rig.inbox.send_nowait(TouchHeartbeats(beats=(beat_for(row),), reply=box.reply))
                results = [by_worker(await box.get()) for box in replies]
                assert rig.writer.batches_committed == 1
        assert all(r[row["worker_identity"]].ok for r, row in zip(results, rows, strict=True))
        assert len(store.touch_calls) == 1
        assert sorted(store.touch_calls[0]) == sorted((r["worker_identity"], LATER) for r in rows)
        assert {r["last_heartbeat_at"] for r in (await by_identity(db)).values()} == {LATER}


@pytest.mark.parametrize("forged_first", [True, False], ids=["forged-first", "valid-first"])
async def test_a_beat_with_wrong_fencing_is_refused_even_when_batched_with_a_valid_one(
    tmp_path: Path, forged_first: bool
) -> None:
    """Coalescing by identity must not hand one beat's verdict to another beat's claim."""
    async with real_store(tmp_path) as db:
        row = registration_row(pid=101)
        await seed(db, row)
        with reply_boxes() as boxes:
            forged: ReplyBox[BeatReplies] = boxes.new()
            valid: ReplyBox[BeatReplies] = boxes.new()
            messages = [
                TouchHeartbeats(beats=(beat_for(row, pid=999),), reply=forged.reply),
                TouchHeartbeats(beats=(beat_for(row),), reply=valid.reply),
            ]
            async with running_writer(RecordingStore(db)) as rig:
                for message in messages if forged_first else reversed(messages):
                    rig.inbox.send_nowait(message)
                forged_result = by_worker(await forged.get())[row["worker_identity"]]
                valid_result = by_worker(await valid.get())[row["worker_identity"]]
                assert rig.writer.batches_committed == 1
        assert (forged_result.ok, forged_result.code) == (False, "fencing_mismatch")
        assert (valid_result.ok, valid_result.code) == (True, "ok")
        assert (await by_identity(db))[row["worker_identity"]]["last_heartbeat_at"] == LATER
