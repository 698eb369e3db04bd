"""docs/wire-protocol.md's operations table is the operation registry, row for row."""

from __future__ import annotations

from pathlib import Path

from supervisor.operations.registry import OPERATIONS
from supervisor.operations.spec import Operation

DOC = Path(__file__).resolve().parents[2] / "docs" / "wire-protocol.md"
START, END = "<!-- ops-table:start -->", "<!-- ops-table:end -->"


def _row(op: Operation) -> str:
    arguments = ", ".join(f"`{a.name}`" for a in op.args) or "—"
    tool = f"`{op.tool.name}`" if op.tool else "—"
    command = "—"
    if op.command:
        command = "`" + " ".join(w for w in (op.command.group, op.command.name) if w) + "`"
    return f"| `{op.name}` | {arguments} | {tool} | {command} |"


def registry_table() -> str:
    rows = [_row(op) for op in OPERATIONS.values()]
    return "\n".join(["| op | arguments | MCP tool | CLI |", "|---|---|---|---|", *rows])


def documented_table(text: str) -> str:
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def test_the_documented_operations_are_the_registry() -> None:
    assert documented_table(DOC.read_text(encoding="utf-8")) == registry_table()


def test_a_missing_operation_is_noticed() -> None:
    text = DOC.read_text(encoding="utf-8")
    first = registry_table().splitlines()[2]
    assert documented_table(text.replace(first + "\n", "", 1)) != registry_table()
