"""What one operation declaration says: its argument shapes, permission, tool and command."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

from supervisor.policy.control.permissions import TaskRule

__all__ = [
    "BOOL",
    "INT",
    "INT64_MAX",
    "INTS",
    "INT_OR_NULL",
    "NUMBER",
    "OBJECT",
    "OBJECTS",
    "TEXT",
    "TEXTS",
    "TEXT_OR_TEXTS",
    "Arg",
    "Command",
    "Flag",
    "Operation",
    "Request",
    "Tool",
    "describe",
]

# Argument shapes. The words are the wire's own: a refusal reads "args.X must be <shape>".
# Only the JSON shape is checked at the surface; what the values may be (work kinds,
# roles, TTL bounds, ...) is the policy's decision, applied by the handle so that the
# socket, the MCP tools and in-process callers all get the same answer for one input.
TEXT = "a string"
INT = "an integer"
INT_OR_NULL = "an integer or null"
NUMBER = "a finite number"
BOOL = "true or false"
TEXTS = "a list of strings"
OBJECTS = "a list of objects"
OBJECT = "an object"
INTS = "a list of integers"
TEXT_OR_TEXTS = "a string or a list of strings"
#: The largest integer the store's 64-bit columns hold (the top of open-ended bounds).
INT64_MAX = 2**63 - 1


class Request:
    """The base of every op's request type (``operations.declared``, generated): a frozen,
    slotted, keyword-only dataclass whose fields are the op's declared arguments (absent
    ones are None, or a switch's default)."""

    __slots__ = ()
    #: The op this is a request of (its name on the socket).
    op: ClassVar[str]
    #: The seed's name for it, where the op is also an MCP tool (else the op's name).
    alias: ClassVar[str]


@dataclass(frozen=True, slots=True)
class Flag:
    """How the CLI spells one argument: ``--flag`` (or a positional), and how its text
    becomes the wire value (``kind``; see ``cli_operations``)."""

    flag: str
    help: str | None = None
    _: KW_ONLY
    type: Any = None
    metavar: str | None = None
    #: value (as typed), true / false (a switch, or its negation), list (comma-separated,
    #: stripped), split (comma-separated as given), ints, json (a file or -), json_object.
    kind: str = "value"
    #: What a JSON file holds, for the refusal when it cannot be read.
    what: str = ""
    #: Flags of one mutually exclusive group share its name.
    group: str | None = None
    #: The command needs the flag though the wire argument may be absent.
    required: bool = False
    #: The parsed value when the flag is not given (flags beyond the wire arguments).
    default: Any = None

    @classmethod
    def comma(cls, flag: str, what: str, *, kind: str = "list", required: bool = False) -> Flag:
        """A flag taking a comma-separated list (kind list, split or ints) of ``what``."""
        return cls(flag, f"comma-separated {what}", kind=kind, required=required)


@dataclass(frozen=True, slots=True)
class Arg:
    """One wire argument: its shape, whether it must be given, and its MCP/CLI spelling."""

    name: str
    shape: str
    _: KW_ONLY
    required: bool = False
    #: The MCP parameter's default when not required (None unless a flag with a value).
    default: Any = None
    cli: Flag | None = None
    #: An integer's allowed range, both ends included (the fleet ops check it).
    bounds: tuple[int, int] | None = None
    #: The only words a string may be (the fleet ops check it).
    choices: frozenset[str] | None = None

    @classmethod
    def switch(cls, name: str, flag: str, help: str, *, default: bool = False) -> Arg:
        """A true-or-false argument whose CLI switch turns its default around (``--full``
        gives true; ``--not-configured`` gives false where true is the default)."""
        kind = "false" if default else "true"
        return cls(name, BOOL, default=default, cli=Flag(flag, help, kind=kind))


