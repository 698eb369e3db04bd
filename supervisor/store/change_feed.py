"""Changes since a reader's last look, keyed: what lets a kept count skip a full pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["ChangeFeed", "Taken"]

K = TypeVar("K")
V = TypeVar("V")

#: Changes kept beyond this share of the source's size are dropped for one start over:
#: past it, reading everything again costs about what folding the changes would.
_LIMIT_SHARE = 2
_MIN_LIMIT = 1024


@dataclass(frozen=True, slots=True)
class Taken(Generic[K, V]):
    """One take: ``changes`` (key -> latest value) since ``cursor``'s take, or None when
    the feed cannot say (a first take, another reader's take in between, an overflow):
    then the reader starts over from the whole source. ``cursor`` is for the next take."""

    cursor: int
    changes: dict[K, V] | None


class ChangeFeed(Generic[K, V]):
    """The latest value of every key noted since the last take (one reader at a time).

    Keeps nothing until a reader takes once, and never more than about twice the
    source's size (``size``): a reader that stops taking costs a bounded dict, and
    its next take starts over. A value overwrites the key's earlier one, so the feed
    never holds an object the source has already replaced.
    """

    __slots__ = ("_changes", "_cursor", "_size")

    def __init__(self, size: Callable[[], int]) -> None:
        self._size = size
        self._changes: dict[K, V] | None = None
        self._cursor = 0

    def note(self, key: K, value: V) -> None:
        changes = self._changes
        if changes is None:
            return
        changes[key] = value
        if len(changes) > max(_MIN_LIMIT, self._size() * _LIMIT_SHARE):
            self._changes = None

    def lose(self) -> None:
        """The source changed in a way not noted key by key: the next take starts over."""
        self._changes = None

    def take(self, cursor: int) -> Taken[K, V]:
        """The changes since the take that returned ``cursor`` (None: start over)."""
        changes = self._changes if cursor == self._cursor else None
        self._cursor += 1
        self._changes = {}
        return Taken(self._cursor, changes)
