"""Registration writes: heartbeats, guarded status changes and the retirement compare-and-swap."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.errors import StoreError
from supervisor.store import GUARD_COLUMNS, Store
from supervisor.store.sqlite.store import SQLiteStore
from tests.store.rowdata import STAMP_1, STAMP_2, STAMP_3, registration

pytestmark = pytest.mark.anyio

RETIRE = {"retired_at": STAMP_3, "retired_by": "operator", "reason": "eligible_stale_orphan"}


async def seed(store: Store, *rows: dict[str, Any]) -> None:
    async with store.write() as tx:
        for row in rows:
            await tx.insert_registration(row)


async def row_of(store: Store, worker_identity: str) -> dict[str, Any]:
    (row,) = [
        r for r in await store.read_registrations() if r["worker_identity"] == worker_identity
    ]
    return row


def changed(column: str, value: Any) -> Any:
    """A different value of the same type, for the single-column-changed cases."""
    if column == "status":
        return "released"
    if isinstance(value, bool) or value is None:
        raise AssertionError(f"fixture value for {column} must be set")
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.25
    return f"{value}-moved"


async def test_insert_round_trips_every_column_and_type(store: SQLiteStore) -> None:
    row = registration("w-1", fencing_epoch=2**40, released_at=None)
    await seed(store, row)
    stored = await row_of(store, "w-1")
    assert stored == row | dict.fromkeys(("retired_at", "retired_by", "retirement_reason"))
    assert type(stored["pid"]) is int
    assert type(stored["heartbeat_ttl_seconds"]) is float


@pytest.mark.parametrize(
    "row",
    [
        {"status": "active"},
        {"worker_identity": "w-1", "status": "zombie"},
        {"worker_identity": "w-1"},
    ],
)
async def test_insert_rejects_invalid_rows(store: SQLiteStore, row: dict[str, Any]) -> None:
    async with store.write() as tx:
        with pytest.raises(StoreError):
            await tx.insert_registration(row)
    assert await store.read_registrations() == []


async def test_duplicate_identity_is_a_store_error(store: SQLiteStore) -> None:
    await seed(store, registration("w-1"))
    with pytest.raises(StoreError, match=r"(?i)unique"):
        async with store.write() as tx:
            await tx.insert_registration(registration("w-1"))


async def test_registrations_filters_by_status_and_identities(store: SQLiteStore) -> None:
    await seed(
        store,
        registration("w-1"),
        registration("w-2", status="released"),
        registration("w-3"),
    )
    async with store.write() as tx:
        assert [r["worker_identity"] for r in await tx.registrations(status="active")] == [
            "w-1",
            "w-3",
        ]
        picked = await tx.registrations(worker_identities=["w-3", "w-2", "w-3", "nope"])
        assert [r["worker_identity"] for r in picked] == ["w-2", "w-3"]
        both = await tx.registrations(status="active", worker_identities=["w-2", "w-3"])
        assert [r["worker_identity"] for r in both] == ["w-3"]
        assert await tx.registrations(worker_identities=[]) == []
    assert [r["worker_identity"] for r in await store.read_registrations(status="released")] == [
        "w-2"
    ]


async def test_registrations_by_identity_handles_more_ids_than_one_statement(
    store: SQLiteStore,
) -> None:
    await seed(store, *(registration(f"w-{i:04d}") for i in range(1200)))
    async with store.write() as tx:
        rows = await tx.registrations(worker_identities=[f"w-{i:04d}" for i in range(1199, -1, -1)])
    assert [r["worker_identity"] for r in rows] == [f"w-{i:04d}" for i in range(1200)]


async def test_touch_heartbeats_only_updates_active_rows(store: SQLiteStore) -> None:
    await seed(
        store,
        registration("w-active"),
        registration("w-released", status="released"),
        registration("w-retired", status="retired"),
        registration("w-superseded", status="superseded"),
    )
    beats = [(w, STAMP_2) for w in ("w-active", "w-released", "w-retired", "w-superseded", "nope")]
    async with store.write() as tx:
        assert await tx.touch_heartbeats(beats) == 1
        assert await tx.touch_heartbeats([]) == 0
    stamps = {
        r["worker_identity"]: r["last_heartbeat_at"] for r in await store.read_registrations()
    }
    assert stamps == {
        "w-active": STAMP_2,
        "w-released": STAMP_1,
        "w-retired": STAMP_1,
        "w-superseded": STAMP_1,
    }


async def test_touch_heartbeats_batches_thousands_in_one_call(store: SQLiteStore) -> None:
    workers = [f"w-{i:05d}" for i in range(3000)]
    await seed(store, *(registration(w) for w in workers))
    async with store.write() as tx:
        assert await tx.touch_heartbeats([(w, STAMP_3) for w in workers]) == 3000
    assert {r["last_heartbeat_at"] for r in await store.read_registrations()} == {STAMP_3}


async def test_set_status_is_guarded_by_expected_status(store: SQLiteStore) -> None:
    await seed(store, registration("w-1"))
    async with store.write() as tx:
        assert not await tx.set_status(
            "w-1",
            expected_status="released",
            new_status="superseded",
            stamp_column=None,
            stamp=None,
        )
        assert await tx.set_status(
            "w-1",
            expected_status="active",
            new_status="released",
            stamp_column="released_at",
            stamp=STAMP_2,
        )
        assert not await tx.set_status(
            "w-1",
            expected_status="active",
            new_status="released",
            stamp_column="released_at",
            stamp=STAMP_3,
        )
        assert not await tx.set_status(
            "missing",
            expected_status="active",
            new_status="released",
            stamp_column=None,
            stamp=None,
        )
    row = await row_of(store, "w-1")
    assert (row["status"], row["released_at"]) == ("released", STAMP_2)


@pytest.mark.parametrize(
    ("new_status", "stamp_column", "stamp"),
    [
        ("retired", None, None),
        ("bogus", None, None),
        ("released", "retired_at", STAMP_2),
        ("released", "released_at", None),
        ("released", None, STAMP_2),
    ],
)
async def test_set_status_refuses_unsafe_changes(
    store: SQLiteStore, new_status: str, stamp_column: str | None, stamp: str | None
) -> None:
    await seed(store, registration("w-1"))
    async with store.write() as tx:
        with pytest.raises(StoreError):
            await tx.set_status(
                "w-1",
                expected_status="active",
                new_status=new_status,
                stamp_column=stamp_column,
                stamp=stamp,
            )
    assert (await row_of(store, "w-1"))["status"] == "active"


async def test_retire_guarded_succeeds_when_nothing_changed(store: SQLiteStore) -> None:
    await seed(store, registration("w-1"), registration("w-2"))
    async with store.write() as tx:
        (expected,) = await tx.registrations(worker_identities=["w-1"])
        assert await tx.retire_guarded(expected, **RETIRE)
        # A second apply of the same plan finds the row retired, not as read.
        assert not await tx.retire_guarded(expected, **RETIRE)
    row = await row_of(store, "w-1")
    assert (row["status"], row["retired_at"], row["retired_by"], row["retirement_reason"]) == (
        "retired",
        STAMP_3,
        "operator",
        "eligible_stale_orphan",
    )
    assert row | {
        "status": "active",
        "retired_at": None,
        "retired_by": None,
        "retirement_reason": None,
    } == registration("w-1") | {
        "retired_at": None,
        "retired_by": None,
        "retirement_reason": None,
        "released_at": None,
    }
    assert (await row_of(store, "w-2"))["status"] == "active"


@pytest.mark.parametrize("column", GUARD_COLUMNS)
async def test_retire_guarded_refuses_when_one_guard_column_moved(
    store: SQLiteStore, column: str
) -> None:
    planned = registration("w-1")
    current = planned | {column: changed(column, planned[column])}
    await seed(store, current)
    async with store.write() as tx:
        assert not await tx.retire_guarded(planned, **RETIRE)
    assert await store.read_registrations() == [
        current
        | {"retired_at": None, "retired_by": None, "retirement_reason": None, "released_at": None}
    ]


@pytest.mark.parametrize("column", [c for c in GUARD_COLUMNS if c != "status"])
async def test_retire_guarded_is_null_safe(store: SQLiteStore, column: str) -> None:
    with_null = registration("w-null", **{column: None})
    with_value = registration("w-value")
    await seed(store, with_null, with_value)
    async with store.write() as tx:
        # Planner read a value, the row now holds NULL: refuse.
        assert not await tx.retire_guarded(with_null | {column: with_value[column]}, **RETIRE)
        # Planner read NULL, the row now holds a value: refuse.
        assert not await tx.retire_guarded(with_value | {column: None}, **RETIRE)
        # NULL read, NULL stored: the row is unchanged, so the swap goes through.
        assert await tx.retire_guarded(with_null, **RETIRE)
    statuses = {r["worker_identity"]: r["status"] for r in await store.read_registrations()}
    assert statuses == {"w-null": "retired", "w-value": "active"}


async def test_retire_guarded_treats_integral_float_ttl_as_equal(store: SQLiteStore) -> None:
    await seed(store, registration("w-1", heartbeat_ttl_seconds=900))
    async with store.write() as tx:
        assert await tx.retire_guarded(registration("w-1", heartbeat_ttl_seconds=900), **RETIRE)


@pytest.mark.parametrize(
    ("expected", "kwargs", "message"),
    [
        ({k: v for k, v in registration().items() if k != "boot_id"}, RETIRE, "boot_id"),
        (registration(status="released"), RETIRE, "only active"),
        (registration(), {**RETIRE, "retired_at": "2024-05-01 10:10"}, "retired_at"),
        (registration(), {**RETIRE, "reason": ""}, "non-empty"),
    ],
)
async def test_retire_guarded_rejects_incomplete_requests(
    store: SQLiteStore, expected: dict[str, Any], kwargs: dict[str, str], message: str
) -> None:
    await seed(store, registration())
    async with store.write() as tx:
        with pytest.raises(StoreError, match=message):
            await tx.retire_guarded(expected, **kwargs)
    assert (await row_of(store, "wrk-1"))["status"] == "active"


async def test_active_processes_are_every_active_row_across_fetch_chunks(
    store: SQLiteStore,
) -> None:
    # More rows than one fetch chunk (512), so rows converted chunk by chunk are all kept.
    active = [
        registration(f"w-{i:04d}", pid=1000 + i, process_start_time=f"ticks-{i}")
        for i in range(700)
    ]
    await seed(store, *active, registration("w-gone", status="released", released_at=STAMP_2))
    got = await store.read_active_processes()
    host = active[0]["host_id"]
    assert sorted(got) == [(f"w-{i:04d}", 1000 + i, host, f"ticks-{i}") for i in range(700)]
    assert all(type(identity) is str for identity, *_ in got)


async def test_retire_guarded_many_retires_every_unchanged_row(store: SQLiteStore) -> None:
    rows = [registration(f"w-{i}") for i in range(5)]
    await seed(store, *rows, registration("w-other"))
    async with store.write() as tx:
        expected = await tx.registrations(worker_identities=[r["worker_identity"] for r in rows])
        assert await tx.retire_guarded_many(expected, **RETIRE) == [True] * 5
    statuses = {r["worker_identity"]: r["status"] for r in await store.read_registrations()}
    assert statuses == {**{f"w-{i}": "retired" for i in range(5)}, "w-other": "active"}
    assert {
        (r["retired_at"], r["retired_by"], r["retirement_reason"])
        for r in await store.read_registrations()
        if r["status"] == "retired"
    } == {(STAMP_3, "operator", "eligible_stale_orphan")}


@pytest.mark.parametrize("column", GUARD_COLUMNS)
async def test_retire_guarded_many_reports_each_moved_row_and_retires_the_rest(
    store: SQLiteStore, column: str
) -> None:
    planned = [registration(f"w-{i}") for i in range(4)]
    moved = {"w-1", "w-3"}
    current = [
        p | {column: changed(column, p[column])} if p["worker_identity"] in moved else p
        for p in planned
    ]
    await seed(store, *current)
    async with store.write() as tx:
        assert await tx.retire_guarded_many(planned, **RETIRE) == [True, False, True, False]
    statuses = {r["worker_identity"]: r["status"] for r in await store.read_registrations()}
    assert {i: s for i, s in statuses.items() if i not in moved} == {
        "w-0": "retired",
        "w-2": "retired",
    }
    # The moved rows are exactly as they were: the batch's fast path was rolled back.
    for row in current:
        if row["worker_identity"] in moved:
            assert await row_of(store, row["worker_identity"]) == row | {
                "retired_at": None,
                "retired_by": None,
                "retirement_reason": None,
                "released_at": None,
            }


async def test_retire_guarded_many_matches_nothing_for_a_missing_row(store: SQLiteStore) -> None:
    await seed(store, registration("w-1"))
    async with store.write() as tx:
        assert await tx.retire_guarded_many(
            [registration("w-ghost"), registration("w-1")], **RETIRE
        ) == [False, True]
    assert (await row_of(store, "w-1"))["status"] == "retired"


async def test_retire_guarded_many_of_nothing_is_empty(store: SQLiteStore) -> None:
    async with store.write() as tx:
        assert await tx.retire_guarded_many([], **RETIRE) == []


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([registration("w-1"), registration("w-1")], "distinct"),
        ([registration("w-1", status="released")], "only active"),
        ([{k: v for k, v in registration("w-1").items() if k != "session_id"}], "session_id"),
    ],
)
async def test_retire_guarded_many_refuses_bad_input_and_writes_nothing(
    store: SQLiteStore, rows: list[dict[str, Any]], message: str
) -> None:
    await seed(store, registration("w-1"))
    with pytest.raises(StoreError, match=message):
        async with store.write() as tx:
            await tx.retire_guarded_many(rows, **RETIRE)
    assert (await row_of(store, "w-1"))["status"] == "active"


async def test_values_are_stored_with_the_column_affinity_on_every_engine(store: Store) -> None:
    # SQLite converts by column affinity; the PostgreSQL store binds the same way, so a
    # row reads back identically from either.
    await seed(store, registration("w-1", process_start_time=987654, pid="4242", fencing_epoch=3.0))
    row = await row_of(store, "w-1")
    assert (row["process_start_time"], row["pid"], row["fencing_epoch"]) == ("987654", 4242, 3)
    assert type(row["fencing_epoch"]) is int
