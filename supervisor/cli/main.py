"""``fleet-supervisor``: parse the command line, run the command, map failures to exit codes."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import cast

from supervisor.cli.common import (
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    settings_of,
)
from supervisor.cli.parser import build_parser
from supervisor.errors import ConfigError, SupervisorError, Unavailable
from supervisor.settings.config import Settings
from supervisor.wire import TOKEN_ENV

__all__ = ["main"]


#: The commands run as ``run(args, settings)``, by module and function: a command's module
#: is imported only when it runs, so the daemon (``run``) does not carry the other commands'
#: imports (formatting, client configs, launch configs) for its whole life.
_COMMANDS: Mapping[str, tuple[str, str]] = {
    **dict.fromkeys(
        ("status", "snapshot", "plan", "apply"), ("supervisor.cli.fleet", "run_fleet_command")
    ),
    "work": ("supervisor.cli.work", "run_work"),
    "launch-config": ("supervisor.cli.launch", "run_launch_config"),
    "token": ("supervisor.cli.daemon", "run_token"),
    "profiles": ("supervisor.cli.daemon", "run_profiles"),
    "hosts": ("supervisor.cli.hosts", "run_hosts"),
    "reap": ("supervisor.cli.reap", "run_reap"),
    "exec": ("supervisor.cli.daemon", "run_exec"),
    "mcp": ("supervisor.cli.daemon", "run_mcp"),
    "service": ("supervisor.cli.systemd", "run_service_command"),
    "doctor": ("supervisor.cli.doctor", "run_doctor"),
}


def _command(name: str) -> Callable[[argparse.Namespace, Settings], int] | None:
    if (where := _COMMANDS.get(name)) is None:
        return None
    module, function = where
    return cast(
        "Callable[[argparse.Namespace, Settings], int]",
        getattr(importlib.import_module(module), function),
    )


def _dispatch(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    if args.command == "run":
        from supervisor.cli.daemon import run_daemon

        return run_daemon(settings, reload=partial(settings_of, args))
    if (run := _command(args.command)) is not None:
        return run(args, settings)
    if args.command == "namespace-probe":
        from supervisor.cli.namespace_probe import run_probe_command

        return run_probe_command(args)
    if args.command == "clients":
        from supervisor.client_configs.command import run_clients_command

        return run_clients_command(args, args.config, settings.socket.path)
    if args.command == "migrate":
        from supervisor.cli.daemon import run_migrate

        return run_migrate(args)
    return EXIT_USAGE


def _settle_stderr() -> None:
    """Let the interpreter's last flush of a dead stderr pass, so the exit status stays ours.

    When the client that held our stderr pipe has gone, a log line that failed
    leaves its bytes in ``sys.stderr``'s buffer; Python flushes it again at exit,
    fails, and exits 120 instead of the status ``main`` returned (a daemon stopped
    cleanly by SIGTERM would read as failed). Pointing fd 2 at /dev/null lets that
    flush succeed, and nobody was left to read the bytes anyway.
    """
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.flush()
        return
    except ValueError:
        return  # closed: the interpreter skips a closed stderr at exit
    except OSError:
        pass
    try:
        if stream.fileno() != 2:
            return  # a stand-in object (tests); fd 2 is not ours to change
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):
        return
    try:
        os.dup2(devnull, 2)
    except OSError:
        pass  # then the exit status is the interpreter's; nothing better is left to try
    finally:
        os.close(devnull)


#: What a new operator needs after a refusal for want of a token (see docs/operations.md).
_TOKEN_HINT = (
    "fleet-supervisor: make a token once with `fleet-supervisor token create PROFILE`"
    f" (e.g. prgs-reconciler) and pass it with --token or ${TOKEN_ENV}\n"
)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except ConfigError as exc:
        sys.stderr.write(f"fleet-supervisor: configuration error: {exc.detail}\n")
        return EXIT_USAGE
    except Unavailable as exc:
        sys.stderr.write(f"fleet-supervisor: supervisor unreachable: {exc.detail}\n")
        return EXIT_UNREACHABLE
    except SupervisorError as exc:
        sys.stderr.write(f"fleet-supervisor: {exc.code}: {exc.detail}\n")
        if exc.code == "unauthenticated":
            sys.stderr.write(_TOKEN_HINT)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130
    finally:
        _settle_stderr()
