"""CLI subcommands built from the operation declarations, and the request each one makes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from supervisor.cli.common import TOKEN_HELP, token_of
from supervisor.errors import ProtocolError
from supervisor.operations.registry import OPERATIONS
from supervisor.operations.spec import INT_OR_NULL, Flag, Operation

__all__ = [
    "COMMON_FLAGS",
    "add_group_parser",
    "add_operation_commands",
    "ask_declared",
    "commands_of",
    "operation_request",
    "selected",
]

#: The flags every declared command takes: the caller's token and the output format.
COMMON_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--token", {"help": TOKEN_HELP}),
    ("--json", {"action": "store_true", "help": "machine-readable output"}),
)


def commands_of(group: str) -> dict[str, list[Operation]]:
    """Command name -> the ops it reaches (two when one command reads and writes), in order."""
    found: dict[str, list[Operation]] = {}
    for op in OPERATIONS.values():
        if op.command is not None and op.command.group == group:
            found.setdefault(op.command.name, []).append(op)
    return found


def _metavar(flag: Flag) -> str:
    return flag.metavar or flag.flag.lstrip("-").upper().replace("-", "_")


def _add_flag(
    parser: argparse.ArgumentParser,
    groups: dict[str, Any],
    dest: str,
    flag: Flag,
    *,
    required: bool,
    required_groups: Sequence[str],
) -> None:
    target: Any = parser
    if flag.group is not None:
        if flag.group not in groups:
            groups[flag.group] = parser.add_mutually_exclusive_group(
                required=flag.group in required_groups
            )
        target = groups[flag.group]
    if not flag.flag.startswith("-"):
        target.add_argument(dest, metavar=_metavar(flag), help=flag.help)
        return
    options: dict[str, Any] = {"dest": dest, "help": flag.help}
    if flag.kind in ("true", "false"):
        options["action"] = "store_true"
    else:
        options.update(metavar=_metavar(flag), type=flag.type, required=required or flag.required)
        if flag.default is not None:
            options["default"] = flag.default
    target.add_argument(flag.flag, **options)


def _described(op: Operation, name: str, flag: Flag) -> Flag:
    """``flag`` with a help line: its own, else the MCP tool's line for the same argument
    (one description per argument for both surfaces)."""
    if flag.help or op.tool is None:
        return flag
    doc = dict(op.tool.params).get(name)
    return flag if not doc else replace(flag, help=" ".join(doc.split()))


def _dest(op: Operation, flag: Flag) -> str:
    return flag.flag.lstrip("-").replace("-", "_") if flag in op.extra_flags else flag.flag


def add_operation_commands(
    subs: Any, group: str, *, common: Sequence[tuple[str, dict[str, Any]]]
) -> None:
    """Add one subparser per declared command of ``group`` to ``subs``, each with the
    ``common`` flags (token, json) and its ops' flags: a flag every op of the command
    takes is required where its argument is; the others are optional."""
    for name, ops in commands_of(group).items():
        assert ops[0].command is not None
        parser: argparse.ArgumentParser = subs.add_parser(name, help=ops[0].command.help)
        for flag_name, options in common:
            parser.add_argument(flag_name, **options)
        flags: dict[str, tuple[str, Flag, bool]] = {}
        for op in ops:
            for arg in op.args:
                if arg.cli is not None and arg.cli.flag not in flags:
                    everywhere = all(arg.name in {a.name for a in other.args} for other in ops)
                    flag = _described(op, arg.name, arg.cli)
                    flags[arg.cli.flag] = (arg.name, flag, arg.required and everywhere)
            for flag in op.extra_flags:
                flags.setdefault(flag.flag, (_dest(op, flag), flag, False))
        order = ops[0].command.order
        groups: dict[str, Any] = {}
        for spelled in sorted(flags, key=lambda f: order.index(f) if f in order else len(order)):
            dest, flag, required = flags[spelled]
            _add_flag(
                parser,
                groups,
                dest,
                flag,
                required=required,
                required_groups=ops[0].command.required_groups,
            )


def add_group_parser(
    commands: Any, group: str, help: str, *, parser_class: type[argparse.ArgumentParser]
) -> None:
    """Add ``<group>`` with one subcommand per declared command of the group; the chosen
    one is ``args.<group>_command``."""
    parser = commands.add_parser(group, help=help)
    subs = parser.add_subparsers(dest=f"{group}_command", required=True, parser_class=parser_class)
    add_operation_commands(subs, group, common=COMMON_FLAGS)


def _read_json(source: str, what: str) -> Any:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        return json.loads(text)
    except (OSError, ValueError) as exc:
        raise ProtocolError(f"cannot read {what} from {source}: {exc}") from None


def _value(flag: Flag, raw: Any) -> Any:
    """The wire value of one flag's parsed text (None when the flag was not given)."""
    if flag.kind == "true":
        return bool(raw)
    if flag.kind == "false":
        return not raw
    if raw is None:
        return None
    if flag.kind == "list":
        return [part.strip() for part in raw.split(",") if part.strip()]
    if flag.kind == "split":
        return [part for part in raw.split(",") if part]
    if flag.kind == "ints":
        try:
            return [int(part) for part in raw.split(",") if part.strip()]
        except ValueError:
            raise ProtocolError(
                f"{flag.flag} must be comma-separated PR numbers, got {raw!r}"
            ) from None
    if flag.kind == "json":
        return _read_json(raw, flag.what)
    if flag.kind == "json_object":
        value = _read_json(raw, flag.what)
        if not isinstance(value, dict):
            raise ProtocolError(f"{flag.what} in {raw} must be a JSON object")
        return value
    return raw


def _given(args: argparse.Namespace, op: Operation, flag_name: str) -> bool:
    for arg in op.args:
        if arg.cli is not None and arg.cli.flag == flag_name:
            return getattr(args, arg.name) is not None
    return any(bool(getattr(args, _dest(op, f))) for f in op.extra_flags if f.flag == flag_name)


def selected(group: str, command: str, args: argparse.Namespace) -> Operation:
    """The op a parsed ``<group> <command>`` reaches."""
    return _selected(commands_of(group)[command], args)


def _selected(ops: Sequence[Operation], args: argparse.Namespace) -> Operation:
    for op in ops:
        if op.when and any(_given(args, op, flag) for flag in op.when):
            return op
    return next(op for op in ops if not op.when)


def operation_request(
    group: str, command: str, args: argparse.Namespace
) -> tuple[str, dict[str, Any]]:
    """The socket op and its arguments for a parsed ``<group> <command>``."""
    op = _selected(commands_of(group)[command], args)
    request: dict[str, Any] = {}
    for arg in op.args:
        if arg.cli is None:
            continue
        # Read in declaration order, so the first unreadable file is the one refused.
        request[arg.name] = _value(arg.cli, getattr(args, arg.name))
        if arg.required and arg.shape != INT_OR_NULL and request[arg.name] is None:
            raise ProtocolError(f"{arg.cli.flag} is required with {op.when[0]}")
    return op.name, request


def ask_declared(
    group: str, command: str, args: argparse.Namespace, socket_path: Path
) -> Mapping[str, Any]:
    """The daemon's answer to the request a parsed ``<group> <command>`` makes."""
    from supervisor.client import Client

    op, request = operation_request(group, command, args)
    with Client(socket_path, token=token_of(args)) as client:
        return client.request(op, request)
