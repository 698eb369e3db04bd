"""The handle's keyword call of every reap op: its request, built from the keyword
arguments, handed to the one generic ``call`` (generated; do not edit)."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/reap.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.handle.declared.base import Calls
from supervisor.operations.requests import request
from supervisor.policy.control.permissions import Profile

__all__ = ["ReapCalls"]


class ReapCalls(Calls):
    """The reap ops."""

    async def reap_plan(
        self,
        profile: Profile | None,
        *,
        include: Sequence[str] | None = None,
    ) -> Mapping[str, Any]:
        """``reap_plan``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "reap_plan",
                include=include,
            ),
        )
        return answer

    async def reap_apply(
        self,
        profile: Profile | None,
        plan_token: str,
        *,
        override_mass_guard: bool = False,
    ) -> Mapping[str, Any]:
        """``reap_apply``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "reap_apply",
                plan_token=plan_token,
                override_mass_guard=override_mass_guard,
            ),
        )
        return answer
