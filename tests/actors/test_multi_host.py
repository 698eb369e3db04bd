"""Three supervisors, three hosts, one PostgreSQL registry: host leases and dead-host retirement."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any, cast

import anyio
import pytest

from actors.host_lease.actor import HostLeaseSettings
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.daemon.app import running_supervisor
from supervisor.policy.retirement.host_leases import (
    REASON_HOST_ID_IN_USE,
    REASON_HOST_IS_LOCAL,
    REASON_HOST_LEASE_EXPIRED,
    REASON_HOST_LEASE_LIVE,
    REASON_HOST_LEASE_RECENT,
    HostRetirementPlan,
)
from supervisor.policy.retirement.reasons import OUTCOME_APPLIED
from supervisor.store.postgres.open import open_postgres_store
from supervisor.store.sqlite.store import SQLiteStore
from tests.actors.harness import AUTHOR, READER, RETIRER, START, Profiles, default_settings
from tests.actors.helpers_app import SettledHarness, close_mailboxes
from tests.actors.helpers_retirement import PAST_TTL, apply_plan, enroll, ensure_swept, plan
from tests.actors.helpers_store import RecordingStore
from tests.fakes import ScriptedProbes

pytestmark = pytest.mark.anyio

LEASE, RENEW, RETIRE_AFTER = 30.0, 10.0, 600.0
HOSTS = ("host-a", "host-b", "host-c")
#: retired_by of an apply from host-b: the profile, and the host it applied from.
BY_B = f"{RETIRER.name}@host-b"


def _settings() -> Any:
    hosts = HostLeaseSettings(
        enabled=True,
        lease_seconds=LEASE,
        renew_interval_seconds=RENEW,
        retire_after_seconds=RETIRE_AFTER,
    )
    return replace(default_settings(), hosts=hosts)


@asynccontextmanager
async def host(
    url: str, name: str, *, supervisor_id: str, pid_base: int
) -> AsyncIterator[SettledHarness]:
    """One host's supervisor on the shared database, with its own clock and probes."""
    fake = FakeClock(wall=START)
    probes = ScriptedProbes(host_id=name, boot_id=f"boot-{name}")
    store = await open_postgres_store(url)
    proxy = RecordingStore(store)
    profiles = Profiles()
    supervisor = None
    try:
        async with running_supervisor(
            store=proxy,
            clock=MonotonicWall(fake),
            probes=probes,
            profiles=profiles,
            settings=_settings(),
            supervisor_id=supervisor_id,
        ) as supervisor:
            h = SettledHarness(
                supervisor=supervisor,
                handle=supervisor.handle,
                clock=fake,
                probes=probes,
                # The harness's helpers only read rows through the Store interface.
                store=cast(SQLiteStore, store),
                profiles=profiles,
                next_pid=pid_base,
                proxy=proxy,
            )
            await h.settle()
            yield h
    finally:
        if supervisor is not None:
            close_mailboxes(supervisor)
        await store.close()


async def advance_all(hosts: list[SettledHarness], seconds: float) -> None:
    """Every live host's clock moves together (each renews on its own schedule)."""
    for h in hosts:
        await h.advance(seconds)


async def statuses(h: SettledHarness) -> dict[str, tuple[str, str | None, str | None]]:
    rows = await h.store.read_registrations()
    return {
        str(r["worker_identity"]): (str(r["status"]), r["host_id"], r["retirement_reason"])
        for r in rows
    }


async def host_plan(h: SettledHarness, host_id: str) -> HostRetirementPlan:
    plan = await h.supervisor.hosts.plan_retirement(RETIRER, host_id)
    assert isinstance(plan, HostRetirementPlan), plan
    return plan


async def race(hosts: list[SettledHarness], workers: Mapping[str, list[Any]], rounds: int) -> None:
    """Every host beats its own workers while the others plan and try to apply its
    retirement with whatever tokens they saw: concurrently, through real transactions."""

    async def beat(h: SettledHarness) -> None:
        for _ in range(rounds):
            for registration in workers[str(h.probes.host_id())]:
                result = await h.beat(registration)
                assert result.ok, result

    async def attack(h: SettledHarness) -> None:
        for _ in range(rounds):
            for target in HOSTS:
                plan = await host_plan(h, target)
                ack = await h.supervisor.hosts.apply_retirement(
                    RETIRER,
                    host_id=target,
                    host_token=plan.host_token,
                    candidate_fingerprint=plan.candidate_fingerprint,
                    worker_identities=[str(r["worker_identity"]) for r in workers[target]],
                )
                assert not ack.ok
                assert ack.code in {REASON_HOST_LEASE_LIVE, REASON_HOST_IS_LOCAL}, ack

    async with anyio.create_task_group() as tg:
        for h in hosts:
            tg.start_soon(beat, h)
            tg.start_soon(attack, h)


