"""A histogram that writes its own exposition lines: most of what a scrape renders."""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from supervisor.observe.exposition import help_text, sample_head, sample_number

__all__ = ["Histogram"]

_INF = float("inf")


class _Child:
    """One label set's buckets (not cumulative), sum and creation time."""

    __slots__ = ("_bounds", "_counts", "_heads", "_sum", "created", "labels")

    def __init__(self, name: str, labels: dict[str, str], bounds: Sequence[float]) -> None:
        self.labels = labels
        self.created = time.time()
        self._bounds = bounds
        self._counts = [0] * len(bounds)
        self._sum = 0.0
        les = [sample_number(bound) for bound in bounds]
        #: The text before each value, written once: label order and escaping never change.
        self._heads = (
            *(sample_head(f"{name}_bucket", {**labels, "le": le}) for le in les),
            sample_head(f"{name}_count", labels),
            sample_head(f"{name}_sum", labels),
        )

    def observe(self, amount: float) -> None:
        self._sum += amount
        if amount <= _INF:  # NaN is in no bucket (as prometheus_client counts it)
            self._counts[bisect_left(self._bounds, amount)] += 1

    def values(self) -> list[float]:
        """Cumulative bucket counts, then the count and the sum (as floats, as the format has)."""
        values, total = [], 0
        for count in self._counts:
            total += count
            values.append(float(total))
        values += [float(total), self._sum]
        return values

    def lines(self) -> str:
        return "".join(
            f"{head}{sample_number(value)}\n"
            for head, value in zip(self._heads, self.values(), strict=True)
        )


class Histogram(Collector):
    """prometheus_client's ``Histogram`` for the few we keep, with the same samples, whose
    scrape text is written from kept line heads instead of re-collected samples.

    The library's collect builds, validates, sorts and escapes every bucket sample of
    every label set on every scrape (about 0.4 ms for the commit histogram alone); the
    lines here differ only in their values. ``collect`` still yields the library's
    samples, so ``generate_latest`` and this module's ``exposition_text`` agree byte for
    byte (a test holds them equal). Updated from the event loop only: no locks.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
    ) -> None:
        self._name, self._doc = name, documentation
        self._labelnames = tuple(labelnames)
        bounds = [float(bound) for bound in buckets]
        if bounds != sorted(bounds):
            raise ValueError(f"{name}: buckets not in sorted order")  # as the library says
        self._bounds = (*(bound for bound in bounds if bound != _INF), _INF)
        self._children: dict[tuple[str, ...], _Child] = {}
        if not self._labelnames:
            self.labels()

    def labels(self, *values: str) -> _Child:
        """The child of one label set, made on first use (in order of first use)."""
        if len(values) != len(self._labelnames):
            raise ValueError(f"{self._name} takes labels {self._labelnames}, got {values}")
        child = self._children.get(values)
        if child is None:
            labels = dict(zip(self._labelnames, values, strict=True))
            child = self._children[values] = _Child(self._name, labels, self._bounds)
        return child

    def observe(self, amount: float) -> None:
        """The unlabelled histogram's observation."""
        self.labels().observe(amount)

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self._name, self._doc, "histogram")
        suffixes = [("_bucket", {"le": sample_number(bound)}) for bound in self._bounds]
        suffixes += [("_count", {}), ("_sum", {})]
        for child in self._children.values():
            for (suffix, extra), value in zip(suffixes, child.values(), strict=True):
                metric.add_sample(self._name + suffix, {**child.labels, **extra}, value)
        for child in self._children.values():
            metric.add_sample(self._name + "_created", child.labels, child.created)
        yield metric

    def exposition_text(self) -> str:
        """The family as the text format writes it: buckets, count and sum per label set,
        then the creation times as a gauge family of their own."""
        head = f"# HELP {self._name} {help_text(self._doc)}\n# TYPE {self._name} histogram\n"
        children = self._children.values()
        if not children:
            return head
        created = f"{self._name}_created"
        return "".join(
            [
                head,
                *(child.lines() for child in children),
                f"# HELP {created} {help_text(self._doc)}\n# TYPE {created} gauge\n",
                *(
                    f"{sample_head(created, child.labels)}{sample_number(child.created)}\n"
                    for child in children
                ),
            ]
        )
