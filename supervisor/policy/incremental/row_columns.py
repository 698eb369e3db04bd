"""One derived value per row, recomputed only for rows that are not the last call's objects."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from operator import is_not
from typing import Any, Generic, TypeVar

__all__ = ["RowColumn", "changed_positions"]

_T = TypeVar("_T")

Row = Mapping[str, Any]


def changed_positions(new: Sequence[Any], old: Sequence[Any]) -> list[int]:
    """Positions whose object is not the one held before (same length assumed)."""
    return list(compress(range(len(new)), map(is_not, new, old)))


class RowColumn(Generic[_T]):
    """``[derive(row) for row in rows]``, reusing the values of rows seen at the same position.

    Only for rows that are never changed in place, so a new row version is a new
    mapping (the store's ``RowVersions`` contract, ``supervisor.store.base``,
    guarantees this of the rows it hands out): a row that is the very object
    the last call saw at its position is known to derive the same value. Pure:
    ``derive`` must read nothing but the row.
    """

    __slots__ = ("_derive", "_rows", "_values")

    def __init__(self, derive: Callable[[Row], _T]) -> None:
        self._derive = derive
        self._rows: list[Row] = []
        self._values: list[_T] = []

    def of(self, rows: Sequence[Row]) -> list[_T]:
        """The derived value of every row, in order (a new list each call)."""
        derive = self._derive
        if len(rows) == len(self._rows) and rows:
            values = list(self._values)
            for i in changed_positions(rows, self._rows):
                values[i] = derive(rows[i])
        else:
            values = list(map(derive, rows))
        self._rows, self._values = list(rows), values
        return list(values)
