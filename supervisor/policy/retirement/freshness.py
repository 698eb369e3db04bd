"""Heartbeat freshness as integers: epoch microseconds, and the instant a row stops being fresh."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["FOREVER", "NO_FRESHNESS", "epoch_us", "fresh_until"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: Past any age two datetimes can be apart (years 1 to 9999): such a TTL never expires.
_AGELESS_TTL = 1e12
#: ``fresh_until`` of a row that is fresh at every instant.
FOREVER = 1 << 62
#: ``fresh_until`` of a row whose freshness is not a boolean (no stamp or no TTL).
NO_FRESHNESS = -(1 << 62)


def epoch_us(moment: datetime) -> int:
    """Whole microseconds since the epoch: exact, so ages computed from it equal
    ``(now - beat).total_seconds()`` to the last bit."""
    return (moment - _EPOCH) // _US


def fresh_until(beat_us: int | None, ttl: float | None) -> int:
    """The first ``now`` (epoch microseconds) at which ``(now - beat) < ttl`` is false.

    The age test is ``(now_us - beat_us) / 10**6 < ttl`` (exactly what
    ``timedelta.total_seconds`` computes), which is monotone in ``now_us``, so
    one integer says for every future instant whether the row is fresh; a plan
    then compares integers instead of subtracting datetimes.
    """
    if beat_us is None or ttl is None:
        return NO_FRESHNESS
    if ttl > _AGELESS_TTL:
        return FOREVER
    # The test reads only now_us - beat_us, so the edge is beat_us plus an offset
    # that depends on the TTL alone; a registry has a handful of TTLs.
    offset = _EDGES.get(ttl)
    if offset is None:
        offset = _edge(ttl)
        if len(_EDGES) < _MAX_EDGES:
            _EDGES[ttl] = offset
    return beat_us + offset


def _edge(ttl: float) -> int:
    """The least whole number of microseconds ``d`` with ``not (d / 10**6 < ttl)``."""
    low = int(ttl * 1_000_000) - 2
    # Float rounding leaves the guess a few microseconds off: walk to the exact edge.
    while low / 1_000_000 >= ttl:
        low -= 16
    while low / 1_000_000 < ttl:
        low += 1
    return low


#: Edge offsets by TTL (bounded: TTLs come from rows, and rows are input).
_EDGES: dict[float, int] = {}
_MAX_EDGES = 1024
