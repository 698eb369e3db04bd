"""The base of the generated keyword calls: each hands its request to ``call``."""

from __future__ import annotations

from typing import Any

from supervisor.operations.requests import Request
from supervisor.policy.control.permissions import Profile

__all__ = ["Calls"]


class Calls:
    """Implemented by the handle (and the host lease calls): the one generic dispatch."""

    async def call(self, profile: Profile | None, request: Request) -> Any:
        raise NotImplementedError
