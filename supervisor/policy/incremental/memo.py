"""A memo of row facts by row content, so a plan re-derives only the rows that changed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any, TypeVar, cast

from supervisor.policy.retirement.derive import row_facts
from supervisor.policy.retirement.facts import RowFacts
from supervisor.policy.retirement.fingerprints import FINGERPRINT_FIELDS
from supervisor.policy.retirement.seen import FactsContext

from .evidence_bases import EvidenceBases
from .rebeat import with_beat
from .row_columns import changed_positions
from .state import PlanState

__all__ = ["KEY_FIELDS", "PlanMemo"]

_T = TypeVar("_T")

#: Every column a verdict, an evidence entry or a token reads: the token's
#: columns, plus ``client_type``, read only as the fallback for a missing
#: ``client_name`` (and only then part of the key).
KEY_FIELDS: tuple[str, ...] = (*FINGERPRINT_FIELDS, "client_type")
_BEAT = "last_heartbeat_at"
#: The key leaves the heartbeat stamp out: it moves on every live row between
#: two plans, and ``with_beat`` re-derives just what depends on it.
_STATIC_FIELDS = tuple(name for name in FINGERPRINT_FIELDS if name != _BEAT)
_CLIENT_NAME_AT = _STATIC_FIELDS.index("client_name")
#: Builds the key in C; rows lacking a column take the ``get`` path.
_KEY_GETTER = itemgetter(*_STATIC_FIELDS)
#: Superseded row versions tolerated before the memo is compacted.
_SLACK = 1024
#: Distinct type signatures shared between memo entries (a registry has a few).
_MAX_SIGNATURES = 256

#: Value types whose equality implies identical canonical text, verdicts and
#: evidence. Other types (datetimes: equal instants in different zones print
#: differently) are never memoized.
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})


def _key(row: Mapping[str, Any], *, fast: bool) -> tuple[Any, ...] | None:
    """The memo key, or ``None`` when the C path cannot read the row (then use ``_slow_key``)."""
    # Plain dicts only: a subclass may answer a missing column (defaultdict)
    # differently from ``get``, which is what every reader of the row uses.
    if not fast or type(row) is not dict:
        return None
    try:
        key: tuple[Any, ...] = _KEY_GETTER(row)
    except KeyError:
        return None
    return key if key[_CLIENT_NAME_AT] else (*key, row.get("client_type"))


def _slow_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    key = tuple(map(row.get, _STATIC_FIELDS))
    return key if key[_CLIENT_NAME_AT] else (*key, row.get("client_type"))


def _memoizable(key: tuple[Any, ...], types: tuple[type, ...]) -> bool:
    if not _PLAIN_TYPES.issuperset(types):
        return False
    # -0.0 == 0.0 with one type, yet a raw value (fencing_epoch) is shown as
    # stored; such rows are simply recomputed every time.
    return not (float in types and 0.0 in key and any(type(v) is float and v == 0 for v in key))


def _same_stamp(beat: Any, seen: Any) -> bool:
    """The new stamp is the one the facts were derived from.

    Text (or NULL) is compared by value; any other object may print differently
    while comparing equal, so it is always re-derived.
    """
    return (type(beat) is str and type(seen) is str and beat == seen) or (
        beat is None and seen is None
    )


def _pairing_key(row: Mapping[str, Any]) -> str | None:
    """The identity a new row version is paired with its previous one by (text only:
    any other value, hashable or not, pairs with nothing and is derived afresh)."""
    identity = row.get("worker_identity")
    return identity if type(identity) is str else None


def _compacted(
    cache: dict[tuple[Any, ...], RowFacts], rows: Sequence[Mapping[str, Any]]
) -> dict[tuple[Any, ...], RowFacts]:
    keep: set[tuple[Any, ...]] = set()
    for row in rows:
        key = _key(row, fast=True) or _slow_key(row)
        # Only plain values are ever memoized (and only they are surely hashable).
        if _PLAIN_TYPES.issuperset(map(type, key)):
            keep.add(key)
    return {key: held for key, held in cache.items() if key in keep}


class PlanMemo:
    """Row facts by row content, so a plan recomputes only rows that changed.

    Pure: no I/O and no clock; a hit returns exactly what ``row_facts`` would,
    because the key holds every column the facts read, with their types, except
    the heartbeat stamp, which is compared on its own (and re-derived by
    ``with_beat`` when only it moved).
    One memo serves one planner at a time; it is not meant to be shared
    across threads. ``state`` carries each row's observations and verdict
    between plans (``state.PlanState``).

    ``trust_identity``: the caller promises the rows are versions, never changed
    once handed in, so a changed row is a new object (what the store's
    ``RowVersions`` contract, ``supervisor.store.base``, guarantees of the rows it
    hands out). A row that is the very object of the last plan is then known
    unchanged without reading its columns, and plans may hold the rows
    themselves instead of copies. Without the promise, rows are read every plan.
    """

    __slots__ = (
        "_context",
        "_facts",
        "_last_facts",
        "_last_rows",
        "_reused",
        "_signatures",
        "evidence_bases",
        "hits",
        "misses",
        "rebeats",
        "state",
        "trusts_identity",
    )

    _facts: dict[tuple[Any, ...], RowFacts]

    def __init__(self, *, trust_identity: bool = False) -> None:
        self._context: FactsContext | None = None
        self._facts = {}
        self._signatures: dict[tuple[type, ...], tuple[type, ...]] = {}
        self._reused: dict[str, tuple[object, object]] = {}
        self._last_rows: list[Mapping[str, Any]] = []
        self._last_facts: list[RowFacts] = []
        self.trusts_identity = trust_identity
        self.state = PlanState()
        #: Rendered rows' evidence between plans (``evidence_bases.EvidenceBases``).
        self.evidence_bases = EvidenceBases()
        self.hits = 0
        self.misses = 0
        #: Rows whose facts were re-derived for a new heartbeat stamp alone.
        self.rebeats = 0

    def __len__(self) -> int:
        return len(self._facts)

    def facts(self, rows: Sequence[Mapping[str, Any]], context: FactsContext) -> list[RowFacts]:
        """Facts for every row, in order; rows unchanged since an earlier call cost a lookup."""
        if context != self._context:
            self._facts.clear()
            self._signatures.clear()
            self._last_rows, self._last_facts = [], []
            self._context = context
        if not self.trusts_identity:
            return self._by_content(rows, context)
        last, last_facts = self._last_rows, self._last_facts
        if len(rows) == len(last) and rows:
            out = list(last_facts)
            moved = changed_positions(rows, last)
            for i in moved:
                out[i] = self._successor(rows[i], last[i], last_facts[i], context)
            self.hits += len(rows) - len(moved)
        else:
            # Rows came or went: pair each row with last plan's row of its identity.
            earlier = {
                _pairing_key(row): (row, held) for row, held in zip(last, last_facts, strict=True)
            }
            earlier.pop(None, None)
            out = []
            for row in rows:
                pair = earlier.get(_pairing_key(row))
                if pair is not None and pair[0] is row:
                    self.hits += 1
                    out.append(pair[1])
                elif pair is not None:
                    out.append(self._successor(row, pair[0], pair[1], context))
                else:
                    key = _key(row, fast=True) or _slow_key(row)
                    out.append(self._derive(row, key, tuple(map(type, key)), context))
        self._last_rows, self._last_facts = list(rows), out
        return out

    def _successor(
        self,
        row: Mapping[str, Any],
        previous: Mapping[str, Any],
        held: RowFacts,
        context: FactsContext,
    ) -> RowFacts:
        """Facts of ``row``, a new version of ``previous`` (whose facts are ``held``).

        Trusting identity, the memo keeps no content key per row (about 220 bytes
        each): the previous version's columns are compared instead, so a row whose
        stamp alone moved still costs only ``with_beat``.
        """
        key = _key(row, fast=True) or _slow_key(row)
        types = tuple(map(type, key))
        if (
            held.types == types
            and _memoizable(key, types)
            and key == (_key(previous, fast=True) or _slow_key(previous))
        ):
            beat = row.get(_BEAT)
            if _same_stamp(beat, held.beat_raw):
                self.hits += 1
                return held
            self.rebeats += 1
            return with_beat(held, beat, row)
        return self._derive(row, key, types, context)

    def _derive(
        self,
        row: Mapping[str, Any],
        key: tuple[Any, ...],
        types: tuple[type, ...],
        context: FactsContext,
    ) -> RowFacts:
        """Fresh facts of a row nobody handed in before, tagged with its key's types."""
        self.misses += 1
        facts = row_facts(row, context, lazy=True)
        if _memoizable(key, types):
            facts = facts._replace(types=self._signature(types))
        return facts

    def _signature(self, types: tuple[type, ...]) -> tuple[type, ...]:
        """``types``, as the one tuple every row of that signature shares."""
        # Rows of one registry share a handful of type signatures; one tuple per
        # signature instead of one per row.
        signatures = self._signatures
        if len(signatures) < _MAX_SIGNATURES:
            return signatures.setdefault(types, types)
        return types

    def _by_content(
        self, rows: Sequence[Mapping[str, Any]], context: FactsContext
    ) -> list[RowFacts]:
        """Facts of ``rows`` by their columns (a memo that does not trust row identity)."""
        cache = self._facts
        out: list[RowFacts] = []
        append = out.append
        misses = 0
        rebeats = 0
        # Rows of one plan come from one source; once one lacks a column the
        # rest are read with ``get`` instead of raising per row.
        fast = True
        for row in rows:
            key = _key(row, fast=fast)
            if key is None:
                fast = False
                key = _slow_key(row)
            types = tuple(map(type, key))
            try:
                held = cache.get(key)
            except TypeError:
                # An unhashable value (a list in some column): judged, never memoized.
                misses += 1
                append(row_facts(row, context))
                continue
            if held is not None and held.types == types:
                beat = row.get(_BEAT)
                if _same_stamp(beat, held.beat_raw):
                    append(held)
                    continue
                rebeats += 1
                held = cache[key] = with_beat(held, beat)
                append(held)
                continue
            misses += 1
            facts = row_facts(row, context)
            if _memoizable(key, types):
                # The signature travels inside the facts: no pair object per row
                # for the garbage collector to walk on every full collection.
                facts = facts._replace(types=self._signature(types))
                cache[key] = facts
            append(facts)
        if len(cache) > 2 * len(rows) + _SLACK:
            # Keep only this plan's row versions, so memory follows the registry's
            # size instead of its history.
            self._facts = _compacted(cache, rows)
        self.hits += len(out) - misses - rebeats
        self.misses += misses
        self.rebeats += rebeats
        return out

    def reuse(self, slot: str, inputs: object, compute: Callable[[], _T]) -> _T:
        """``compute()``, reused while ``inputs`` equal what the last call for ``slot`` saw.

        ``inputs`` must hold everything ``compute`` reads. Lists of the same
        memoized objects compare by identity first, so an unchanged registry
        costs a pass of pointer compares instead of a sort and a hash.
        """
        held = self._reused.get(slot)
        if held is not None and held[0] == inputs:
            return cast(_T, held[1])
        value = compute()
        self._reused[slot] = (inputs, value)
        return value
