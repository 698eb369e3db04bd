"""Which MCP tool answers are errors: refusals, denials and lost answers set ``isError``."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from mcp.types import CallToolResult

from supervisor.policy.retirement.reasons import OUTCOME_REFUSED
from supervisor.surfaces.mcp.answers import OUTCOME_FAILED, OUTCOME_UNKNOWN

__all__ = ["FAILED_OUTCOMES", "answer_is_error", "flag_error"]

#: Outcomes a tool answer carries when nothing was done: a refusal (denied, invalid
#: arguments), a read that got no answer, a mutation whose answer was lost.
FAILED_OUTCOMES = frozenset({OUTCOME_REFUSED, OUTCOME_FAILED, OUTCOME_UNKNOWN})


def answer_is_error(
    body: Mapping[str, Any] | None,
    *,
    ok_outcomes: Collection[str] | None = None,
    success_is_verdict: bool = False,
) -> bool:
    """Whether a tool's structured answer says the tool could not do what it was asked.

    Every refusal, permission denial and failure the tools produce carries
    ``success: false`` (and a reason code and detail), so that is the rule. A tool
    whose ``success`` can stay true while it did nothing (apply's drift outcomes)
    names the outcomes that count as done in ``ok_outcomes`` instead. A negative
    but complete answer (an allocator ``wait`` or ``no_safe_work``, a fleet that is
    not safe) has ``success: true`` and is not an error. A tool whose ``success``
    is its verdict (``success_is_verdict``: an unhealthy namespace assessment is
    still recorded) fails only when the call itself was refused or lost.
    """
    if body is None:
        return False
    if success_is_verdict:
        return body.get("outcome") in FAILED_OUTCOMES
    if ok_outcomes is not None:
        return body.get("outcome") not in ok_outcomes
    return body.get("success") is False


def flag_error(
    result: CallToolResult,
    *,
    ok_outcomes: Collection[str] | None = None,
    success_is_verdict: bool = False,
) -> CallToolResult:
    """``result`` with ``is_error`` set when its structured answer is an error; content kept."""
    body = result.structured_content
    if result.is_error or not answer_is_error(
        body, ok_outcomes=ok_outcomes, success_is_verdict=success_is_verdict
    ):
        return result
    return result.model_copy(update={"is_error": True})
