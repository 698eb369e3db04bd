"""The registry mirror equals what the database returns after every committed transaction."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from actors.registry_mirror import MirrorJournal, RegistryMirror
from supervisor.store import GUARD_COLUMNS, SQLiteStore, sqlite_store
from supervisor.store.base import WriteTx
from tests.store.rowdata import STAMP_1, STAMP_2, STAMP_3, registration

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with sqlite_store(tmp_path / "registry.db") as opened:
        yield opened


async def _same(mirror: RegistryMirror, store: SQLiteStore) -> None:
    held = mirror.rows()
    assert held is not None
    stored = await store.read_registrations()
    # repr: the mirror must hold the stored types too (90 vs 90.0 vs "90").
    assert repr(held) == repr(stored)


async def _op(
    rng: random.Random, tx: WriteTx, journal: MirrorJournal, names: list[str], serial: int
) -> None:
    kind = rng.choice(("insert", "insert", "beat", "beat", "status", "retire", "rollback"))
    existing = await tx.registrations()
    if kind == "insert" or not existing:
        identity = f"wrk-{serial}-{len(names)}"
        # Typed oddly on purpose: the stored value follows the column's affinity.
        ttl = rng.choice((90, 90.0, 90.5, "90"))
        await tx.insert_registration(
            registration(identity, heartbeat_ttl_seconds=ttl, pid=rng.choice((41, 42)))
        )
        journal.touched([identity])
        names.append(identity)
    elif kind == "beat":
        beats = sorted(
            {(str(r["worker_identity"]), rng.choice((STAMP_2, STAMP_3))) for r in existing}
        )[: rng.randint(1, 4)]
        await tx.touch_heartbeats(beats)
        journal.heartbeats(beats)
    elif kind == "status":
        target = rng.choice(existing)
        await tx.set_status(
            str(target["worker_identity"]),
            expected_status="active",
            new_status=rng.choice(("released", "superseded")),
            stamp_column=None,
            stamp=None,
        )
        journal.touched([str(target["worker_identity"])])
    elif kind == "retire":
        target = rng.choice(existing)
        if target["status"] == "active":
            await tx.retire_guarded(
                {c: target[c] for c in ("worker_identity", *GUARD_COLUMNS)},
                retired_at=STAMP_3,
                retired_by="tester",
                reason="stale",
            )
            journal.touched([str(target["worker_identity"])])
    else:
        identity = f"wrk-{serial}-{len(names)}-rolled-back"
        try:
            async with tx.savepoint():
                await tx.insert_registration(registration(identity))
                journal.touched([identity])
                raise RuntimeError("roll the savepoint back")
        except RuntimeError:
            pass


@pytest.mark.parametrize("seed", range(6))
async def test_mirror_follows_random_committed_transactions(store: SQLiteStore, seed: int) -> None:
    rng = random.Random(seed)
    mirror = RegistryMirror()
    async with store.write() as tx:
        await tx.insert_registration(registration("wrk-seed", last_heartbeat_at=STAMP_1))
    mirror.load(await store.read_registrations())
    names: list[str] = []
    for serial in range(25):
        journal = mirror.journal()
        try:
            async with store.write() as tx:
                await mirror.ensure_loaded(tx)
                for _ in range(rng.randint(1, 3)):
                    await _op(rng, tx, journal, names, serial)
                await journal.capture(tx)
                if rng.random() < 0.15:
                    raise RuntimeError("the whole transaction fails")
        except RuntimeError:
            # Nothing committed; the writer forgets the journal (or, when unsure
            # of the outcome, invalidates the mirror).
            if rng.random() < 0.5:
                mirror.invalidate()
        else:
            mirror.apply_committed_changes(journal)
        if mirror.loaded:
            await _same(mirror, store)
    async with store.write() as tx:
        await mirror.ensure_loaded(tx)
    await _same(mirror, store)


async def test_uncaptured_touched_rows_invalidate_the_mirror(store: SQLiteStore) -> None:
    mirror = RegistryMirror()
    mirror.load([])
    journal = mirror.journal()
    async with store.write() as tx:
        await tx.insert_registration(registration("wrk-1"))
        journal.touched(["wrk-1"])
    mirror.apply_committed_changes(journal)
    assert not mirror.loaded
    assert mirror.rows() is None


async def test_heartbeat_on_inactive_row_is_not_replayed(store: SQLiteStore) -> None:
    async with store.write() as tx:
        await tx.insert_registration(registration("wrk-1", status="released"))
        await tx.insert_registration(registration("wrk-2"))
    mirror = RegistryMirror()
    mirror.load(await store.read_registrations())
    journal = mirror.journal()
    beats = [("wrk-1", STAMP_3), ("wrk-2", STAMP_3), ("wrk-absent", STAMP_3)]
    async with store.write() as tx:
        await tx.touch_heartbeats(beats)
        journal.heartbeats(beats)
        await journal.capture(tx)
    mirror.apply_committed_changes(journal)
    await _same(mirror, store)


def test_rows_handed_out_are_not_changed_by_later_commits() -> None:
    mirror = RegistryMirror()
    mirror.load([registration("wrk-1")])
    before = mirror.rows()
    assert before is not None
    journal = mirror.journal()
    journal.heartbeats([("wrk-1", STAMP_3)])
    journal._captured = []  # as capture() leaves it when nothing was touched
    mirror.apply_committed_changes(journal)
    after = mirror.rows()
    assert after is not None
    assert before[0]["last_heartbeat_at"] == STAMP_1
    assert after[0]["last_heartbeat_at"] == STAMP_3


def test_non_text_stamps_are_re_read_instead_of_replayed() -> None:
    journal = RegistryMirror().journal()
    beats: list[tuple[str, Any]] = [("wrk-1", 12345)]
    journal.heartbeats(beats)
    assert "wrk-1" in journal._touched


class _StoreReads:
    """Counts registration reads; everything else is unused by the test."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.reads = 0

    async def read_registrations(self, *, status: str | None = None) -> list[dict[str, Any]]:
        self.reads += 1
        return self.rows


async def test_retirement_reads_the_mirror_once_it_is_loaded() -> None:
    from actors.retirement import RetirementActor

    store = _StoreReads([registration("wrk-db")])
    mirror = RegistryMirror()
    unused: Any = None
    actor = RetirementActor(
        inbox=unused,
        writer=unused,
        liveness=unused,
        lease_watch=unused,
        store=store,  # type: ignore[arg-type]
        clock=unused,
        probes=unused,
        profiles=unused,
        mirror=mirror,
    )
    # Not loaded yet (or invalidated): the store answers.
    assert [r["worker_identity"] for r in await actor._registrations()] == ["wrk-db"]
    mirror.load([registration("wrk-b"), registration("wrk-a")])
    assert [r["worker_identity"] for r in await actor._registrations()] == ["wrk-a", "wrk-b"]
    assert store.reads == 1
    mirror.invalidate()
    assert [r["worker_identity"] for r in await actor._registrations()] == ["wrk-db"]
