"""The handle's keyword call of every hosts op: its request, built from the keyword
arguments, handed to the one generic ``call`` (generated; do not edit)."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/hosts.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from supervisor.handle.declared.base import Calls
from supervisor.operations.requests import request
from supervisor.policy.control.permissions import Profile

__all__ = ["HostCalls"]


class HostCalls(Calls):
    """The hosts ops."""

    async def plan_retirement(
        self,
        profile: Profile | None,
        host_id: str,
    ) -> Any:
        """``host_plan``, as declared in ``supervisor.operations``."""
        answer: Any = await self.call(
            profile,
            request(
                "host_plan",
                host_id=host_id,
            ),
        )
        return answer

    async def apply_retirement(
        self,
        profile: Profile | None,
        host_id: str,
        *,
        host_token: str,
        candidate_fingerprint: str,
        worker_identities: Sequence[str],
    ) -> Any:
        """``host_apply``, as declared in ``supervisor.operations``."""
        answer: Any = await self.call(
            profile,
            request(
                "host_apply",
                host_id=host_id,
                host_token=host_token,
                candidate_fingerprint=candidate_fingerprint,
                worker_identities=worker_identities,
            ),
        )
        return answer
