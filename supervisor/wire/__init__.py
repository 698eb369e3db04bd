"""The wire format the daemon and its clients share; imports nothing of either side."""

from __future__ import annotations

# The package exports its modules' names, each listed once, in its own module's __all__.
from supervisor.wire import frames, plan_query
from supervisor.wire.frames import *  # noqa: F403 - every name frames exports
from supervisor.wire.plan_query import *  # noqa: F403 - every name plan_query exports

__all__ = frames.__all__ + plan_query.__all__
