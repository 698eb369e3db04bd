"""Shared set-up for the retirement actor tests: enrolling workers, plans, applies, fakes, spies."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from typing import Any, Literal

import anyio
import pytest

from supervisor.policy.control.permissions import Profile
from supervisor.policy.identity.instance import mint_instance_id
from supervisor.store.base import WriteTx
from supervisor.store.stamps import format_stamp
from supervisor.system.probes import ProcessEvidence
from supervisor.wire import PlanQuery
from tests.actors.harness import READER, RETIRER, START, Harness
from tests.fakes import ScriptedProbes

__all__ = [
    "DEFAULT_TTL",
    "PAST_TTL",
    "AuditSpy",
    "ExplodingReprobe",
    "Mode",
    "SplitProbes",
    "TxProxy",
    "apply_plan",
    "enroll",
    "ensure_swept",
    "instance_id",
    "lease",
    "plan",
    "rows_by_identity",
    "stale_fleet",
    "status_of",
    "wrap_store_writes",
]

DEFAULT_TTL = 30.0
#: Advancing by this makes every silent row of DEFAULT_TTL stale.
PAST_TTL = DEFAULT_TTL + 1.0

Mode = Literal["strict", "scoped"]


def instance_id(tag: str) -> str:
    """A launcher-minted (trusted) instance id of its own, so workers never share a slot."""
    return mint_instance_id("codex", now=START, nonce=f"retire-{tag}")


async def ensure_swept(h: Harness) -> None:
    """Apply refuses until a liveness sweep completed: make sure one did.

    The actor's first sweep starts with the supervisor but finishes on a database
    thread, so whether it is done yet depends on real time. Running one sweep to
    completion here does not (advancing the fake clock until the count moves would).
    """
    if (await h.handle.liveness_status()).sweeps_completed >= 1:
        return
    liveness = h.supervisor.liveness
    assert liveness is not None
    await liveness.sweep()
    assert (await h.handle.liveness_status()).sweeps_completed >= 1


async def enroll(
    h: Harness,
    *,
    instance: str | None = None,
    namespace: str = "author",
    session_id: str | None = None,
    start: str | None = None,
    **claims: Any,
) -> dict[str, Any]:
    """Register one live (scripted) process under an instance of its own by default."""
    pid = h.spawn(start=start)
    extra: dict[str, Any] = dict(claims)
    extra["client_instance_id"] = instance or instance_id(str(pid))
    extra["namespace"] = namespace
    if session_id is not None:
        extra["session_id"] = session_id
    return dict(await h.register(pid, **extra))


async def plan(h: Harness, profile: Profile | None = READER, **kwargs: Any) -> Mapping[str, Any]:
    """A plan listing every entry (``query=None`` asks for the compact default)."""
    kwargs.setdefault("query", PlanQuery(full=True))
    result = await h.handle.plan(profile, **kwargs)
    assert result["success"] is True, result
    return result


async def apply_plan(
    h: Harness,
    planned: Mapping[str, Any],
    *,
    mode: Mode = "strict",
    identities: Sequence[str] | None = None,
    profile: Profile | None = RETIRER,
) -> Mapping[str, Any]:
    """Apply a plan's tokens (one registry token, by mode) and, by default, its candidates."""
    chosen = list(planned["candidate_worker_identities"] if identities is None else identities)
    if mode == "strict":
        return await h.handle.apply(
            profile,
            registry_fingerprint=str(planned["registry_fingerprint"]),
            candidate_fingerprint=str(planned["candidate_fingerprint"]),
            worker_identities=chosen,
        )
    return await h.handle.apply(
        profile,
        scope_fingerprint=str(planned["scope_fingerprint"]),
        candidate_fingerprint=str(planned["candidate_fingerprint"]),
        worker_identities=chosen,
    )


async def rows_by_identity(h: Harness) -> dict[str, dict[str, Any]]:
    return {str(r["worker_identity"]): r for r in await h.store.read_registrations()}


async def status_of(h: Harness, worker_identity: str) -> str:
    return str((await h.row(worker_identity))["status"])


