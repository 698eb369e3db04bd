"""Shared by the async and sync clients: request frames, result parsing, remote errors."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from supervisor.errors import PermissionDenied, ProtocolError, SupervisorError, Unavailable
from supervisor.wire import (
    BAD_REQUEST,
    FRAME_TOO_LARGE,
    PERMISSION_DENIED,
    SERVER_BUSY,
    TIMEOUT,
    UNAUTHENTICATED,
    UNKNOWN_OP,
)

__all__ = [
    "MAX_RESPONSE_BYTES",
    "RemoteError",
    "RemotePermissionDenied",
    "RemoteProfilesUnreadable",
    "RemoteProtocolError",
    "RemoteTimeout",
    "RemoteUnauthenticated",
    "RemoteUnavailable",
    "apply_args",
    "connection_dropped",
    "fenced_args",
    "parse_result",
    "register_args",
    "remote_error",
    "snapshot_args",
]

#: Answers can be large (a snapshot of a big fleet) but not unbounded.
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class RemoteError(SupervisorError):
    """An error frame from the supervisor; ``remote_code`` is the code it sent, verbatim."""

    code: ClassVar[str] = "remote_error"

    def __init__(self, detail: str, *, remote_code: str) -> None:
        super().__init__(detail)
        self.remote_code = remote_code

    def to_dict(self) -> dict[str, str]:
        return {"error": self.remote_code, "detail": self.detail}


class RemoteProtocolError(RemoteError, ProtocolError):
    """The supervisor could not parse or validate the request."""

    code: ClassVar[str] = "bad_request"


class RemotePermissionDenied(RemoteError, PermissionDenied):
    """The supervisor refused to act for this caller."""

    code: ClassVar[str] = "permission_denied"


class RemoteUnauthenticated(RemotePermissionDenied):
    """No token, or a token that proves no profile."""

    code: ClassVar[str] = "unauthenticated"


class RemoteProfilesUnreadable(RemoteError):
    """The supervisor's profiles file is broken: no token can be checked until it is fixed."""

    code: ClassVar[str] = "profiles_unreadable"


class RemoteUnavailable(RemoteError, Unavailable):
    """The supervisor is busy or shutting down; worth retrying later."""

    code: ClassVar[str] = "supervisor_unavailable"


class RemoteTimeout(RemoteError):
    """The supervisor gave up on the request; it may still have taken effect."""

    code: ClassVar[str] = "timeout"


_BY_CODE: Mapping[str, type[RemoteError]] = {
    BAD_REQUEST: RemoteProtocolError,
    UNKNOWN_OP: RemoteProtocolError,
    FRAME_TOO_LARGE: RemoteProtocolError,
    PERMISSION_DENIED: RemotePermissionDenied,
    UNAUTHENTICATED: RemoteUnauthenticated,
    "profiles_unreadable": RemoteProfilesUnreadable,
    SERVER_BUSY: RemoteUnavailable,
    "actor_stopped": RemoteUnavailable,
    "supervisor_unavailable": RemoteUnavailable,
    TIMEOUT: RemoteTimeout,
}


def remote_error(code: str, detail: str) -> RemoteError:
    """The exception for an error frame's code (``RemoteError`` itself for unlisted codes)."""
    return _BY_CODE.get(code, RemoteError)(detail, remote_code=code)


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


def snapshot_args(
    canonical_repository: str | None,
    expected_manifest: Sequence[Mapping[str, Any]] | None,
    expected_live_revision: str | None,
    include_history: bool = False,
) -> dict[str, Any]:
    args: dict[str, Any] = {
        "canonical_repository": canonical_repository,
        "expected_live_revision": expected_live_revision,
    }
    if include_history:
        args["include_history"] = True
    if expected_manifest is not None:
        args["expected_manifest"] = [dict(entry) for entry in expected_manifest]
    return args


def apply_args(
    candidate_fingerprint: str,
    worker_identities: Sequence[str],
    registry_fingerprint: str | None,
    scope_fingerprint: str | None,
    canonical_repository: str | None,
    *,
    override_mass_guard: bool = False,
) -> dict[str, Any]:
    args: dict[str, Any] = {
        "candidate_fingerprint": candidate_fingerprint,
        "worker_identities": list(worker_identities),
        "registry_fingerprint": registry_fingerprint,
        "scope_fingerprint": scope_fingerprint,
        "canonical_repository": canonical_repository,
    }
    if override_mass_guard:
        args["override_mass_guard"] = True
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
