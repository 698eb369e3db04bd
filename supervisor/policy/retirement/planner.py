"""The retirement plan: every row is a candidate or preserved with the first failing reason code."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import compress, repeat
from operator import attrgetter, is_, is_not, itemgetter, not_
from typing import Any

from supervisor.policy.evidence import EvidenceMap
from supervisor.policy.incremental.memo import PlanMemo

from .conjunction import fleet_context, row_verdict
from .facts import REQUIRED_IDENTITY_FIELDS, FactsContext, RowFacts, Verdict, epoch_us, row_facts
from .fingerprints import (
    candidate_token,
    identity_keys,
    registry_token,
    row_unit,
    scope_token,
    sharing_positions,
)
from .history import HistorySummary, fold_history
from .moment import EvidenceBases, Moment, entry_order, evidence_reader, lazy_entries, observe
from .plan import (
    Entries,
    FencingContext,
    PlanEntry,
    ProtectedOwners,
    RetirementPlan,
    protected_from_leases,
)
from .reasons import REASON_ALREADY_TERMINAL, REASON_ELIGIBLE

__all__ = [
    "REQUIRED_IDENTITY_FIELDS",
    "FencingContext",
    "PlanEntry",
    "PlanMemo",
    "ProtectedOwners",
    "RetirementPlan",
    "plan_retirement",
    "protected_from_leases",
]


_ACTIVE = attrgetter("active")
_IDENTITY = attrgetter("worker_identity")
_STATIC_DIGEST = attrgetter("static_digest")
_DIGEST = attrgetter("digest")
_CODE = itemgetter(0)

_ELIGIBLE_DETAIL = (
    "dead pid, expired heartbeat, stale ownership, trusted and fenced "
    "identity, canonical repository, no active lease"
)


def _judge(
    facts: list[RowFacts], evidence: EvidenceMap, now: datetime, owners: ProtectedOwners
) -> tuple[Moment, list[Verdict]]:
    """Every row from scratch: the planner without a memo."""
    moment, ambiguous = observe(facts, evidence, now)
    fleet = fleet_context(facts, moment, ambiguous, owners)
    probes, live, fresh, ownership = moment.probes, moment.live, moment.fresh, moment.ownership
    verdicts = [
        row_verdict(f, probes[i], live[i], fresh[i], ownership[i], fleet)
        for i, f in enumerate(facts)
    ]
    return moment, verdicts


def _candidate_entries(
    facts: list[RowFacts], moment: Moment, indices: list[int], bases: EvidenceBases | None
) -> Entries:
    """Candidates in worker-identity order, their entries built when first read."""

    def build() -> tuple[PlanEntry, ...]:
        evidence = evidence_reader(facts, moment, bases)
        return tuple(
            PlanEntry(
                worker_identity=facts[i].worker_identity,
                reason_code=REASON_ELIGIBLE,
                detail=_ELIGIBLE_DETAIL,
                evidence=evidence(i),
            )
            for i in indices
        )

    return Entries(len(indices), build)


def plan_retirement(
    rows: Iterable[Mapping[str, Any]],
    *,
    now: datetime,
    evidence: EvidenceMap,
    fencing: FencingContext,
    canonical_repository: str | None = None,
    protected: ProtectedOwners | None = None,
    memo: PlanMemo | None = None,
    history: HistorySummary | None = None,
) -> RetirementPlan:
    """Decide, without side effects, which registrations are conclusively stale orphans.

    ``memo`` carries per-row facts from earlier plans; the result is the same
    with or without it, only rows whose content changed cost their full price.

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
    if memo is None:
        facts = [row_facts(row, context) for row in all_rows]
        moment, verdicts = _judge(facts, evidence, now, owners)
    else:
        facts = memo.facts(all_rows, context)
        moment, verdicts = memo.state.observe(facts, evidence, epoch_us(now), owners)
    if history is not None and not all(map(_ACTIVE, facts)):
        raise ValueError("with a history summary, pass only the active rows")

    positions = range(len(verdicts))
    in_order = list(compress(positions, map(is_, verdicts, repeat(None))))
    # Preserved rows keep only their verdict here; their entries are built when read.
    kept = list(compress(positions, map(is_not, verdicts, repeat(None))))

    def by_name() -> list[int]:
        # Stable: rows of one identity keep their registry order.
        return sorted(in_order, key=lambda i: facts[i].worker_identity or "")

    def by_canon() -> list[int]:
        return sorted(in_order, key=lambda i: facts[i].canon_identity)

    if memo is None:
        candidate_indices, by_identity = by_name(), by_canon()
    else:
        # The candidates' facts objects say everything both orders read.
        order_inputs = (in_order, [facts[i] for i in in_order])
        candidate_indices = memo.reuse("candidate_order", order_inputs, by_name)
        by_identity = memo.reuse("candidate_rows_order", order_inputs, by_canon)
    bases = None if memo is None else memo.evidence_bases
    candidates = _candidate_entries(facts, moment, candidate_indices, bases)
    ordered = None
    if memo is not None:
        # Unchanged rows keep their very facts and verdict objects: compared by identity.
        kept_inputs = (kept, [facts[i] for i in kept], [verdicts[i] for i in kept])
        ordered = memo.reuse("kept_order", kept_inputs, lambda: entry_order(facts, verdicts, kept))
    preserved = lazy_entries(facts, moment, kept, verdicts, ordered, bases=bases)
    anchors = list(map(str, map(_IDENTITY, map(facts.__getitem__, candidate_indices))))
    digests = list(map(_DIGEST, facts))
    candidate_digests = list(map(digests.__getitem__, in_order))
    if history is None:
        actives = list(map(_ACTIVE, facts))
        active_digests = list(compress(digests, actives))
        past = list(compress(positions, map(not_, actives)))
        past_ids = [all_rows[i].get("worker_identity") for i in past]

        def fold() -> HistorySummary:
            # The history digest folds each row's text, as the store's does.
            return fold_history([row_unit(all_rows[i]) for i in past], past_ids)

        # A row's digest stands for its text: equal digests, equal texts.
        past_digests = list(map(digests.__getitem__, past))
        summary = fold() if memo is None else memo.reuse("history", (past_digests, past_ids), fold)
    else:
        active_digests, summary = digests, history
    registry_inputs = (active_digests, summary.digest)

    if memo is None:
        registry = registry_token(active_digests, summary)
        candidate = candidate_token(candidate_digests)
        anchor_keys = _anchor_keys(all_rows, facts, anchors)
        scope_digests = [digests[i] for i in sharing_positions(all_rows, anchor_keys)]
        scope_fingerprint = scope_token(scope_digests, anchors)
    else:
        registry = memo.reuse(
            "registry", registry_inputs, lambda: registry_token(active_digests, summary)
        )
        candidate = memo.reuse(
            "candidate", candidate_digests, lambda: candidate_token(candidate_digests)
        )
        # The scope reads only identities and identity keys, columns a row's static
        # digest covers and a new heartbeat stamp leaves alone (with_beat keeps the
        # very same digest object); the scope's token reads only its rows' digests,
        # which beating live rows rarely touch.
        scope_inputs = (list(map(_STATIC_DIGEST, facts)), anchors)
        anchor_keys = memo.reuse(
            "anchor_keys", scope_inputs, lambda: _anchor_keys(all_rows, facts, anchors)
        )
        scope_rows = memo.reuse(
            "scope_rows", scope_inputs, lambda: sharing_positions(all_rows, anchor_keys)
        )
        scope_digests = [digests[i] for i in scope_rows]
        scope_fingerprint = memo.reuse(
            "scope", (scope_digests, anchors), lambda: scope_token(scope_digests, anchors)
        )
    if memo is not None and memo.trusts_identity:
        # The caller promised never to change a row it handed in: no copy needed.
        candidate_rows = tuple(map(all_rows.__getitem__, by_identity))
    else:
        # Copied so the plan never aliases a caller's mutable row.
        candidate_rows = tuple([dict(all_rows[i]) for i in by_identity])
    counts = Counter(map(_CODE, filter(None, verdicts)))
    unlisted = history.count if history is not None else 0
    if unlisted:
        counts[REASON_ALREADY_TERMINAL] += unlisted
    return RetirementPlan(
        registry_fingerprint=registry,
        candidate_fingerprint=candidate,
        scope_fingerprint=scope_fingerprint,
        candidates=candidates,
        preserved=preserved,
        candidate_rows=candidate_rows,
        preserved_reason_counts=dict(sorted(counts.items())),
        protected=owners,
        fencing=fencing,
        canonical_repository=canonical_repository,
        unlisted_terminal_count=unlisted,
        scope_digests=tuple(sorted(scope_digests)),
        anchor_identities=tuple(anchors),
        anchor_keys=anchor_keys,
    )


def _anchor_keys(
    rows: Sequence[Mapping[str, Any]], facts: Sequence[RowFacts], anchors: Sequence[str]
) -> frozenset[tuple[str, str]]:
    """Every identity key of the rows the anchors name (a few rows: read from the rows)."""
    anchor_set = set(anchors)
    if not anchor_set:
        return frozenset()
    named = [rows[i] for i, f in enumerate(facts) if f.canon_identity in anchor_set]
    return frozenset().union(*map(identity_keys, named))
