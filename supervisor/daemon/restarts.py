"""An actor restarted after a crash within a budget (OTP-style), else the group fails loudly."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from supervisor.clock import Clock
from supervisor.errors import SupervisorError
from supervisor.observe.logs import bind_actor, get_logger
from supervisor.observe.metrics import Metrics

__all__ = ["ActorBook", "ActorRun", "RestartBudget", "RestartBudgetExceeded", "supervise"]

_log = get_logger()

ActorRun = Callable[..., Awaitable[None]]


class RestartBudgetExceeded(SupervisorError, code="restart_budget_exceeded"):
    """An actor kept crashing: stop loudly rather than flap."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartBudget:
    """At most ``max_restarts`` crashes of one actor within ``window_seconds``."""

    max_restarts: int
    window_seconds: float


@dataclass(slots=True)
class ActorBook:
    """What the health check and the tests read of the actors' lives."""

    #: Actor name -> restarts so far.
    restarts: dict[str, int] = field(default_factory=dict)
    #: Actor name -> "running", "restarting" (crashed, being remade) or "stopped".
    states: dict[str, str] = field(default_factory=dict)


class _Started:
    """Remembers whether an actor got as far as reporting ready."""

    def __init__(self, outer: TaskStatus[None]) -> None:
        self.outer: TaskStatus[None] | None = outer
        self.done = False

    def started(self, value: None = None) -> None:
        self.done = True
        if self.outer is not None:
            self.outer.started()
            self.outer = None


async def supervise(
    name: str,
    make: Callable[[], ActorRun],
    owned: Sequence[MemoryObjectSendStream[Any]],
    *,
    budget: RestartBudget,
    book: ActorBook,
    clock: Clock,
    metrics: Metrics,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run the actor ``make`` builds; remake it after a crash within ``budget``, else raise
    ``RestartBudgetExceeded``. A failure before it is ready is a start-up error and is
    raised as it is. ``owned`` streams are closed when it ends for good."""
    status = _Started(task_status)
    crashes: deque[float] = deque()
    try:
        while True:
            run = make()
            book.states[name] = "running"
            try:
                with bind_actor(name):
                    await run(task_status=status)
                book.states[name] = "stopped"
                return
            except Exception as exc:
                # Not healthy until remade (the watchdog and /healthz read this).
                book.states[name] = "restarting"
                if not status.done:
                    raise  # failing before ready is a start-up error, not a crash
                now = clock.monotonic()
                crashes.append(now)
                while crashes and now - crashes[0] > budget.window_seconds:
                    crashes.popleft()
                if len(crashes) > budget.max_restarts:
                    _log.error("restart_budget_exceeded", actor=name, error=repr(exc))
                    raise RestartBudgetExceeded(
                        f"actor {name!r} crashed {len(crashes)} times within "
                        f"{budget.window_seconds}s; last error: {exc!r}"
                    ) from exc
                book.restarts[name] = book.restarts.get(name, 0) + 1
                metrics.actor_restarts.labels(name).inc()
                _log.warning("actor_restarting", actor=name, error=repr(exc))
    finally:
        if book.states.get(name) == "running":
            book.states[name] = "stopped"  # cancelled
        for stream in owned:
            stream.close()
