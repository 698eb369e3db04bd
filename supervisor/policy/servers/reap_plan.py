"""The reap plan: which server trees of a census are orphaned, with a token to reap them by.

A census in, a frozen plan out. A server is a target only on positive evidence that its
owner is gone: the owner client's incarnation is recorded dead (``alive is False``; the
census judges it by pid and start token, never by ``PPID == 1``), the owner's end of
the server's stdio is recorded closed, what survived a server's leader is out of its
running owner's reach, or, with no owner recorded, the kernel says no process holds the
other end of any of its stdio sockets or pipes. Evidence that cannot be read
(None) keeps the server. Servers launched through ``exec`` are kept: the server guard
stops those. Live clients' duplicate servers are reported, never targeted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from supervisor.policy.servers.abandoned import STDIO_ABANDONED
from supervisor.policy.servers.census import (
    PROVENANCE_OBSERVED,
    Census,
    OwnerClient,
    ProcessRef,
    ServerRecord,
)
from supervisor.policy.servers.duplicates import DuplicateGroup, duplicate_groups
from supervisor.policy.servers.superseded import SUPERSEDED, Superseded, superseded

__all__ = [
    "KEEP_NO_OWNER",
    "KEEP_OWNER_LIVE",
    "KEEP_OWNER_UNKNOWN",
    "KEEP_PROTECTED",
    "KEEP_WRAPPED",
    "REAP_OWNER_GONE",
    "REAP_STDIO_ABANDONED",
    "REAP_STDIO_CLOSED",
    "REAP_SUPERSEDED",
    "REAP_UNREACHABLE",
    "ReapEntry",
    "ReapPlan",
    "members_of",
    "plan_reap",
    "plan_superseded_stop",
    "plan_token",
    "token_includes_superseded",
]

#: The owner client's recorded incarnation is gone.
REAP_OWNER_GONE = "owner_client_gone"
#: The owner still runs, but its end of the server's stdio is closed.
REAP_STDIO_CLOSED = "owner_stdio_closed"
#: No owner was recorded, but no process holds the other end of any of its stdio sockets
#: or pipes (discovery's evidence word, so the reason names what was seen).
REAP_STDIO_ABANDONED = STDIO_ABANDONED
#: The owner runs, but what survived the server's leader is out of its reach: nothing of
#: the server's stdio is left in its tree and nothing connects it to the owner or to
#: another server (the census's ``stdio_abandoned`` on a survivor, actors.census.unreached).
REAP_UNREACHABLE = "survivor_unreachable"
#: Only with ``include_superseded`` (the user's word): an older copy its live owner
#: replaced, idle since the newer copy started (policy.servers.superseded).
REAP_SUPERSEDED = SUPERSEDED
#: The owner client runs and (as far as can be told) still talks to the server.
KEEP_OWNER_LIVE = "owner_client_live"
#: Whether the owner runs cannot be told: unknown evidence never makes a target.
KEEP_OWNER_UNKNOWN = "owner_liveness_unknown"
#: No owner client was recorded at first sight: nothing proves it orphaned.
KEEP_NO_OWNER = "owner_not_recorded"
#: Launched through ``exec``: the server guard watches it and stops it when orphaned.
KEEP_WRAPPED = "wrapped_server_guarded"
#: Its tree holds a process the caller protects (the supervisor itself, its parent).
KEEP_PROTECTED = "protected_process"

#: The token's format version: a token of another version never matches.
_TOKEN_VERSION = "reap-v1"
#: A plan that includes superseded servers says so in its token, so that an apply
#: recomputes the same plan from the token alone.
_WITH_SUPERSEDED = "+superseded"


def members_of(server: ServerRecord) -> tuple[ProcessRef, ...]:
    """The leader and its tree's other members, as the census saw them."""
    return (server.process, *server.usage.children)


def _ref(process: ProcessRef) -> str:
    return f"{process.pid}:{process.start}"


def plan_token(targets: Iterable[ReapEntry], *, include_superseded: bool = False) -> str:
    """A digest over each target's leader and members (pid and start token) and reason, in
    any order: the same targets give the same token; any target, member, incarnation or
    reason more, less or different moves it."""
    units = sorted(
        "/".join([_ref(t.server.process), *sorted(_ref(m) for m in t.server.usage.children)])
        + ("" if t.reason_code != REAP_SUPERSEDED else f"#{REAP_SUPERSEDED}")
        for t in targets
    )
    version = _TOKEN_VERSION + (_WITH_SUPERSEDED if include_superseded else "")
    body = "\n".join([version, *units]).encode()
    return f"{version}-{hashlib.sha256(body).hexdigest()}"


def token_includes_superseded(token: str) -> bool:
    """Whether a plan token is of a plan made with ``include_superseded``."""
    return token.startswith(f"{_TOKEN_VERSION}{_WITH_SUPERSEDED}-")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapEntry:
    """One server and the verdict on it: a target (``REAP_*``) or kept (``KEEP_*``)."""

    server: ServerRecord
    reason_code: str
    detail: str

    @property
    def members(self) -> tuple[ProcessRef, ...]:
        """The processes a reap signals: the leader, then its tree's other members."""
        return members_of(self.server)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapPlan:
    """Targets and kept servers in pid order, duplicates, and the token apply compares."""

    targets: tuple[ReapEntry, ...]
    kept: tuple[ReapEntry, ...]
    duplicates: tuple[DuplicateGroup, ...]
    plan_token: str
    #: The census's size: the mass guard judges the targets against it.
    server_count: int
    #: The targets' RSS together (None when any target's is unknown).
    target_rss_bytes: int | None


