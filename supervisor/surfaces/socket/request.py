"""A decoded socket request: its id, op, token and the op's checked arguments."""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.policy.fast_init import fast_init
from supervisor.surfaces.socket.fleet_args import FleetArgs
from supervisor.surfaces.socket.protocol_control import ControlArgs
from supervisor.surfaces.socket.protocol_hosts import HostArgs

__all__ = ["MAX_ID", "Args", "Request"]

#: Longest request id a frame may carry.
MAX_ID = 128

Args = FleetArgs | ControlArgs | HostArgs


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    id: str | None
    op: str
    token: str | None
    args: Args
