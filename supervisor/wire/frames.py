"""Frames both sides write: the protocol version, error codes, and the frame encodings; and
where a caller finds its profile token."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from supervisor.errors import PermissionDenied, ProtocolError

__all__ = [
    "BAD_REQUEST",
    "FRAME_TOO_LARGE",
    "INTERNAL_ERROR",
    "PERMISSION_DENIED",
    "PROTOCOL_VERSION",
    "SERVER_BUSY",
    "TIMEOUT",
    "TOKEN_ENV",
    "UNAUTHENTICATED",
    "UNKNOWN_OP",
    "encode",
    "error_frame",
    "ok_frame",
    "request_frame",
]

PROTOCOL_VERSION = 1

# Error codes a surface answers with; clients branch on them.
BAD_REQUEST = ProtocolError.code
UNKNOWN_OP = "unknown_op"
FRAME_TOO_LARGE = "frame_too_large"
UNAUTHENTICATED = "unauthenticated"
PERMISSION_DENIED = PermissionDenied.code
TIMEOUT = "timeout"
SERVER_BUSY = "server_busy"
INTERNAL_ERROR = "internal_error"

#: The profile token a caller (the CLI, the MCP stdio bridge) sends when none is given.
TOKEN_ENV = "FLEET_SUPERVISOR_TOKEN"

#: Built once: ``json.dumps`` rebuilds its encoder on every call, and every heartbeat
#: answer is encoded once.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


def encode(frame: Mapping[str, Any]) -> bytes:
    # The text is dropped as soon as it is bytes, and the newline is added to the
    # bytes: a plan of a large fleet is megabytes, and each copy alive at once is
    # a peak the daemon's RSS keeps.
    data = _ENCODER.encode(frame).encode()
    return data + b"\n"


def request_frame(request_id: str, op: str, args: Mapping[str, Any], token: str | None) -> bytes:
    frame: dict[str, Any] = {"v": PROTOCOL_VERSION, "id": request_id, "op": op, "args": args}
    if token is not None:
        frame["token"] = token
    return encode(frame)


def ok_frame(request_id: str | None, result: Mapping[str, Any]) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "id": request_id, "ok": True, "result": dict(result)}


def error_frame(request_id: str | None, code: str, detail: str) -> dict[str, Any]:
    return {
        "v": PROTOCOL_VERSION,
        "id": request_id,
        "ok": False,
        "error": {"code": code, "detail": detail},
    }
