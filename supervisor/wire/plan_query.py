"""What of a plan to list: the query a client sends and the daemon pages by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_EXAMPLES",
    "DEFAULT_PAGE",
    "MAX_EXAMPLES",
    "MAX_PAGE",
    "PlanQuery",
    "query_args",
]

DEFAULT_PAGE = 50
MAX_PAGE = 1000
DEFAULT_EXAMPLES = 3
MAX_EXAMPLES = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanQuery:
    """What of a plan to list. Tokens, counts and candidates are always complete.

    ``full`` lists every preserved entry (costs a pass over history); otherwise
    entries are listed only when a filter or a cursor is given, ``limit`` per
    page, in (worker_identity, reason_code) order, continuing after ``cursor``
    (the ``next_cursor`` of the previous page).
    """

    full: bool = False
    reason: str | None = None
    namespace: str | None = None
    instance: str | None = None
    limit: int = DEFAULT_PAGE
    cursor: str | None = None
    examples: int = DEFAULT_EXAMPLES

    @property
    def lists_entries(self) -> bool:
        return self.full or any(
            value is not None for value in (self.reason, self.namespace, self.instance, self.cursor)
        )


def query_args(query: PlanQuery | None) -> dict[str, Any]:
    """The wire arguments of a query (defaults left out)."""
    if query is None:
        return {}
    args: dict[str, Any] = {}
    default = PlanQuery()
    for name in ("full", "reason", "namespace", "instance", "limit", "cursor", "examples"):
        value = getattr(query, name)
        if value != getattr(default, name):
            args[name] = value
    return args
