"""The ``[servers]`` table: what the daemon may do on its own to the servers live clients
hold (off by default: such servers are only reported)."""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.settings.config_checks import NON_NEGATIVE, setting

__all__ = ["ServersConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServersConfig:
    #: Stop a superseded copy (policy.servers.superseded) once it has been idle this long
    #: since its client started the newer copy; 0 turns it off.
    stop_superseded_after_seconds: float = setting(0.0, NON_NEGATIVE)
