"""``status``, ``snapshot``, ``plan`` and ``apply``: the declared fleet commands, with the
hooks their declarations name (watch mode, a progress line, the exit rule)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from supervisor.cli.common import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, emit, token_of
from supervisor.cli.format import format_apply, format_plan, format_snapshot, format_status
from supervisor.cli.operations import operation_request, selected
from supervisor.operations.spec import Command
from supervisor.settings.config import Settings

if TYPE_CHECKING:
    from supervisor.client import Client

__all__ = ["FLEET_COMMANDS", "run_fleet_command"]

#: op -> how its answer reads for a human (``--json`` prints it whole).
_FORMATS: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "status": format_status,
    "snapshot": format_snapshot,
    "plan": format_plan,
    "apply": format_apply,
}
FLEET_COMMANDS = frozenset(_FORMATS)


def run_fleet_command(args: argparse.Namespace, settings: Settings) -> int:
    """One declared top-level command: its request, its answer, its exit status."""
    from supervisor.client import Client

    op = selected("", args.command, args)
    command = op.command
    assert command is not None
    name, request = operation_request("", args.command, args)
    human = _FORMATS[name]
    with Client(settings.socket.path, token=token_of(args)) as client:
        if command.watch and args.watch:
            return _watch(client, name, args, human)
        if command.progress is not None:
            result = _with_progress(command.progress, lambda: client.request(name, request))
        else:
            result = client.request(name, request)
    emit(result, args.json, human)
    return EXIT_OK if _succeeded(command, result, request) else EXIT_REFUSED


def _succeeded(command: Command, result: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    if command.succeeded is not None:
        return command.succeeded(result, request)
    return bool(result.get("success"))


def _watch(
    client: Client, op: str, args: argparse.Namespace, human: Callable[[Mapping[str, Any]], str]
) -> int:
    """Redraw the answer every ``--interval`` seconds (a terminal is cleared first)."""
    if args.interval <= 0 or (args.count is not None and args.count < 1):
        sys.stderr.write(f"{op}: --interval must be > 0 and --count >= 1\n")
        return EXIT_USAGE
    clear = "\033[H\033[2J" if sys.stdout.isatty() else ""
    shown = 0
    try:
        while True:
            result = client.request(op, {})
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            text = json.dumps(result, default=str) if args.json else human(result)
            sys.stdout.write(f"{clear}{text}\n" if args.json else f"{clear}{stamp}\n{text}\n\n")
            sys.stdout.flush()
            shown += 1
            if args.count is not None and shown >= args.count:
                return EXIT_OK
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return EXIT_OK


def _with_progress(label: str, work: Callable[[], Mapping[str, Any]]) -> Mapping[str, Any]:
    """Run a blocking request while telling a human on a terminal that it is still going."""
    if not sys.stderr.isatty():
        return work()
    done = threading.Event()

    def ticker() -> None:
        started = time.monotonic()
        while not done.wait(1.0):
            sys.stderr.write(f"\r{label}... {time.monotonic() - started:.0f}s")
            sys.stderr.flush()

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    try:
        return work()
    finally:
        done.set()
        thread.join()
        sys.stderr.write("\r\033[K")
