"""Every store keeps the ``RowVersions`` contract (store.base): rows handed out are versions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from supervisor.store.base import Row, Store
from tests.store.rowdata import STAMP_2, STAMP_3, change_every_way, registration

pytestmark = pytest.mark.anyio

_IDENTITIES = ("wrk-0", "wrk-1", "wrk-2", "wrk-3", "wrk-4")


def _by_identity(rows: Sequence[Row]) -> dict[str, Row]:
    return {str(row["worker_identity"]): row for row in rows}


def _copies(rows: Sequence[Row]) -> list[dict[str, Any]]:
    # Row values are scalars, so a shallow copy is a full snapshot.
    return [dict(row) for row in rows]


async def _active_reads(store: Store) -> list[list[Row]]:
    """Both reads the planner and the apply gates take of the active rows."""
    return [
        (await store.read_registry_view()).active,
        await store.read_registrations(status="active"),
    ]


def _held_to_contract(before: Sequence[Row], snapshot: Sequence[Row], after: Sequence[Row]) -> None:
    # Handed-out dicts are never edited, whatever was written since.
    assert list(before) == list(snapshot)
    earlier = _by_identity(before)
    for row in after:
        seen = earlier.get(str(row["worker_identity"]))
        # The very object seen before holds what it held then: identity proves "unchanged".
        if seen is row:
            assert row == _by_identity(snapshot)[str(row["worker_identity"])]


async def test_rows_handed_out_are_never_edited_and_a_changed_row_is_a_new_dict(
    store: Store,
) -> None:
    async with store.write() as tx:
        for identity in _IDENTITIES[:4]:
            await tx.insert_registration(registration(identity))
    before = await _active_reads(store)
    snapshots = [_copies(rows) for rows in before]

    # Every kind of change a plan sees between two reads: a stamp through a write
    # transaction, a stamp through the queued heartbeat batches, a status change,
    # a new row.
    await change_every_way(store, insert=[registration("wrk-4")])
    after = await _active_reads(store)

    for rows, snapshot in zip(before, snapshots, strict=True):
        for now_rows in after:
            _held_to_contract(rows, snapshot, now_rows)
    for rows in before:
        earlier = _by_identity(rows)
        for now_rows in after:
            now = _by_identity(now_rows)
            assert sorted(now) == ["wrk-0", "wrk-1", "wrk-3", "wrk-4"]
            # Changed rows are new dicts showing the change.
            assert now["wrk-1"] is not earlier["wrk-1"]
            assert now["wrk-1"]["last_heartbeat_at"] == STAMP_2
            assert now["wrk-3"] is not earlier["wrk-3"]
            assert now["wrk-3"]["last_heartbeat_at"] == STAMP_3
    # The list is the caller's: a new one every read.
    again = await _active_reads(store)
    assert all(a is not b for a, b in zip(after, again, strict=True))


async def test_an_unchanged_row_is_the_same_dict_on_a_caching_store(store: Store) -> None:
    async with store.write() as tx:
        for identity in _IDENTITIES[:3]:
            await tx.insert_registration(registration(identity))
    first = (await store.read_registry_view()).active
    async with store.write() as tx:
        await tx.touch_heartbeats([("wrk-1", STAMP_2)])
    second = (await store.read_registry_view()).active
    same = [a is b for a, b in zip(first, second, strict=True)]
    if store.dialect == "sqlite":
        # SQLite's cached view: the unchanged rows are the identical dicts.
        assert same == [True, False, True]
    else:
        # A store that reads afresh hands out new dicts, which keeps the contract trivially.
        assert same == [False, False, False]
    assert second[0] == first[0]
    assert second[2] == first[2]
