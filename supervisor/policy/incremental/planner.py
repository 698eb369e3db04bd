"""The plain planner's plan, redoing only what changed since the memo's last plan."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from itertools import compress
from operator import attrgetter
from typing import Any

from supervisor.policy.evidence import EvidenceMap
from supervisor.policy.retirement import planner as plain
from supervisor.policy.retirement.entries import candidate_entries, entry_order, preserved_entries
from supervisor.policy.retirement.fingerprints import (
    candidate_token,
    registry_token,
    scope_token,
    sharing_positions,
)
from supervisor.policy.retirement.freshness import epoch_us
from supervisor.policy.retirement.history import HistorySummary
from supervisor.policy.retirement.plan import FencingContext, ProtectedOwners, RetirementPlan
from supervisor.policy.retirement.seen import FactsContext

from .memo import PlanMemo

__all__ = ["plan_retirement"]

_ACTIVE = attrgetter("active")
_STATIC_DIGEST = attrgetter("static_digest")
_DIGEST = attrgetter("digest")


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
    """``retirement.planner.plan_retirement``, with ``memo`` carrying what earlier plans
    derived; the result is the same with or without it (the property tests hold the
    two equal), only rows whose content changed cost their full price.

    The steps are the plain planner's: facts come from the memo (a row unchanged
    since the last plan keeps its very facts object), observations and verdicts
    from its plan state (redone only where a row, a probe or freshness moved),
    and every order and token is reused while the inputs it reads are unchanged.
    """
    if memo is None:
        return plain.plan_retirement(
            rows,
            now=now,
            evidence=evidence,
            fencing=fencing,
            canonical_repository=canonical_repository,
            protected=protected,
            history=history,
        )
    all_rows = rows if isinstance(rows, list) else list(rows)
    owners = protected or ProtectedOwners()
    context = FactsContext(fencing.host_id, fencing.boot_id, canonical_repository)
    facts = memo.facts(all_rows, context)
    moment, verdicts = memo.state.observe(facts, evidence, epoch_us(now), owners)
    plain.check_history(facts, history)
    eligible, kept = plain.split(verdicts)

    # The candidates' facts objects say everything both orders read.
    order_inputs = (eligible, [facts[i] for i in eligible])
    candidate_order = memo.reuse(
        "candidate_order", order_inputs, lambda: plain.by_identity(facts, eligible)
    )
    rows_order = memo.reuse(
        "candidate_rows_order", order_inputs, lambda: plain.by_canon_identity(facts, eligible)
    )
    evidence_of = memo.evidence_bases.reader(facts, moment)
    # Unchanged rows keep their very facts and verdict objects: compared by identity.
    kept_inputs = (kept, [facts[i] for i in kept], [verdicts[i] for i in kept])
    ordered = memo.reuse("kept_order", kept_inputs, lambda: entry_order(facts, verdicts, kept))

    digests = list(map(_DIGEST, facts))
    candidate_digests = [digests[i] for i in eligible]
    if history is None:
        active_digests = list(compress(digests, map(_ACTIVE, facts)))
        past = plain.past_positions(facts)
        # A row's digest stands for its text: equal digests, equal texts.
        past_inputs = (
            [digests[i] for i in past],
            [all_rows[i].get("worker_identity") for i in past],
        )
        summary = memo.reuse("history", past_inputs, lambda: plain.fold_past(all_rows, past))
    else:
        active_digests, summary = digests, history
    registry = memo.reuse(
        "registry",
        (active_digests, summary.digest),
        lambda: registry_token(active_digests, summary),
    )
    candidate = memo.reuse(
        "candidate", candidate_digests, lambda: candidate_token(candidate_digests)
    )
    # The scope reads only identities and identity keys, columns a row's static
    # digest covers and a new heartbeat stamp leaves alone (with_beat keeps the
    # very same digest object); the scope's token reads only its rows' digests,
    # which beating live rows rarely touch.
    anchors = [str(facts[i].worker_identity) for i in candidate_order]
    scope_inputs = (list(map(_STATIC_DIGEST, facts)), anchors)
    keys = memo.reuse(
        "anchor_keys", scope_inputs, lambda: plain.anchor_keys(all_rows, facts, anchors)
    )
    scope_rows = memo.reuse("scope_rows", scope_inputs, lambda: sharing_positions(all_rows, keys))
    scope_digests = [digests[i] for i in scope_rows]
    scope = memo.reuse(
        "scope", (scope_digests, anchors), lambda: scope_token(scope_digests, anchors)
    )
    if memo.trusts_identity:
        # The caller promised never to change a row it handed in: no copy needed.
        candidate_rows = tuple(map(all_rows.__getitem__, rows_order))
    else:
        candidate_rows = tuple([dict(all_rows[i]) for i in rows_order])
    return RetirementPlan(
        registry_fingerprint=registry,
        candidate_fingerprint=candidate,
        scope_fingerprint=scope,
        candidates=candidate_entries(facts, candidate_order, evidence_of),
        preserved=preserved_entries(facts, kept, verdicts, evidence_of, ordered),
        candidate_rows=candidate_rows,
        preserved_reason_counts=plain.reason_counts(verdicts, history),
        protected=owners,
        fencing=fencing,
        canonical_repository=canonical_repository,
        unlisted_terminal_count=0 if history is None else history.count,
        scope_digests=tuple(sorted(scope_digests)),
        anchor_identities=tuple(anchors),
        anchor_keys=keys,
    )
