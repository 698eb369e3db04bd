"""Allocator candidates: one issue or pull request with its routing signals, parsed strictly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from supervisor.policy.stamps import parse_stamp

from .plane import WORK_KINDS, ControlPlaneRefusal, check_head_sha, check_kind, check_state

__all__ = [
    "CANDIDATE_FIELDS",
    "MAX_CANDIDATES",
    "Candidate",
    "candidate_from_mapping",
    "candidates_from_mappings",
]

#: More candidates than this in one request is a caller bug, not a queue.
MAX_CANDIDATES = 1000

_Key = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One issue or pull request offered to the allocator, with its routing signals."""

    kind: str
    number: int
    state: str = "open"
    labels: tuple[str, ...] = ()
    title: str = ""
    priority: int = 0
    head_sha: str | None = None
    created_at: datetime | None = None
    request_changes_current_head: bool = False
    approval_on_current_head: bool = False
    approval_stale: bool = False
    approval_contaminated: bool = False
    mergeable: bool = False
    blocked: bool = False
    dependency_unmet: bool = False
    #: The caller's own inventory says someone else holds it (a lease outside this
    #: supervisor, e.g. a comment lease being migrated); honoured, never overridden.
    already_claimed_elsewhere: bool = False
    dependency_reason: str | None = None

    def __post_init__(self) -> None:
        # Direct construction gets the same refusal as parsing: an incident (or
        # any other kind) can never become a candidate.
        if self.kind not in WORK_KINDS:
            check_kind(self.kind)
            raise ControlPlaneRefusal("invalid_work_kind", f"kind {self.kind!r} must be lower case")

    @property
    def key(self) -> _Key:
        return (self.kind, self.number)

    @property
    def label(self) -> str:
        return f"{self.kind}#{self.number}"


# Read from the declaration: with postponed annotations a field's type is its text.
#: The routing signals, in declaration order: each must be true or false.
_BOOL_FIELDS = tuple(f.name for f in fields(Candidate) if f.type == "bool")
CANDIDATE_FIELDS: frozenset[str] = frozenset(f.name for f in fields(Candidate))


def _refuse(detail: str) -> ControlPlaneRefusal:
    return ControlPlaneRefusal("invalid_candidate", detail)


def _int(data: Mapping[str, Any], name: str, default: int | None) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 2**31:
        raise _refuse(f"{name} must be an integer, got {str(value)[:32]!r}")
    return value


def _text(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 1000:
        raise _refuse(f"{name} must be a string of at most 1000 characters")
    return value


def candidate_from_mapping(data: Mapping[str, Any]) -> Candidate:
    """A candidate from plain JSON values; unknown keys are refused, not ignored.

    A misspelt signal (``blokced: true``) silently dropped would route work that
    its sender meant to hold back. A null value means "not given" and takes the
    field's default (``state`` open, ``priority`` 0, every signal false): an
    inventory exported from a tracker writes nulls for fields it has no value for,
    and one such field must not refuse the whole request.
    """
    unknown = sorted(set(data) - CANDIDATE_FIELDS)
    if unknown:
        raise _refuse(f"unknown candidate field(s): {', '.join(unknown)[:200]}")
    data = {key: value for key, value in data.items() if value is not None}
    flags: dict[str, bool] = {}
    for name in _BOOL_FIELDS:
        value = data.get(name, False)
        if not isinstance(value, bool):
            raise _refuse(f"{name} must be true or false")
        flags[name] = value
    labels = data.get("labels") or []
    if not isinstance(labels, list | tuple) or not all(isinstance(x, str) for x in labels):
        raise _refuse("labels must be a list of strings")
    created_raw = data.get("created_at")
    created = parse_stamp(created_raw) if created_raw is not None else None
    if created_raw is not None and created is None:
        raise _refuse(f"created_at {str(created_raw)[:40]!r} is not a UTC timestamp")
    number = _int(data, "number", None)
    if number <= 0:
        raise _refuse("number must be positive")
    return Candidate(
        kind=check_kind(data.get("kind")),
        number=number,
        state=check_state(data.get("state", "open")),
        labels=tuple(x.strip().lower() for x in labels if x.strip()),
        title=_text(data, "title") or "",
        priority=_int(data, "priority", 0),
        head_sha=check_head_sha(data.get("head_sha")),
        created_at=created,
        dependency_reason=_text(data, "dependency_reason"),
        **flags,
    )


def candidates_from_mappings(items: Sequence[Mapping[str, Any]]) -> tuple[Candidate, ...]:
    """Every candidate parsed; more than MAX_CANDIDATES or one item twice is refused."""
    if len(items) > MAX_CANDIDATES:
        raise _refuse(f"at most {MAX_CANDIDATES} candidates per request")
    parsed = tuple(candidate_from_mapping(item) for item in items)
    keys = [c.key for c in parsed]
    if len(set(keys)) != len(keys):
        raise _refuse("a candidate is listed twice")
    return parsed
