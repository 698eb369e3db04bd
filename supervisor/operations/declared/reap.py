"""The request type of every reap op, made from its declaration (generated; do not
edit): what every surface parses into, what the handle's one ``call`` takes and what the
actor reads."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/reap.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from supervisor.operations.spec import Request
from supervisor.policy.fast_init import fast_init

__all__ = [
    "ReapApplyRequest",
    "ReapPlanRequest",
]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ReapPlanRequest(Request):
    """The arguments of ``reap_plan`` (``reap_plan``)."""

    op: ClassVar[str] = "reap_plan"
    alias: ClassVar[str] = "fleet_plan_server_reap"
    include: Sequence[str] | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ReapApplyRequest(Request):
    """The arguments of ``reap_apply`` (``reap_apply``)."""

    op: ClassVar[str] = "reap_apply"
    alias: ClassVar[str] = "fleet_apply_server_reap"
    plan_token: str
    override_mass_guard: bool | None = False
