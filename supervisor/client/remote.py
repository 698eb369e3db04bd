"""The supervisor's error frames as exceptions: a class for each code a client branches on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

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
    "RemoteError",
    "RemotePermissionDenied",
    "RemoteProfilesUnreadable",
    "RemoteProtocolError",
    "RemoteTimeout",
    "RemoteUnauthenticated",
    "RemoteUnavailable",
    "remote_error",
]


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
