"""Writes ``supervisor/handle/declared/``: the handle's keyword call of every declared op.

Each call builds the op's request (``operations.requests``) from its keyword arguments and
hands it to the one generic ``call``, so no hand-written file repeats an op's argument
list. One module per family of operations (``supervisor/operations/<family>.py``); it
also writes the table of op names in docs/development.md, the workers' library's named
calls and each op's request type (``tools/gen_requests.py``). Run
``python -m tools.gen_declared`` after changing a declaration; ``--check`` exits 1 when
the files are not what this writes (``tests/unit/test_declared_current.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from supervisor.operations import spec
from supervisor.operations.fleet import FLEET_OPERATIONS
from supervisor.operations.spec import Arg, Operation
from tools.gen_requests import ANNOTATIONS, OP_FAMILIES, REQUEST_DIR, render_requests

__all__ = ["CLIENT", "DOC", "FAMILIES", "TARGET", "main", "name_table", "render", "render_client"]

TARGET = Path(__file__).resolve().parents[1] / "supervisor" / "handle" / "declared"

DOC = Path(__file__).resolve().parents[1] / "docs" / "development.md"
_TABLE_START, _TABLE_END = "<!-- operation-names:start -->", "<!-- operation-names:end -->"

#: Module -> (its class, the ops it serves).
_CLASSES = {
    "fleet": "FleetCalls",
    "control": "ControlCalls",
    "links": "LinkCalls",
    "reap": "ReapCalls",
    "hosts": "HostCalls",
}
FAMILIES: Mapping[str, tuple[str, tuple[Operation, ...]]] = {
    family: (_CLASSES[family], ops) for family, ops in OP_FAMILIES.items()
}

#: Ops the handle answers by other means: the workers' own (peer credentials, the
#: heartbeat fast path), status (the socket's figures), plan (its façade takes a
#: PlanQuery, the listing's one value, rather than each listing field) and this host's
#: lease status (any authenticated caller; asked without a profile).
_HAND_WRITTEN = frozenset({"register", "heartbeat", "release", "status", "plan", "host_status"})


_HEADER = '''"""The handle's keyword call of every {family} op: its request, built from the keyword
arguments, handed to the one generic ``call`` (generated; do not edit)."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/{family}.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

{abc}from typing import Any

from supervisor.handle.declared.base import Calls
from supervisor.operations.requests import request
from supervisor.policy.control.permissions import Profile

__all__ = ["{name}"]
'''

_BASE = '''"""The base of the generated keyword calls: each hands its request to ``call``."""

from __future__ import annotations

from typing import Any

from supervisor.operations.requests import Request
from supervisor.policy.control.permissions import Profile

__all__ = ["Calls"]


class Calls:
    """Implemented by the handle (and the host lease calls): the one generic dispatch."""

    async def call(self, profile: Profile | None, request: Request) -> Any:
        raise NotImplementedError
'''

_INIT = '''"""The handle's keyword calls, generated from the operation declarations."""

from supervisor.handle.declared.control import ControlCalls
from supervisor.handle.declared.fleet import FleetCalls
from supervisor.handle.declared.hosts import HostCalls
from supervisor.handle.declared.links import LinkCalls
from supervisor.handle.declared.reap import ReapCalls

__all__ = ["ControlCalls", "FleetCalls", "HostCalls", "LinkCalls", "ReapCalls"]
'''


def _param(arg: Arg) -> str:
    # By wire shape, when given (optional ones add ``| None``).
    annotation = ANNOTATIONS[arg.shape]
    if arg.required:
        return f"{arg.name}: {annotation}"
    if arg.shape == spec.BOOL:
        return f"{arg.name}: bool = {arg.default!r}"
    if not annotation.endswith("| None"):
        annotation += " | None"
    return f"{arg.name}: {annotation} = None"


def _method(op: Operation) -> str:
    params = ["self", "profile: Profile | None"]
    for index, arg in enumerate(op.args):
        # A required first argument may be positional too (``plan_retirement(p, host)``).
        if index == (1 if op.args[0].required else 0):
            params.append("*")
        params.append(_param(arg))
    signature = "".join(f"        {p},\n" for p in params)
    # Every call spread one argument a line with a trailing comma: ruff format keeps it so.
    values = "".join(f"                {arg.name}={arg.name},\n" for arg in op.args)
    if values:
        build = f'request(\n                "{op.name}",\n{values}            )'
    else:
        build = f'request("{op.name}")'
    # Every op but a host one answers a mapping (a host plan is the plan, or an ack).
    answer = "Any" if op.name.startswith("host_") else "Mapping[str, Any]"
    return (
        f"\n    async def {op.call}(\n{signature}    ) -> {answer}:\n"
        f'        """``{op.name}``, as declared in ``supervisor.operations``."""\n'
        f"        answer: {answer} = await self.call(\n"
        f"            profile,\n            {build},\n        )\n        return answer\n"
    )


#: The operator's fleet ops the workers' library calls by name (its own: register,
#: heartbeat and release take a registration; plan takes a PlanQuery).
_CLIENT_OPS = ("status", "snapshot", "apply")
CLIENT = TARGET.parents[1] / "client" / "declared.py"

_CLIENT_HEADER = '''"""The workers' library's named call of the operator's fleet ops, by their
keyword arguments (generated; do not edit)."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/fleet.py;
# tests/unit/test_declared_current.py fails when this is not what it writes. The library
# sends the wire format and loads no server module.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["DeclaredCalls"]

_R = TypeVar("_R")


def _sent(values: Mapping[str, Any]) -> dict[str, Any]:
    """The frame's arguments: absent ones (None) left out, sequences as JSON lists."""
    return {
        name: [dict(v) if isinstance(v, Mapping) else v for v in value]
        if isinstance(value, list | tuple)
        else value
        for name, value in values.items()
        if value is not None
    }


