"""The ``clients`` subcommand's arguments (kept apart so building the CLI parser stays cheap)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from supervisor.client_configs.locations import CLIENTS

__all__ = ["add_clients_parser"]


def add_clients_parser(commands: Any) -> None:
    clients = commands.add_parser("clients", help="list, wrap and unwrap MCP clients' servers")
    sub = clients.add_subparsers(dest="clients_command", required=True, parser_class=type(clients))
    for name, text in (
        ("list", "every client config found, its servers and whether each is wrapped"),
        ("wrap", "rewrite stdio servers to run under `exec` (backup kept beside the file)"),
        ("unwrap", "give wrapped servers their own command back"),
    ):
        parser = sub.add_parser(name, help=text)
        parser.add_argument("--home", type=Path, help="the user's home (default: ~)")
        parser.add_argument("--project", type=Path, help="the project (default: the cwd)")
        parser.add_argument(
            "--file",
            action="append",
            default=[],
            metavar="CLIENT=PATH",
            help=f"read CLIENT's config from PATH instead ({', '.join(CLIENTS)}); repeatable",
        )
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "list":
            continue
        parser.add_argument("--client", choices=CLIENTS, help="only this client's files")
        parser.add_argument("--server", help="only entries with this name")
        parser.add_argument("--scope", choices=("user", "project"), help="only this scope")
        parser.add_argument("--dry-run", action="store_true", help="print a diff, write nothing")
        if name == "unwrap":
            parser.add_argument(
                "--from-backup", type=Path, help="restore this backup file over its original"
            )
