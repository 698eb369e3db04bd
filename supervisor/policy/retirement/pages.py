"""Which plan entries a caller sees: a compact summary by default, filtered pages on request."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from supervisor.policy.evidence import UNKNOWN, EvidenceMap
from supervisor.policy.fleet.worker_view import OWNERSHIP_HISTORICAL

from .derive import row_facts
from .freshness import epoch_us
from .plan import FencingContext, PlanEntry
from .reasons import REASON_ALREADY_TERMINAL
from .seen import FactsContext

__all__ = [
    "PageQuery",
    "entry_matches",
    "page_of",
    "terminal_entries",
    "wants_history",
]


class PageQuery(Protocol):
    """What policy reads of a plan query (``supervisor.wire.PlanQuery``, which policy,
    importing only itself, names by shape)."""

    @property
    def full(self) -> bool: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def instance(self) -> str | None: ...
    @property
    def limit(self) -> int: ...
    @property
    def cursor(self) -> str | None: ...
    @property
    def examples(self) -> int: ...


def wants_history(query: PageQuery) -> bool:
    """Whether historical rows (always ``already_terminal_registration``) can match."""
    return query.reason is None or query.reason == REASON_ALREADY_TERMINAL


def entry_matches(entry: PlanEntry, query: PageQuery) -> bool:
    """The filters on one entry, read from its own evidence (as the full plan shows it)."""
    if query.reason is not None and entry.reason_code != query.reason:
        return False
    evidence = entry.evidence
    if query.namespace is not None and evidence.get("namespace") != query.namespace:
        return False
    return query.instance is None or evidence.get("client_instance_id") == query.instance


def _key(entry: PlanEntry) -> tuple[str, str]:
    return (entry.worker_identity or "", entry.reason_code)


def page_of(entries: Iterable[PlanEntry], query: PageQuery) -> tuple[list[PlanEntry], str | None]:
    """Matching entries after the cursor, sorted, at most ``limit`` (all when ``full``).

    Returns the page and the cursor for the next one (``None`` when this is the
    last). Entries with one identity never straddle two pages.
    """
    after = query.cursor
    chosen = sorted(
        (e for e in entries if entry_matches(e, query) and (after is None or _key(e)[0] > after)),
        key=_key,
    )
    if query.full or len(chosen) <= query.limit:
        return chosen, None
    cut = query.limit
    last = chosen[cut - 1].worker_identity or ""
    while cut < len(chosen) and (chosen[cut].worker_identity or "") == last:
        cut += 1
    return chosen[:cut], (last if cut < len(chosen) else None)


def terminal_entries(
    rows: Sequence[Mapping[str, Any]],
    *,
    now: datetime,
    evidence: EvidenceMap,
    fencing: FencingContext,
    canonical_repository: str | None,
) -> list[PlanEntry]:
    """The entries a whole-registry plan gives these historical rows.

    Valid while no row shares a (stripped) identity with another, the condition
    under which a plan counts history instead of planning it: then every
    historical row fails the terminal-status check and nothing else about the
    fleet can change its entry.
    """
    context = FactsContext(fencing.host_id, fencing.boot_id, canonical_repository)
    out: list[PlanEntry] = []
    for row in rows:
        f = row_facts(row, context)
        if f.active or f.static_verdict is None:
            raise ValueError("terminal_entries takes historical rows only")
        probe = UNKNOWN if f.pid is None else evidence.get(f.pid, UNKNOWN)
        age = None if f.beat_us is None else (epoch_us(now) - f.beat_us) / 1_000_000
        fresh = None if age is None or f.ttl is None else age < f.ttl
        entry_evidence = dict(f.evidence_template.get())
        entry_evidence["last_heartbeat_at"] = f.beat_raw
        entry_evidence["pid_alive"] = probe.alive
        entry_evidence["probed_start_time"] = probe.start_time
        entry_evidence["heartbeat_age_seconds"] = age
        entry_evidence["heartbeat_fresh"] = fresh
        entry_evidence["live"] = False
        entry_evidence["ownership_state"] = OWNERSHIP_HISTORICAL
        reason, detail = f.static_verdict
        out.append(
            PlanEntry(
                worker_identity=f.worker_identity,
                reason_code=reason,
                detail=detail,
                evidence=entry_evidence,
            )
        )
    return out