@dataclass(frozen=True, slots=True)
class Tool:
    """The MCP tool an operation is also served as (the seed's name where it differs)."""

    name: str
    #: Stem of the tool's JSON schema titles (``<function>Arguments``); kept from the
    #: hand-written tools so ``tools/list`` stays byte-for-byte what clients saw.
    function: str
    summary: str
    #: (argument, its line under "Args:") in the tool's parameter order.
    params: tuple[tuple[str, str], ...]
    #: What a mutating call whose answer was lost tells its caller.
    lost: str
    _: KW_ONLY
    read_only: bool = False
    #: The boolean argument that makes a call mutating (otherwise: every call but a read's).
    mutates_with: str | None = None
    #: ``success`` is the tool's verdict, not whether it worked (an unhealthy namespace
    #: is still recorded): only a refused or lost call is flagged ``isError``.
    success_is_verdict: bool = False
    #: Parameters the tool has beyond the wire arguments (audit context), or where its
    #: shape differs from the wire's (a string as well as a list); looked up first.
    own: tuple[Arg, ...] = ()
    #: Whether a call may destroy (the MCP ``destructiveHint``).
    destructive: bool = False
    #: Answered by a hook of its own (``surfaces.mcp.fleet_tools``: the socket's parsers,
    #: size cuts, audit context) rather than by forwarding every argument; its name,
    #: description and parameters are still these.
    hooked: bool = False
    #: Outcomes that alone mean the call did its job (``success`` may be true for a
    #: compare-and-swap that moved and wrote nothing; see ``mcp.results.flag_error``).
    ok_outcomes: frozenset[str] | None = None
    #: Added to a refusal of the call (what it did not do), as (key, value) pairs.
    refused_extra: tuple[tuple[str, Any], ...] = ()

    def param(self, op: Operation, name: str) -> Arg:
        """The parameter ``name``: the tool's own, else the op's wire argument."""
        for arg in self.own:
            if arg.name == name:
                return arg
        return op.arg(name)

    def mutating(self, arguments: Mapping[str, Any]) -> bool:
        """Whether a call with ``arguments`` may have changed something."""
        if self.mutates_with is not None:
            return arguments.get(self.mutates_with) is True
        return not self.read_only


@dataclass(frozen=True, slots=True)
class Command:
    """``fleet-supervisor <group> <name>``: the subcommand an operation is reached by."""

    group: str
    name: str
    help: str
    _: KW_ONLY
    #: The flags' order in ``--help`` where it is not the arguments' (wire) order.
    order: tuple[str, ...] = ()
    #: Mutually exclusive flag groups of which one flag must be given.
    required_groups: tuple[str, ...] = ()
    #: Whether the answer means the command did its job (the exit status scripts branch
    #: on), from the answer and the request; None: the answer's ``success``.
    succeeded: Callable[[Mapping[str, Any], Mapping[str, Any]], bool] | None = None
    #: Shown on a terminal while a slow request runs ("applying... 3s").
    progress: str | None = None
    #: ``--watch`` redraws the answer until interrupted (its flags are the op's extra_flags).
    watch: bool = False


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation, declared once: every surface is built from this."""

    #: The socket op.
    name: str
    #: Its keyword call on the handle (``SupervisorHandle.<call>(profile, **args)``,
    #: generated into ``handle/declared/``): the seed's function name.
    call: str
    #: The permission task(s) the handle checks, with their rules.
    tasks: Mapping[str, TaskRule]
    _: KW_ONLY
    args: tuple[Arg, ...] = ()
    tool: Tool | None = None
    command: Command | None = None
    #: CLI flags that belong to the command but not to any argument of this op.
    extra_flags: tuple[Flag, ...] = field(default=())
    #: When ops share a command: the flags that select this op (otherwise the other).
    when: tuple[str, ...] = ()

    @classmethod
    def gated(
        cls, name: str, rule: TaskRule, *, call: str | None = None, **declared: Any
    ) -> Operation:
        """An operation behind one permission task named as the op itself (most are),
        with the keyword call ``call`` (by default the op's own name)."""
        return cls(name, call or name, {name: rule}, **declared)

    @property
    def tool_name(self) -> str | None:
        """The MCP tool this op is served as, if any."""
        return self.tool.name if self.tool is not None else None

    def arg(self, name: str) -> Arg:
        for arg in self.args:
            if arg.name == name:
                return arg
        raise KeyError(f"{self.name} has no argument {name!r}")


def _indent(text: str, prefix: str) -> str:
    first, *rest = text.split("\n")
    return first + "".join(f"\n{prefix}{line}" if line else "\n" for line in rest)


def describe(tool: Tool) -> str:
    """The tool's description, laid out as the docstring it used to be (indentation too)."""
    lines = "".join(f"            {name}: {_indent(doc, ' ' * 16)}\n" for name, doc in tool.params)
    return f"{_indent(tool.summary, ' ' * 8)}\n\n        Args:\n{lines}        "
