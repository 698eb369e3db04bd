"""A reap actor on its own inbox, with a registry writer, a census source and test profiles."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from actors.calls import Call
from actors.mailbox import ask
from actors.reap import ReapActor, ReapInbox, ReapSettings
from actors.reap.inbox import ReapTick, SupersededTick
from actors.reap.trees import ProcessOps
from supervisor.clock import Clock
from supervisor.operations.requests import request
from supervisor.policy.control.permissions import Profile
from supervisor.policy.servers.census import Census
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.store.sqlite.store import SQLiteStore
from tests.actors.harness import RETIRER, Profiles
from tests.actors.helpers_actors import running_writer
from tests.census_source import census_source

__all__ = ["ReapRig", "running_reap"]

_Answer = Mapping[str, Any]


@dataclass
class ReapRig:
    inbox: MemoryObjectSendStream[ReapInbox]
    store: SQLiteStore
    profiles: Profiles

    async def plan(self, profile: Profile | None = RETIRER) -> _Answer:
        return await ask(
            self.inbox,
            lambda reply: Call(profile=profile, request=request("reap_plan"), reply=reply),
            actor="reap",
        )

    async def apply(
        self, token: str, *, profile: Profile | None = RETIRER, override: bool = False
    ) -> _Answer:
        return await ask(
            self.inbox,
            lambda reply: Call(
                profile=profile,
                request=request("reap_apply", plan_token=token, override_mass_guard=override),
                reply=reply,
            ),
            actor="reap",
        )

    async def tick(self) -> _Answer:
        return await ask(self.inbox, lambda reply: ReapTick(reply=reply), actor="reap")

    async def superseded_tick(self) -> _Answer:
        return await ask(self.inbox, lambda reply: SupersededTick(reply=reply), actor="reap")

    async def audit(self) -> list[dict[str, Any]]:
        return [dict(e) for e in await self.store.read_audit(limit=10_000)]


@asynccontextmanager
async def running_reap(
    tmp_path: Path,
    *,
    take: Callable[[], Census] | None,
    clock: Clock,
    processes: ProcessOps | None = None,
    settings: ReapSettings | None = None,
    protected: frozenset[int] = frozenset(),
) -> AsyncIterator[ReapRig]:
    """``take`` answers every census (None: no census runs, as before discovery)."""
    async with AsyncExitStack() as stack:
        store = await open_sqlite_store(tmp_path / "reap.sqlite3")
        stack.push_async_callback(store.close)
        writer = await stack.enter_async_context(running_writer(store, clock=clock))
        census = await stack.enter_async_context(_census(take))
        send, receive = anyio.create_memory_object_stream[ReapInbox](64)
        reap_writer = writer.inbox.clone()
        for stream in (send, receive, reap_writer):
            stack.enter_context(stream)
        profiles = Profiles()
        make = partial(ReapActor, settings=settings, processes=processes, protected=protected)
        actor = make(
            inbox=receive, census=census, writer=reap_writer, clock=clock, profiles=profiles
        )
        group = await stack.enter_async_context(anyio.create_task_group())
        await group.start(actor.run)
        # Undone first: the actor drains and stops before the census and the writer.
        stack.callback(send.close)
        yield ReapRig(inbox=send, store=store, profiles=profiles)


@asynccontextmanager
async def _census(
    take: Callable[[], Census] | None,
) -> AsyncIterator[MemoryObjectSendStream[Any] | None]:
    if take is None:
        yield None
        return
    async with census_source(take) as census:
        yield census
