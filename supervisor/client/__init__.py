"""What workers and the CLI import: socket clients, remote errors and the heartbeat keeper.

Stands alone: it loads ``supervisor.wire`` and small leaves (errors, clock, the Unix
stream), never the daemon (tests/unit/test_client_standalone.py keeps it so).
"""

from __future__ import annotations

# The package exports its modules' public names, each listed once, in its module's __all__.
from supervisor.client import connection, keeper, remote
from supervisor.client.connection import *  # noqa: F403 - AsyncClient, Client
from supervisor.client.keeper import *  # noqa: F403 - the heartbeat keeper, async or threaded
from supervisor.client.remote import *  # noqa: F403 - RemoteError and its kinds, remote_error
from supervisor.wire import PlanQuery

__all__ = connection.__all__ + keeper.__all__ + remote.__all__ + ["PlanQuery"]
