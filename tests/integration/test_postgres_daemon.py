"""The real daemon on a PostgreSQL registry: ``[database] url`` end to end through the socket."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import anyio
import pytest

from supervisor.client import AsyncClient
from supervisor.store.postgres import postgres_store
from tests.integration.daemon import Daemon, running_daemon, wait_ready
from tests.integration.socket_helpers import claims

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture
def pg_daemon(pg_url: str) -> Iterator[Daemon]:
    with running_daemon(ttl=5.0, database_url=pg_url) as running:
        yield running
    assert running.process.returncode == 0, (running.workdir / "daemon.log").read_text()[-2000:]


async def test_a_daemon_with_a_url_serves_workers_from_postgresql(
    pg_daemon: Daemon, pg_url: str
) -> None:
    await wait_ready(pg_daemon)
    async with AsyncClient(pg_daemon.socket) as client:
        registered = await client.register(claims())
        assert registered["ok"] is True, registered
        registration = registered["registration"]
        beat = await client.heartbeat(registration)
        assert beat["ok"] is True, beat
    async with postgres_store(pg_url) as store:
        (row,) = await store.read_registrations()
        (lease,) = await store.read_host_leases()
    assert (row["worker_identity"], row["pid"], row["status"]) == (
        registration["worker_identity"],
        os.getpid(),
        "active",
    )
    # With a shared registry the daemon keeps a lease for its host.
    assert (lease["host_id"], lease["status"], lease["epoch"]) == (row["host_id"], "live", 1)
    # The SQLite file of [database] path was never created.
    assert not (pg_daemon.workdir / "registry.sqlite3").exists()
    pg_daemon.process.send_signal(signal.SIGTERM)
    with anyio.fail_after(30):  # a hang guard, not a timing assertion
        while pg_daemon.process.poll() is None:
            await anyio.sleep(0.05)