async def test_three_hosts_never_retire_a_live_row_and_a_silent_host_comes_back(
    pg_url: str,
) -> None:
    async with AsyncExitStack() as stack:
        hosts = [
            await stack.enter_async_context(
                host(pg_url, name, supervisor_id=f"sup-{name}", pid_base=1000 * (i + 1))
            )
            for i, name in enumerate(HOSTS)
        ]
        a, b, c = hosts
        workers = {str(h.probes.host_id()): [await h.register() for _ in range(3)] for h in hosts}
        for h in hosts:
            status = await h.supervisor.hosts.status()
            assert (status.renewals, status.epoch, status.last_code) == (1, 1, "ok")

        # Beats and retirement attempts race on every host while every lease is live.
        await race(hosts, workers, rounds=3)
        await advance_all(hosts, RENEW * 3)
        for h in hosts:
            # Renewed on the injected clock: at start, then once per interval.
            assert (await h.supervisor.hosts.status()).renewals == 4
        await race(hosts, workers, rounds=2)
        assert {s for s, _, _ in (await statuses(a)).values()} == {"active"}

        # host-c goes silent (its supervisor stops); the others carry on beating.
        await stack.enter_async_context(_closing(c))
        live = [a, b]
        await advance_all(live, LEASE + 1)
        early = await host_plan(b, "host-c")
        assert early.refused == REASON_HOST_LEASE_RECENT
        assert [e.reason_code for e in early.preserved] == [REASON_HOST_LEASE_RECENT] * 3
        await advance_all(live, RETIRE_AFTER)
        for h in live:
            for registration in workers[str(h.probes.host_id())]:
                assert (await h.beat(registration)).ok

        plan = await host_plan(b, "host-c")
        assert not plan.refused
        assert [e.reason_code for e in plan.candidates] == [REASON_HOST_LEASE_EXPIRED] * 3
        # Live hosts' plans still refuse, whoever asks.
        assert (await host_plan(a, "host-b")).refused == (REASON_HOST_LEASE_LIVE)
        ack = await b.supervisor.hosts.apply_retirement(
            RETIRER,
            host_id="host-c",
            host_token=plan.host_token,
            candidate_fingerprint=plan.candidate_fingerprint,
            worker_identities=[e.worker_identity for e in plan.candidates],
        )
        assert ack.ok, ack
        rows = await statuses(a)
        for identity, (row_status, host_id, reason) in rows.items():
            if host_id == "host-c":
                assert (row_status, reason) == ("retired", REASON_HOST_LEASE_EXPIRED), identity
            else:
                assert (row_status, reason) == ("active", None), identity

        # host-c's supervisor comes back: it is told it was declared dead, and its
        # workers' beats tell them to register again.
        back = await stack.enter_async_context(
            host(pg_url, "host-c", supervisor_id="sup-host-c-2", pid_base=3000)
        )
        comeback = await back.supervisor.hosts.status()
        assert (comeback.declared_dead_count, comeback.declared_dead_by) == (1, BY_B)
        assert comeback.epoch == 2
        old = workers["host-c"][0]
        back.probes.set(int(old["pid"]), alive=True, start_time=f"ticks-{old['pid']}")
        refused = await back.beat(old)
        assert (refused.ok, refused.code) == (False, "registration_not_active")
        again = await back.register(int(old["pid"]))
        assert (await back.beat(again)).ok
        # The apply's tokens are spent: the host lease moved when it came back.
        stale = await b.supervisor.hosts.apply_retirement(
            RETIRER,
            host_id="host-c",
            host_token=plan.host_token,
            candidate_fingerprint=plan.candidate_fingerprint,
            worker_identities=[str(again["worker_identity"])],
        )
        assert (stale.ok, stale.code) == (False, "host_lease_moved")