class DeclaredCalls(Generic[_R]):
    """Mixed into the client's Calls: ``request`` sends one frame and returns its answer."""

    def request(
        self, op: str, args: Mapping[str, Any] | None = None, *, token: str | None = None
    ) -> _R:
        raise NotImplementedError
'''


def _client_value(arg: Arg) -> str:
    if arg.shape == spec.BOOL:
        # A switch is sent only when it differs from its default.
        return f"{arg.name} or None" if arg.default is False else f"None if {arg.name} else False"
    return arg.name


def _client_method(op: Operation) -> str:
    params = "".join(f"        {_param(arg)},\n" for arg in op.args)
    signature = f"        self,\n        *,\n{params}" if params else "        self,\n"
    values = "".join(f'                    "{a.name}": {_client_value(a)},\n' for a in op.args)
    sent = (
        f"_sent(\n                {{\n{values}                }}\n            )" if values else ""
    )
    call = f'"{op.name}",\n            {sent},\n' if sent else f'"{op.name}"'
    body = f"self.request(\n            {call}        )" if sent else f"self.request({call})"
    return (
        f"\n    def {op.name}(\n{signature}    ) -> _R:\n"
        f'        """``{op.name}``, as declared in ``supervisor.operations``."""\n'
        f"        return {body}\n"
    )


def render_client() -> str:
    """The text of ``supervisor/client/declared.py``."""
    ops = [op for op in FLEET_OPERATIONS if op.name in _CLIENT_OPS]
    return _CLIENT_HEADER + "".join(_client_method(op) for op in ops)


def render() -> dict[str, str]:
    """File name -> text of ``supervisor/handle/declared/``, for the declarations as they are."""
    files = {"__init__.py": _INIT, "base.py": _BASE}
    for family, (name, ops) in FAMILIES.items():
        methods = "".join(_method(op) for op in ops if op.name not in _HAND_WRITTEN)
        used = [kind for kind in ("Mapping", "Sequence") if f"{kind}[" in methods]
        abc = f"from collections.abc import {', '.join(used)}\n" if used else ""
        header = _HEADER.format(family=family, name=name, abc=abc)
        files[f"{family}.py"] = (
            f'{header}\n\nclass {name}(Calls):\n    """The {family} ops."""\n{methods}'
        )
    return files


#: Who answers each family's requests (the handle's routes; the workers' and status' own).
_ANSWERED_BY: Mapping[str, str] = {
    "register": "heartbeat",
    "heartbeat": "heartbeat",
    "release": "heartbeat",
    "status": "socket (+ liveness, lease_watch)",
    "snapshot": "retirement (+ census)",
    "plan": "retirement",
    "apply": "retirement, registry_writer",
    "reap_plan": "reap (+ census)",
    "reap_apply": "reap",
    "host_status": "host_lease",
    "host_plan": "host_lease",
    "host_apply": "host_lease, registry_writer",
}


def name_table() -> str:
    """The docs' table of each op's one name and where else it is spelled."""
    rows = [
        "| op (socket, request, audit action) | seed's name (MCP tool) | CLI | grant task |"
        " handle call (the seed's function) | answered by |",
        "|---|---|---|---|---|---|",
    ]
    for _, ops in FAMILIES.values():
        for op in ops:
            command = op.command
            cli = " ".join(w for w in (command.group, command.name) if w) if command else ""
            tasks = ", ".join(f"`{t}`" for t in op.tasks) or "(peer or any profile)"
            tool = f"`{op.tool_name}`" if op.tool_name else ""
            by = _ANSWERED_BY.get(op.name, "registry_writer (control op)")
            rows.append(
                f"| `{op.name}` | {tool} | {f'`{cli}`' if cli else ''} | {tasks} |"
                f" `{op.call}` | {by} |"
            )
    return "\n".join(rows)


def _doc(current: str) -> str:
    head, rest = current.split(_TABLE_START, 1)
    _, tail = rest.split(_TABLE_END, 1)
    return f"{head}{_TABLE_START}\n{name_table()}\n{_TABLE_END}{tail}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    files = render()
    if "--check" in args:
        stale: list[str] = []
        extra: list[str] = []
        doc = DOC.read_text(encoding="utf-8")
        if _doc(doc) != doc:
            stale.append(str(DOC))
        if not CLIENT.exists() or CLIENT.read_text(encoding="utf-8") != render_client():
            stale.append(str(CLIENT))
        for directory, made in ((TARGET, files), (REQUEST_DIR, render_requests())):
            for name, text in made.items():
                path = directory / name
                if not path.exists() or path.read_text(encoding="utf-8") != text:
                    stale.append(str(path))
            extra += sorted(str(p) for p in directory.glob("*.py") if p.name not in made)
        if stale or extra:
            names = ", ".join([*stale, *extra])
            sys.stderr.write(
                f"{TARGET} is not current ({names}): run python -m tools.gen_declared\n"
            )
            return 1
        return 0
    TARGET.mkdir(exist_ok=True)
    for name, text in files.items():
        (TARGET / name).write_text(text, encoding="utf-8")
    DOC.write_text(_doc(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    CLIENT.write_text(render_client(), encoding="utf-8")
    REQUEST_DIR.mkdir(exist_ok=True)
    for name, text in render_requests().items():
        (REQUEST_DIR / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
