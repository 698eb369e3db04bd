"""The JSON-RPC error for a request the MCP SDK cannot read, by its id when that can be read."""

from __future__ import annotations

from mcp.types import INVALID_PARAMS, INVALID_REQUEST, ErrorData, JSONRPCError
from pydantic import ValidationError

from supervisor.observe.logs import get_logger

__all__ = ["INVALID_PARAMS", "INVALID_REQUEST", "readable_id", "refusal", "unreadable_answer"]

_log = get_logger(surface="mcp")


def unreadable_answer(data: object, failure: ValidationError | None) -> JSONRPCError:
    """The error for the parsed JSON ``data`` the SDK refused (``failure``: why its message
    shapes did not fit, None when they did but its strict parser refused the text):
    invalid params for a request whose ``params`` alone are not an object, invalid
    request for anything else; answered by the request's id when one can be read."""
    request_id = readable_id(data)
    if isinstance(data, dict) and isinstance(data.get("method"), str) and _params_refused(failure):
        return refusal(
            request_id,
            INVALID_PARAMS,
            "Invalid params: params must be a JSON object",
            reason="params not an object",
        )
    return refusal(
        request_id,
        INVALID_REQUEST,
        "Invalid request: not a valid JSON-RPC message (a field has the wrong shape, "
        "or a string is not valid Unicode: a lone UTF-16 surrogate is not)",
        reason="not a valid request",
    )


def refusal(request_id: int | str | None, code: int, message: str, *, reason: str) -> JSONRPCError:
    """The JSON-RPC error answering an unreadable request, logged with ``reason``."""
    _log.warning("mcp_unreadable_line", reason=reason)
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def readable_id(data: object) -> int | str | None:
    """The request's id when an answer can carry it: an int, or a string that is itself
    valid Unicode; else None."""
    value = data.get("id") if isinstance(data, dict) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def _params_refused(failure: ValidationError | None) -> bool:
    """Did the request and notification shapes fail on ``params`` alone?"""
    if failure is None:
        return False
    shaped = [
        e
        for e in failure.errors()
        if e.get("loc", ())[:1] in (("JSONRPCRequest",), ("JSONRPCNotification",))
    ]
    return bool(shaped) and all(e.get("loc", ())[1:2] == ("params",) for e in shaped)