async def test_a_second_supervisor_with_a_live_host_id_is_refused_its_lease(
    pg_url: str,
) -> None:
    async with (
        host(pg_url, "host-a", supervisor_id="sup-1", pid_base=1000) as first,
        host(pg_url, "host-a", supervisor_id="sup-2", pid_base=2000) as second,
    ):
        assert (await first.supervisor.hosts.status()).last_code == "ok"
        assert (await second.supervisor.hosts.status()).last_code == REASON_HOST_ID_IN_USE


@asynccontextmanager
async def _closing(h: SettledHarness) -> AsyncIterator[None]:
    """Stop one host's supervisor now (its context still unwinds at the end)."""
    h.supervisor.stop()
    await h.settle()
    yield


async def fall_silent(silent: SettledHarness, *, seen_by: SettledHarness) -> None:
    """``silent`` registers a worker and stops; ``seen_by`` waits until its lease is past
    retirement."""
    await silent.register()
    silent.supervisor.stop()
    await silent.settle()
    await seen_by.advance(LEASE + RETIRE_AFTER + 1)


async def test_host_retirement_needs_its_grants_and_rechecks_apply_before_writing(
    pg_url: str,
) -> None:
    async with (
        host(pg_url, "host-a", supervisor_id="sup-a", pid_base=1000) as a,
        host(pg_url, "host-c", supervisor_id="sup-c", pid_base=3000) as c,
    ):
        await fall_silent(c, seen_by=a)
        denied = await a.supervisor.hosts.plan_retirement(AUTHOR, "host-c")
        assert not isinstance(denied, HostRetirementPlan)
        assert (denied.ok, denied.code) == (False, "permission_denied")
        plan = await a.supervisor.hosts.plan_retirement(READER, "host-c")
        assert isinstance(plan, HostRetirementPlan)
        assert len(plan.candidates) == 1
        args: dict[str, Any] = {
            "host_id": "host-c",
            "host_token": plan.host_token,
            "candidate_fingerprint": plan.candidate_fingerprint,
            "worker_identities": [e.worker_identity for e in plan.candidates],
        }
        reader_apply = await a.supervisor.hosts.apply_retirement(READER, **args)
        assert (reader_apply.ok, reader_apply.code) == (False, "permission_denied")
        # The grant is revoked after the caller was authorized: the writer re-reads it
        # inside the transaction and writes nothing.
        a.profiles.revoke(RETIRER.name)
        revoked = await a.supervisor.hosts.apply_retirement(RETIRER, **args)
        assert (revoked.ok, revoked.code) == (False, "permission_denied")
        assert {s for s, _, _ in (await statuses(a)).values()} == {"active"}


async def test_a_hosts_own_retirement_applies_on_postgresql_while_another_host_beats(
    pg_url: str,
) -> None:
    async with (
        host(pg_url, "host-a", supervisor_id="sup-a", pid_base=1000) as a,
        host(pg_url, "host-b", supervisor_id="sup-b", pid_base=2000) as b,
    ):
        await ensure_swept(a)
        gone = [await enroll(a) for _ in range(2)]
        running = await enroll(a, namespace="reviewer")
        others = [await enroll(b, namespace="merger") for _ in range(2)]
        for worker in gone:
            a.probes.kill(int(worker["pid"]))
        await a.advance(PAST_TTL)
        assert (await a.beat(running)).ok
        planned = await plan(a)
        assert sorted(planned["candidate_worker_identities"]) == sorted(
            str(w["worker_identity"]) for w in gone
        )
        # host-b's rows are in host-a's registry view but never its candidates.
        assert {str(w["worker_identity"]) for w in others}.isdisjoint(
            planned["candidate_worker_identities"]
        )
        result: dict[str, Any] = {}

        async def beat_b() -> None:
            for _ in range(5):
                for worker in others:
                    assert (await b.beat(worker)).ok

        async def apply_a() -> None:
            result.update(await apply_plan(a, planned, mode="scoped"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(beat_b)
            tg.start_soon(apply_a)
        assert (result["outcome"], result["retired_count"]) == (OUTCOME_APPLIED, 2), result
        rows = await statuses(a)
        for worker in gone:
            assert rows[str(worker["worker_identity"])][0] == "retired"
        for worker in [running, *others]:
            assert rows[str(worker["worker_identity"])][0] == "active"
