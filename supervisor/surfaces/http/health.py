"""Whether the daemon is healthy (actors running and answering) and ready (serving)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from supervisor.errors import SupervisorError
from supervisor.handle import SupervisorHandle

__all__ = ["ACTORS", "HealthReport", "HealthSource", "check_health"]

#: Every actor the supervisor runs; health needs all of them running.
ACTORS = ("registry_writer", "liveness", "lease_watch", "heartbeat", "retirement")


class HealthSource(Protocol):
    """What a health check reads: the actors' states and the handle to ask them."""

    @property
    def actor_states(self) -> Mapping[str, str]: ...

    @property
    def handle(self) -> SupervisorHandle: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthReport:
    healthy: bool
    ready: bool
    actors: Mapping[str, str] = field(default_factory=dict)
    sweeps_completed: int = 0
    reasons: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "healthy": self.healthy,
            "ready": self.ready,
            "actors": dict(self.actors),
            "sweeps_completed": self.sweeps_completed,
            "reasons": list(self.reasons),
        }


async def check_health(
    source: HealthSource,
    *,
    serving: bool,
    timeout: float = 5.0,  # noqa: ASYNC109 - a bound on the actors' answers, not a scope
) -> HealthReport:
    """Healthy: every actor runs and the liveness and lease actors answer within ``timeout``
    seconds. Ready: healthy, the socket is serving and one liveness sweep has completed."""
    states = {name: source.actor_states.get(name, "not_started") for name in ACTORS}
    reasons = [f"actor {name} is {state}" for name, state in states.items() if state != "running"]
    sweeps = 0
    try:
        with anyio.fail_after(timeout):
            status = await source.handle.liveness_counts()
            owners = await source.handle.lease_owners()
        sweeps = status.sweeps_completed
        if not owners.readable:
            reasons.append(f"lease owners unreadable: {owners.detail}")
    except TimeoutError:
        reasons.append(f"actors did not answer within {timeout}s")
    except SupervisorError as exc:
        reasons.append(f"{exc.code}: {exc.detail}")
    healthy = not reasons
    not_ready = list(reasons)
    if not serving:
        not_ready.append("the socket is not serving yet")
    if sweeps < 1:
        not_ready.append("no liveness sweep has completed yet")
    return HealthReport(
        healthy=healthy,
        ready=not not_ready,
        actors=states,
        sweeps_completed=sweeps,
        reasons=tuple(not_ready),
    )
