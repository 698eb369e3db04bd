"""The ``fleet-supervisor`` command: run the daemon, inspect and retire, mint launch configs."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import anyio

from supervisor.cli_format import format_apply, format_plan, format_snapshot, format_status
from supervisor.cli_operations import add_operation_commands, operation_request
from supervisor.cli_work import add_work_parser, format_work, succeeded, work_request
from supervisor.clients.arguments import add_clients_parser
from supervisor.errors import ConfigError, SupervisorError, Unavailable
from supervisor.launcher import (
    absolute_path,
    absolute_path_args,
    build_launch_config,
    build_server_entry,
    exec_command,
    resolve_server_command,
)
from supervisor.namespace_probe import add_probe_parser
from supervisor.policy.identity.instance import UntrustedInstanceError
from supervisor.settings.config import Settings, default_config_path, load_settings
from supervisor.version import package_version
from supervisor.wire import DEFAULT_EXAMPLES, DEFAULT_PAGE, PlanQuery

if TYPE_CHECKING:
    from supervisor.client import Client

__all__ = ["EXIT_OK", "EXIT_REFUSED", "EXIT_UNREACHABLE", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

TOKEN_ENV = "FLEET_SUPERVISOR_TOKEN"


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; keep its messages on stderr."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fleet-supervisor", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("--config", type=Path, help="supervisor.toml (default: built-in defaults)")
    parser.add_argument("--socket", type=Path, help="override socket.path")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser("run", help="run the supervisor daemon")
    run.add_argument("--db", type=Path, help="override database.path")
    run.add_argument("--profiles", type=Path, help="override auth.profiles_path")

    for name, text in (
        ("status", "daemon, liveness and lease summary"),
        ("snapshot", "classified fleet snapshot"),
        ("plan", "dry-run retirement plan"),
        ("apply", "retire the rows a plan approved (compare-and-swap)"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--token", help=f"profile token (default: ${TOKEN_ENV})")
        sub.add_argument("--json", action="store_true", help="machine-readable output")
        if name in ("snapshot", "plan", "apply"):
            sub.add_argument("--canonical-repository")
        if name == "snapshot":
            sub.add_argument(
                "--history",
                action="store_true",
                help="also list released, superseded and retired rows (reads all history)",
            )
        if name == "plan":
            _plan_listing_arguments(sub)
        if name == "status":
            sub.add_argument("--watch", action="store_true", help="refresh until interrupted")
            sub.add_argument(
                "--interval", type=float, default=2.0, help="seconds between refreshes (2)"
            )
            sub.add_argument("--count", type=int, help="with --watch: stop after N refreshes")
        if name == "apply":
            tokens = sub.add_mutually_exclusive_group(required=True)
            tokens.add_argument("--registry-fingerprint", help="strict: whole-registry token")
            tokens.add_argument("--scope-fingerprint", help="scoped: decision-scope token")
            sub.add_argument("--candidate-fingerprint", required=True)
            sub.add_argument("--workers", required=True, help="comma-separated identities")

    launch = commands.add_parser("launch-config", help="print the mcpServers map for one launch")
    launch.add_argument("--client", required=True, help="client type, e.g. codex, claude_code")
    launch.add_argument("--instance-id", help="reuse this trusted instance id (resume a launch)")
    launch.add_argument("--session-id")
    launch.add_argument("--fleet-run-id")
    launch.add_argument("--profile-prefix", default="prgs-")
    launch.add_argument("--exec", dest="wrap", action="store_true", help="wrap each in `exec`")
    launch.add_argument("--server", help="print one generic entry {SERVER: ...} instead")
    launch.add_argument("server_command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")

    common = (
        ("--token", {"help": f"profile token (default: ${TOKEN_ENV})"}),
        ("--json", {"action": "store_true", "help": "machine-readable output"}),
    )
    token = commands.add_parser("token", help="profile tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True, parser_class=_Parser)
    create = token_commands.add_parser("create", help="mint a token for PROFILE (shown once)")
    create.add_argument("profile")
    create.add_argument("--profiles", type=Path, help="override auth.profiles_path")

    hosts = commands.add_parser("hosts", help="host leases of a shared PostgreSQL registry")
    hosts_commands = hosts.add_subparsers(dest="hosts_command", required=True, parser_class=_Parser)
    add_operation_commands(hosts_commands, "hosts", common=common)

    migrate = commands.add_parser(
        "migrate", help="copy a SQLite registry, history included, into an empty PostgreSQL one"
    )
    migrate.add_argument("--from", dest="source", required=True, help="sqlite:PATH")
    migrate.add_argument("--to", dest="target", required=True, help="postgresql://... URL")
    migrate.add_argument("--json", action="store_true", help="machine-readable output")

    exec_cmd = commands.add_parser(
        "exec", help="register an MCP server with the daemon, then become it (same pid)"
    )
    exec_cmd.add_argument("--client", help="client family label (default: detected)")
    exec_cmd.add_argument("--name", help="server name (default: the command's name)")
    exec_cmd.add_argument("--namespace", help="default: derived from $GITEA_MCP_PROFILE")
    exec_cmd.add_argument("--ttl", type=float, help="heartbeat TTL seconds to request")
    exec_cmd.add_argument(
        "--timeout", type=float, help="seconds to wait for the daemon's answer (3)"
    )
    exec_cmd.add_argument(
        "--no-parent-death-signal",
        action="store_true",
        help="do not ask the kernel to SIGTERM the server when its client dies",
    )
    # Written by `clients wrap` for `clients unwrap`; ignored when the server starts.
    exec_cmd.add_argument(
        "--as-written", action="append", metavar="INDEX=TEXT", help=argparse.SUPPRESS
    )
    exec_cmd.add_argument("child", nargs=argparse.REMAINDER, help="-- CMD ARGS...")

    mcp = commands.add_parser("mcp", help="serve the MCP tools over stdio via the running daemon")
    mcp.add_argument("--token", help=f"profile token (default: ${TOKEN_ENV})")

    add_work_parser(
        commands, parser_class=_Parser, token_help=f"profile token (default: ${TOKEN_ENV})"
    )
    add_probe_parser(commands)
    add_clients_parser(commands)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    if args.socket:
        overrides["socket.path"] = str(args.socket)
    if getattr(args, "db", None):
        overrides["database.path"] = str(args.db)
    if getattr(args, "profiles", None):
        overrides["auth.profiles_path"] = str(args.profiles)
    config = args.config
    if config is None and default_config_path().is_file():
        config = default_config_path()
    return load_settings(config, overrides=overrides)


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


def _strip_dashdash(argv: Sequence[str]) -> list[str]:
    items = list(argv)
    return items[1:] if items and items[0] == "--" else items


def _emit(
    result: Mapping[str, Any], as_json: bool, human: Callable[[Mapping[str, Any]], str]
) -> None:
    sys.stdout.write(
        (json.dumps(result, indent=2, default=str) if as_json else human(result)) + "\n"
    )


def _token(args: argparse.Namespace) -> str | None:
    return args.token or os.environ.get(TOKEN_ENV) or None


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


def _plan_listing_arguments(sub: argparse.ArgumentParser) -> None:
    # By default a plan lists candidates in full and preserved rows only as counts
    # per reason with a few examples; these ask for full preserved entries.
    sub.add_argument("--full", action="store_true", help="every preserved entry (large)")
    sub.add_argument("--reason", help="list preserved entries with this reason code")
    sub.add_argument("--namespace", help="list preserved entries of this namespace")
    sub.add_argument("--instance", help="list preserved entries of this client_instance_id")
    sub.add_argument("--limit", type=int, help=f"entries per page (default {DEFAULT_PAGE})")
    sub.add_argument("--cursor", help="continue after this cursor (a page's next_cursor)")
    sub.add_argument("--examples", type=int, help="examples per reason code (default 3)")


def _plan_query(args: argparse.Namespace) -> PlanQuery:
    return PlanQuery(
        full=bool(args.full),
        reason=args.reason,
        namespace=args.namespace,
        instance=args.instance,
        limit=DEFAULT_PAGE if args.limit is None else args.limit,
        cursor=args.cursor,
        examples=DEFAULT_EXAMPLES if args.examples is None else args.examples,
    )


def _operator(args: argparse.Namespace, settings: Settings) -> int:
    from supervisor.client import Client

    with Client(settings.socket.path, token=_token(args)) as client:
        if args.command == "status":
            if args.watch:
                return _watch_status(client, args)
            result = client.status()
            _emit(result, args.json, format_status)
            return EXIT_OK if result.get("success", True) else EXIT_REFUSED
        if args.command == "snapshot":
            result = client.snapshot(
                canonical_repository=args.canonical_repository,
                include_history=args.history,
            )
            _emit(result, args.json, format_snapshot)
            ok = result.get("success", True) and result.get("live_fleet_safe", False)
            return EXIT_OK if ok else EXIT_REFUSED
        if args.command == "plan":
            result = client.plan(
                canonical_repository=args.canonical_repository, query=_plan_query(args)
            )
            _emit(result, args.json, format_plan)
            return EXIT_OK if result.get("success") else EXIT_REFUSED
        workers = [w.strip() for w in args.workers.split(",") if w.strip()]
        result = _with_progress(
            "applying",
            lambda: client.apply(
                registry_fingerprint=args.registry_fingerprint,
                scope_fingerprint=args.scope_fingerprint,
                candidate_fingerprint=args.candidate_fingerprint,
                worker_identities=workers,
                canonical_repository=args.canonical_repository,
            ),
        )
        _emit(result, args.json, format_apply)
        complete = result.get("outcome") == "applied" and result.get("retired_count") == len(
            workers
        )
        return EXIT_OK if complete else EXIT_REFUSED


def _watch_status(client: Client, args: argparse.Namespace) -> int:
    """Redraw the status every ``--interval`` seconds (a terminal is cleared first)."""
    if args.interval <= 0 or (args.count is not None and args.count < 1):
        sys.stderr.write("status: --interval must be > 0 and --count >= 1\n")
        return EXIT_USAGE
    clear = "\033[H\033[2J" if sys.stdout.isatty() else ""
    shown = 0
    try:
        while True:
            result = client.status()
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            text = json.dumps(result, default=str) if args.json else format_status(result)
            sys.stdout.write(f"{clear}{text}\n" if args.json else f"{clear}{stamp}\n{text}\n\n")
            sys.stdout.flush()
            shown += 1
            if args.count is not None and shown >= args.count:
                return EXIT_OK
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return EXIT_OK


def _work(args: argparse.Namespace, settings: Settings) -> int:
    from supervisor.client import Client

    op, request = work_request(args)
    with Client(settings.socket.path, token=_token(args)) as client:
        result = client.request(op, request)
    _emit(result, args.json, format_work)
    return EXIT_OK if succeeded(args.work_command, result) else EXIT_REFUSED


def _launch_config(args: argparse.Namespace, settings: Settings) -> int:
    command = _strip_dashdash(args.server_command)
    if not command:
        sys.stderr.write("launch-config: give the server command after --\n")
        return EXIT_USAGE
    try:
        server = resolve_server_command(command[0])
    except ConfigError as exc:
        sys.stderr.write(f"launch-config: {exc.detail}\n")
        return EXIT_USAGE
    wrapper = None
    if args.wrap:
        # The wrapper runs wherever the client starts it: the config file this run
        # read (so its [exec] settings apply there too) and the socket go in as
        # absolute paths. Without --config the wrapper repeats the default search.
        carried = ["--config", absolute_path(str(args.config.expanduser()))] if args.config else []
        socket_path = os.path.abspath(settings.socket.path)
        wrapper = [*exec_command(), *carried, "--socket", socket_path]
    if args.server is not None:
        entry = build_server_entry(
            args.server,
            client_type=args.client,
            command=server,
            args=absolute_path_args(command[1:]),
            exec_wrapper=wrapper,
        )
        sys.stdout.write(json.dumps(entry, indent=2) + "\n")
        return EXIT_OK
    try:
        config = build_launch_config(
            client_type=args.client,
            command=server,
            args=absolute_path_args(command[1:]),
            instance_id=args.instance_id,
            session_id=args.session_id,
            fleet_run_id=args.fleet_run_id,
            profile_prefix=args.profile_prefix,
            exec_wrapper=wrapper,
        )
    except UntrustedInstanceError as exc:
        sys.stderr.write(f"launch-config: refusing untrusted instance id: {exc}\n")
        return EXIT_USAGE
    sys.stdout.write(json.dumps(config, indent=2) + "\n")
    return EXIT_OK


def _token_create(args: argparse.Namespace, settings: Settings) -> int:
    from supervisor.defaults import PROFILES, read_default
    from supervisor.settings.profiles import create_token, ensure_profiles_file

    path = settings.auth.profiles_path
    # First use: start the operator's own profiles file from the shipped example
    # (package data, so an installed wheel has it too); later grants are edits to
    # their file, never to the installation.
    if not path.exists() and ensure_profiles_file(path, read_default(PROFILES)):
        sys.stderr.write(f"token: created {path} from the shipped example profiles\n")
    token = create_token(path, args.profile)
    sys.stdout.write(token + "\n")
    sys.stderr.write(f"token for {args.profile!r} stored as a hash in {path}; it is shown once\n")
    return EXIT_OK


def _run(settings: Settings) -> int:
    """The daemon; a start-up failure is one line on stderr (a bad setting exits 2, else 1)."""
    from supervisor.daemon.service import run_service

    try:
        return anyio.run(run_service, settings)
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


def _hosts(args: argparse.Namespace, settings: Settings) -> int:
    from supervisor.client import Client

    op, request = operation_request("hosts", args.hosts_command, args)
    with Client(settings.socket.path, token=_token(args)) as client:
        result = client.request(op, request)
    _emit(result, args.json, _format_hosts)
    return EXIT_OK if result.get("success") is True else EXIT_REFUSED


def _format_hosts(result: Mapping[str, Any]) -> str:
    if "host_token" in result:
        head = f"host {result['host_id']}: " + (
            f"refused: {result['refused']} ({result['detail']})"
            if result.get("refused")
            else f"{result['candidate_count']} candidate(s)"
        )
        lines = [head]
        lines += [
            f"  retire   {e['worker_identity']}  {e['reason_code']}" for e in result["candidates"]
        ]
        lines += [
            f"  keep     {e['worker_identity']}  {e['reason_code']}" for e in result["preserved"]
        ]
        lines.append(f"host_token {result['host_token']}")
        lines.append(f"candidate_fingerprint {result['candidate_fingerprint']}")
        return "\n".join(lines)
    return "\n".join(f"{key}: {value}" for key, value in sorted(result.items()))


def _migrate(args: argparse.Namespace) -> int:
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
    _emit(result, args.json, _format_copy)
    return EXIT_OK


def _format_copy(result: Mapping[str, Any]) -> str:
    lines = [
        f"copied {result['source']} -> {result['target']} (schema v{result['schema_version']})"
    ]
    for table, facts in result["tables"].items():
        lines.append(f"  {table:<22} {facts['rows']:>8} rows  {facts['fingerprint']}")
    lines.append(f"registry fingerprint {result['registry_fingerprint']} (source = copy)")
    return "\n".join(lines)


def _dispatch(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.command == "run":
        return _run(settings)
    if args.command in ("status", "snapshot", "plan", "apply"):
        return _operator(args, settings)
    if args.command == "work":
        return _work(args, settings)
    if args.command == "launch-config":
        return _launch_config(args, settings)
    if args.command == "namespace-probe":
        from supervisor.namespace_probe import run_probe_command

        return run_probe_command(args)
    if args.command == "token":
        return _token_create(args, settings)
    if args.command == "clients":
        from supervisor.clients.command import run_clients_command

        return run_clients_command(args, args.config, settings.socket.path)
    if args.command == "migrate":
        return _migrate(args)
    if args.command == "hosts":
        return _hosts(args, settings)
    if args.command == "exec":
        from supervisor.sidecar.exec_in_place import main as exec_main

        child = _strip_dashdash(args.child)
        if not child:
            sys.stderr.write("exec: give the command to run after --\n")
            return EXIT_USAGE
        return exec_main([*_exec_flags(args, settings), "--", *child])
    if args.command == "mcp":
        from supervisor.surfaces.mcp_bridge import run_stdio_bridge

        token = _token(args)
        if not token:
            sys.stderr.write(f"mcp: a profile token is required (--token or ${TOKEN_ENV})\n")
            return EXIT_USAGE
        return run_stdio_bridge(
            settings.socket.path, token, max_result_bytes=settings.mcp.max_result_bytes
        )
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130
    finally:
        _settle_stderr()


if __name__ == "__main__":
    sys.exit(main())
