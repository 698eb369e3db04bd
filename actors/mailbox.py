"""Actor plumbing: reply channels, ``ask``, and how a stopped actor is reported to its caller."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from supervisor.errors import ActorStopped

__all__ = ["Inbox", "Outbox", "Reply", "ask", "tell"]

T = TypeVar("T")
M = TypeVar("M")

Inbox = MemoryObjectReceiveStream
Outbox = MemoryObjectSendStream


class Reply(Generic[T]):
    """The one-shot answer slot a request carries back to its asker.

    Closing without sending is how an actor that failed mid-message tells the
    asker it will never answer: the asker wakes and raises ``ActorStopped``
    instead of waiting forever. A slot and an event are much cheaper than a
    memory stream pair, and every heartbeat crosses two of these.
    """

    __slots__ = ("_answered", "_done", "_value")

    def __init__(self) -> None:
        self._done = anyio.Event()
        self._answered = False
        self._value: T | None = None

    @classmethod
    def discarding(cls) -> Reply[T]:
        """A slot nobody reads: for requests an actor makes of itself."""
        return cls()

    @property
    def answered(self) -> bool:
        return self._answered

    def send(self, value: T) -> None:
        """Deliver the answer once; later sends and closes are ignored."""
        if self._done.is_set():
            return
        self._value = value
        self._answered = True
        self._done.set()

    def close(self) -> None:
        """No answer is coming (if none came yet)."""
        self._done.set()

    async def wait(self, *, actor: str) -> T:
        await self._done.wait()
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


async def ask(
    outbox: MemoryObjectSendStream[M], build: Callable[[Reply[T]], M], *, actor: str
) -> T:
    """Send a request built around a fresh reply slot and wait for the answer."""
    reply: Reply[T] = Reply()
    try:
        await outbox.send(build(reply))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        raise ActorStopped(f"{actor} is not running") from exc
    return await reply.wait(actor=actor)


async def tell(outbox: MemoryObjectSendStream[M], message: M, *, actor: str) -> None:
    """Fire-and-forget send that still reports a stopped actor."""
    try:
        await outbox.send(message)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        raise ActorStopped(f"{actor} is not running") from exc
