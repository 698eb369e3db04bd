"""Writes ``supervisor/operations/declared/``: each operation's request type.

One frozen, slotted, keyword-only dataclass per declared op (one module per family of
operations), with one typed field per argument in declared order, so the steps and
actors that read a request are checked by mypy. ``python -m tools.gen_declared`` writes
them with the handle's calls; ``--check`` fails when they are not what the declarations
make.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from supervisor.operations import spec
from supervisor.operations.control import CONTROL_OPERATIONS
from supervisor.operations.fleet import FLEET_OPERATIONS
from supervisor.operations.hosts import HOST_OPERATIONS
from supervisor.operations.links import LINK_OPERATIONS
from supervisor.operations.reap import REAP_OPERATIONS
from supervisor.operations.spec import Arg, Operation

__all__ = ["ANNOTATIONS", "OP_FAMILIES", "REQUEST_DIR", "render_requests", "type_name"]

REQUEST_DIR = Path(__file__).resolve().parents[1] / "supervisor" / "operations" / "declared"

#: Each family's module (``supervisor/operations/<family>.py``) and its ops.
OP_FAMILIES: Mapping[str, tuple[Operation, ...]] = {
    "fleet": FLEET_OPERATIONS,
    "control": CONTROL_OPERATIONS,
    "links": LINK_OPERATIONS,
    "reap": REAP_OPERATIONS,
    "hosts": HOST_OPERATIONS,
}

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

_HEADER = '''"""The request type of every {family} op, made from its declaration (generated; do not
edit): what every surface parses into, what the handle's one ``call`` takes and what the
actor reads."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/{family}.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

{abc}from dataclasses import dataclass
from typing import {typing}

from supervisor.operations.spec import Request
from supervisor.policy.fast_init import fast_init

__all__ = [
{names}]
'''

_INIT = '''"""Each operation's request type, generated from the declarations (do not edit)."""

# Written by ``python -m tools.gen_declared``; tests/unit/test_declared_current.py fails
# when this is not what it writes.

from __future__ import annotations

{imports}from supervisor.operations.spec import Request

__all__ = [
{names}]

#: Every declared op's request type.
REQUEST_TYPES: tuple[type[Request], ...] = (
{table})
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


def _family(family: str, ops: tuple[Operation, ...]) -> str:
    classes = "".join(_class(op) for op in ops)
    used = [kind for kind in ("Mapping", "Sequence") if f"{kind}[" in classes]
    abc = f"from collections.abc import {', '.join(used)}\n" if used else ""
    shapes = {arg.shape for op in ops for arg in op.args}
    typing = "Any, ClassVar" if any("Any" in ANNOTATIONS[s] for s in shapes) else "ClassVar"
    names = "".join(f'    "{name}",\n' for name in sorted(type_name(op) for op in ops))
    return _HEADER.format(family=family, abc=abc, typing=typing, names=names) + classes


def render_requests() -> dict[str, str]:
    """File name -> text of ``supervisor/operations/declared/``, one module per family."""
    files = {f"{family}.py": _family(family, ops) for family, ops in OP_FAMILIES.items()}
    imports = "".join(
        f"from supervisor.operations.declared.{family} import (\n"
        + "".join(f"    {name},\n" for name in sorted((type_name(op) for op in ops), key=str.lower))
        + ")\n"
        for family, ops in sorted(OP_FAMILIES.items())
    )
    every = [type_name(op) for ops in OP_FAMILIES.values() for op in ops]
    names = "".join(f'    "{name}",\n' for name in ["REQUEST_TYPES", *sorted(every)])
    table = "".join(f"    {name},\n" for name in every)
    files["__init__.py"] = _INIT.format(imports=imports, names=names, table=table)
    return files
