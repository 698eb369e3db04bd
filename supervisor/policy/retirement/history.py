"""The history aggregate: a MuHash set digest over every non-active row, folded row by row."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EMPTY_HISTORY",
    "HISTORY_MODULUS",
    "HistoryFold",
    "HistorySummary",
    "fold_history",
    "history_element",
    "identity_irregular",
]

#: MuHash3072's modulus (the largest 3072-bit safe prime, as Bitcoin's MuHash3072
#: uses). A product of per-row elements modulo a prime this size is a multiset
#: hash whose collision resistance rests on discrete logarithms, unlike an XOR or
#: a sum of row hashes, which an adversary choosing row fields can solve for.
HISTORY_MODULUS = 2**3072 - 1103717
_ELEMENT_BYTES = 384
_DOMAIN = b"fleet-history-element-v1\x00"


def history_element(unit: str) -> int:
    """One row's element of the multiplicative group: SHAKE-256 expanded to 3072 bits."""
    value = int.from_bytes(
        hashlib.shake_256(_DOMAIN + unit.encode("utf-8")).digest(_ELEMENT_BYTES), "big"
    )
    # 0 has no inverse; a 2^-3072 event, mapped so folding can never break.
    return value % HISTORY_MODULUS or 1


def identity_irregular(value: Any) -> bool:
    """Whether a stored ``worker_identity`` is not already in the planner's normal form.

    Only such rows can share a (stripped) identity with another row, because the
    column is the primary key; while none exist, no historical row can make an
    active row a duplicate and history never needs to be planned row by row.
    """
    if value is None:
        # A NULL key (SQLite allows it) sorts and pages unlike any text: plan it in full.
        return True
    if type(value) is not str:
        return True
    return value != value.strip()


@dataclass(frozen=True, slots=True, kw_only=True)
class HistorySummary:
    """What a plan or snapshot needs of the historical rows, without reading them."""

    count: int
    irregular_count: int
    product: int

    @property
    def digest(self) -> str:
        """Short, content-derived text of the set digest (goes into the registry token)."""
        raw = self.product.to_bytes(_ELEMENT_BYTES, "big")
        return f"{self.count}:{hashlib.sha256(raw).hexdigest()}"


EMPTY_HISTORY = HistorySummary(count=0, irregular_count=0, product=1)


class HistoryFold:
    """A mutable accumulator: add and remove rows in any order, read a ``HistorySummary``."""

    __slots__ = ("count", "irregular", "product")

    def __init__(self, summary: HistorySummary = EMPTY_HISTORY) -> None:
        self.count = summary.count
        self.irregular = summary.irregular_count
        self.product = summary.product

    def add(self, unit: str, identity: Any, sign: int = 1) -> None:
        """Fold one historical row version (its ``row_unit`` text) in (``sign`` 1) or out (-1)."""
        element = history_element(unit)
        irregular = identity_irregular(identity)
        if sign >= 0:
            self.product = self.product * element % HISTORY_MODULUS
            self.count += 1
            self.irregular += irregular
        else:
            # Removal is rare (history is terminal): one modular inverse each.
            self.product = self.product * pow(element, -1, HISTORY_MODULUS) % HISTORY_MODULUS
            self.count -= 1
            self.irregular -= irregular

    def copy(self) -> HistoryFold:
        return HistoryFold(self.summary())

    def summary(self) -> HistorySummary:
        return HistorySummary(
            count=self.count, irregular_count=self.irregular, product=self.product
        )


def fold_history(units: Sequence[str], identities: Sequence[Any]) -> HistorySummary:
    """From scratch: the summary of the historical rows with these units and identities."""
    fold = HistoryFold()
    for unit, identity in zip(units, identities, strict=True):
        fold.add(unit, identity)
    return fold.summary()
