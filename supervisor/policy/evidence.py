"""Process evidence handed to policy as plain data: what a probe saw for one pid number."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["UNKNOWN", "EvidenceMap", "PidEvidence", "evidence_for", "row_pid"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PidEvidence:
    """``alive`` is True/False/None (None: cannot tell); ``start_time`` names the incarnation."""

    alive: bool | None
    start_time: str | None = None


UNKNOWN = PidEvidence(alive=None, start_time=None)

EvidenceMap = Mapping[int, PidEvidence]


def row_pid(row: Mapping[str, Any]) -> int | None:
    """The row's pid as an int, or ``None`` when absent or not a positive integer."""
    raw = row.get("pid")
    if raw is None or isinstance(raw, bool):
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return None
    if isinstance(raw, float) and not raw.is_integer():
        return None
    return value if value > 0 else None


def evidence_for(row: Mapping[str, Any], evidence: EvidenceMap) -> PidEvidence:
    """Evidence for the row's pid; a pid nobody probed is unknown, never dead."""
    pid = row_pid(row)
    if pid is None:
        return UNKNOWN
    return evidence.get(pid, UNKNOWN)
