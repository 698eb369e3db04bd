"""A census actor for tests: answers ``TakeCensus`` from a function, until its inbox closes."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from actors.census.inbox import CensusInbox, TakeCensus
from actors.mailbox import Actor, Inbox
from supervisor.policy.servers.census import Census

__all__ = ["CensusSource", "Take", "census_source", "empty_census"]

#: What answers a census: a function, or an async one (a proxy of a real census).
Take = Callable[[], Census | Awaitable[Census]]


def empty_census() -> Census:
    return Census(servers=(), taken_at=0.0)


class CensusSource(Actor[CensusInbox]):
    """Every ``TakeCensus`` is answered with what ``take`` returns at that moment (the
    reap asks nothing else of a census)."""

    def __init__(self, inbox: Inbox[CensusInbox], take: Take) -> None:
        self.inbox = inbox
        self._take = take
        #: How many censuses were asked for, and how many of them fresh.
        self.taken = 0
        self.fresh = 0

    async def on_receive(self, message: CensusInbox, tg: TaskGroup) -> None:
        with message.reply:  # anything but a census request is left unanswered
            if isinstance(message, TakeCensus):
                self.taken += 1
                self.fresh += message.fresh
                taken = self._take()
                message.reply.send(await taken if inspect.isawaitable(taken) else taken)


@asynccontextmanager
async def census_source(
    take: Take = empty_census,
) -> AsyncIterator[MemoryObjectSendStream[CensusInbox]]:
    """The inbox of a running ``CensusSource``; it stops when the block ends."""
    send, receive = anyio.create_memory_object_stream[CensusInbox](64)
    with send, receive:
        async with anyio.create_task_group() as tg:
            await tg.start(CensusSource(receive, take).run)
            try:
                yield send
            finally:
                send.close()
