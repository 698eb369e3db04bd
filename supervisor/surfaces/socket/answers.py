"""Results as plain JSON values, as the socket (and the fleet page) answer them."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Set
from datetime import datetime
from enum import Enum
from typing import Any

__all__ = ["to_wire"]


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def to_wire(value: Any) -> Any:
    """Results as plain JSON values: dataclasses and mappings to dicts, sets sorted to lists."""
    if value is None or type(value) in _PLAIN:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Field names cached per class and plain values taken as they are: every heartbeat
        # answer passes through here.
        fields = ((name, getattr(value, name)) for name in _field_names(type(value)))
        return {n: v if v is None or type(v) in _PLAIN else to_wire(v) for n, v in fields}
    if isinstance(value, Mapping):
        return {str(k): to_wire(v) for k, v in value.items()}
    if isinstance(value, Set):
        items = [to_wire(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, list | tuple):
        return [to_wire(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return to_wire(value.value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


#: Exact types that are already JSON values (subclasses such as enums take the long way).
_PLAIN = frozenset({str, int, float, bool})
