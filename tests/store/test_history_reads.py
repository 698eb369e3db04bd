"""The history reads on every backend: digest, scope lookup and pages agree with a full read."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.policy.retirement.fingerprints import (
    history_summary,
    identity_keys,
    is_history,
    row_digest,
)
from tests.store.rowdata import registration

pytestmark = pytest.mark.anyio


def _rows() -> list[dict[str, Any]]:
    rows = [registration(f"wrk-{i}", session_id=f"sess-{i % 2}", pid=100 + i) for i in range(3)]
    rows += [
        registration(f"old-{i}", status=status, session_id=f"sess-{i % 3}", pid=200 + i)
        for i, status in enumerate(("released", "superseded", "retired", "retired"))
    ]
    return rows


async def test_history_reads_agree_with_a_full_read(store: Any) -> None:
    async with store.write() as tx:
        for row in _rows():
            await tx.insert_registration(row)
    everything = await store.read_registrations()
    view = await store.read_registry_view()
    assert view.history == history_summary(everything)
    assert view.history.count == 4
    assert sorted(r["worker_identity"] for r in view.active) == ["wrk-0", "wrk-1", "wrk-2"]

    keys = {("session_id", "sess-1"), ("pid", "203")}
    want = sorted(row_digest(r) for r in everything if is_history(r) and identity_keys(r) & keys)
    assert sorted(await store.read_history_scope(keys)) == want
    async with store.write() as tx:
        assert await tx.history_summary() == view.history
        assert sorted(map(row_digest, await tx.history_scope(keys))) == want

    first = await store.read_history(limit=2)
    assert [r["worker_identity"] for r in first] == ["old-0", "old-1"]
    rest = await store.read_history(after="old-1", limit=10)
    assert [r["worker_identity"] for r in rest] == ["old-2", "old-3"]
    assert await store.read_history(limit=10, needle="nowhere") == []


async def test_the_history_summary_follows_a_row_entering_history(store: Any) -> None:
    async with store.write() as tx:
        for row in _rows():
            await tx.insert_registration(row)
    before = await store.read_registry_view()
    assert await store.read_registry_view() == before  # unchanged history, same summary
    async with store.write() as tx:
        (row,) = await tx.registrations(worker_identities=["wrk-0"])
        assert await tx.retire_guarded(
            row, retired_at="2024-05-01T10:20:00.000000Z", retired_by="t", reason="r"
        )
    after = await store.read_registry_view()
    assert after.history != before.history
    assert after.history == history_summary(await store.read_registrations())
    assert after.history.count == 5
