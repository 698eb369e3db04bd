"""Actor plumbing: reply slots, ``ask``, the one receive loop every actor runs (``serve``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import ClassVar, Generic, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from supervisor.errors import ActorStopped

__all__ = [
    "Actor",
    "Inbox",
    "Outbox",
    "Reply",
    "ask",
    "let_others_run",
    "post",
    "reply_with",
    "serve",
    "take_waiting",
    "tell",
]

T = TypeVar("T")
M = TypeVar("M")

Inbox = MemoryObjectReceiveStream
Outbox = MemoryObjectSendStream


class Reply(Generic[T]):
    """The one-shot answer slot a request carries back to its asker.

    Closing without sending is how an actor that failed mid-message tells the
    asker it will never answer: the asker wakes and raises ``ActorStopped``
    instead of waiting forever.

    Every heartbeat crosses two of these, so the slot is as cheap as asyncio
    allows: the waiter parks on a bare future created only if it has to wait,
    not on an ``anyio.Event`` (which looks up the backend on every creation).
    The project runs on asyncio only (aiosqlite is asyncio-only), and anyio's
    cancel scopes cancel a task parked on a future like any other await.
    Single-threaded: send and close are called from the event loop's thread, and
    one task waits.
    """

    __slots__ = ("_answered", "_closed", "_value", "_waiter")

    def __init__(self) -> None:
        self._closed = False
        self._answered = False
        self._value: T | None = None
        self._waiter: asyncio.Future[None] | None = None

    @classmethod
    def discarding(cls) -> Reply[T]:
        """A slot nobody reads: for requests an actor makes of itself."""
        return cls()

    @property
    def answered(self) -> bool:
        return self._answered

    def send(self, value: T) -> None:
        """Deliver the answer once; later sends and closes are ignored."""
        if self._closed:
            return
        self._value = value
        self._answered = True
        self._finish()

    def close(self) -> None:
        """No answer is coming (if none came yet)."""
        if not self._closed:
            self._finish()

    def _finish(self) -> None:
        self._closed = True
        waiter = self._waiter
        # A waiter cancelled by its scope leaves a cancelled future behind.
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, *, actor: str, timeout: float | None = None) -> T:  # noqa: ASYNC109 (timer)
        """The answer; ``ActorStopped`` if the slot was closed without one, ``TimeoutError``
        if none came within ``timeout`` seconds. One waiter at a time."""
        if not self._closed:
            waiter = self._waiter
            if waiter is not None and not waiter.done():
                raise RuntimeError("a reply slot has one waiter at a time")
            # A fresh future also after an earlier wait was cancelled (and took its future along).
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            # A timer rather than a cancel scope: heartbeats wait here once each, and a
            # scope costs several times what the timer does.
            timer = None if timeout is None else loop.call_later(timeout, _wake, waiter)
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
            if not self._closed:
                raise TimeoutError(f"{actor} did not answer within {timeout}s")
        if not self._answered:
            raise ActorStopped(f"{actor} stopped without answering")
        return self._value  # type: ignore[return-value]

    def __enter__(self) -> Reply[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # Answered or not, failed or not: the slot closes (an unanswered asker wakes).
        self.close()

    def __repr__(self) -> str:  # messages are logged; keep them short
        return "Reply()"


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def reply_with(reply: Reply[T], work: Awaitable[T]) -> None:
    """Send what ``work`` returns; if it raises, the slot closes unanswered (``Reply``)."""
    with reply:
        reply.send(await work)


async def post(outbox: MemoryObjectSendStream[M], message: M, *, actor: str) -> None:
    """Queue a message, waiting only while the inbox is full; report a stopped actor.

    Callers go on to wait for the answer, which yields anyway, so the checkpoint
    a plain ``send`` takes first would only cost a loop iteration per request.
    """
    try:
        try:
            outbox.send_nowait(message)
        except anyio.WouldBlock:
            await outbox.send(message)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        raise ActorStopped(f"{actor} is not running") from exc


async def ask(
    outbox: MemoryObjectSendStream[M], build: Callable[[Reply[T]], M], *, actor: str
) -> T:
    """Send a request built around a fresh reply slot and wait for the answer."""
    reply: Reply[T] = Reply()
    await post(outbox, build(reply), actor=actor)
    return await reply.wait(actor=actor)


async def tell(outbox: MemoryObjectSendStream[M], message: M, *, actor: str) -> None:
    """Fire-and-forget send that still reports a stopped actor."""
    try:
        await outbox.send(message)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        raise ActorStopped(f"{actor} is not running") from exc


class Actor(Generic[M]):
    """The hooks ``serve`` calls, in pykka's shape: override what the actor needs.

    Order: ``on_start`` (before ready), then ``on_receive`` per message (``on_idle``
    whenever the inbox is empty, if overridden), ``on_end`` once every sender has closed
    and every message was handled, and ``on_stop`` always, last and shielded: after the
    end, a failure or a cancellation. A failure propagates (the supervisor restarts the
    actor); the messages waiting in the inbox stay there for the next incarnation.
    """

    #: At the end of the stream, let tasks started on the actor's group finish (True: a
    #: message handled in a task of its own is still answered) or cancel them (False:
    #: background loops such as timers and sweepers).
    finish_tasks: ClassVar[bool] = False

    #: Where the actor's messages arrive: a field of every actor (actors are kw_only
    #: dataclasses whose fields are what they are given; see ``RegistryWriter``).
    inbox: MemoryObjectReceiveStream[M]

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the inbox (``serve``) until every sender has closed its end, then return."""
        await serve(self.inbox, self, task_status=task_status)

    async def on_start(self, tg: TaskGroup) -> None:
        """Before ready: start background tasks on ``tg``."""

    async def on_receive(self, message: M, tg: TaskGroup) -> None:
        """Handle one message (or start a task on ``tg`` that does)."""
        raise NotImplementedError

    async def on_idle(self) -> bool:
        """The inbox is empty: do deferred work; True to look at the inbox again, False
        to wait for the next message. Called only when an actor overrides it."""
        return False

    async def on_end(self) -> None:
        """Every sender closed its end and every message was handled."""

    async def on_stop(self) -> None:
        """The actor is stopping, however: release what it holds."""


