"""The wire format the daemon and its clients share; imports nothing of either side."""

from __future__ import annotations

from supervisor.wire.frames import (
    BAD_REQUEST,
    FRAME_TOO_LARGE,
    INTERNAL_ERROR,
    PERMISSION_DENIED,
    PROTOCOL_VERSION,
    SERVER_BUSY,
    TIMEOUT,
    UNAUTHENTICATED,
    UNKNOWN_OP,
    encode,
    error_frame,
    ok_frame,
    request_frame,
)
from supervisor.wire.plan_query import (
    DEFAULT_EXAMPLES,
    DEFAULT_PAGE,
    MAX_EXAMPLES,
    MAX_PAGE,
    PlanQuery,
    query_args,
)

__all__ = [
    "BAD_REQUEST",
    "DEFAULT_EXAMPLES",
    "DEFAULT_PAGE",
    "FRAME_TOO_LARGE",
    "INTERNAL_ERROR",
    "MAX_EXAMPLES",
    "MAX_PAGE",
    "PERMISSION_DENIED",
    "PROTOCOL_VERSION",
    "SERVER_BUSY",
    "TIMEOUT",
    "UNAUTHENTICATED",
    "UNKNOWN_OP",
    "PlanQuery",
    "encode",
    "error_frame",
    "ok_frame",
    "query_args",
    "request_frame",
]
