"""The supervisor's exception hierarchy, each error carrying a stable machine-readable code."""

from __future__ import annotations

from typing import Any, ClassVar

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
    """Base of every error the supervisor reports; `code` is what clients branch on.

    A subclass names its code in its bases: ``class Gone(SupervisorError, code="gone")``.
    """

    code: ClassVar[str] = "internal_error"

    def __init_subclass__(cls, *, code: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def to_dict(self) -> dict[str, str]:
        """The wire form used by the socket and MCP surfaces."""
        return {"error": self.code, "detail": self.detail}


class ConfigError(SupervisorError, code="config_invalid"):
    """Configuration is missing, malformed or contradictory."""


class ProfilesUnreadable(ConfigError, code="profiles_unreadable"):
    """The profiles file cannot be read or parsed, so no token can prove a profile."""


class StoreError(SupervisorError, code="store_error"):
    """The registry database failed or holds something it should not."""


class StoreUnwritable(StoreError, code="store_unwritable"):
    """The registry database (or its directory) cannot be written by this process."""


class ActorStopped(SupervisorError, code="actor_stopped"):
    """An actor stopped before answering a request sent to it."""


class ProtocolError(SupervisorError, code="bad_request"):
    """A request was malformed or violated the wire protocol."""


class PermissionDenied(SupervisorError, code="permission_denied"):
    """The caller lacks the profile, role or operation grant the request needs."""


class Unavailable(SupervisorError, code="supervisor_unavailable"):
    """The supervisor is not running, not ready, or shutting down."""
