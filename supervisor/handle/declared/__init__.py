"""The handle's keyword calls, generated from the operation declarations."""

from supervisor.handle.declared.control import ControlCalls
from supervisor.handle.declared.fleet import FleetCalls
from supervisor.handle.declared.hosts import HostCalls
from supervisor.handle.declared.links import LinkCalls
from supervisor.handle.declared.reap import ReapCalls

__all__ = ["ControlCalls", "FleetCalls", "HostCalls", "LinkCalls", "ReapCalls"]
