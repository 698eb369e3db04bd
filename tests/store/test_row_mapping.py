"""Rows as dicts: the driver's values, with repeated values of some columns shared."""

from __future__ import annotations

from supervisor.store.rows import SHARED_TEXT_COLUMNS, as_dicts
from supervisor.store.schema.tables import REGISTRATION_COLUMNS
from tests.store.rowdata import registration


def _driver_rows(count: int) -> list[tuple[object, ...]]:
    # Texts built at run time, so equal ones are distinct objects as a driver returns them.
    return [
        tuple(
            "".join(list(value)) if isinstance(value, str) else value
            for value in (registration(f"wrk-{i}").get(c) for c in REGISTRATION_COLUMNS)
        )
        for i in range(count)
    ]


def test_values_are_the_drivers_and_repeated_shared_texts_are_one_object() -> None:
    raw = _driver_rows(3)
    assert (
        raw[0][REGISTRATION_COLUMNS.index("host_id")]
        is not raw[1][REGISTRATION_COLUMNS.index("host_id")]
    )
    out = as_dicts(REGISTRATION_COLUMNS, raw)
    assert out == [dict(zip(REGISTRATION_COLUMNS, r, strict=True)) for r in raw]
    shared = [c for c in REGISTRATION_COLUMNS if c in SHARED_TEXT_COLUMNS]
    assert "host_id" in shared
    assert "repository_binding" in shared
    for column in shared:
        if isinstance(out[0][column], str):
            assert out[1][column] is out[0][column], column
            assert out[2][column] is out[0][column], column
    # Other columns keep the driver's own objects.
    index = REGISTRATION_COLUMNS.index("session_id")
    assert out[1]["session_id"] is raw[1][index]


def test_values_that_are_not_texts_keep_their_type() -> None:
    # SQLite's dynamic typing can store a number in a text column: 1, 1.0 and True
    # are equal dict keys, so only texts may be shared.
    out = as_dicts(("namespace", "status"), [(1, "active"), (1.0, "active"), (True, None)])
    assert [type(r["namespace"]) for r in out] == [int, float, bool]
    assert out[2]["status"] is None


def test_columns_without_shared_texts_map_plainly() -> None:
    out = as_dicts(("event_id", "detail"), iter([(1, "a"), (2, "b")]))
    assert out == [{"event_id": 1, "detail": "a"}, {"event_id": 2, "detail": "b"}]


def test_batch_columns_share_within_one_read_and_keep_every_value_exact() -> None:
    raw = _driver_rows(3)
    ttl = REGISTRATION_COLUMNS.index("heartbeat_ttl_seconds")
    stamp = REGISTRATION_COLUMNS.index("last_heartbeat_at")
    # Equal numbers arrive as distinct objects; -0.0 equals 0.0 but is another value.
    raw = [tuple(float(str(v)) if i == ttl else v for i, v in enumerate(row)) for row in raw]
    out = as_dicts(REGISTRATION_COLUMNS, raw)
    assert out == [dict(zip(REGISTRATION_COLUMNS, r, strict=True)) for r in raw]
    assert out[1]["heartbeat_ttl_seconds"] is out[0]["heartbeat_ttl_seconds"]
    assert out[2]["last_heartbeat_at"] is out[0]["last_heartbeat_at"]
    assert raw[2][stamp] is not raw[0][stamp]
    odd = as_dicts(
        ("heartbeat_ttl_seconds", "client_pid"),
        [(0.0, 1), (-0.0, True), (1, 1.0), (float("nan"), int("70000")), (2.5, int("70000"))],
    )
    assert [repr(r["heartbeat_ttl_seconds"]) for r in odd] == ["0.0", "-0.0", "1", "nan", "2.5"]
    assert [type(r["client_pid"]) for r in odd] == [int, bool, float, int, int]
    assert odd[4]["client_pid"] is odd[3]["client_pid"]


def test_shared_texts_are_one_object_across_reads() -> None:
    first = as_dicts(REGISTRATION_COLUMNS, _driver_rows(1))
    again = as_dicts(REGISTRATION_COLUMNS, _driver_rows(1))
    assert again[0]["host_id"] is first[0]["host_id"]
    # Batch columns share within one read only.
    assert again[0]["client_instance_id"] == first[0]["client_instance_id"]
