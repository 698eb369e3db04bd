"""The exec wrapper's command line: its flags, where the daemon's exec socket is.

Read by the wrapper on every server start (so, like ``exec_in_place``, it imports only
``os`` and the marker's label rule), and by ``clients wrap``/``unwrap`` and the daemon,
which need the flag table and the socket name without the wrapper itself.
"""

from __future__ import annotations

import os

from supervisor.policy.identity.exec_marker import safe_label
from supervisor.policy.identity.worker_env import ENV_CLIENT, ENV_PROFILE, NAMESPACES

# Types only: importing typing would pull in re, milliseconds on every server start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "AS_WRITTEN",
    "EXEC_SOCKET_SUFFIX",
    "OPTIONS",
    "USAGE",
    "VALUE_FLAGS",
    "ExecOptions",
    "HelpRequested",
    "UsageError",
    "exec_socket_path",
    "help_text",
    "parse_args",
    "resolve_socket_path",
]

#: The exec socket sits beside the daemon's main socket: ``<socket path>.exec``.
EXEC_SOCKET_SUFFIX = ".exec"

#: ``--as-written INDEX=TEXT``: what ``clients wrap`` replaced in the server's command
#: (word INDEX after ``--`` was TEXT before it was made absolute), for ``clients unwrap``
#: to put back. Accepted, repeatable, and ignored at run time.
AS_WRITTEN = "--as-written"
#: The wrapper's flags that take a value (a value may be "--").
VALUE_FLAGS = (
    "--socket",
    "--config",
    "--client",
    "--name",
    "--namespace",
    "--ttl",
    "--timeout",
    AS_WRITTEN,
)
USAGE = (
    "usage: fleet-supervisor [--config FILE] [--socket PATH] exec [--client NAME] [--name NAME]\n"
    "                        [--namespace NS] [--ttl SECONDS] [--timeout SECONDS]\n"
    "                        [--no-parent-death-signal] -- CMD [ARGS...]\n"
)
#: The wrapper's options as ``--help`` describes them: (flag, metavar, what it does). The
#: CLI's ``exec`` subcommand is built from the same rows (supervisor/cli/parser.py).
OPTIONS = (
    (
        "--socket",
        "PATH",
        "the daemon's socket (default: [socket] path of the config, else the"
        " default path); the wrapper talks to PATH.exec beside it",
    ),
    (
        "--config",
        "FILE",
        "supervisor.toml to read [socket] path from (default:"
        " $XDG_CONFIG_HOME/fleet-supervisor/supervisor.toml when it exists)",
    ),
    (
        "--client",
        "NAME",
        "the MCP client family the server belongs to, e.g. claude_code"
        " (default: $GITEA_MCP_CLIENT, else read from the client's command line)",
    ),
    (
        "--name",
        "NAME",
        "the server's name in status and the audit (default: the namespace,"
        " else the command's file name)",
    ),
    (
        "--namespace",
        "NS",
        "the worker namespace the server serves (default: from"
        " $GITEA_MCP_PROFILE, e.g. prgs-author -> author)",
    ),
    ("--ttl", "SECONDS", "heartbeat TTL to register the server with (default: the daemon's)"),
    (
        "--timeout",
        "SECONDS",
        "how long to wait for the daemon's answer; the server starts anyway after it,"
        " and a daemon that starts later adopts it (default: 3)",
    ),
    (
        "--no-parent-death-signal",
        "",
        "do not ask the kernel to SIGTERM the server when its"
        " client dies (the daemon's guard still stops it)",
    ),
)


def _wrapped(text: str, indent: str, width: int = 88) -> str:
    # By hand: textwrap would load re on every server start (the module is imported then).
    lines, line = [], indent
    for word in text.split():
        if line.strip() and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = indent
        line += word if not line.strip() else " " + word
    return "\n".join([*lines, line]) + "\n"


def help_text() -> str:
    """``exec --help``: the usage, what the wrapper does, and every option."""
    about = (
        "Register an MCP server with the daemon, then become it: the server keeps this pid"
        " and its client as its parent, and the daemon stops its whole tree once the client"
        " exits or closes the server's stdin. Nothing of the wrapper stays running."
    )
    rows = [("-h, --help", "", "print this help and exit"), *OPTIONS]
    rows.append(("-- CMD [ARGS...]", "", "the server's own command line"))
    described = "".join(
        f"  {flag} {metavar}".rstrip() + "\n" + _wrapped(what, " " * 8)
        for flag, metavar, what in rows
    )
    return f"{USAGE}\n{_wrapped(about, '')}\noptions:\n{described}"


class UsageError(ValueError):
    """The wrapper's own arguments are wrong; nothing was started."""


class HelpRequested(UsageError):
    """``-h``/``--help`` among the wrapper's own flags (before the command)."""


