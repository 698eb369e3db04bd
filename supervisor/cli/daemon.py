"""The daemon and local commands: ``run``, ``exec``, ``mcp``, ``token create``, ``migrate``
and ``launch-config``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from supervisor.cli.common import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    emit,
    strip_dashdash,
    token_of,
)
from supervisor.errors import ConfigError, SupervisorError
from supervisor.settings.config import Settings
from supervisor.wire import TOKEN_ENV

__all__ = [
    "run_daemon",
    "run_exec",
    "run_mcp",
    "run_migrate",
    "run_profiles",
    "run_token",
]


def run_daemon(settings: Settings, reload: Callable[[], Settings] | None = None) -> int:
    """The daemon; a start-up failure is one line on stderr (a bad setting exits 2, else 1).
    ``reload`` reads the settings again on SIGHUP."""
    from supervisor.daemon.service import run_service

    try:
        return anyio.run(partial(run_service, settings, reload=reload))
    except ConfigError:
        raise
    except SupervisorError as exc:
        failure = exc
    except BaseExceptionGroup as group:
        # Start-up claims its resources outside any task group; this covers one that
        # fails inside one anyway, so it still reads as one line, not a traceback.
        failure = _only_supervisor_error(group)
    sys.stderr.write(f"fleet-supervisor: cannot start: {failure.code}: {failure.detail}\n")
    return EXIT_REFUSED


def _only_supervisor_error(group: BaseExceptionGroup[BaseException]) -> SupervisorError:
    """The first supervisor error in ``group``; the group itself if anything else is in it."""
    matched, rest = group.split(SupervisorError)
    if matched is None or rest is not None:
        raise group
    found: BaseException = matched
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    assert isinstance(found, SupervisorError)
    return found


def run_exec(args: argparse.Namespace, settings: Settings) -> int:
    from supervisor.exec.exec_in_place import main as exec_main

    child = strip_dashdash(args.child)
    if not child:
        sys.stderr.write("exec: give the command to run after --\n")
        return EXIT_USAGE
    return exec_main([*_exec_flags(args, settings), "--", *child])


def _exec_flags(args: argparse.Namespace, settings: Settings) -> list[str]:
    """The wrapper's own flags, for ``python -m supervisor.cli exec`` (the console script
    hands ``exec`` to the wrapper without loading this module)."""
    flags = ["--socket", str(settings.socket.path)]
    for name in ("client", "name", "namespace", "ttl", "timeout"):
        value = getattr(args, name)
        if value is not None:
            flags += [f"--{name}", str(value)]
    if args.no_parent_death_signal:
        flags.append("--no-parent-death-signal")
    return flags


def run_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from supervisor.surfaces.mcp.bridge import run_stdio_bridge

    token = token_of(args)
    if not token:
        sys.stderr.write(f"mcp: a profile token is required (--token or ${TOKEN_ENV})\n")
        return EXIT_USAGE
    return run_stdio_bridge(
        settings.socket.path, token, max_result_bytes=settings.mcp.max_result_bytes
    )


def _profiles_file(settings: Settings, command: str) -> Path:
    """The profiles file, started on first use from the shipped example (package data, so
    an installed wheel has it too): later grants and tokens are edits to the operator's
    own file, never to the installation."""
    from supervisor.defaults import PROFILES, read_default
    from supervisor.settings.profile_edits import ensure_profiles_file

    path = settings.auth.profiles_path
    if not path.exists() and ensure_profiles_file(path, read_default(PROFILES)):
        sys.stderr.write(f"{command}: created {path} from the shipped example profiles\n")
    return path


def run_profiles(args: argparse.Namespace, settings: Settings) -> int:
    from supervisor.settings.profile_edits import change_grant

    path = _profiles_file(settings, "profiles")
    grant = args.profiles_command == "grant"
    changed = change_grant(path, args.profile, args.operation, grant=grant)
    done = "granted" if grant else "revoked"
    state = f"{done} {args.operation!r} for {args.profile!r} in {path}"
    sys.stderr.write((state if changed else f"nothing to change: already {done}") + "\n")
    return EXIT_OK


def run_token(args: argparse.Namespace, settings: Settings) -> int:
    from supervisor.settings.profile_edits import create_token

    path = _profiles_file(settings, "token")
    token = create_token(path, args.profile)
    sys.stdout.write(token + "\n")
    sys.stderr.write(f"token for {args.profile!r} stored as a hash in {path}; it is shown once\n")
    return EXIT_OK


def run_migrate(args: argparse.Namespace) -> int:
    from supervisor.settings.config_checks import Invalid, postgres_url_check
    from supervisor.store.registry_copy import copy_sqlite_to_postgres, parse_sqlite_source

    try:
        url = postgres_url_check(args.target, Path.cwd())
    except Invalid as exc:
        sys.stderr.write(f"migrate: --to must be {exc.expected}\n")
        return EXIT_USAGE
    if url is None:
        sys.stderr.write("migrate: --to needs a postgresql:// URL\n")
        return EXIT_USAGE
    source = parse_sqlite_source(args.source)
    report = anyio.run(copy_sqlite_to_postgres, source, url)
    result = {
        "source": report.source,
        "target": report.target,
        "schema_version": report.schema_version,
        "registry_fingerprint": report.registry_fingerprint,
        "tables": {t.table: {"rows": t.rows, "fingerprint": t.fingerprint} for t in report.tables},
    }
    emit(result, args.json, _format_copy)
    return EXIT_OK


def _format_copy(result: Mapping[str, Any]) -> str:
    lines = [
        f"copied {result['source']} -> {result['target']} (schema v{result['schema_version']})"
    ]
    for table, facts in result["tables"].items():
        lines.append(f"  {table:<22} {facts['rows']:>8} rows  {facts['fingerprint']}")
    lines.append(f"registry fingerprint {result['registry_fingerprint']} (source = copy)")
    return "\n".join(lines)
