"""Which MCP tool answers are errors: refusals, denials and lost answers set ``isError``."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from mcp.types import CallToolResult

__all__ = ["answer_is_error", "flag_error"]


def answer_is_error(
    body: Mapping[str, Any] | None, *, ok_outcomes: Collection[str] | None = None
) -> bool:
    """Whether a tool's structured answer says the tool could not do what it was asked.

    Every refusal, permission denial and failure the tools produce carries
    ``success: false`` (and a reason code and detail), so that is the rule. A tool
    whose ``success`` can stay true while it did nothing (apply's drift outcomes)
    names the outcomes that count as done in ``ok_outcomes`` instead. A negative
    but complete answer (an allocator ``wait`` or ``no_safe_work``, a fleet that is
    not safe) has ``success: true`` and is not an error.
    """
    if body is None:
        return False
    if ok_outcomes is not None:
        return body.get("outcome") not in ok_outcomes
    return body.get("success") is False


def flag_error(
    result: CallToolResult, *, ok_outcomes: Collection[str] | None = None
) -> CallToolResult:
    """``result`` with ``is_error`` set when its structured answer is an error; content kept."""
    if result.is_error or not answer_is_error(result.structured_content, ok_outcomes=ok_outcomes):
        return result
    return result.model_copy(update={"is_error": True})
