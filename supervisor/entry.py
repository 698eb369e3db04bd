"""The ``fleet-supervisor`` console script: ``exec`` starts without loading the CLI."""

from __future__ import annotations

import sys

__all__ = ["is_exec", "main"]

_GLOBAL_VALUE_OPTIONS = ("--config", "--socket")


def is_exec(argv: list[str]) -> bool:
    """Whether the subcommand is ``exec`` (global ``--config``/``--socket`` may precede it)."""
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg in _GLOBAL_VALUE_OPTIONS:
            index += 2
        elif arg.partition("=")[0] in _GLOBAL_VALUE_OPTIONS:
            index += 1
        else:
            return arg == "exec"
    return False


def main() -> None:
    # Every wrapped MCP server starts through here, so importing the whole CLI (argparse,
    # anyio, the store, the MCP SDK) for it would add a tenth of a second to each start.
    argv = sys.argv[1:]
    if is_exec(argv):
        from supervisor.exec.exec_in_place import main as exec_main

        sys.exit(exec_main(argv))
    from supervisor.cli import main as cli_main

    sys.exit(cli_main())
