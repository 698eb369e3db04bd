"""The request type of every hosts op, made from its declaration (generated; do not
edit): what every surface parses into, what the handle's one ``call`` takes and what the
actor reads."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/hosts.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from supervisor.operations.spec import Request
from supervisor.policy.fast_init import fast_init

__all__ = [
    "HostApplyRequest",
    "HostPlanRequest",
    "HostStatusRequest",
]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HostStatusRequest(Request):
    """The arguments of ``host_status`` (``status``)."""

    op: ClassVar[str] = "host_status"
    alias: ClassVar[str] = "host_status"


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HostPlanRequest(Request):
    """The arguments of ``host_plan`` (``plan_retirement``)."""

    op: ClassVar[str] = "host_plan"
    alias: ClassVar[str] = "host_plan"
    host_id: str


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HostApplyRequest(Request):
    """The arguments of ``host_apply`` (``apply_retirement``)."""

    op: ClassVar[str] = "host_apply"
    alias: ClassVar[str] = "host_apply"
    host_id: str
    host_token: str
    candidate_fingerprint: str
    worker_identities: Sequence[str]
