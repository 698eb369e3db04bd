"""render_text writes exactly what prometheus_client's generate_latest writes."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import generate_latest

from supervisor.observe.exposition import TextRegistry, render_text
from supervisor.observe.histogram import Histogram as KeptHistogram
from supervisor.observe.metrics import FleetGauges
from supervisor.observe.metrics_prometheus import PrometheusMetrics

_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.sampled_from([0.0, -0.0, 1e6, 1234567.0, 1e-7, 2.5e21]),
)


@given(
    labels=st.lists(
        st.one_of(st.text(max_size=12), st.sampled_from(['a"b', "back\\slash", "new\nline", ""])),
        min_size=1,
        max_size=4,
    ),
    values=st.lists(_VALUES, min_size=1, max_size=4),
    observed=st.lists(st.floats(min_value=0, max_value=20, allow_nan=False), max_size=5),
)
def test_every_family_we_use_renders_as_the_library_does(
    labels: list[str], values: list[float], observed: list[float]
) -> None:
    registry = CollectorRegistry(auto_describe=True)
    counter = Counter(
        "c_things", 'Help with "quotes", \\ and\nnewline.', ["kind"], registry=registry
    )
    gauge = Gauge("g_level", "A gauge.", ["a", "b"], registry=registry)
    plain = Gauge("g_plain", "No labels.", registry=registry)
    hist = Histogram("h_seconds", "A histogram.", ["kind"], buckets=(0.1, 1, 5), registry=registry)
    for label, value in zip(labels, values, strict=False):
        counter.labels(label).inc(abs(value) if math.isfinite(value) else 1)
        gauge.labels(label, label[::-1]).set(value)
        plain.set(value)
    for seconds in observed:
        hist.labels(labels[0]).observe(seconds)
    assert render_text(registry) == generate_latest(registry)


def test_the_daemons_registry_renders_as_the_library_does() -> None:
    metrics = PrometheusMetrics()
    metrics.count_outcome("plan", "planned")
    metrics.count_outcome("apply", "refused")
    metrics.commit_seconds.labels("beats").observe(0.003)
    metrics.sweep_seconds.observe(0.04)
    metrics.accept_heartbeats(7)
    fleet = FleetGauges(
        workers={("active", "live", "author"): 3, ("historical", "historical", ""): 2},
        orphaned=1,
        active_leases=4,
    )
    rendered = metrics.render(fleet)
    assert rendered == generate_latest(metrics.registry)
    assert b'fleet_workers{namespace="author",ownership="live",status="active"} 3.0' in rendered


def test_a_family_it_does_not_write_goes_the_librarys_way() -> None:
    registry = CollectorRegistry()
    Info("build", "Build facts.", registry=registry).info({"version": "1"})
    assert render_text(registry) == generate_latest(registry)


_BUCKETS = (0.0005, 0.01, 0.1, 1, 5)


@given(
    labels=st.lists(
        st.one_of(st.text(max_size=8), st.sampled_from(['a"b', "back\\slash", "new\nline"])),
        min_size=1,
        max_size=3,
    ),
    observed=st.lists(
        st.tuples(st.integers(0, 2), st.floats(allow_nan=True, allow_infinity=True)), max_size=12
    ),
)
def test_the_kept_histogram_writes_what_the_librarys_histogram_writes(
    labels: list[str], observed: list[tuple[int, float]]
) -> None:
    ours, theirs = TextRegistry(), CollectorRegistry(auto_describe=True)
    kept = KeptHistogram("h_seconds", 'Help "with" \\ and\nnewline.', ["kind"], buckets=_BUCKETS)
    ours.register(kept)
    library = Histogram(
        "h_seconds", 'Help "with" \\ and\nnewline.', ["kind"], buckets=_BUCKETS, registry=theirs
    )
    for label in labels:  # the same children, in the same order
        kept.labels(label)
        library.labels(label)
    for which, seconds in observed:
        label = labels[which % len(labels)]
        kept.labels(label).observe(seconds)
        library.labels(label).observe(seconds)
    for child, (label,) in zip(kept._children.values(), kept._children, strict=True):
        child.created = library.labels(label)._created  # the one value two objects differ in
    assert render_text(ours) == generate_latest(ours) == generate_latest(theirs)


def test_an_unlabelled_kept_histogram_writes_what_the_librarys_writes() -> None:
    ours, theirs = TextRegistry(), CollectorRegistry(auto_describe=True)
    kept = KeptHistogram("sweep_seconds", "Sweeps.", buckets=(0.5, 1, 10.0))
    ours.register(kept)
    library = Histogram("sweep_seconds", "Sweeps.", buckets=(0.5, 1, 10.0), registry=theirs)
    for seconds in (0.2, 0.5, 0.7, 11.0):
        kept.observe(seconds)
        library.observe(seconds)
    kept.labels().created = library._created
    assert render_text(ours) == generate_latest(theirs)
    assert b'sweep_seconds_bucket{le="0.5"} 2.0' in render_text(ours)
