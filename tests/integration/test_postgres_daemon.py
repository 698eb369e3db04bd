"""The real daemon on a PostgreSQL registry: ``[database] url`` end to end through the socket."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from supervisor.client import AsyncClient
from supervisor.store.postgres.open import postgres_store
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


async def _until(predicate: Callable[[], bool], what: str) -> None:
    with anyio.move_on_after(30) as guard:  # a hang guard, not a timing assertion
        while not predicate():
            await anyio.sleep(0.1)
    if guard.cancelled_caught:
        raise AssertionError(f"gave up waiting for {what}")


def _json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


async def test_an_operator_on_one_host_retires_a_silent_hosts_rows_with_the_cli(
    pg_url: str,
) -> None:
    # Short leases so the host goes silent within the test; real processes, real time.
    hosts = ("[hosts]", "lease_seconds = 1.0", "renew_interval_seconds = 0.3")
    quick = (*hosts, "retire_after_seconds = 1.0")
    with (
        running_daemon(database_url=pg_url, host_id="host-a", extra_lines=quick) as a,
        running_daemon(database_url=pg_url, host_id="host-b", extra_lines=hosts) as b,
    ):
        await wait_ready(a)
        await wait_ready(b)
        async with AsyncClient(b.socket) as client:
            registered = await client.register(claims())
            assert registered["ok"] is True, registered
        identity = registered["registration"]["worker_identity"]
        status = _json(a.cli("hosts", "status", "--json"))
        assert (status["host_id"], status["last_code"]) == ("host-a", "ok")
        live = a.cli("hosts", "plan", "host-b", "--json")
        assert live.returncode == 1
        assert _json(live)["refused"] == "host_lease_live"

        b.process.send_signal(signal.SIGTERM)  # host-b's supervisor goes away
        assert b.process.wait(timeout=30) == 0

        def plan() -> dict[str, Any]:
            return _json(a.cli("hosts", "plan", "host-b", "--json"))

        await _until(lambda: plan()["candidate_count"] == 1, "host-b's row to be retirable")
        ready = plan()
        assert ready["candidate_worker_identities"] == [identity]
        applied = a.cli(
            "hosts",
            "apply",
            "host-b",
            "--host-token",
            ready["host_token"],
            "--candidate-fingerprint",
            ready["candidate_fingerprint"],
            "--workers",
            identity,
            "--json",
        )
        assert applied.returncode == 0, applied.stdout + applied.stderr
        async with postgres_store(pg_url) as store:
            (row,) = await store.read_registrations()
            leases = {r["host_id"]: r for r in await store.read_host_leases()}
        assert (row["status"], row["retirement_reason"]) == ("retired", "host_lease_expired")
        assert row["retired_by"] == "prgs-reconciler@host-a"
        assert leases["host-b"]["status"] == "declared_dead"
        assert leases["host-a"]["status"] == "live"
