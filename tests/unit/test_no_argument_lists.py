"""No surface, handle or inbox spells an operation's argument list by hand: each op's
arguments are its declaration's (and the request type generated from it)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from supervisor.operations.registry import OPERATIONS

ROOT = Path(__file__).resolve().parents[2]

#: Where an op's arguments would be spelled again if a surface kept a list of its own: the
#: socket, both MCP surfaces, the page, the CLI, the workers' library, the handle and the
#: actors' inboxes. Generated files (``declared``) are the declarations' own.
_SCANNED = (
    "supervisor/surfaces",
    "supervisor/handle",
    "supervisor/cli",
    "supervisor/client",
)

#: An op with at least this many arguments, named this many times in one literal, is a list.
_AT_LEAST = 4

#: The places that spell arguments on purpose, and why.
_ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {
        # The workers' own ops keep their path: the heartbeat fast path reads a beat frame
        # without the generic parser, the handle's keyword calls are the workers' API, and
        # the workers' library writes the wire format (which the issue allows).
        ("supervisor/surfaces/socket/beats.py", "heartbeat"),
        ("supervisor/surfaces/socket/beats.py", "release"),
        ("supervisor/handle/facade.py", "heartbeat"),
        ("supervisor/handle/facade.py", "release"),
        ("supervisor/client/frames.py", "heartbeat"),
        ("supervisor/client/frames.py", "release"),
        # The probe collects the evidence it sends: its fields are what it measured.
        ("supervisor/cli/namespace_probe.py", "namespace_health_assess"),
    }
)


def _files() -> Iterator[Path]:
    for root in _SCANNED:
        for path in sorted((ROOT / root).rglob("*.py")):
            if "declared" not in path.parts and path.name != "declared.py":
                yield path
    yield from sorted((ROOT / "actors").rglob("inbox.py"))


def _names(node: ast.AST) -> set[str]:
    """The argument-like names one literal spells: dict keys, string items, keywords of a
    call, parameters of a function."""
    if isinstance(node, ast.Dict):
        keys = node.keys
        return {k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        items = node.elts
        return {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    if isinstance(node, ast.Call):
        return {k.arg for k in node.keywords if k.arg}
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return {a.arg for a in (*node.args.args, *node.args.kwonlyargs)}
    return set()


def argument_lists() -> list[tuple[str, int, str, list[str]]]:
    """(file, line, op, the op's arguments it names) for every literal that names at least
    ``_AT_LEAST`` arguments of one op."""
    ops = [(op.name, {a.name for a in op.args}) for op in OPERATIONS.values()]
    found = []
    for path in _files():
        where = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=where)):
            named = _names(node)
            for op, args in ops:
                common = named & args
                if len(args) >= _AT_LEAST and len(common) >= _AT_LEAST:
                    found.append((where, getattr(node, "lineno", 0), op, sorted(common)))
    return found


def test_no_surface_spells_an_operations_arguments() -> None:
    spelled = [hit for hit in argument_lists() if (hit[0], hit[2]) not in _ALLOWED]

    assert spelled == []


def test_the_scan_finds_a_hand_written_list() -> None:
    """The scan is not blind: a surface that spelled ``apply``'s arguments is found."""
    hand_written = ast.parse(
        "def values(a):\n"
        "    return {'candidate_fingerprint': a[0], 'worker_identities': a[1],\n"
        "            'registry_fingerprint': a[2], 'scope_fingerprint': a[3]}\n"
    )
    apply_args = {a.name for a in OPERATIONS["apply"].args}
    spelled = [n for n in ast.walk(hand_written) if len(_names(n) & apply_args) >= _AT_LEAST]

    assert len(spelled) == 1


def test_every_allowed_place_still_spells_its_op() -> None:
    """An allowance that no longer matches anything is removed, not kept."""
    found = {(where, op) for where, _, op, _ in argument_lists()}

    assert _ALLOWED - found == set()
