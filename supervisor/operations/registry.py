"""Every operation by socket op and by MCP tool name, and the permission table they declare."""

from __future__ import annotations

from collections.abc import Mapping

from supervisor.operations.control import CONTROL_OPERATIONS
from supervisor.operations.fleet import FLEET_OPERATIONS
from supervisor.operations.hosts import HOST_OPERATIONS
from supervisor.operations.links import LINK_OPERATIONS
from supervisor.operations.reap import REAP_OPERATIONS
from supervisor.operations.spec import Operation
from supervisor.policy.control.permissions import Decision, Profile, TaskRule, decide_rule

__all__ = [
    "CONTROL_OPS",
    "HOST_OPS",
    "OPERATIONS",
    "TASKS",
    "TOOLS",
    "decide",
    "operation",
    "tool_name",
]

#: op name -> declaration, in the order the surfaces list them.
OPERATIONS: Mapping[str, Operation] = {
    op.name: op
    for op in (
        *FLEET_OPERATIONS,
        *CONTROL_OPERATIONS,
        *LINK_OPERATIONS,
        *HOST_OPERATIONS,
        *REAP_OPERATIONS,
    )
}
#: The ops whose socket arguments the control reader checks (``protocol.parse_control_args``).
CONTROL_OPS: frozenset[str] = frozenset(
    op.name for op in (*CONTROL_OPERATIONS, *LINK_OPERATIONS, *REAP_OPERATIONS)
)
HOST_OPS: frozenset[str] = frozenset(op.name for op in HOST_OPERATIONS)
#: MCP tool name -> declaration, for every op served as a tool.
TOOLS: Mapping[str, Operation] = {
    op.tool_name: op for op in OPERATIONS.values() if op.tool_name is not None
}


def _tasks() -> dict[str, TaskRule]:
    table: dict[str, TaskRule] = {}
    for op in OPERATIONS.values():
        for task, rule in op.tasks.items():
            # Two ops may share a task (host apply retires as apply does), never its rule.
            if table.setdefault(task, rule) != rule:
                raise AssertionError(f"task {task!r} is declared with two rules")
    return table


#: Which grant and roles each permission task needs, as the operations declare it.
TASKS: Mapping[str, TaskRule] = _tasks()


def operation(name: str) -> Operation:
    """The declaration of the socket op ``name`` (KeyError for an unknown op)."""
    return OPERATIONS[name]


def tool_name(name: str) -> str:
    """The MCP tool the socket op ``name`` is served as (AssertionError if none)."""
    tool = OPERATIONS[name].tool_name
    assert tool is not None, name
    return tool


def decide(profile: Profile | None, task: str) -> Decision:
    """``permissions.decide_rule`` with the rule the operations declare for ``task``."""
    return decide_rule(profile, task, TASKS.get(task))
