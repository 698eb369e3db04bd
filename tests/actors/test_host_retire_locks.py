"""A retirement of a live host's rows refuses before it locks any row (no deadlock)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from actors.host_lease.writes import HOST_LEASE_MOVED, RetireHostRows, handle_host_write
from supervisor.policy.retirement.host_leases import (
    REASON_HOST_IS_LOCAL,
    REASON_HOST_LEASE_LIVE,
    host_token,
)
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import Row, WriteTx

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


class _Leases:
    def __init__(self, lease: Row) -> None:
        self.lease_row = lease
        self.reads: list[bool] = []

    async def lease(self, host_id: str, *, lock: bool = True) -> Row | None:
        self.reads.append(lock)
        return dict(self.lease_row)


class _Tx:
    """Records the order of reads: which ones lock rows, which read the lease."""

    def __init__(self, lease: Row) -> None:
        self.host_leases = _Leases(lease)
        self.row_locks: list[list[str]] = []

    def hosts(self) -> _Leases:
        return self.host_leases

    async def registrations(
        self, *, status: str | None = None, worker_identities: Sequence[str] | None = None
    ) -> list[Row]:
        if worker_identities is not None:
            self.row_locks.append(list(worker_identities))
        return []

    async def leases(self, *, status: str | None = None) -> list[Row]:
        return []


def _lease(*, expires: datetime) -> Row:
    return {
        "host_id": "host-b",
        "status": "live",
        "epoch": 3,
        "expires_at": format_stamp(expires),
        "renewed_at": format_stamp(NOW),
        "supervisor_id": "sup-b",
    }


def _retire(lease: Row, *, token: str | None = None, local: str = "host-a") -> RetireHostRows:
    return RetireHostRows(
        host_id="host-b",
        host_token=host_token(lease) if token is None else token,
        candidate_fingerprint="",
        worker_identities=("wkr-1", "wkr-2"),
        retired_by="sup-a",
        local_host_id=local,
        retire_after_seconds=60.0,
        recheck_grant=lambda: None,
    )


async def _run(tx: _Tx, message: RetireHostRows) -> Any:
    return await handle_host_write(cast(WriteTx, tx), message, NOW)


async def test_a_live_lease_refuses_without_locking_the_hosts_rows() -> None:
    lease = _lease(expires=NOW + timedelta(seconds=30))
    tx = _Tx(lease)
    ack = await _run(tx, _retire(lease))
    assert (ack.ok, ack.code) == (False, REASON_HOST_LEASE_LIVE)
    assert tx.row_locks == []
    assert tx.host_leases.reads == [False]


async def test_the_local_host_refuses_without_locking_its_rows() -> None:
    lease = _lease(expires=NOW - timedelta(hours=1))
    tx = _Tx(lease)
    ack = await _run(tx, _retire(lease, local="host-b"))
    assert (ack.ok, ack.code) == (False, REASON_HOST_IS_LOCAL)
    assert tx.row_locks == []


async def test_a_changed_lease_takes_the_locked_path_and_answers_moved() -> None:
    lease = _lease(expires=NOW + timedelta(seconds=30))
    tx = _Tx(lease)
    ack = await _run(tx, _retire(lease, token="hostfp-stale"))
    assert (ack.ok, ack.code) == (False, HOST_LEASE_MOVED)
    assert tx.row_locks == [["wkr-1", "wkr-2"]]
    assert tx.host_leases.reads == [False, True]


async def test_an_expired_lease_locks_rows_before_the_lease() -> None:
    lease = _lease(expires=NOW - timedelta(hours=1))
    tx = _Tx(lease)
    await _run(tx, _retire(lease))
    assert tx.row_locks[0] == ["wkr-1", "wkr-2"]
    assert tx.host_leases.reads == [False, True]
