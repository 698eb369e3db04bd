"""The plain retirement planner: every row a candidate or preserved with the reason it fails."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import compress
from operator import attrgetter, itemgetter, not_
from typing import Any

from supervisor.policy.evidence import EvidenceMap

from .conjunction import fleet_context, row_verdict
from .derive import row_facts
from .entries import candidate_entries, preserved_entries
from .facts import RowFacts, Verdict
from .fingerprints import (
    candidate_token,
    identity_keys,
    registry_token,
    row_unit,
    scope_token,
    sharing_positions,
)
from .history import HistorySummary, fold_history
from .moment import entry_evidence, observe
from .plan import FencingContext, ProtectedOwners, RetirementPlan
from .reasons import REASON_ALREADY_TERMINAL
from .seen import FactsContext

__all__ = [
    "anchor_keys",
    "by_canon_identity",
    "by_identity",
    "check_history",
    "fold_past",
    "past_positions",
    "plan_retirement",
    "reason_counts",
    "split",
]

_ACTIVE = attrgetter("active")
_CODE = itemgetter(0)


def plan_retirement(
    rows: Iterable[Mapping[str, Any]],
    *,
    now: datetime,
    evidence: EvidenceMap,
    fencing: FencingContext,
    canonical_repository: str | None = None,
    protected: ProtectedOwners | None = None,
    history: HistorySummary | None = None,
) -> RetirementPlan:
    """Decide, without side effects, which registrations are conclusively stale orphans.

    Every row is judged from scratch: read into its facts (``derive.row_facts``),
    observed at ``now`` against the probes (``moment.observe``) and held to the
    conjunction (``conjunction.row_verdict``). ``policy.incremental`` gives the
    very same plan while redoing only what changed since its last one.

    Without ``history``, ``rows`` is the whole registry. With it, ``rows`` is
    just the active rows and ``history`` the store's summary of the rest: a
    historical row is always ``already_terminal_registration`` unless it shares
    an identity with another row, which only a non-normalized identity can do
    (``history.identity_irregular``), so while ``history.irregular_count`` is 0
    the historical rows are counted, not planned. The scope token then covers
    the active rows only until ``with_history_scope`` adds the historical rows
    that share a key with a candidate.
    """
    all_rows = rows if isinstance(rows, list) else list(rows)
    owners = protected or ProtectedOwners()
    context = FactsContext(fencing.host_id, fencing.boot_id, canonical_repository)
    facts = [row_facts(row, context) for row in all_rows]
    check_history(facts, history)

    # What the probes and ``now`` say of each row, what the fleet says around it,
    # then the conjunction row by row.
    moment, ambiguous = observe(facts, evidence, now)
    fleet = fleet_context(facts, moment, ambiguous, owners)
    verdicts = [
        row_verdict(
            f, moment.probes[i], moment.live[i], moment.fresh[i], moment.ownership[i], fleet
        )
        for i, f in enumerate(facts)
    ]
    eligible, kept = split(verdicts)

    def evidence_of(index: int) -> dict[str, Any]:
        return entry_evidence(facts[index], index, moment)

    candidate_order = by_identity(facts, eligible)
    # The tokens: every row's digest, the candidates' alone, and the scope (the rows
    # sharing an identity key with a candidate).
    digests = [f.digest for f in facts]
    active_digests = list(compress(digests, map(_ACTIVE, facts)))
    history_summary = fold_past(all_rows, past_positions(facts)) if history is None else history
    anchors = [str(facts[i].worker_identity) for i in candidate_order]
    keys = anchor_keys(all_rows, facts, anchors)
    scope_digests = [digests[i] for i in sharing_positions(all_rows, keys)]
    return RetirementPlan(
        registry_fingerprint=registry_token(active_digests, history_summary),
        candidate_fingerprint=candidate_token([digests[i] for i in eligible]),
        scope_fingerprint=scope_token(scope_digests, anchors),
        candidates=candidate_entries(facts, candidate_order, evidence_of),
        preserved=preserved_entries(facts, kept, verdicts, evidence_of),
        # Copied so the plan never aliases a caller's mutable row.
        candidate_rows=tuple([dict(all_rows[i]) for i in by_canon_identity(facts, eligible)]),
        preserved_reason_counts=reason_counts(verdicts, history),
        protected=owners,
        fencing=fencing,
        canonical_repository=canonical_repository,
        unlisted_terminal_count=0 if history is None else history.count,
        scope_digests=tuple(sorted(scope_digests)),
        anchor_identities=tuple(anchors),
        anchor_keys=keys,
    )


# --- the steps, shared with the incremental planner --------------------------------------


def check_history(facts: Sequence[RowFacts], history: HistorySummary | None) -> None:
    """With a history summary, only active rows may be planned."""
    if history is not None and not all(map(_ACTIVE, facts)):
        raise ValueError("with a history summary, pass only the active rows")


def split(verdicts: Sequence[Verdict]) -> tuple[list[int], list[int]]:
    """Positions of the eligible rows and of the preserved ones, each in registry order."""
    eligible = [i for i, verdict in enumerate(verdicts) if verdict is None]
    # Preserved rows keep only their verdict here; their entries are built when read.
    kept = [i for i, verdict in enumerate(verdicts) if verdict is not None]
    return eligible, kept


def by_identity(facts: Sequence[RowFacts], indices: Sequence[int]) -> list[int]:
    """``indices`` in worker-identity order (stable: rows of one identity keep their order)."""
    return sorted(indices, key=lambda i: facts[i].worker_identity or "")


def by_canon_identity(facts: Sequence[RowFacts], indices: Sequence[int]) -> list[int]:
    """``indices`` in canonical worker-identity order: the order of ``candidate_rows``."""
    return sorted(indices, key=lambda i: facts[i].canon_identity)


def past_positions(facts: Sequence[RowFacts]) -> list[int]:
    """Positions of the historical (non-active) rows."""
    return list(compress(range(len(facts)), map(not_, map(_ACTIVE, facts))))


def fold_past(rows: Sequence[Mapping[str, Any]], past: Sequence[int]) -> HistorySummary:
    """The history summary of the rows at ``past``, folded from each row's text as the
    store's is."""
    return fold_history(
        [row_unit(rows[i]) for i in past], [rows[i].get("worker_identity") for i in past]
    )


def anchor_keys(
    rows: Sequence[Mapping[str, Any]], facts: Sequence[RowFacts], anchors: Sequence[str]
) -> frozenset[tuple[str, str]]:
    """Every identity key of the rows the anchors name (a few rows: read from the rows)."""
    anchor_set = set(anchors)
    if not anchor_set:
        return frozenset()
    named = [rows[i] for i, f in enumerate(facts) if f.canon_identity in anchor_set]
    return frozenset().union(*map(identity_keys, named))


def reason_counts(verdicts: Sequence[Verdict], history: HistorySummary | None) -> dict[str, int]:
    """Preserved rows per reason code, the historical rows ``history`` counts included."""
    counts = Counter(map(_CODE, filter(None, verdicts)))
    if history is not None and history.count:
        counts[REASON_ALREADY_TERMINAL] += history.count
    return dict(sorted(counts.items()))
