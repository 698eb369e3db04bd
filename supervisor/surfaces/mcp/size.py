"""Keep an MCP tool answer under a byte budget by shortening its longest lists, and say so."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_MAX_RESULT_BYTES", "fit_result"]

DEFAULT_MAX_RESULT_BYTES = 65_536

#: Lists that may be shortened, least important first. ``candidate_worker_identities``
#: comes last: apply needs it, and a shortened list only retires fewer rows.
_TRIMMABLE: tuple[str, ...] = (
    "mcp_servers",
    "mcp_server_duplicates",
    "historical_workers",
    "stale_workers",
    "live_workers",
    "workers",
    "findings",
    "instances",
    "preserved",
    "preserved_summary",
    "candidates",
    "active_blockers",
    "candidate_worker_identities",
)


def _size(body: Mapping[str, Any]) -> int:
    return len(json.dumps(body, default=str, separators=(",", ":")).encode("utf-8"))


def fit_result(result: Mapping[str, Any], max_bytes: int) -> dict[str, Any]:
    """``result`` itself when it fits; otherwise a copy whose lists are cut to fit.

    Each list cut is recorded under ``truncated`` with how many entries are shown
    and how many there were, so a caller knows to narrow the request (a plan's
    ``reason``/``namespace``/``instance``/``limit`` filters, or the CLI).
    Tokens and counts are never cut.
    """
    body = dict(result)
    if _size(body) <= max_bytes:
        return body
    truncated: dict[str, dict[str, int]] = {}
    body["truncated"] = truncated
    for name in _TRIMMABLE:
        items = body.get(name)
        if not isinstance(items, list) or not items:
            continue
        total = len(items)
        # Halve until it fits or the list is empty: a handful of serializations.
        keep = total
        while keep and _size(body) > max_bytes:
            keep //= 2
            body[name] = items[:keep]
            truncated[name] = {"shown": keep, "total": total}
        if _size(body) <= max_bytes:
            break
    body["truncation_note"] = (
        f"answer cut to {max_bytes} bytes; narrow the request (a plan takes reason, "
        "namespace, instance, limit and cursor) or use the CLI for everything"
    )
    return body
