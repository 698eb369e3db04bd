"""The metrics the actors bump: counting nothing unless exported (``metrics_prometheus``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from supervisor.policy.servers.summary import CensusSummary

__all__ = ["BeatAnswer", "FleetGauges", "Metrics"]


class BeatAnswer(Protocol):
    """What a heartbeat answer shows the counters (the heartbeat actor's result has it);
    a protocol, so this low layer never imports the actors that bump it."""

    @property
    def ok(self) -> bool: ...

    @property
    def code(self) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetGauges:
    """The fleet at one scrape, as the retirement actor classified it."""

    #: (status, ownership_state, namespace) -> number of registrations.
    workers: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    orphaned: int = 0
    active_leases: int = 0
    available: bool = True


class _Nothing:
    """A counter, gauge or histogram that keeps nothing (and its labelled children)."""

    __slots__ = ()

    def labels(self, *values: str) -> _Nothing:
        return self

    def inc(self, amount: float = 1) -> None:
        return None

    def set(self, value: float) -> None:
        return None

    def observe(self, value: float) -> None:
        return None


_NOTHING = _Nothing()


class Metrics:
    """The instruments actors update inline; this base keeps none of them.

    A daemon whose ``/metrics`` listener is off has nobody to show counters to,
    so it does not load the Prometheus client at all (about 2.5 MB of the
    daemon's memory); ``metrics_prometheus.PrometheusMetrics`` is the exported kind
    (it imports this module, never the other way round).
    """

    content_type = "text/plain; charset=utf-8"
    commit_seconds: Any = _NOTHING
    sweep_seconds: Any = _NOTHING
    exit_watches: Any = _NOTHING
    sweeps: Any = _NOTHING
    plans: Any = _NOTHING
    applies: Any = _NOTHING
    actor_restarts: Any = _NOTHING

    def accept_heartbeats(self, count: int) -> None:
        """``count`` beats answered ``ok``."""

    def count_heartbeats(self, results: Iterable[BeatAnswer]) -> None:
        """One batch of answers, by result and code."""

    def count_outcome(self, kind: str, outcome: object) -> None:
        """A plan's or an apply's answer, by its outcome code."""

    def set_census(self, summary: CensusSummary) -> None:
        """The host's MCP servers at the latest census sweep."""

    def render(self, fleet: FleetGauges) -> bytes:
        """The text exposition format; nothing is kept here, so nothing is shown."""
        return b""
