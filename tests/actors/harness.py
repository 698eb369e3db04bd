"""A running supervisor for actor tests: FakeClock, scripted probes, real SQLite in tmp_path."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from actors.liveness.actor import LivenessSettings
from actors.retirement.actor import RetirementSettings
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.daemon.app import AppSettings, Supervisor, running_supervisor
from supervisor.handle import SupervisorHandle
from supervisor.policy.control.permissions import OP_READ, OP_RETIRE, Profile
from supervisor.policy.identity.instance import mint_instance_id
from supervisor.store.base import Store
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.store.sqlite.store import SQLiteStore
from tests.actors.profiles import CONTROL_PROFILES
from tests.census_source import Take, census_source, empty_census
from tests.fakes import ScriptedProbes

REPO = "/srv/repos/fleet"
START = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
INSTANCE = mint_instance_id("codex", now=START, nonce="harness")

READER = Profile(
    name="prgs-controller", role_kind="controller", allowed_operations=frozenset({OP_READ})
)
RETIRER = Profile(
    name="prgs-reconciler",
    role_kind="reconciler",
    allowed_operations=frozenset({OP_READ, OP_RETIRE}),
)
AUTHOR = Profile(name="prgs-author", role_kind="author", allowed_operations=frozenset({OP_READ}))


@dataclass
class Profiles:
    """A mutable profile source, so tests can revoke a grant mid-call."""

    by_name: dict[str, Profile] = field(
        default_factory=lambda: {p.name: p for p in (READER, RETIRER, AUTHOR, *CONTROL_PROFILES)}
    )

    def get(self, name: str) -> Profile | None:
        return self.by_name.get(name)

    def revoke(self, name: str) -> None:
        profile = self.by_name[name]
        self.by_name[name] = replace(
            profile, allowed_operations=profile.allowed_operations - {OP_RETIRE}
        )


@dataclass
class Harness:
    supervisor: Supervisor
    handle: SupervisorHandle
    clock: FakeClock
    probes: ScriptedProbes
    store: SQLiteStore
    profiles: Profiles
    next_pid: int = 4000

    def spawn(self, *, start: str | None = None) -> int:
        """A scripted live process."""
        self.next_pid += 1
        pid = self.next_pid
        self.probes.set(pid, alive=True, start_time=start or f"ticks-{pid}", cwd=REPO)
        return pid

    async def register(self, pid: int | None = None, **claims: Any) -> Mapping[str, Any]:
        pid = pid if pid is not None else self.spawn()
        base: dict[str, Any] = {
            "client_name": "codex",
            "client_instance_id": INSTANCE,
            "session_id": f"sess-{pid}",
            "namespace": "author",
            "role": "author",
            "profile": "prgs-author",
            "repository_binding": REPO,
        }
        base.update(claims)
        result = await self.handle.register(pid, base)
        assert result.ok, result
        return result.registration

    async def beat(self, registration: Mapping[str, Any]) -> Any:
        identity, fence = _fenced(registration)
        return await self.handle.heartbeat(identity, **fence)

    async def release(self, registration: Mapping[str, Any]) -> Any:
        identity, fence = _fenced(registration)
        return await self.handle.release(identity, **fence)

    async def row(self, worker_identity: str) -> dict[str, Any]:
        rows = [
            r
            for r in await self.store.read_registrations()
            if r["worker_identity"] == worker_identity
        ]
        assert len(rows) == 1
        return rows[0]


def _fenced(registration: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """What a heartbeat or a release names: the identity and its fencing arguments."""
    fence = {
        "pid": int(registration["pid"]),
        "generation_id": str(registration["generation_id"]),
        "fencing_epoch": int(registration["fencing_epoch"]),
    }
    return str(registration["worker_identity"]), fence


def default_settings(**retirement: Any) -> AppSettings:
    return AppSettings(
        liveness=LivenessSettings(sweep_interval_seconds=5.0, use_pidfd=False),
        retirement=RetirementSettings(canonical_repository=REPO, **retirement),
    )


@asynccontextmanager
async def harness(
    tmp_path: Path,
    *,
    settings: AppSettings | None = None,
    probes: ScriptedProbes | None = None,
    wrap_store: Callable[[SQLiteStore], Store] | None = None,
    census: Take = empty_census,
) -> AsyncIterator[Harness]:
    """``wrap_store`` lets a test put a proxy between the actors and the real database;
    ``Harness.store`` stays the real store, for assertions. ``census`` answers every
    census the reap asks for (by default none lists a server)."""
    fake = FakeClock(wall=START)
    clock = MonotonicWall(fake)
    scripted = probes or ScriptedProbes(host_id="host-a", boot_id="boot-1")
    profiles = Profiles()
    store = await open_sqlite_store(tmp_path / "registry.sqlite3")
    try:
        async with (
            census_source(census) as census_inbox,
            running_supervisor(
                store=wrap_store(store) if wrap_store is not None else store,
                clock=clock,
                probes=scripted,
                profiles=profiles,
                settings=settings or default_settings(),
                census=census_inbox,
            ) as supervisor,
        ):
            await fake.advance(0)
            yield Harness(
                supervisor=supervisor,
                handle=supervisor.handle,
                clock=fake,
                probes=scripted,
                store=store,
                profiles=profiles,
            )
    finally:
        await store.close()
