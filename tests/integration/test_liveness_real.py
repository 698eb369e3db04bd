"""Liveness against real child processes: a pidfd reports the exit at once, a sweep on the clock."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process

from actors.liveness.actor import LivenessSettings
from actors.replies import LivenessStatus, LivenessVerdict
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.daemon.app import Supervisor, running_supervisor
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.system.pidfd import pidfd_supported
from supervisor.system.probes import LocalProbes
from supervisor.wire import PlanQuery
from tests.actors.harness import (
    INSTANCE,
    READER,
    REPO,
    RETIRER,
    START,
    Profiles,
    default_settings,
)
from tests.actors.helpers_actors import until
from tests.actors.helpers_app import settle
from tests.actors.helpers_store import RecordingStore

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

SWEEP = 5.0
_SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@dataclass
class Live:
    supervisor: Supervisor
    clock: FakeClock
    proxy: RecordingStore

    async def settle(self) -> None:
        await settle(self.clock, self.proxy)

    async def status(self) -> LivenessStatus:
        return await self.supervisor.handle.liveness_status()

    async def verdict(self, worker_identity: str) -> LivenessVerdict | None:
        found = [v for v in (await self.status()).verdicts if v.worker_identity == worker_identity]
        return found[0] if found else None


@asynccontextmanager
async def live_supervisor(tmp_path: Path, *, use_pidfd: bool) -> AsyncIterator[Live]:
    fake = FakeClock(wall=START)
    store = await open_sqlite_store(tmp_path / "registry.sqlite3")
    proxy = RecordingStore(store)
    settings = replace(
        default_settings(),
        liveness=LivenessSettings(sweep_interval_seconds=SWEEP, use_pidfd=use_pidfd),
    )
    try:
        async with running_supervisor(
            store=proxy,
            clock=MonotonicWall(fake),
            probes=LocalProbes(),
            profiles=Profiles(),
            settings=settings,
        ) as supervisor:
            live = Live(supervisor=supervisor, clock=fake, proxy=proxy)
            await live.settle()
            yield live
    finally:
        await store.close()


@asynccontextmanager
async def sleeper() -> AsyncIterator[Process]:
    async with await anyio.open_process(
        _SLEEPER, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as proc:
        try:
            yield proc
        finally:
            if proc.returncode is None:
                proc.kill()
            # Leaving the block waits for (reaps) the child.


async def register(live: Live, pid: int) -> str:
    result = await live.supervisor.handle.register(
        pid,
        {
            "client_name": "codex",
            "client_instance_id": INSTANCE,
            "session_id": f"sess-{pid}",
            "namespace": "author",
            "role": "author",
            "profile": "prgs-author",
            "repository_binding": REPO,
        },
    )
    assert result.ok, result
    return str(result.registration["worker_identity"])


@pytest.mark.skipif(not pidfd_supported(), reason="pidfd_open unavailable")
async def test_pidfd_reports_a_killed_worker_dead_without_a_sweep(tmp_path: Path) -> None:
    async with live_supervisor(tmp_path, use_pidfd=True) as live, sleeper() as child:
        identity = await register(live, child.pid)
        await live.settle()
        before = await live.status()
        assert before.watched_pids == 1  # the registration started an exit watch
        # The open pidfd itself vouches for the process; no sweep has judged it.
        watched = await live.verdict(identity)
        assert watched is not None
        assert (watched.state, watched.source) == ("alive", "pidfd")

        child.kill()

        async def exit_seen() -> bool:
            verdict = await live.verdict(identity)
            return verdict is not None and verdict.state == "dead"

        await until(exit_seen)  # real I/O: the kernel makes the pidfd readable
        verdict = await live.verdict(identity)
        assert verdict is not None
        assert (verdict.state, verdict.pid) == ("dead", child.pid)
        after = await live.status()
        assert after.sweeps_completed == before.sweeps_completed
        assert after.watched_pids == 0
        # Reaped or not, a later sweep does not bring the incarnation back.
        await child.wait()
        await live.clock.advance(SWEEP)
        await live.settle()
        verdict = await live.verdict(identity)
        assert verdict is not None
        assert (verdict.state, verdict.source) == ("dead", "pidfd")


async def test_without_pidfd_the_next_sweep_sees_the_death(tmp_path: Path) -> None:
    async with live_supervisor(tmp_path, use_pidfd=False) as live, sleeper() as child:
        identity = await register(live, child.pid)
        await live.clock.advance(SWEEP)
        await live.settle()
        verdict = await live.verdict(identity)
        assert verdict is not None
        assert (verdict.state, verdict.source) == ("alive", "sweep")
        assert verdict.evidence.alive is True
        assert (await live.status()).watched_pids == 0

        child.kill()
        await child.wait()  # reaped: a zombie would still probe as existing
        # Nothing notices before the next sweep...
        verdict = await live.verdict(identity)
        assert verdict is not None
        assert verdict.state == "alive"
        # ...and the sweep does.
        await live.clock.advance(SWEEP)
        await live.settle()
        verdict = await live.verdict(identity)
        assert verdict is not None
        assert (verdict.state, verdict.source) == ("dead", "sweep")
        assert verdict.evidence.alive is False


@pytest.mark.parametrize("use_pidfd", [False, True], ids=["sweep", "pidfd"])
async def test_unreaped_zombie_worker_is_not_live_and_does_not_block_retirement(
    tmp_path: Path, use_pidfd: bool
) -> None:
    if use_pidfd and not pidfd_supported():
        pytest.skip("pidfd_open unavailable")
    async with live_supervisor(tmp_path, use_pidfd=use_pidfd) as live:
        handle = live.supervisor.handle
        # Popen, not anyio: the event loop's child watcher would reap the child, and the
        # point is a parent that never does (until the test is over).
        with subprocess.Popen(_SLEEPER) as child:
            try:
                identity = await register(live, child.pid)
                await live.settle()
                assert _worker(await handle.snapshot(READER), identity)["live"] is True

                child.kill()  # and not waited for: a zombie from here on
                await until(partial(_became_zombie, child.pid))
                if use_pidfd:

                    async def exit_seen() -> bool:
                        verdict = await live.verdict(identity)
                        return verdict is not None and verdict.state == "dead"

                    await until(exit_seen)

                # The heartbeat is still fresh, but the pid is known dead: not live.
                snapshot = await handle.snapshot(READER)
                worker = _worker(snapshot, identity)
                assert (worker["live"], worker["liveness"]["pid_alive"]) == (False, False)
                assert snapshot["live_worker_count"] == 0
                plan = await handle.plan(READER, query=PlanQuery(full=True))
                (preserved,) = plan["preserved"]
                assert preserved["reason_code"] == "heartbeat_not_expired"

                # Past its TTL the zombie's row is a stale orphan: it no longer blocks
                # retirement, and apply's own re-probe agrees the incarnation is gone.
                await live.clock.advance(SWEEP * 10)
                await live.settle()
                plan = await handle.plan(READER)
                assert plan["candidate_worker_identities"] == [identity]
                applied = await handle.apply(
                    RETIRER,
                    scope_fingerprint=plan["scope_fingerprint"],
                    candidate_fingerprint=plan["candidate_fingerprint"],
                    worker_identities=[identity],
                )
                assert (applied["outcome"], applied["retired_count"]) == ("applied", 1)
                assert _zombie(child.pid)  # still unreaped throughout
            finally:
                child.kill()
                child.wait()


def _worker(snapshot: Mapping[str, Any], identity: str) -> Mapping[str, Any]:
    (worker,) = [w for w in snapshot["workers"] if w["worker_identity"] == identity]
    return dict(worker)


async def _became_zombie(pid: int) -> bool:
    return _zombie(pid)


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
        return handle.read().rpartition(")")[2].split()[0] == "Z"
