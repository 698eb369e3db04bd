"""Writes ``supervisor/operations/declared_requests.py``: each operation's request type.

One frozen, slotted, keyword-only dataclass per declared op, with one typed field per
argument in declared order, so the steps and actors that read a request are checked by
mypy. ``python -m tools.gen_declared`` writes it with the handle's calls; ``--check``
fails when it is not what the declarations make.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from supervisor.operations import spec
from supervisor.operations.registry import OPERATIONS
from supervisor.operations.spec import Arg, Operation

__all__ = ["ANNOTATIONS", "REQUEST_FILE", "render_requests", "type_name"]

REQUEST_FILE = (
    Path(__file__).resolve().parents[1] / "supervisor" / "operations" / "declared_requests.py"
)

#: The Python type each wire shape is held as once checked (lists may become tuples); the
#: handle's generated keyword calls annotate their parameters with it too.
ANNOTATIONS: Mapping[str, str] = {
    spec.TEXT: "str",
    spec.INT: "int",
    spec.INT_OR_NULL: "int | None",
    spec.NUMBER: "float",
    spec.BOOL: "bool",
    spec.TEXTS: "Sequence[str]",
    spec.OBJECTS: "Sequence[Any]",
    spec.OBJECT: "Mapping[str, Any]",
    spec.INTS: "Sequence[int]",
    spec.TEXT_OR_TEXTS: "Sequence[str] | str",
}

_HEADER = '''"""Each operation's request type, made from its declaration (generated; do not edit):
what every surface parses into, what the handle's one ``call`` takes and what the actor
reads."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from supervisor.operations.spec import Request
from supervisor.policy.fast_init import fast_init

__all__ = [
{names}]
'''


def type_name(op: Operation) -> str:
    """``assign`` -> ``AssignRequest``: the request type of ``op``."""
    return "".join(part.capitalize() for part in op.name.split("_")) + "Request"


def _field(arg: Arg) -> str:
    # A required argument is always there (every parser refuses a frame without it); a
    # switch's absence is its default (false, or true where --not-X turns it off); every
    # other absent argument is None, and the actor applies its own default.
    if arg.required:
        return f"    {arg.name}: {ANNOTATIONS[arg.shape]}\n"
    if arg.shape == spec.BOOL:
        return f"    {arg.name}: bool | None = {arg.default!r}\n"
    annotation = ANNOTATIONS[arg.shape]
    if not annotation.endswith("| None"):
        annotation += " | None"
    return f"    {arg.name}: {annotation} = None\n"


def _class(op: Operation) -> str:
    fields = "".join(_field(arg) for arg in op.args)
    # A heartbeat's request is built once per beat: the cheaper __init__ (``fast_init``).
    return (
        f"\n\n@fast_init\n@dataclass(frozen=True, slots=True, kw_only=True)\n"
        f"class {type_name(op)}(Request):\n"
        f'    """The arguments of ``{op.name}`` (``{op.call}``)."""\n\n'
        f'    op: ClassVar[str] = "{op.name}"\n'
        f'    alias: ClassVar[str] = "{op.tool_name or op.name}"\n'
        f"{fields}"
    )


def render_requests() -> str:
    """The text of ``supervisor/operations/declared_requests.py``."""
    ops = list(OPERATIONS.values())
    names = [type_name(op) for op in ops]
    listed = "".join(f'    "{name}",\n' for name in ["REQUEST_TYPES", *sorted(names)])
    classes = "".join(_class(op) for op in ops)
    table = "".join(f"    {name},\n" for name in names)
    return (
        _HEADER.format(names=listed)
        + classes
        + f"\n\n#: Every declared op's request type, in declaration order.\n"
        f"REQUEST_TYPES: tuple[type[Request], ...] = (\n{table})\n"
    )
