"""A row's facts for a new heartbeat stamp, without reading the row again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.policy.retirement.conjunction import static_verdict
from supervisor.policy.retirement.derive import missing_fields
from supervisor.policy.retirement.facts import RowFacts
from supervisor.policy.retirement.fingerprints import stamped_digest
from supervisor.policy.retirement.freshness import epoch_us, fresh_until
from supervisor.policy.stamps import parse_stamp

__all__ = ["with_beat"]


def with_beat(facts: RowFacts, beat_raw: Any, row: Mapping[str, Any] | None = None) -> RowFacts:
    """``row_facts`` of the same row with ``last_heartbeat_at`` set to ``beat_raw``.

    Only the stamp-dependent facts are re-derived (the parsed beat, the
    unparsable-beat and missing-field verdicts, the self-contradiction, the
    unit text and the evidence entry), which is what lets a plan after a round
    of heartbeats skip rebuilding every live row from scratch. ``row``: the new
    version itself, when the facts were built lazily from the old one.
    """
    beat = parse_stamp(beat_raw)
    beat_us = None if beat is None else epoch_us(beat)
    started_us = facts.started_us
    # A list and _make instead of _replace: a plan after a round of heartbeats
    # re-derives every live row, and _replace walks all fields in Python.
    values = list(facts)
    values[_AT_DIGEST] = stamped_digest(facts.static_digest, beat_raw)
    values[_AT_BEAT_US] = beat_us
    values[_AT_FRESH_UNTIL] = fresh_until(beat_us, facts.ttl)
    values[_AT_CONTRADICTING] = started_us is None or (beat_us is not None and started_us > beat_us)
    if beat is not None and facts.status == STATUS_ACTIVE and not facts.missing_besides_beat:
        # The common case, settled without building the missing-field list: a parsed
        # stamp is never blank, so nothing is missing and there is no static verdict.
        values[_AT_STATIC] = None
    else:
        values[_AT_STATIC] = static_verdict(
            facts.status, missing_fields(facts.missing_besides_beat, beat_raw), beat
        )
    values[_AT_BEAT_RAW] = beat_raw
    if row is not None:
        # The stamp is no part of a template, but an unbuilt one holds its row.
        values[_AT_TEMPLATE] = facts.evidence_template.for_version(row)
    return RowFacts._make(values)


_FIELDS = RowFacts._fields
_AT_DIGEST = _FIELDS.index("digest")
_AT_BEAT_US = _FIELDS.index("beat_us")
_AT_FRESH_UNTIL = _FIELDS.index("fresh_until")
_AT_CONTRADICTING = _FIELDS.index("self_contradicting")
_AT_STATIC = _FIELDS.index("static_verdict")
_AT_BEAT_RAW = _FIELDS.index("beat_raw")
_AT_TEMPLATE = _FIELDS.index("evidence_template")