def lease(
    lease_id: str,
    *,
    session_id: str | None = None,
    owner_pid: int | None = None,
    status: str = "active",
    hours: float = 24.0,
) -> dict[str, Any]:
    """An active work lease that will not expire during a test."""
    record: dict[str, Any] = {
        "lease_id": lease_id,
        "work_item_key": f"issue-{lease_id}",
        "status": status,
        "role": "author",
        "acquired_at": format_stamp(START),
        "expires_at": format_stamp(START + timedelta(hours=hours)),
    }
    if session_id is not None:
        record["session_id"] = session_id
    if owner_pid is not None:
        record["owner_pid"] = owner_pid
    return record


# --- probe backends -------------------------------------------------------------------


class SplitProbes(ScriptedProbes):
    """Bulk probes (sweeps, plans, the in-transaction plan) follow the script, while the
    single-pid probe apply uses for its per-target re-probe can be overridden per pid."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reprobe: dict[int, ProcessEvidence] = {}

    def probe_many(self, pids: Sequence[int]) -> list[ProcessEvidence]:
        return [ScriptedProbes.probe(self, pid) for pid in pids]

    def probe(self, pid: int) -> ProcessEvidence:
        seen = self.reprobe.get(pid)
        if seen is not None:
            self.probed.append(pid)
            return seen
        return super().probe(pid)


class ExplodingReprobe(ScriptedProbes):
    """Once armed, the Nth single-pid probe raises (bulk probes are unaffected)."""

    def __init__(self, *, explode_on: int = 2, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.armed = False
        self.explode_on = explode_on
        self.reprobes: list[int] = []

    def probe_many(self, pids: Sequence[int]) -> list[ProcessEvidence]:
        return [ScriptedProbes.probe(self, pid) for pid in pids]

    def probe(self, pid: int) -> ProcessEvidence:
        if self.armed:
            self.reprobes.append(pid)
            if len(self.reprobes) == self.explode_on:
                raise RuntimeError(f"synthetic probe failure on pid {pid}")
        return super().probe(pid)


# --- store spies ----------------------------------------------------------------------


class TxProxy:
    """Delegates every WriteTx operation; subclasses intercept some."""

    def __init__(self, tx: WriteTx) -> None:
        self._tx = tx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)


TxWrapper = Callable[[WriteTx], Any]


def wrap_store_writes(
    monkeypatch: pytest.MonkeyPatch,
    h: Harness,
    wrap: TxWrapper,
    *,
    after_commit: Callable[[Any], None] | None = None,
) -> None:
    """Every transaction the writer opens from now on hands out ``wrap(tx)`` instead of tx."""
    original: Callable[..., AbstractAsyncContextManager[WriteTx]] = h.store.write

    @asynccontextmanager
    async def write(*, durable: bool = True) -> AsyncIterator[Any]:
        async with original(durable=durable) as tx:
            wrapped = wrap(tx)
            yield wrapped
        if after_commit is not None:
            after_commit(wrapped)

    monkeypatch.setattr(h.store, "write", write)


class _AuditTx(TxProxy):
    def __init__(self, tx: WriteTx) -> None:
        super().__init__(tx)
        self.appended: list[dict[str, Any]] = []

    async def append_audit(self, event: Mapping[str, Any]) -> None:
        await self._tx.append_audit(event)
        self.appended.append(dict(event))


class AuditSpy:
    """Sees audit events as their transactions commit, so a test can wait for timer-driven
    work (automatic retirement) on a fact instead of on time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, h: Harness) -> None:
        self.events: list[dict[str, Any]] = []
        self._changed = anyio.Event()
        wrap_store_writes(monkeypatch, h, _AuditTx, after_commit=self._committed)

    def _committed(self, tx: Any) -> None:
        assert isinstance(tx, _AuditTx)
        if tx.appended:
            self.events.extend(tx.appended)
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[Mapping[str, Any]], bool]) -> dict[str, Any]:
        while True:
            for event in self.events:
                if predicate(event):
                    return event
            await self._changed.wait()


async def stale_fleet(
    h: Harness, dead: int, *, live: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``dead`` workers whose processes exit and ``live`` ones that keep beating, past the TTL."""
    await ensure_swept(h)
    gone = [await enroll(h) for _ in range(dead)]
    running = [await enroll(h, namespace="reviewer") for _ in range(live)]
    for worker in gone:
        h.probes.kill(int(worker["pid"]))
    await h.clock.advance(PAST_TTL)
    for worker in running:
        assert (await h.beat(worker)).ok
    return gone, running
