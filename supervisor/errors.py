"""The supervisor's exception hierarchy, each error carrying a stable machine-readable code."""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "ActorStopped",
    "ConfigError",
    "PermissionDenied",
    "ProfilesUnreadable",
    "ProtocolError",
    "StoreError",
    "StoreUnwritable",
    "SupervisorError",
    "Unavailable",
]


class SupervisorError(Exception):
    """Base of every error the supervisor reports; `code` is what clients branch on."""

    code: ClassVar[str] = "internal_error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def to_dict(self) -> dict[str, str]:
        """The wire form used by the socket and MCP surfaces."""
        return {"error": self.code, "detail": self.detail}


class ConfigError(SupervisorError):
    """Configuration is missing, malformed or contradictory."""

    code: ClassVar[str] = "config_invalid"


class ProfilesUnreadable(ConfigError):
    """The profiles file cannot be read or parsed, so no token can prove a profile."""

    code: ClassVar[str] = "profiles_unreadable"


class StoreError(SupervisorError):
    """The registry database failed or holds something it should not."""

    code: ClassVar[str] = "store_error"


class StoreUnwritable(StoreError):
    """The registry database (or its directory) cannot be written by this process."""

    code: ClassVar[str] = "store_unwritable"


class ActorStopped(SupervisorError):
    """An actor stopped before answering a request sent to it."""

    code: ClassVar[str] = "actor_stopped"


class ProtocolError(SupervisorError):
    """A request was malformed or violated the wire protocol."""

    code: ClassVar[str] = "bad_request"


class PermissionDenied(SupervisorError):
    """The caller lacks the profile, role or operation grant the request needs."""

    code: ClassVar[str] = "permission_denied"


class Unavailable(SupervisorError):
    """The supervisor is not running, not ready, or shutting down."""

    code: ClassVar[str] = "supervisor_unavailable"
