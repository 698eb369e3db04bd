"""The Prometheus text format of a registry, written directly: what a scrape renders."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import cast

from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

#: The library's float text (``+Inf``, ``NaN``, Go's exponent form); untyped there.
_number = cast(Callable[[float], str], floatToGoString)

__all__ = ["render_text"]

#: OpenMetrics-only samples, which the text format moves to a gauge after their family.
_OM_SUFFIXES = ("_created", "_gsum", "_gcount")
#: Families written here; anything else (info, stateset, ...) goes the library's way.
_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram"}


def _help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _value(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _line(sample: Sample) -> str:
    labels = sample.labels
    if labels:
        inner = ",".join(f'{k}="{_value(v)}"' for k, v in sorted(labels.items()))
        return f"{sample.name}{{{inner}}} {_number(sample.value)}\n"
    return f"{sample.name} {_number(sample.value)}\n"


_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: Names already found plain: a registry has a few dozen, checked once each.
_PLAIN: set[str] = set()


def _plain(metric: str, labels: Iterable[str] = ()) -> bool:
    """Legacy metric and label names, as every one of ours is: nothing to escape."""
    if metric not in _PLAIN:
        if not _METRIC_NAME.fullmatch(metric):
            return False
        _PLAIN.add(metric)
    for label in labels:
        if label not in _PLAIN:
            if not _LABEL_NAME.fullmatch(label):
                return False
            _PLAIN.add(label)
    return True


def render_text(registry: Collector) -> bytes:
    """Byte for byte what ``prometheus_client.generate_latest`` gives for ``registry``
    (a test holds the two equal), at about half its cost: the library escapes and
    validates every name of every sample on every scrape, ours are fixed and plain.
    A family this does not know, a sample with a timestamp or a name that would need
    escaping sends the whole render the library's way."""
    output: list[str] = []
    for metric in registry.collect():
        mtype = _TYPES.get(metric.type)
        samples = metric.samples
        if (
            mtype is None
            or not _plain(metric.name)
            or any(s.timestamp is not None or not _plain(s.name, s.labels) for s in samples)
        ):
            return generate_latest(registry)
        name = metric.name + "_total" if mtype == "counter" else metric.name
        doc = _help(metric.documentation)
        output.append(f"# HELP {name} {doc}\n# TYPE {name} {mtype}\n")
        moved: dict[str, list[str]] = {}
        for sample in samples:
            for suffix in _OM_SUFFIXES:
                if sample.name == metric.name + suffix:
                    moved.setdefault(suffix, []).append(_line(sample))
                    break
            else:
                output.append(_line(sample))
        for suffix, lines in sorted(moved.items()):
            family = metric.name + suffix
            output.append(f"# HELP {family} {doc}\n# TYPE {family} gauge\n")
            output.extend(lines)
    return "".join(output).encode("utf-8")
