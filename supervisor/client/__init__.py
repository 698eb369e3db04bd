"""What workers and the CLI import: socket clients and the one-line heartbeat keeper.

Stands alone: it loads ``supervisor.wire`` and small leaves (errors, clock, the Unix
stream), never the daemon (tests/unit/test_client_standalone.py keeps it so).
"""

from __future__ import annotations

from supervisor.client.connection import AsyncClient, Client
from supervisor.client.frames import (
    RemoteError,
    RemotePermissionDenied,
    RemoteProfilesUnreadable,
    RemoteProtocolError,
    RemoteTimeout,
    RemoteUnauthenticated,
    RemoteUnavailable,
    remote_error,
)
from supervisor.client.keeper import (
    HeartbeatKeeper,
    HeartbeatThread,
    keep_registered,
    start_heartbeat_thread,
)
from supervisor.wire import PlanQuery

__all__ = [
    "AsyncClient",
    "Client",
    "HeartbeatKeeper",
    "HeartbeatThread",
    "PlanQuery",
    "RemoteError",
    "RemotePermissionDenied",
    "RemoteProfilesUnreadable",
    "RemoteProtocolError",
    "RemoteTimeout",
    "RemoteUnauthenticated",
    "RemoteUnavailable",
    "keep_registered",
    "remote_error",
    "start_heartbeat_thread",
]
