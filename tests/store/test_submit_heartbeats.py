"""Queued heartbeat transactions: one job each, run in order, all-or-nothing, chained."""

from __future__ import annotations

import pytest

from supervisor.errors import StoreError
from supervisor.store.base import CommitChain, Store
from supervisor.store.sqlite import beats as sqlite_beats
from supervisor.store.sqlite.connection import check_submit_support
from supervisor.store.sqlite.store import SQLiteStore
from tests.store.rowdata import STAMP_1, STAMP_2, STAMP_3, registration

pytestmark = pytest.mark.anyio


async def _seed(store: Store, *identities: str, status: str = "active") -> None:
    async with store.write() as tx:
        for identity in identities:
            await tx.insert_registration(
                registration(identity, last_heartbeat_at=STAMP_1, status=status)
            )


async def _stamps(store: Store) -> dict[str, str]:
    rows = await store.read_registrations()
    return {str(r["worker_identity"]): str(r["last_heartbeat_at"]) for r in rows}


async def test_jobs_queued_back_to_back_commit_in_order(store: Store) -> None:
    await _seed(store, "w1", "w2")
    chain = CommitChain()
    first = store.submit_heartbeats([("w1", STAMP_2), ("w2", STAMP_2)], chain)
    second = store.submit_heartbeats([("w1", STAMP_3)], chain)
    assert (await first, await second) == (True, True)
    assert await _stamps(store) == {"w1": STAMP_3, "w2": STAMP_2}
    assert not chain.broken


async def test_a_row_no_longer_active_rolls_back_the_job_and_skips_the_rest(store: Store) -> None:
    await _seed(store, "w1", "w2")
    await _seed(store, "gone", status="retired")
    chain = CommitChain()
    spoiled = store.submit_heartbeats([("w1", STAMP_2), ("gone", STAMP_2)], chain)
    after = store.submit_heartbeats([("w2", STAMP_3)], chain)
    assert (await spoiled, await after) == (False, False)
    assert chain.broken
    # Nothing of either job stuck, not even the spoiled job's valid pair.
    assert await _stamps(store) == {"w1": STAMP_1, "w2": STAMP_1, "gone": STAMP_1}
    assert await store.submit_heartbeats([("w2", STAMP_3)], CommitChain()) is True
    assert (await _stamps(store))["w2"] == STAMP_3


@pytest.mark.sqlite_only
async def test_a_value_sqlite_cannot_bind_rolls_back_and_leaves_no_transaction_open(
    store: Store,
) -> None:
    await _seed(store, "w1")
    chain = CommitChain()
    # A lone surrogate cannot be encoded for SQLite: binding raises before any row moves.
    with pytest.raises(StoreError, match="surrogates"):
        await store.submit_heartbeats([("w1", STAMP_2), ("w\ud800", STAMP_2)], chain)
    assert chain.broken
    assert await _stamps(store) == {"w1": STAMP_1}
    # The write connection is out of the failed transaction: the next job commits.
    assert await store.submit_heartbeats([("w1", STAMP_3)], CommitChain()) is True
    assert await _stamps(store) == {"w1": STAMP_3}


async def test_a_job_never_writes_inside_another_transaction(store: Store) -> None:
    await _seed(store, "w1")
    chain = CommitChain()
    async with store.write() as tx:
        with pytest.raises(StoreError, match="already open"):
            await store.submit_heartbeats([("w1", STAMP_3)], chain)
        assert await tx.touch_heartbeats([("w1", STAMP_2)]) == 1
    assert chain.broken
    assert await _stamps(store) == {"w1": STAMP_2}


async def test_a_closed_store_refuses_jobs(store: Store) -> None:
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        store.submit_heartbeats([("w1", STAMP_2)], CommitChain())


@pytest.mark.sqlite_only
async def test_store_open_refuses_an_aiosqlite_without_the_job_queue(store: SQLiteStore) -> None:
    class _Bare:
        """An aiosqlite-like connection without the private queue ``submit`` relies on."""

    check_submit_support(store._writer)  # the installed aiosqlite has it
    with pytest.raises(StoreError, match="no way to run a job"):
        check_submit_support(_Bare())  # type: ignore[arg-type]


@pytest.mark.parametrize("set_based", [True, False], ids=["set-based", "row-by-row"])
@pytest.mark.parametrize("count", [1, 2, 4, 5, 16, 17, 64, 65, 256, 257, 600])
async def test_every_batch_size_stamps_exactly_its_rows(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    count: int,
    set_based: bool,
) -> None:
    monkeypatch.setattr(sqlite_beats, "SET_BASED", set_based)
    identities = [f"w{i:03d}" for i in range(count + 3)]
    await _seed(store, *identities)
    beats = [(identity, STAMP_2) for identity in identities[:count]]
    assert await store.submit_heartbeats(beats, CommitChain()) is True
    stamps = await _stamps(store)
    # The padding of a partly filled statement matched no row.
    assert {i for i, s in stamps.items() if s == STAMP_2} == set(identities[:count])
    assert {i for i, s in stamps.items() if s == STAMP_1} == set(identities[count:])


@pytest.mark.parametrize("set_based", [True, False], ids=["set-based", "row-by-row"])
async def test_an_inactive_row_in_a_later_statement_rolls_back_the_whole_job(
    store: Store, monkeypatch: pytest.MonkeyPatch, set_based: bool
) -> None:
    monkeypatch.setattr(sqlite_beats, "SET_BASED", set_based)
    identities = [f"w{i:03d}" for i in range(300)]
    await _seed(store, *identities)
    await _seed(store, "gone", status="released")
    beats = [(identity, STAMP_2) for identity in identities]
    beats.insert(290, ("gone", STAMP_2))
    chain = CommitChain()
    assert await store.submit_heartbeats(beats, chain) is False
    assert chain.broken
    assert set((await _stamps(store)).values()) == {STAMP_1}
