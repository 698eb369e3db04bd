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
    """The one-shot channel a request carries back to its asker.

    Closing without sending is how an actor that failed mid-message tells the
    asker it will never answer: the asker sees end-of-stream and raises
    ``ActorStopped`` instead of waiting forever.
    """

    __slots__ = ("_stream",)

    def __init__(self, stream: MemoryObjectSendStream[T]) -> None:
        self._stream = stream

    @classmethod
    def discarding(cls) -> Reply[T]:
        """A channel nobody reads: for requests an actor makes of itself or fire-and-forget."""
        send, receive = anyio.create_memory_object_stream[T](1)
        receive.close()
        # Closed too: a request that is handled without ever being answered (the
        # retirement actor's own auto plan/apply) must not leak an open send end.
        send.close()
        return cls(send)

    def send(self, value: T) -> None:
        """Deliver the answer; an asker that already gave up is not an error."""
        try:
            self._stream.send_nowait(value)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.WouldBlock):
            pass
        finally:
            self._stream.close()

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> Reply[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stream.close()

    def __repr__(self) -> str:  # messages are logged; never dump stream internals
        return "Reply()"


async def ask(
    outbox: MemoryObjectSendStream[M], build: Callable[[Reply[T]], M], *, actor: str
) -> T:
    """Send a request built around a fresh reply channel and wait for the answer."""
    send, receive = anyio.create_memory_object_stream[T](1)
    with receive:
        try:
            await outbox.send(build(Reply(send)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            send.close()
            raise ActorStopped(f"{actor} is not running") from exc
        try:
            return await receive.receive()
        except anyio.EndOfStream as exc:
            raise ActorStopped(f"{actor} stopped without answering") from exc


async def tell(outbox: MemoryObjectSendStream[M], message: M, *, actor: str) -> None:
    """Fire-and-forget send that still reports a stopped actor."""
    try:
        await outbox.send(message)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        raise ActorStopped(f"{actor} is not running") from exc
