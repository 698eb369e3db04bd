"""Prometheus metrics: counters and histograms the actors bump, fleet gauges filled at scrape."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Iterator

from prometheus_client import Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from supervisor.observe.exposition import TextRegistry, render_text
from supervisor.observe.histogram import Histogram
from supervisor.observe.metrics import BeatAnswer, FleetGauges, Metrics
from supervisor.policy.servers.summary import CensusSummary

__all__ = ["PrometheusMetrics"]

#: Seconds; a commit on a healthy disk takes well under a millisecond, a stalled one seconds.
_COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
#: Seconds; a 10,000-pid sweep is tens of milliseconds.
_SWEEP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _FleetCollector(Collector):
    """Yields the gauges of the last scrape's ``FleetGauges`` (set just before rendering)."""

    def __init__(self) -> None:
        self.latest = FleetGauges(available=False)

    def collect(self) -> Iterator[Metric]:
        latest = self.latest
        workers = GaugeMetricFamily(
            "fleet_workers",
            "Registrations by status, ownership state and namespace.",
            labels=["status", "ownership", "namespace"],
        )
        for (status, ownership, namespace), count in sorted(latest.workers.items()):
            workers.add_metric([status, ownership, namespace], count)
        yield workers
        yield GaugeMetricFamily(
            "fleet_orphaned_workers",
            "Active workers whose launching client process is gone.",
            value=latest.orphaned,
        )
        yield GaugeMetricFamily(
            "fleet_active_leases", "Work leases currently active.", value=latest.active_leases
        )
        yield GaugeMetricFamily(
            "fleet_gauges_available",
            "1 when the fleet gauges of this scrape could be computed, else 0.",
            value=1 if latest.available else 0,
        )


class PrometheusMetrics(Metrics):
    """One supervisor's metrics, in a registry of their own (tests run many supervisors).

    Updating any of them is a few attribute lookups and a lock; actors call them inline.
    """

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        registry = self.registry = TextRegistry()
        self._heartbeats = Counter(
            "fleet_heartbeats",
            "Heartbeats answered, by result (accepted or refused) and code.",
            ["result", "code"],
            registry=registry,
        )
        self._accepted = self._heartbeats.labels("accepted", "ok")
        self.commit_seconds = Histogram(
            "fleet_commit_latency_seconds",
            "Time from starting a registry write transaction to its commit.",
            ["kind"],
            buckets=_COMMIT_BUCKETS,
        )
        registry.register(self.commit_seconds)
        self.sweep_seconds = Histogram(
            "fleet_liveness_sweep_duration_seconds",
            "Duration of one full liveness sweep.",
            buckets=_SWEEP_BUCKETS,
        )
        registry.register(self.sweep_seconds)
        self.exit_watches = Gauge(
            "fleet_exit_watches",
            "Worker processes whose exit is watched through a pidfd.",
            registry=registry,
        )
        self.sweeps = Counter(
            "fleet_liveness_sweeps", "Liveness sweeps completed.", registry=registry
        )
        self.plans = Counter(
            "fleet_plans", "Retirement plans answered, by outcome.", ["outcome"], registry=registry
        )
        self.applies = Counter(
            "fleet_applies",
            "Retirement applies answered, by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.actor_restarts = Counter(
            "fleet_actor_restarts",
            "Crashed actors restarted within the restart budget.",
            ["actor"],
            registry=registry,
        )
        self._fleet = _FleetCollector()
        registry.register(self._fleet)
        self._servers = Gauge(
            "fleet_mcp_servers",
            "MCP server processes on this host at the latest census, by provenance.",
            ["provenance"],
            registry=registry,
        )
        self._orphaned_servers = Gauge(
            "fleet_mcp_servers_orphaned",
            "MCP servers whose owner client is gone (by pid and start time).",
            registry=registry,
        )
        self._duplicate_groups = Gauge(
            "fleet_mcp_server_duplicate_groups",
            "Groups of MCP servers running one command, directory and environment names.",
            registry=registry,
        )
        self._server_memory = Gauge(
            "fleet_mcp_server_memory_bytes",
            "Memory (PSS where readable, else RSS) of MCP server trees, by owner client name.",
            ["client"],
            registry=registry,
        )
        self._server_idle = Gauge(
            "fleet_mcp_server_idle_seconds",
            "Seconds since each MCP server's tree last did I/O, at least (the kernel's I/O "
            "counters); a server whose counters cannot be read has no sample.",
            ["pid", "client", "command"],
            registry=registry,
        )

    def accept_heartbeats(self, count: int) -> None:
        """``count`` beats answered ``ok``: the common case, one counter update."""
        self._accepted.inc(count)

    def count_heartbeats(self, results: Iterable[BeatAnswer]) -> None:
        """Tally one batch of answers first: one counter update per code, not per beat."""
        tally = Tally((r.ok, r.code) for r in results)
        for (ok, code), count in tally.items():
            self._heartbeats.labels("accepted" if ok else "refused", code).inc(count)

    def count_outcome(self, kind: str, outcome: object) -> None:
        """A plan's or an apply's answer, by its outcome code."""
        counter = self.plans if kind == "plan" else self.applies
        counter.labels(str(outcome or "unknown")).inc()

    def set_census(self, summary: CensusSummary) -> None:
        """The latest census sweep's counts; a client with no server left drops its label."""
        for provenance, count in summary.by_provenance.items():
            self._servers.labels(provenance).set(count)
        self._orphaned_servers.set(summary.orphaned)
        self._duplicate_groups.set(summary.duplicate_groups)
        self._server_memory.clear()
        for client, size in summary.memory_by_client.items():
            self._server_memory.labels(client).set(size)
        self._server_idle.clear()  # a server gone, or unreadable now, has no sample
        for server in summary.idle:
            if server.idle_seconds is not None:
                labels = (str(server.pid), server.client, server.command)
                self._server_idle.labels(*labels).set(server.idle_seconds)

    def render(self, fleet: FleetGauges) -> bytes:
        """The text exposition format, with ``fleet`` as this scrape's gauges."""
        self._fleet.latest = fleet
        return render_text(self.registry)
