"""Shared by the async and sync clients: request frames, result parsing, the socket check."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from typing import Any

from supervisor.client.remote import remote_error
from supervisor.errors import ProtocolError

__all__ = [
    "MAX_RESPONSE_BYTES",
    "connection_dropped",
    "fenced_args",
    "parse_result",
    "register_args",
]

#: Answers can be large (a snapshot of a big fleet) but not unbounded.
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


def parse_result(line: bytes, request_id: str) -> dict[str, Any]:
    """The result of a response frame, or the mapped exception for an error frame."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"the supervisor sent an unreadable frame: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("ok"), bool):
        raise ProtocolError("the supervisor sent a frame without an ok field")
    ok, answered = data["ok"], data.get("id")
    # Errors the server raises before it could read an id (busy, oversized) carry none.
    if answered != request_id and not (answered is None and not ok):
        raise ProtocolError(f"answer for request {answered!r} arrived for request {request_id!r}")
    if ok:
        result = data.get("result")
        if not isinstance(result, dict):
            raise ProtocolError("the supervisor sent an ok frame without a result object")
        return result
    error = data.get("error")
    if not isinstance(error, dict):
        raise ProtocolError("the supervisor sent an error frame without an error object")
    raise remote_error(str(error.get("code") or "internal_error"), str(error.get("detail") or ""))


def fenced_args(registration: Mapping[str, Any]) -> dict[str, Any]:
    """The four fields that name a registration on heartbeat and release."""
    try:
        return {
            "worker_identity": str(registration["worker_identity"]),
            "pid": int(registration["pid"]),
            "generation_id": str(registration["generation_id"]),
            "fencing_epoch": int(registration["fencing_epoch"]),
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a registration returned by register(): {exc}") from None


def register_args(claims: Mapping[str, Any], pid: int | None) -> dict[str, Any]:
    args: dict[str, Any] = {"claims": dict(claims)}
    if pid is not None:
        args["pid"] = pid
    return args


def connection_dropped(raw: socket.socket) -> bool:
    """Did the server close this idle connection (or leave unread bytes on it)?"""
    # Non-blocking for the peek: a socket with a timeout first polls for input for up to
    # that timeout, whatever flags are passed, so an idle live connection would stall here.
    try:
        timeout = raw.gettimeout()
        raw.setblocking(False)
        try:
            raw.recv(1, socket.MSG_PEEK)
        finally:
            raw.settimeout(timeout)
    except BlockingIOError:
        return False
    except OSError:
        return True
    # b"" is end-of-stream; any byte is a frame nobody asked for. Either way, start afresh.
    return True
