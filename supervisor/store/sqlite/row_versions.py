"""Versions of a cached row: when a read's values are the same, and a copy with a new stamp."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from supervisor.store.base import Row
from supervisor.store.schema.active import STAMP_COLUMN

__all__ = ["same_row", "same_value", "stamped"]


def same_value(a: Any, b: Any) -> bool:
    """Equal value of the same type, as a fresh read would return it."""
    if a is b:
        return True
    if type(a) is not type(b) or a != b:
        return False
    # 0.0 == -0.0; a float is kept only if it prints the same.
    return type(a) is not float or repr(a) == repr(b)


def same_row(row: Row, values: Sequence[Any]) -> bool:
    return all(map(same_value, row.values(), values))


def stamped(row: Row, stamp: Any, share: dict[Any, Any]) -> Row:
    """A copy of ``row`` with a new stamp; equal texts among the stamps of one pass
    are one object (``share``), as the rows of one read share theirs."""
    if stamp.__class__ is str:
        stamp = share.setdefault(stamp, stamp)
    copy = row.copy()  # a copy keeps the key table: cheaper than {**row}
    copy[STAMP_COLUMN] = stamp
    return copy
