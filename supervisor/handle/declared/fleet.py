"""The handle's keyword call of every fleet op: its request, built from the keyword
arguments, handed to the one generic ``call`` (generated; do not edit)."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/fleet.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.handle.declared.base import Calls
from supervisor.operations.requests import request
from supervisor.policy.control.permissions import Profile

__all__ = ["FleetCalls"]


class FleetCalls(Calls):
    """The fleet ops."""

    async def snapshot(
        self,
        profile: Profile | None,
        *,
        canonical_repository: str | None = None,
        expected_manifest: Sequence[Any] | None = None,
        expected_live_revision: str | None = None,
        include_history: bool = False,
    ) -> Mapping[str, Any]:
        """``snapshot``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "snapshot",
                canonical_repository=canonical_repository,
                expected_manifest=expected_manifest,
                expected_live_revision=expected_live_revision,
                include_history=include_history,
            ),
        )
        return answer

    async def apply(
        self,
        profile: Profile | None,
        *,
        registry_fingerprint: str | None = None,
        scope_fingerprint: str | None = None,
        candidate_fingerprint: str,
        worker_identities: Sequence[str] | None = None,
        canonical_repository: str | None = None,
        override_mass_guard: bool = False,
    ) -> Mapping[str, Any]:
        """``apply``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "apply",
                registry_fingerprint=registry_fingerprint,
                scope_fingerprint=scope_fingerprint,
                candidate_fingerprint=candidate_fingerprint,
                worker_identities=worker_identities,
                canonical_repository=canonical_repository,
                override_mass_guard=override_mass_guard,
            ),
        )
        return answer
