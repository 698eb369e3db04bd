"""Actor plumbing: reply channels, ``ask``, and how a stopped actor is reported to its caller."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from supervisor.errors import ActorStopped

__all__ = ["Inbox", "Outbox", "Reply", "ask", "post", "tell"]

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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:  # messages are logged; keep them short
        return "Reply()"


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


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
