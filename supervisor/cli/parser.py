"""The ``fleet-supervisor`` argument parser: hand-written commands plus the declared ones."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from supervisor.cli.common import EXIT_USAGE, TOKEN_HELP
from supervisor.cli.namespace_probe import add_probe_parser
from supervisor.cli.operations import COMMON_FLAGS, add_group_parser, add_operation_commands
from supervisor.cli.setup_args import add_doctor_parser, add_service_parser
from supervisor.cli.work import add_work_parser
from supervisor.client_configs.arguments import add_clients_parser
from supervisor.exec.exec_args import OPTIONS as EXEC_OPTIONS
from supervisor.version import package_version

__all__ = ["build_parser"]

_GLOBAL_FLAGS = ("--config", "--socket")
_DESCRIPTION = (
    "The ``fleet-supervisor`` command: run the daemon, inspect and retire, mint launch configs."
)


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; keep its messages on stderr."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


class _Version(argparse.Action):
    """``--version``, with the version looked up only when asked for (see package_version)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        sys.stdout.write(f"{parser.prog} {package_version()}\n")  # stdout, as argparse's own
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: global flags, then one subcommand per command."""
    parser = _Parser(prog="fleet-supervisor", description=_DESCRIPTION)
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    parser.add_argument("--config", type=Path, help="supervisor.toml (default: built-in defaults)")
    parser.add_argument("--socket", type=Path, help="override socket.path")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser("run", help="run the supervisor daemon")
    run.add_argument("--db", type=Path, help="override database.path")
    run.add_argument("--profiles", type=Path, help="override auth.profiles_path")

    # status, snapshot, plan, apply: declared in supervisor.operations.fleet.
    add_operation_commands(commands, "", common=COMMON_FLAGS)

    launch = commands.add_parser("launch-config", help="print the mcpServers map for one launch")
    launch.add_argument("--client", required=True, help="client type, e.g. codex, claude_code")
    launch.add_argument("--instance-id", help="reuse this trusted instance id (resume a launch)")
    launch.add_argument("--session-id", help="session id to write into every entry")
    launch.add_argument("--fleet-run-id", help="enrollment cohort to write into every entry")
    launch.add_argument(
        "--profile-prefix",
        default="prgs-",
        help="profile names are PREFIX + namespace (default: prgs-)",
    )
    launch.add_argument("--exec", dest="wrap", action="store_true", help="wrap each in `exec`")
    launch.add_argument("--server", help="print one generic entry {SERVER: ...} instead")
    launch.add_argument("server_command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")

    token = commands.add_parser("token", help="profile tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True, parser_class=_Parser)
    create = token_commands.add_parser("create", help="mint a token for PROFILE (shown once)")
    create.add_argument("profile", help="the profile the token proves, e.g. prgs-reconciler")
    create.add_argument("--profiles", type=Path, help="override auth.profiles_path")

    profiles = commands.add_parser("profiles", help="grant or revoke a profile's operations")
    profile_commands = profiles.add_subparsers(
        dest="profiles_command", required=True, parser_class=_Parser
    )
    for verb, what in (
        ("grant", "allow PROFILE to use OPERATION (and lift a forbid)"),
        ("revoke", "stop allowing PROFILE to use OPERATION"),
    ):
        change = profile_commands.add_parser(verb, help=what)
        change.add_argument("profile", help="the profile to change, e.g. prgs-reconciler")
        change.add_argument("operation", help="e.g. gitea.worker_registry.retire")
        change.add_argument("--profiles", type=Path, help="override auth.profiles_path")

    hosts = "host leases of a shared PostgreSQL registry"
    add_group_parser(commands, "hosts", hosts, parser_class=_Parser)

    migrate = commands.add_parser(
        "migrate", help="copy a SQLite registry, history included, into an empty PostgreSQL one"
    )
    migrate.add_argument("--from", dest="source", required=True, help="sqlite:PATH")
    migrate.add_argument("--to", dest="target", required=True, help="postgresql://... URL")
    migrate.add_argument("--json", action="store_true", help="machine-readable output")

    exec_cmd = commands.add_parser(
        "exec", help="register an MCP server with the daemon, then become it (same pid)"
    )
    # The wrapper's own option table: `fleet-supervisor exec` runs the wrapper without this
    # parser, `python -m supervisor.cli exec` through it; both describe the same options.
    for flag, metavar, what in EXEC_OPTIONS:
        if flag in _GLOBAL_FLAGS:
            continue  # --config and --socket are this parser's global flags
        if not metavar:
            exec_cmd.add_argument(flag, action="store_true", help=what)
        elif metavar == "SECONDS":
            exec_cmd.add_argument(flag, metavar=metavar, type=float, help=what)
        else:
            exec_cmd.add_argument(flag, metavar=metavar, help=what)
    # Written by `clients wrap` for `clients unwrap`; ignored when the server starts.
    exec_cmd.add_argument(
        "--as-written", action="append", metavar="INDEX=TEXT", help=argparse.SUPPRESS
    )
    exec_cmd.add_argument("child", nargs=argparse.REMAINDER, help="-- CMD ARGS...")

    mcp = commands.add_parser("mcp", help="serve the MCP tools over stdio via the running daemon")
    mcp.add_argument("--token", help=TOKEN_HELP)

    add_work_parser(commands, parser_class=_Parser)
    # reap plan, reap apply: declared in supervisor.operations.reap.
    add_group_parser(
        commands, "reap", "orphaned MCP server trees: plan, then apply", parser_class=_Parser
    )
    add_probe_parser(commands)
    add_clients_parser(commands)
    add_service_parser(commands, parser_class=_Parser)
    add_doctor_parser(commands)
    return parser