class ExecOptions:
    """The wrapper's parsed command line."""

    __slots__ = (
        "client",
        "command",
        "config",
        "name",
        "namespace",
        "parent_death_signal",
        "socket",
        "timeout",
        "ttl",
    )

    def __init__(
        self,
        *,
        socket: str | None,
        config: str | None,
        client: str,
        name: str,
        namespace: str,
        ttl: float | None,
        timeout: float,
        parent_death_signal: bool,
        command: tuple[str, ...],
    ) -> None:
        self.socket = socket
        self.config = config
        self.client = client
        self.name = name
        self.namespace = namespace
        self.ttl = ttl
        self.timeout = timeout
        self.parent_death_signal = parent_death_signal
        self.command = command


def _number(flag: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag} needs a number, got {text!r}") from None
    if not 0 < value < 1e6:
        raise UsageError(f"{flag} must be a positive number of seconds, got {text!r}")
    return value


def parse_args(argv: Sequence[str], env: Mapping[str, str]) -> ExecOptions:
    """Flags before ``--`` (the word ``exec`` may precede them), the server command after."""
    values: dict[str, str] = {}
    death_signal = True
    items = list(argv)
    index = 0
    while index < len(items):
        arg = items[index]
        if arg == "--":
            index += 1
            break
        if arg == "exec" and "exec" not in values:
            values["exec"] = ""
        elif arg == "--no-parent-death-signal":
            death_signal = False
        elif arg in ("-h", "--help"):
            raise HelpRequested(arg)
        else:
            flag, eq, inline = arg.partition("=")
            if flag not in VALUE_FLAGS:
                if not arg.startswith("-"):
                    break  # the command, given without a "--"
                raise UsageError(f"unknown option {arg!r}")
            if not eq:
                index += 1
                if index >= len(items):
                    raise UsageError(f"{flag} needs a value")
                inline = items[index]
            values[flag] = inline
        index += 1
    command = tuple(items[index:])
    if not command:
        raise UsageError("give the server command after --")
    namespace = values.get("--namespace", "")
    profile = env.get(ENV_PROFILE, "")
    if not namespace and profile:
        # Launch configs name profiles "<prefix><namespace>", e.g. prgs-author.
        namespace = next((ns for ns in NAMESPACES if _names_namespace(profile, ns)), "")
    if namespace and namespace not in NAMESPACES:
        raise UsageError(f"--namespace must be one of {', '.join(NAMESPACES)}")
    name = values.get("--name") or namespace or os.path.basename(command[0])
    ttl = values.get("--ttl")
    return ExecOptions(
        socket=values.get("--socket"),
        config=values.get("--config"),
        client=safe_label(values.get("--client") or env.get(ENV_CLIENT, "")),
        name=safe_label(name),
        namespace=namespace,
        ttl=_number("--ttl", ttl) if ttl is not None else None,
        timeout=_number("--timeout", values.get("--timeout", "3")),
        parent_death_signal=death_signal,
        command=command,
    )


def _names_namespace(profile: str, namespace: str) -> bool:
    """``prgs-author`` names ``author``; ``prgs-coauthor`` does not."""
    return profile == namespace or (
        profile.endswith(namespace) and not profile[-len(namespace) - 1].isalnum()
    )


def _xdg(variable: str, env: Mapping[str, str], fallback: str) -> str:
    value = env.get(variable, "")
    return value if value and os.path.isabs(value) else fallback


def resolve_socket_path(options: ExecOptions, env: Mapping[str, str]) -> str:
    """Where the daemon listens, by the same rules as the rest of the CLI (config.py):
    ``--socket``, else ``[socket] path`` of the config file, else the default."""
    if options.socket:
        return os.path.abspath(os.path.expanduser(options.socket))
    # "~" too, as load_settings reads it: MCP clients pass args without a shell to expand it.
    config = os.path.expanduser(options.config) if options.config is not None else None
    if config is None:
        home = os.path.expanduser("~")
        default = os.path.join(
            _xdg("XDG_CONFIG_HOME", env, os.path.join(home, ".config")),
            "fleet-supervisor",
            "supervisor.toml",
        )
        config = default if os.path.isfile(default) else None
    if config is not None:
        import tomllib  # only when a file must be read: it costs more than the rest together

        try:
            with open(config, "rb") as handle:
                table = tomllib.load(handle).get("socket", {})
        except (OSError, ValueError) as exc:
            # ValueError: TOMLDecodeError, and UnicodeDecodeError for a file that is not UTF-8.
            raise UsageError(f"cannot read config {config}: {exc}") from None
        path = table.get("path") if isinstance(table, dict) else None
        if not isinstance(table, dict) or not isinstance(path, str | None):
            # What load_settings refuses, the wrapper must not silently replace by the default.
            raise UsageError(f"config {config}: [socket] path must be a path string")
        if path:
            # Relative paths in a file resolve against the file's directory (config.py).
            base = os.path.dirname(os.path.abspath(config))
            return os.path.abspath(os.path.join(base, os.path.expanduser(path)))
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "fleet-supervisor.sock")
    return f"/tmp/fleet-supervisor-{os.getuid()}.sock"


def exec_socket_path(socket_path: str) -> str:
    return socket_path + EXEC_SOCKET_SUFFIX
