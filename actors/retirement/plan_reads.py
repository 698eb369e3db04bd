"""The reads behind a plan: active rows and the history digest, scope rows and history pages."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.incremental.memo import PlanMemo
from supervisor.policy.incremental.row_columns import RowColumn
from supervisor.policy.retirement.history import HistorySummary, identity_irregular
from supervisor.policy.retirement.pages import (
    entry_matches,
    page_of,
    terminal_entries,
    wants_history,
)
from supervisor.policy.retirement.plan import FencingContext, PlanEntry, RetirementPlan
from supervisor.policy.retirement.scope import with_history_digests
from supervisor.store.base import Row, Store
from supervisor.wire import PlanQuery

__all__ = [
    "HistoryReads",
    "PlanInputs",
    "PlanListing",
    "list_entries",
    "read_plan_inputs",
    "rescope",
]

#: Historical rows read per page while filling a filtered listing.
_HISTORY_BATCH = 500


@dataclass(frozen=True, slots=True)
class PlanInputs:
    """Rows to plan and the history summary (``None``: the rows are the whole registry)."""

    rows: list[Row]
    history: HistorySummary | None


@dataclass(frozen=True, slots=True)
class PlanListing:
    listed: list[PlanEntry] | None
    next_cursor: str | None
    extra_examples: list[PlanEntry]


async def read_plan_inputs(store: Store, irregular: RowColumn[bool] | None = None) -> PlanInputs:
    """The active rows and the digest of the rest, or every row when history must be planned.

    Only a non-normalized ``worker_identity`` (never minted by the supervisor) can
    make a historical row matter to another row's verdict; while there is none
    anywhere, history is counted, not read. ``irregular``, when given, keeps each
    row's identity check between calls.
    """
    view = await store.read_registry_view()
    if view.history.irregular_count > 0:
        found = True
    elif irregular is not None:
        found = any(irregular.of(view.active))
    else:
        found = any(identity_irregular(row.get("worker_identity")) for row in view.active)
    if found:
        return PlanInputs(rows=await store.read_registrations(), history=None)
    return PlanInputs(rows=view.active, history=view.history)


class HistoryReads:
    """History reads of the last plan, by what they read and the history digest they saw.

    The digest is a set hash of every historical row (with their count), so while
    it and the arguments are unchanged the store would return the same rows: no
    read is needed.
    """

    __slots__ = ("_examples", "_scope")

    def __init__(self) -> None:
        self._scope: tuple[object, list[bytes]] | None = None
        self._examples: tuple[object, list[Row]] | None = None

    async def scope_digests(
        self, store: Store, keys: frozenset[tuple[str, str]], history: HistorySummary
    ) -> list[bytes]:
        key = (keys, history.digest, history.count)
        if self._scope is not None and self._scope[0] == key:
            return self._scope[1]
        digests = await store.read_history_scope(keys)
        self._scope = (key, digests)
        return digests

    async def examples(self, store: Store, limit: int, history: HistorySummary) -> list[Row]:
        key = (limit, history.digest, history.count)
        if self._examples is not None and self._examples[0] == key:
            return self._examples[1]
        rows = await store.read_history(limit=limit)
        self._examples = (key, rows)
        return rows


async def rescope(
    store: Store,
    plan: RetirementPlan,
    inputs: PlanInputs,
    memo: PlanMemo | None = None,
    cache: HistoryReads | None = None,
) -> RetirementPlan:
    """Add the historical rows sharing a candidate's identity key to the scope token."""
    if inputs.history is None or not plan.anchor_keys or not inputs.history.count:
        return plan
    if cache is not None:
        digests = await cache.scope_digests(store, plan.anchor_keys, inputs.history)
    else:
        digests = await store.read_history_scope(plan.anchor_keys)
    if memo is None:
        return with_history_digests(plan, digests)

    # The cached digests are the same objects plan after plan, so an unchanged scope
    # costs a pass of pointer compares instead of a sort and a hash.
    def token() -> tuple[str, tuple[bytes, ...]]:
        scoped = with_history_digests(plan, digests)
        return scoped.scope_fingerprint, scoped.scope_digests

    key = (plan.scope_digests, plan.anchor_identities, digests)
    fingerprint, scope = memo.reuse("history_scope", key, token)
    return replace(plan, scope_fingerprint=fingerprint, scope_digests=scope)


EntryBuilder = Callable[[Sequence[Row]], list[PlanEntry]]


def entry_builder(
    *,
    now: datetime,
    evidence: Mapping[int, PidEvidence],
    fencing: FencingContext,
    canonical_repository: str | None,
) -> EntryBuilder:
    def build(rows: Sequence[Row]) -> list[PlanEntry]:
        return terminal_entries(
            rows,
            now=now,
            evidence=evidence,
            fencing=fencing,
            canonical_repository=canonical_repository,
        )

    return build


async def list_entries(
    store: Store,
    plan: RetirementPlan,
    query: PlanQuery,
    build: EntryBuilder,
    reads: tuple[HistoryReads, HistorySummary] | None = None,
) -> PlanListing:
    """The page of entries the query asks for, and examples of the unlisted history rows.

    ``reads``: a cache of history reads and the summary the plan was made with.
    """
    unlisted = plan.unlisted_terminal_count
    examples: list[PlanEntry] = []
    if unlisted and query.examples > 0:
        if reads is not None:
            rows = await reads[0].examples(store, query.examples, reads[1])
        else:
            rows = await store.read_history(limit=query.examples)
        examples = build(rows)
    if not query.lists_entries:
        return PlanListing(listed=None, next_cursor=None, extra_examples=examples)
    history: list[PlanEntry] = []
    if unlisted and wants_history(query):
        history = await _history_matches(store, query, build)
    listed, cursor = page_of([*plan.preserved, *history], query)
    return PlanListing(listed=listed, next_cursor=cursor, extra_examples=examples)


async def _history_matches(store: Store, query: PlanQuery, build: EntryBuilder) -> list[PlanEntry]:
    """Matching historical entries after the cursor: all of them (full) or one page plus one."""
    need = None if query.full else query.limit + 1
    needle = query.instance or query.namespace
    after = query.cursor
    found: list[PlanEntry] = []
    while need is None or len(found) < need:
        rows = await store.read_history(after=after, limit=_HISTORY_BATCH, needle=needle)
        if not rows:
            break
        found.extend(e for e in build(rows) if entry_matches(e, query))
        after = str(rows[-1].get("worker_identity") or "")
        if len(rows) < _HISTORY_BATCH:
            break
    return found
