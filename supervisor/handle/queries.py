"""A query of an actor declared in one line: the handle's method becomes the actor's message."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, overload

from anyio.streams.memory import MemoryObjectSendStream

from actors.mailbox import Reply, ask
from supervisor.errors import ActorStopped

__all__ = ["Query"]

T = TypeVar("T")


class Query(Generic[T]):
    """``liveness_status = Query[LivenessStatus]("_liveness", "liveness", LivenessStatusQuery)``
    makes ``await handle.liveness_status()`` ask the actor behind ``handle._liveness`` with
    ``LivenessStatusQuery(reply=...)``; keyword arguments become the message's fields.
    An outbox the handle was not given (None) answers ``ActorStopped``."""

    def __init__(self, outbox: str, actor: str, message: Callable[..., Any]) -> None:
        self._outbox, self._actor, self._message = outbox, actor, message

    @overload
    def __get__(self, handle: None, owner: type) -> Query[T]: ...
    @overload
    def __get__(self, handle: object, owner: type) -> Callable[..., Awaitable[T]]: ...
    def __get__(self, handle: object | None, owner: type) -> Query[T] | Callable[..., Awaitable[T]]:
        if handle is None:
            return self
        outbox: MemoryObjectSendStream[Any] | None = getattr(handle, self._outbox)

        async def asked(**fields: Any) -> T:
            if outbox is None:
                raise ActorStopped(f"{self._actor} is not running")

            def build(reply: Reply[T]) -> Any:
                return self._message(**fields, reply=reply)

            answer: T = await ask(outbox, build, actor=self._actor)
            return answer

        return asked
