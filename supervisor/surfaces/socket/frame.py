"""A decoded socket frame: its id, op, token and the op's checked request."""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.operations.requests import Request
from supervisor.policy.fast_init import fast_init

__all__ = ["MAX_ID", "Frame"]

#: Longest request id a frame may carry.
MAX_ID = 128


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """One frame: ``args`` is the op's request (``operations.requests``), checked."""

    id: str | None
    op: str
    token: str | None
    args: Request
