"""How an MCP tool reports a backend answer, or a failure that says whether anything changed."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any

from supervisor.errors import PermissionDenied, ProtocolError, SupervisorError
from supervisor.policy.retirement.reasons import OUTCOME_REFUSED

__all__ = ["OUTCOME_FAILED", "OUTCOME_UNKNOWN", "tool_answer"]

#: A call that got no usable answer.
OUTCOME_FAILED = "failed"
#: A mutation whose answer was lost: it may or may not have changed anything.
OUTCOME_UNKNOWN = "outcome_unknown"


async def tool_answer(
    call: Awaitable[Mapping[str, Any]],
    *,
    mutating: bool,
    lost: str,
    refused_extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The backend's answer; an error becomes a structured refusal or failure.

    ``lost`` is what to tell the caller when a mutating call's answer never came back;
    ``refused_extra`` is added to a refusal of a mutating call (what it did not do).
    """
    try:
        return dict(await call)
    except SupervisorError as exc:
        # Refused before anything ran, so a mutation did nothing. Backends raise
        # anything else (ActorStopped, Unavailable, ...) when the answer was lost.
        refused = isinstance(exc, ProtocolError | PermissionDenied)
        body: dict[str, Any] = {
            "success": False,
            "outcome": OUTCOME_REFUSED if refused else OUTCOME_FAILED,
            "code": exc.code,
            "error": exc.to_dict()["error"],
            "reasons": [exc.detail],
        }
        if refused or not mutating:
            body["mutation_performed"] = False
            if refused and mutating and refused_extra:
                body.update(refused_extra)
            return body
        # The request may have reached the writer before the answer was lost.
        body["outcome"] = OUTCOME_UNKNOWN
        body["reasons"].append(lost)
        return body
