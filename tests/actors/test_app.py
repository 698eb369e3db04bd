"""The supervisor as a whole: restart budget, orderly drain on stop, SIGTERM."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus

from actors.heartbeat.actor import HeartbeatSettings
from actors.lease_watch import LeaseWatch
from actors.replies import HeartbeatResult
from supervisor.daemon import app as app_module
from supervisor.daemon.app import RestartBudgetExceeded, Supervisor
from supervisor.errors import ActorStopped
from supervisor.observe.metrics_prometheus import PrometheusMetrics
from supervisor.policy.stamps import format_stamp
from supervisor.store.sqlite.open import open_sqlite_store
from tests.actors.harness import INSTANCE, REPO, START, default_settings
from tests.actors.helpers_actors import until
from tests.actors.helpers_app import bare_supervisor, close_mailboxes, harness, settle

pytestmark = pytest.mark.anyio

NAMESPACES = ("author", "reviewer", "merger", "controller", "reconciler")


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def claims(pid: int, namespace: str) -> dict[str, Any]:
    return {
        "client_name": "codex",
        "client_instance_id": INSTANCE,
        "session_id": f"sess-{pid}",
        "namespace": namespace,
        "role": namespace,
        "profile": f"prgs-{namespace}",
        "repository_binding": REPO,
    }


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Supervisor]]:
    """Every Supervisor ``running_supervisor`` builds in this test; its mailboxes are closed
    afterwards, because a supervisor that failed leaves them open (see the tests below)."""
    instances: list[Supervisor] = []

    class Recorded(Supervisor):
        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            instances.append(self)

    monkeypatch.setattr(app_module, "Supervisor", Recorded)
    yield instances
    for supervisor in instances:
        close_mailboxes(supervisor)


async def handle_is_stopped(supervisor: Supervisor) -> bool:
    try:
        await supervisor.handle.liveness_status()
    except ActorStopped:
        return True
    return False


# --- restarts -------------------------------------------------------------------------------------


async def test_a_crashed_actor_is_restarted_and_serves_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = LeaseWatch.run
    calls: list[int] = []

    async def crash_first_run(
        self: LeaseWatch, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        calls.append(1)
        if len(calls) == 1:
            task_status.started()
            raise RuntimeError("lease watch crashed (injected)")
        await original(self, task_status=task_status)

    monkeypatch.setattr(LeaseWatch, "run", crash_first_run)
    async with harness(tmp_path) as h:
        owners = await h.handle.lease_owners()  # answered by the restarted actor
        assert owners.readable
        assert h.supervisor.restarts == {"lease_watch": 1}
        metrics = h.supervisor.metrics
        assert isinstance(metrics, PrometheusMetrics)
        registry = metrics.registry
        restarts = registry.get_sample_value("fleet_actor_restarts_total", {"actor": "lease_watch"})
        assert restarts == 1
        assert len(calls) == 2
        # The rest of the supervisor never noticed.
        reg = await h.register()
        assert (await h.beat(reg)).ok


async def test_restart_budget_counts_crashes_within_the_window_then_stops_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built: list[Supervisor]
) -> None:
    crash_send, crash_receive = anyio.create_memory_object_stream[str](0)

    async def crash_on_demand(
        self: LeaseWatch, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        raise RuntimeError(f"crash {await crash_receive.receive()} (injected)")

    monkeypatch.setattr(LeaseWatch, "run", crash_on_demand)
    settings = replace(default_settings(), max_restarts=2, restart_window_seconds=60.0)

    async def crash_until_the_budget_is_spent() -> None:
        async with bare_supervisor(tmp_path, settings=settings) as bare:
            supervisor = bare.supervisor
            for n in (1, 2):
                await crash_send.send(str(n))  # returns once the running actor took it
                await settle(bare.clock, bare.proxy)
                assert supervisor.restarts == {"lease_watch": n}
            # Outside the window the old crashes no longer count...
            await bare.clock.advance(60.5)
            for n in (3, 4):
                await crash_send.send(str(n))
                await settle(bare.clock, bare.proxy)
                assert supervisor.restarts == {"lease_watch": n}
            # ...but a third crash within 60 s of the two before it is one too many.
            await crash_send.send("5")
            with anyio.fail_after(10):  # hang guard only: the group is cancelled first
                await anyio.sleep_forever()

    with crash_send, crash_receive, pytest.raises(BaseExceptionGroup) as raised:
        await crash_until_the_budget_is_spent()

    found = leaves(raised.value)
    assert [type(e) for e in found] == [RestartBudgetExceeded]
    assert "lease_watch" in str(found[0])
    assert "crash 5" in str(found[0])
    (supervisor,) = built
    assert supervisor.restarts == {"lease_watch": 4}


async def test_a_supervisor_that_stopped_loudly_does_not_leave_callers_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built: list[Supervisor]
) -> None:
    async def crash(
        self: LeaseWatch, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        raise RuntimeError("crash (injected)")

    monkeypatch.setattr(LeaseWatch, "run", crash)
    settings = replace(default_settings(), max_restarts=0)

    async def run_until_it_fails() -> None:
        async with bare_supervisor(tmp_path, settings=settings):
            with anyio.fail_after(10):  # hang guard only
                await anyio.sleep_forever()

    with pytest.raises(BaseExceptionGroup) as raised:
        await run_until_it_fails()
    assert [type(e) for e in leaves(raised.value)] == [RestartBudgetExceeded]
    (supervisor,) = built
    # Its actors are gone; a request must fail with ActorStopped, not wait forever.
    with anyio.fail_after(5):  # hang guard: waiting forever is the failure under test
        assert await handle_is_stopped(supervisor)


async def test_failure_before_ready_is_a_startup_error_not_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built: list[Supervisor]
) -> None:
    async def fail_at_start(
        self: LeaseWatch, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        raise RuntimeError("cannot start (injected)")

    monkeypatch.setattr(LeaseWatch, "run", fail_at_start)
    with pytest.raises(BaseExceptionGroup) as raised:
        async with bare_supervisor(tmp_path):
            pytest.fail("the supervisor must not report ready")
    assert [str(e) for e in leaves(raised.value)] == ["cannot start (injected)"]
    (supervisor,) = built
    assert supervisor.restarts == {}


# --- drain --------------------------------------------------------------------------------------


async def test_stop_drains_every_beat_already_accepted(tmp_path: Path) -> None:
    workers = 20
    settings = replace(default_settings(), heartbeat=HeartbeatSettings(max_in_flight=2))
    async with harness(tmp_path, settings=settings) as h:
        regs = [await h.register(namespace=NAMESPACES[i % 5]) for i in range(workers)]
        await h.advance(7)
        beat_at = format_stamp(START + timedelta(seconds=7))
        # Hold the writer at its next transaction so the beats pile up inside the actors.
        gate = anyio.Event()
        h.proxy.gate = gate
        results: list[HeartbeatResult] = []

        async def beat(reg: Any) -> None:
            results.append(await h.beat(reg))

        with anyio.fail_after(30):  # hang guard: a beat dropped by the drain is never answered
            async with anyio.create_task_group() as tg:
                for reg in regs:
                    tg.start_soon(beat, reg)
                await h.settle()
                assert h.proxy.write_waiting.is_set()
                assert results == []
                h.supervisor.stop()
                await h.settle()
                # Stopped for new work...
                assert await handle_is_stopped(h.supervisor)
                # ...but what was accepted before the stop still reaches the database.
                h.proxy.gate = None
                gate.set()
        assert len(results) == workers
        assert {(r.ok, r.code, r.last_heartbeat_at) for r in results} == {(True, "ok", beat_at)}

    assert await stored_beats(tmp_path) == {r["worker_identity"]: beat_at for r in regs}


async def stored_beats(tmp_path: Path) -> dict[str, str]:
    """last_heartbeat_at per worker, read from the database file after the supervisor exited."""
    reopened = await open_sqlite_store(tmp_path / "registry.sqlite3")
    try:
        rows = await reopened.read_registrations()
    finally:
        await reopened.close()
    return {str(r["worker_identity"]): str(r["last_heartbeat_at"]) for r in rows}


async def test_sigterm_drains_and_stops_cleanly(tmp_path: Path) -> None:
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    results: list[HeartbeatResult] = []
    async with bare_supervisor(tmp_path, handle_signals=True) as bare:
        supervisor = bare.supervisor
        regs = []
        for n, namespace in enumerate(NAMESPACES):
            pid = 4321 + n
            bare.probes.set(pid, alive=True, start_time=f"ticks-{pid}", cwd=REPO)
            registered = await supervisor.handle.register(pid, claims(pid, namespace))
            assert registered.ok
            regs.append(registered.registration)
        await bare.clock.advance(3)
        await settle(bare.clock, bare.proxy)
        gate = anyio.Event()
        bare.proxy.gate = gate

        async def beat(reg: Any) -> None:
            results.append(
                await supervisor.handle.heartbeat(
                    str(reg["worker_identity"]),
                    pid=int(reg["pid"]),
                    generation_id=str(reg["generation_id"]),
                    fencing_epoch=int(reg["fencing_epoch"]),
                )
            )

        async def stopped() -> bool:
            return await handle_is_stopped(supervisor)

        with anyio.fail_after(30):  # hang guard
            async with anyio.create_task_group() as tg:
                for reg in regs:
                    tg.start_soon(beat, reg)
                await settle(bare.clock, bare.proxy)
                assert bare.proxy.write_waiting.is_set()
                # The watcher must own SIGTERM before we send it, or its default action
                # would kill the test run.
                assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
                os.kill(os.getpid(), signal.SIGTERM)
                await until(stopped)  # real I/O: the signal arrives through the event loop
                bare.proxy.gate = None
                gate.set()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    beat_at = format_stamp(START + timedelta(seconds=3))
    assert {(r.ok, r.last_heartbeat_at) for r in results} == {(True, beat_at)}
    assert await stored_beats(tmp_path) == {str(r["worker_identity"]): beat_at for r in regs}
