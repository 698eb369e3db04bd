"""Flat dataclasses as JSON-ready dicts, without ``asdict``'s recursive deep copy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from operator import attrgetter
from typing import Any

__all__ = ["Flat", "flat", "flat_dict"]

#: A dataclass's field names, in declaration order, and one getter for all their values.
Flat = tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]


def flat(cls: type) -> Flat:
    """Read once per class: ``fields`` is too slow to call per instance on a 10k-row view."""
    names = tuple(f.name for f in fields(cls))
    return names, attrgetter(*names)


def flat_dict(shape: Flat, obj: Any) -> dict[str, Any]:
    """Every field of ``obj`` by name, in declaration order; tuples become lists."""
    names, values = shape
    return {
        k: list(v) if isinstance(v, tuple) else v for k, v in zip(names, values(obj), strict=True)
    }
