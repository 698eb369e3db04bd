"""Heartbeats the server guard writes for wrapped servers, each row on its own schedule."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import anyio

from actors.mailbox import Outbox, ask
from actors.replies import HeartbeatResult
from actors.server_guard.watches import Watched
from actors.writer.inbox import HeartbeatWrite, TouchHeartbeats, WriterInbox
from supervisor.clock import Clock
from supervisor.errors import SupervisorError
from supervisor.observe.logs import get_logger
from supervisor.policy.stamps import format_stamp

__all__ = ["BeatSchedule"]

_log = get_logger()

#: How long the loop sleeps with nothing to beat (a watched server wakes it at once).
_IDLE_SECONDS = 60.0


class BeatSchedule:
    """Beats every watched row at a third of its TTL while its pidfd has not fired.

    A wrapped server never heartbeats itself (it is an unmodified program); a pidfd that
    has not fired is the supervisor's own proof that the process runs, so it vouches.
    """

    def __init__(
        self, *, clock: Clock, writer: Outbox[WriterInbox], servers: Callable[[], Iterable[Watched]]
    ) -> None:
        self._clock = clock
        self._writer = writer
        self._servers = servers
        self._wake: anyio.Event | None = None

    def wake(self) -> None:
        """A server was watched: it is due at once (an adopted row may be stale already,
        and a short TTL must not wait out the previous interval)."""
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        self._wake = anyio.Event()
        while True:
            now = self._clock.monotonic()
            rows = [s for s in self._servers() if s.worker_identity]
            due = [s for s in rows if s.due <= now]
            if due:
                await self._beat(due)
            upcoming = min((s.due for s in rows), default=now + _IDLE_SECONDS)
            await self._nap(max(upcoming - self._clock.monotonic(), 0.0))

    async def _nap(self, seconds: float) -> None:
        """Sleep ``seconds`` on the clock, or until ``wake``."""
        wake = self._wake = self._wake or anyio.Event()

        async def sleep(scope: anyio.CancelScope) -> None:
            await self._clock.sleep(seconds)
            scope.cancel()

        async def wait(scope: anyio.CancelScope) -> None:
            await wake.wait()
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(sleep, tg.cancel_scope)
            tg.start_soon(wait, tg.cancel_scope)
        if wake.is_set():
            self._wake = anyio.Event()

    async def _beat(self, due: list[Watched]) -> None:
        stamp = format_stamp(self._clock.now())
        now = self._clock.monotonic()
        for server in due:
            server.due = now + server.ttl / 3
        watched = [s for s in due if s.pidfd is not None and not s.stopping]
        if not watched:
            return
        beats = tuple(
            HeartbeatWrite(
                worker_identity=s.worker_identity or "",
                pid=s.pid,
                generation_id=s.generation_id,
                fencing_epoch=s.fencing_epoch,
                stamp=stamp,
            )
            for s in watched
        )
        try:
            results: tuple[HeartbeatResult, ...] = await ask(
                self._writer,
                lambda reply: TouchHeartbeats(beats=beats, reply=reply),
                actor="registry_writer",
            )
        except SupervisorError as exc:
            _log.warning("server_beats_failed", code=exc.code, detail=exc.detail)
            return
        for server, result in zip(watched, results, strict=True):
            if not result.ok and result.code != "store_error":
                # Retired or released by someone else: not ours to keep up any more.
                _log.warning(
                    "server_row_gone",
                    worker_identity=server.worker_identity,
                    code=result.code,
                    pid=server.pid,
                )
                server.worker_identity = None
