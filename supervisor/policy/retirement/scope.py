"""The plan's scope token with the historical rows that share a key with a candidate."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .fingerprints import identity_keys, is_history, row_digest, scope_token
from .plan import RetirementPlan

__all__ = ["with_history_digests", "with_history_scope"]


def with_history_scope(
    plan: RetirementPlan, history_rows: Iterable[Mapping[str, Any]]
) -> RetirementPlan:
    """The plan's scope token once the historical rows sharing a candidate's key are added.

    ``history_rows`` must include every historical row that shares an identity
    key with a candidate (more is fine: the rest are filtered out here, and
    each row must appear once). Then the token equals the one a plan over the
    whole registry computes.
    """
    keys = plan.anchor_keys
    extra = [
        row_digest(row)
        for row in history_rows
        if is_history(row) and not keys.isdisjoint(identity_keys(row))
    ]
    return with_history_digests(plan, extra)


def with_history_digests(plan: RetirementPlan, digests: Sequence[bytes]) -> RetirementPlan:
    """``with_history_scope`` from the ``row_digest`` of exactly the sharing rows."""
    if not digests:
        return plan
    scope = (*plan.scope_digests, *digests)
    return replace(
        plan,
        scope_fingerprint=scope_token(scope, plan.anchor_identities),
        scope_digests=scope,
    )