async def serve(
    inbox: MemoryObjectReceiveStream[M],
    actor: Actor[M],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """The receive loop every actor runs: until every sender has closed the inbox.

    A message whose handling fails (or is cancelled) has its reply slot closed once the
    actor has stopped, so its asker raises ``ActorStopped`` instead of waiting forever;
    answered slots ignore the close.
    """
    idle = actor.on_idle if type(actor).on_idle is not Actor.on_idle else None
    in_hand: list[M] = []
    try:
        async with anyio.create_task_group() as tg:
            await actor.on_start(tg)
            task_status.started()
            while True:
                try:
                    message = await _next(inbox, idle)
                except anyio.EndOfStream:
                    break
                in_hand.append(message)
                await actor.on_receive(message, tg)
                in_hand.clear()
            await actor.on_end()
            if not actor.finish_tasks:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await actor.on_stop()
        for message in in_hand:
            _close_reply(message)


async def _next(
    inbox: MemoryObjectReceiveStream[M], idle: Callable[[], Awaitable[bool]] | None
) -> M:
    """The next message; ``EndOfStream`` once every sender has closed and none is left."""
    if idle is None:
        return await inbox.receive()
    while True:
        try:
            return inbox.receive_nowait()
        except anyio.WouldBlock:
            pass
        if not await idle():
            return await inbox.receive()


def take_waiting(inbox: MemoryObjectReceiveStream[M], batch: list[M], limit: int) -> None:
    """Add the messages already waiting to ``batch``, up to ``limit`` in all, without waiting."""
    while len(batch) < limit:
        try:
            batch.append(inbox.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            return


def _close_reply(message: object) -> None:
    # Messages differ in whether they carry a slot (and of which answer type).
    reply = getattr(message, "reply", None)
    if isinstance(reply, Reply):
        reply.close()


async def let_others_run() -> None:
    """Yield to everything ready to run, between two chunks of a long piece of work."""
    # One checkpoint is not enough: this task's continuation is queued ahead of the
    # timers and I/O callbacks that fall due meanwhile, so the next chunk would run
    # before them and two chunks would block the loop as one. The second checkpoint
    # lets everything that was ready run first.
    await anyio.lowlevel.checkpoint()
    await anyio.lowlevel.checkpoint()
