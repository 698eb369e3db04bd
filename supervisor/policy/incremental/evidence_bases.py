"""Rendered rows' evidence kept between plans, so an unchanged candidate costs one dict copy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from supervisor.policy.retirement.entries import EvidenceOf
from supervisor.policy.retirement.facts import RowFacts
from supervisor.policy.retirement.moment import Moment, entry_evidence

__all__ = ["EvidenceBases"]


class EvidenceBases:
    """Each rendered row's evidence but its age, kept while the row's facts and the
    plan's observations of it are the very objects the last render saw.

    A plan renders every candidate in full, and a candidate is a stale row whose
    probe answer and ownership rarely move between two plans: copying one dict and
    setting the age is several times cheaper than filling the template again.
    Only rendered rows are held, and past ``limit`` entries it starts over.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[int, tuple[Any, ...]] = {}

    def evidence(self, f: RowFacts, index: int, moment: Moment, limit: int) -> dict[str, Any]:
        probe = moment.probes[index]
        fresh = moment.fresh[index]
        live = moment.live[index]
        ownership = moment.ownership[index]
        held = self._held.get(id(f))
        # ``held[0] is f`` first: an id is reused once its object is gone, and the
        # held tuple keeps the facts alive, so a match is the same facts object. A
        # probe answer may be a new but equal object (a dead pid, answered anew).
        if (
            held is not None
            and held[0] is f
            and (held[1] is probe or held[1] == probe)
            and held[2] is fresh
            and held[3] is live
            and held[4] == ownership
        ):
            base: dict[str, Any] = held[5]
        else:
            base = entry_evidence(f, index, moment)
            if len(self._held) >= limit:
                self._held.clear()
            self._held[id(f)] = (f, probe, fresh, live, ownership, base)
        out = dict(base)
        out["heartbeat_age_seconds"] = moment.ages[index]
        return out

    def reader(self, facts: Sequence[RowFacts], moment: Moment) -> EvidenceOf:
        """Row index -> its entry's evidence, from the bases where they still hold."""
        limit = 2 * len(facts) + 1024
        evidence = self.evidence
        return lambda index: evidence(facts[index], index, moment, limit)
