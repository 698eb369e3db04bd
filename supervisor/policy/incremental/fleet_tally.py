"""The fleet's counts kept as rows and verdicts change: a scrape reads them without a pass.

A full count classifies every row on every call (``build_worker_view``, one at a time).
``FleetTally`` keeps the same counts from the changes alone. What a row contributes
depends on three things:

- its columns, which settle everything but liveness: the ownership it has when live
  (live, untrusted identity, orphaned) and when not (stale, inconsistent record), its
  namespace, whether a local pid probe speaks for it, and the instant its heartbeat
  stops being fresh (``deadline``, an integer microsecond, exact: see ``_deadline``);
- whether its process is known dead (the liveness actor's verdict, by identity);
- the time, which only ever turns fresh rows stale.

Rows of one class (``_Class``: both ownerships and the namespace) keep their deadlines
in one sorted array; the rows known dead and the rows that are never fresh are only
counted. Live rows of a class at ``now`` are the deadlines after ``now``: one bisection
per class, and a fleet has a handful of classes. A change costs one removal and one
insertion in one array. The tally holds the row dicts the store handed out (shared,
never copied) and one deadline per row: about 60 bytes a row of its own.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from supervisor.policy.evidence import row_pid
from supervisor.policy.fleet.liveness import STATUS_ACTIVE, pid_evidence_applies, ttl_seconds
from supervisor.policy.fleet.orphans import client_candidate
from supervisor.policy.fleet.worker_view import (
    OWNERSHIP_HISTORICAL,
    live_ownership,
    not_live_ownership,
    text_of,
)
from supervisor.policy.identity.instance import assess_instance_identity
from supervisor.policy.stamps import parse_stamp

__all__ = ["Bucket", "FleetTally", "dead_changes", "epoch_us"]

#: (status, ownership_state, namespace or ""): the key the metrics and ``status`` count by.
Bucket = tuple[str, str, str]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: A row that is never fresh: its heartbeat or its TTL cannot be read.
_NEVER = -(1 << 62)
#: A TTL longer than any two datetimes are apart: the row stays fresh for good.
_FOREVER_SECONDS = 1e12
_ALWAYS = 1 << 62


def epoch_us(moment: datetime) -> int:
    """Microseconds since the epoch of an aware instant, exactly."""
    return (moment - _EPOCH) // _US


# Memos by stored value: one heartbeat batch stamps its rows with one shared stamp, and
# rows share a handful of TTLs, so a fold of thousands of changes parses a few of each.
# ``typed``: 1, 1.0 and True are equal keys, but ``ttl_seconds`` refuses a bool.
@lru_cache(maxsize=4096, typed=True)
def _parsed(value: object) -> datetime | None:
    return parse_stamp(value)


@lru_cache(maxsize=4096, typed=True)
def _deadline_of(beat_value: object, ttl_value: object) -> int:
    beat = _parsed(beat_value)
    ttl = ttl_seconds({"heartbeat_ttl_seconds": ttl_value})
    return _NEVER if beat is None or ttl is None else _deadline(beat, ttl)


def _deadline(beat: datetime, ttl: float) -> int:
    """The first microsecond at which a heartbeat at ``beat`` is no longer fresh.

    ``assess_liveness`` calls a beat fresh while ``age < ttl``, with ``age`` the
    ``timedelta.total_seconds()`` of ``now - beat``: a whole number ``n`` of
    microseconds divided by 10**6. That test is monotone in ``n``, so there is a
    least ``n`` that fails it; the float rounding is reproduced by testing the
    neighbours of the rounded guess the same way, not by trusting the guess.
    """
    if ttl >= _FOREVER_SECONDS:
        return _ALWAYS
    n = int(-(-ttl * 1_000_000 // 1))
    while n > 0 and (n - 1) / 1_000_000 >= ttl:
        n -= 1
    while n / 1_000_000 < ttl:
        n += 1
    return epoch_us(beat) + n


#: (bucket when live, bucket when not): what a row counts as; shared by its rows.
_Class = tuple[Bucket, Bucket]
#: (class, deadline, whether a "dead" verdict applies: the row names a local pid).
_Place = tuple[_Class, int, bool]


def _place(row: Mapping[str, Any], host_id: str | None, classes: dict[_Class, _Class]) -> _Place:
    """Where ``row`` counts (computed again from the row when it leaves, never kept).

    The conditions are ``build_worker_view``'s and ``assess_liveness``'s, read once
    each: this runs for every change a kept count folds (twice per heartbeat).
    """
    session = text_of(row, "session_id")
    # The identity check only matters (and is only paid for) with a session.
    trusted = bool(session) and assess_instance_identity(row.get("client_instance_id")).trusted
    live = live_ownership(session, trusted=trusted)
    beat_value = row.get("last_heartbeat_at")
    beat = _parsed(beat_value)
    started = _parsed(row.get("started_at"))
    # self_contradicting(row), with the beat parsed once for both uses.
    contradicting = started is None or (beat is not None and started > beat)
    not_live = not_live_ownership(contradicting)
    namespace = text_of(row, "namespace") or ""
    made = ((STATUS_ACTIVE, live, namespace), (STATUS_ACTIVE, not_live, namespace))
    kind = classes.get(made)
    if kind is None:
        kind = classes[made] = made
    deadline = (
        _NEVER if beat is None else _deadline_of(beat_value, row.get("heartbeat_ttl_seconds"))
    )
    dies = row_pid(row) is not None and pid_evidence_applies(row, host_id)
    return kind, deadline, dies


_STAMP = "last_heartbeat_at"


def _restamped(
    place: _Place, old: Mapping[str, Any], new: Mapping[str, Any], classes: dict[_Class, _Class]
) -> _Place | None:
    """``new``'s place from ``old``'s when ``new`` differs from it only in its heartbeat
    stamp (every other value the very same object, as the store's restamped copies
    are); None otherwise. A beat moves only the deadline and the stale-or-inconsistent
    half of the class, so the rest is not judged again."""
    if len(old) != len(new):
        return None
    for column, value in old.items():
        if column != _STAMP and new.get(column, _STAMP) is not value:
            return None
    kind, _, dies = place
    beat_value = new.get(_STAMP)
    beat = _parsed(beat_value)
    started = _parsed(new.get("started_at"))
    contradicting = started is None or (beat is not None and started > beat)
    live = kind[0]
    made = (live, (STATUS_ACTIVE, not_live_ownership(contradicting), live[2]))
    moved = classes.get(made)
    if moved is None:
        moved = classes[made] = made
    deadline = (
        _NEVER if beat is None else _deadline_of(beat_value, new.get("heartbeat_ttl_seconds"))
    )
    return moved, deadline, dies


def _active(row: Mapping[str, Any]) -> bool:
    return str(row.get("status") or "") == STATUS_ACTIVE


class FleetTally:
    """Active rows by (status, ownership, namespace), kept from changes.

    ``apply_rows`` takes the store's changes (key -> new row, None for gone; the key is
    the row's ``worker_identity`` where it has one) and ``apply_dead`` the liveness
    actor's (identity -> known dead); ``counts(now)`` equals a full count of
    the same rows with those rows' pids dead and every other pid not known dead (a
    property test holds the two equal). Rows known dead are kept apart from the others,
    so telling which is which costs no memory of its own.
    """

    def __init__(self, host_id: str | None) -> None:
        self.host_id = host_id
        self._rows: dict[Any, Mapping[str, Any]] = {}
        self._dead_rows: dict[Any, Mapping[str, Any]] = {}
        #: Dead verdicts for identities with no row (yet): a row registered between a
        #: take of the store's changes and a take of the verdicts. Liveness takes the
        #: verdict back when the row goes, so this stays as small as that gap.
        self._dead_unseen: set[Any] = set()
        self._classes: dict[_Class, _Class] = {}
        #: Per class: every row of it, and the sorted deadlines of those that may be live.
        self._total: dict[_Class, int] = {}
        self._fresh: dict[_Class, array[int]] = {}
        #: Rows that are not active (the store hands out active rows; counted, not placed).
        self._inactive = 0
        #: The rows with a launching client this host can probe (orphan checks).
        self._clients: dict[Any, Mapping[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._rows) + len(self._dead_rows)

    def apply_rows(self, changes: Mapping[Any, Mapping[str, Any] | None], *, reset: bool) -> None:
        """Fold the store's changes; ``reset``: ``changes`` is every row there is."""
        if reset:
            # Verdicts outlive a re-read of the rows: the dead stay dead.
            self._dead_unseen.update(self._dead_rows)
            self._rows.clear()
            self._dead_rows.clear()
            self._clients.clear()
            self._total.clear()
            self._fresh.clear()
            self._inactive = 0
        rows, dead_rows, unseen = self._rows, self._dead_rows, self._dead_unseen
        for key, row in changes.items():
            old = rows.pop(key, None)
            dead = old is None and (key in dead_rows or key in unseen)
            if old is None:
                old = dead_rows.pop(key, None)
            place = None
            if old is not None:
                place = self._count(key, old, -1, dead)
            if row is None:
                if dead:
                    unseen.add(key)  # until liveness takes the verdict back
                continue
            unseen.discard(key)
            (dead_rows if dead else rows)[key] = row
            if place is not None and old is not None and _active(row):
                place = _restamped(place, old, row, self._classes)
            self._count(key, row, +1, dead, place)

    def apply_dead(self, changes: Mapping[Any, bool], *, reset: bool) -> None:
        """Fold verdict changes (identity -> known dead); ``reset``: the whole dead set."""
        if reset:
            dead_now = [key for key, dead in changes.items() if dead]
            changes = dead_changes([*self._dead_rows, *self._dead_unseen], dead_now)
        rows, dead_rows = self._rows, self._dead_rows
        for key, dead in changes.items():
            source, target = (rows, dead_rows) if dead else (dead_rows, rows)
            row = source.pop(key, None)
            if row is None:
                if dead and key not in dead_rows:
                    self._dead_unseen.add(key)
                elif not dead:
                    self._dead_unseen.discard(key)
                continue
            place = self._count(key, row, -1, not dead)
            target[key] = row
            self._count(key, row, +1, dead, place)

    def counts(self, now: datetime) -> dict[Bucket, int]:
        """Active rows by bucket at ``now``, plus ``("historical",)*2 + ("",)`` for the
        rows handed over that are not active."""
        now_us = epoch_us(now)
        out: dict[Bucket, int] = {}
        for kind, total in self._total.items():
            fresh = self._fresh.get(kind)
            live = len(fresh) - bisect_right(fresh, now_us) if fresh else 0
            for bucket, count in ((kind[0], live), (kind[1], total - live)):
                if count:
                    out[bucket] = out.get(bucket, 0) + count
        if self._inactive:
            out[(OWNERSHIP_HISTORICAL, OWNERSHIP_HISTORICAL, "")] = self._inactive
        return out

    def client_rows(self) -> list[Mapping[str, Any]]:
        """The rows whose launching client this host can probe, for ``find_orphans``."""
        return list(self._clients.values())

    def _count(
        self, key: Any, row: Mapping[str, Any], sign: int, dead: bool, place: _Place | None = None
    ) -> _Place | None:
        """Count ``row`` in (+1) or out (-1) at ``place`` (computed when not given); the
        place it used, None for a row that is not active."""
        if not _active(row):
            self._inactive += sign
            return None
        if place is None:
            place = _place(row, self.host_id, self._classes)
        kind, deadline, dies = place
        if client_candidate(row, self.host_id) is not None:
            if sign > 0:
                self._clients[key] = row
            else:
                self._clients.pop(key, None)
        total = self._total.get(kind, 0) + sign
        if total:
            self._total[kind] = total
        else:
            del self._total[kind]
        if (dead and dies) or deadline == _NEVER:
            return place
        fresh = self._fresh.get(kind)
        if sign > 0:
            if fresh is None:
                fresh = self._fresh[kind] = array("q")
            insort(fresh, deadline)
            return place
        assert fresh is not None  # placed when it was counted in
        del fresh[bisect_left(fresh, deadline)]
        if not fresh:
            del self._fresh[kind]
        return place


def dead_changes(previous: Iterable[Any], current: Iterable[Any]) -> dict[Any, bool]:
    """The changes that turn one dead set into another (for tests and resets)."""
    before, after = set(previous), set(current)
    return dict.fromkeys(before - after, False) | dict.fromkeys(after - before, True)