def _owner_text(owner: OwnerClient) -> str:
    return f"owner {owner.name} pid {owner.process.pid} ({owner.process.start})"


def _verdict(server: ServerRecord, protected: frozenset[int]) -> tuple[str, str]:
    """(reason code, detail) of one server; the first rule that applies decides."""
    owner = server.owner
    hit = sorted(m.pid for m in members_of(server) if m.pid in protected)
    if hit:
        return KEEP_PROTECTED, f"its tree holds protected pid(s) {hit}"
    if server.provenance != PROVENANCE_OBSERVED:
        return KEEP_WRAPPED, f"provenance {server.provenance!r}: the server guard stops it"
    if owner is None:
        said = f": {server.stdio_detail}" if server.stdio_detail else ""
        if server.stdio_abandoned is True:
            return REAP_STDIO_ABANDONED, f"no process holds the other end of its stdio{said}"
        return KEEP_NO_OWNER, f"no owner client was recorded when it was first seen{said}"
    if owner.alive is None:
        return KEEP_OWNER_UNKNOWN, f"whether {_owner_text(owner)} runs cannot be told"
    if owner.alive is False:
        return REAP_OWNER_GONE, f"{_owner_text(owner)} is gone (that incarnation exited)"
    if owner.stdio_open is False:
        return REAP_STDIO_CLOSED, f"{_owner_text(owner)} runs but closed its end of the stdio"
    if owner.stdio_open is None and server.stdio_abandoned is True:
        return REAP_UNREACHABLE, f"{_owner_text(owner)} runs, but {server.stdio_detail}"
    # What keeps a survivor its owner holds no stdio of within reach, when it was judged.
    said = f"; {server.stdio_detail}" if server.stdio_detail else ""
    return KEEP_OWNER_LIVE, f"{_owner_text(owner)} runs{said}"


def _total(values: Sequence[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _superseded_detail(found: Superseded) -> str:
    newer = found.newer
    return (
        f"its owner runs a newer copy, pid {newer.pid} ({newer.start}), and its tree has done "
        f"no I/O since that copy started (idle {found.idle_seconds:.0f} s at least)"
    )


_REAPED = (
    REAP_OWNER_GONE,
    REAP_STDIO_CLOSED,
    REAP_STDIO_ABANDONED,
    REAP_UNREACHABLE,
    REAP_SUPERSEDED,
)


def _entries(
    census: Census, protected: frozenset[int], replaced: Mapping[int, Superseded]
) -> list[ReapEntry]:
    """Every server with its verdict, in pid order; a server of a live owner that is in
    ``replaced`` gets ``superseded_by_newer_instance`` instead of its keep."""
    entries = []
    for server in sorted(census.servers, key=lambda s: s.process.pid):
        code, detail = _verdict(server, protected)
        found = replaced.get(server.process.pid)
        if found is not None and code in (KEEP_OWNER_LIVE, KEEP_WRAPPED):
            code, detail = REAP_SUPERSEDED, _superseded_detail(found)
        entries.append(ReapEntry(server=server, reason_code=code, detail=detail))
    return entries


def _plan(
    census: Census,
    entries: Sequence[ReapEntry],
    targeted: Callable[[ReapEntry], bool],
    *,
    include_superseded: bool,
) -> ReapPlan:
    targets = [e for e in entries if targeted(e)]
    kept = [e for e in entries if not targeted(e)]
    # Wrapped or observed: any server a running client still holds may repeat another.
    live = [e.server for e in kept if e.server.owner is not None and e.server.owner.alive is True]
    return ReapPlan(
        targets=tuple(targets),
        kept=tuple(kept),
        duplicates=duplicate_groups(live),
        plan_token=plan_token(targets, include_superseded=include_superseded),
        server_count=len(census.servers),
        target_rss_bytes=_total([t.server.usage.rss_bytes for t in targets]),
    )


def plan_reap(
    census: Census,
    *,
    protected: frozenset[int] = frozenset(),
    include_superseded: bool = False,
) -> ReapPlan:
    """Every server of ``census`` as a target or kept, with its reason; the live clients'
    duplicates; the plan token. Deterministic for one census. ``include_superseded`` (the
    user's word, never a default) also targets the copies a live owner replaced."""
    replaced = (
        {s.server.process.pid: s for s in superseded(census.servers)} if include_superseded else {}
    )
    entries = _entries(census, protected, replaced)
    return _plan(
        census,
        entries,
        lambda e: e.reason_code in _REAPED,
        include_superseded=include_superseded,
    )


def plan_superseded_stop(
    census: Census, *, after_seconds: float, protected: frozenset[int] = frozenset()
) -> ReapPlan:
    """The opt-in stop of superseded servers (``[servers] stop_superseded_after_seconds``):
    targets only the copies idle at least ``after_seconds`` since their newer copy started;
    every other server is kept with its plain verdict and nothing else is a target."""
    if after_seconds <= 0:
        raise ValueError("the superseded stop needs a time > 0 (0 turns it off)")
    due = {
        s.server.process.pid: s
        for s in superseded(census.servers)
        if s.since_newer_seconds >= after_seconds
    }
    entries = _entries(census, protected, due)
    return _plan(
        census, entries, lambda e: e.reason_code == REAP_SUPERSEDED, include_superseded=True
    )
