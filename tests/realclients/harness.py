"""Real MCP clients and servers for leftover tests: where they are, configs, their processes."""

# Everything here is synchronous and bounded: every wait has a deadline, every process
# started is stopped by its pid, and a process is recognised as one of a test's servers
# by a marker in its environment (``FLEET_TEST_MARKER=<uuid4>``), set on every server
# entry and inherited by everything the server starts, so one scan of /proc/*/environ
# finds a server's whole tree (npx -> sh -> node, a wrapper and what it runs, a child a
# stubborn server forked). The clients' own processes never carry it.

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tests.offline import OFFLINE_HINT, offline, require_offline

__all__ = [
    "CLIENTS",
    "CLIENTS_DIR",
    "CLIENT_TYPES",
    "MARKER_ENV",
    "OBSERVER",
    "REPO",
    "SDK_CLIENT",
    "SERVERS",
    "SERVER_ENV",
    "STUBBORN_SERVER",
    "ClientHome",
    "ClientRun",
    "Proc",
    "ServerEntry",
    "client_argv",
    "client_env",
    "kill_all",
    "kill_pid",
    "leftovers",
    "missing",
    "new_marker",
    "process_kind",
    "run_client",
    "sdk_argv",
    "server_entry",
    "temp_home",
    "wrap_command",
    "wrapper_takes_client",
]

REPO = Path(__file__).resolve().parents[2]
#: Where tests/realclients/install.sh puts the pinned npm packages (gitignored).
CLIENTS_DIR = Path(os.environ.get("FLEET_REALCLIENTS_DIR") or REPO / ".clients")
_HERE = Path(__file__).resolve().parent
STUBBORN_SERVER = _HERE / "stubborn_server.py"
SDK_CLIENT = _HERE / "sdk_client.py"

MARKER_ENV = "FLEET_TEST_MARKER"
#: Names the server entry a marked process belongs to (one marker per scenario).
SERVER_ENV = "FLEET_TEST_SERVER"

#: The clients: ``claude``/``gemini`` list their servers (``mcp list``); ``inspector`` is
#: inspector-cli's ``--cli`` mode; ``sdk`` is ``sdk_client.py`` from this project's venv.
CLIENTS = ("claude", "codex", "gemini", "inspector", "sdk")
#: The servers: server-everything run directly (one node process) and through npx
#: (npm exec -> sh -> node), mcp-server-time (one Python process), and the stubborn
#: stub (a Python server ignoring EOF and SIGTERM, with a child doing the same).
SERVERS = ("everything", "everything-npx", "time", "stubborn")
#: Not in the test matrix: the stub made polite (exits on EOF or its first stop signal),
#: only to log how each client stops a well-behaved server.
OBSERVER = "observer"
#: Not in the test matrix either: the polite stub with a child in a session of its own,
#: which a client stopping the server's process group does not reach (a browser).
DETACHING = "detaching"
#: ``client_type`` each client registers as under the wrapper.
CLIENT_TYPES = {
    "claude": "claude_code",
    "codex": "codex",
    "gemini": "gemini",
    "inspector": "mcp_inspector",
    "sdk": "mcp_python_sdk",
}

#: Telemetry, update checks and notices off, for every client and every npm/npx.
QUIET_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "GEMINI_TELEMETRY_ENABLED": "false",
    "npm_config_update_notifier": "false",
    "npm_config_fund": "false",
    "npm_config_audit": "false",
    "npm_config_offline": "true",
    "NO_COLOR": "1",
    "TERM": "dumb",
}

_BIN = {
    "claude": "claude",
    "codex": "codex",
    "gemini": "gemini",
    "inspector": "mcp-inspector-cli",
    "everything": "mcp-server-everything",
}
_NPM_PACKAGE = "@modelcontextprotocol/server-everything"
#: One tool each server answers ``tools/call`` for, with its arguments.
_TOOLS: dict[str, tuple[str, dict[str, str]]] = {
    "everything": ("echo", {"message": "leftovers"}),
    "everything-npx": ("echo", {"message": "leftovers"}),
    "time": ("get_current_time", {"timezone": "UTC"}),
    "stubborn": ("stubborn_echo", {"text": "leftovers"}),
    "observer": ("stubborn_echo", {"text": "leftovers"}),
    "detaching": ("stubborn_echo", {"text": "leftovers"}),
}


def _node_bin(name: str) -> Path:
    return CLIENTS_DIR / "node_modules" / ".bin" / name


def _time_server() -> Path | None:
    """mcp-server-time: beside this interpreter, else in the clients' own venv."""
    for path in (
        Path(sys.executable).parent / "mcp-server-time",
        CLIENTS_DIR / "py" / "bin" / "mcp-server-time",
    ):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def _fleet_supervisor() -> Path:
    return Path(sys.executable).parent / "fleet-supervisor"


def missing(client: str, server: str) -> str | None:
    """Why this client or server cannot run here (None when both can)."""
    hint = "run tests/realclients/install.sh"
    if client in _BIN and not os.access(_node_bin(_BIN[client]), os.X_OK):
        return f"{client}: {_node_bin(_BIN[client])} is missing ({hint})"
    if client not in CLIENTS:
        return f"unknown client {client!r}"
    if client in _BIN and not offline():
        return f"{client} would not be offline here; {OFFLINE_HINT}"
    if server in ("everything", "everything-npx") and not os.access(
        _node_bin(_BIN["everything"]), os.X_OK
    ):
        return f"{server}: {_node_bin(_BIN['everything'])} is missing ({hint})"
    if server == "everything-npx" and shutil.which("npx") is None:
        return "everything-npx: npx is not on PATH"
    if server == "time" and _time_server() is None:
        return f"time: mcp-server-time is not installed beside {sys.executable} ({hint})"
    if server not in (*SERVERS, OBSERVER, DETACHING):
        return f"unknown server {server!r}"
    return None


def client_env(home: Path) -> dict[str, str]:
    """A client's whole environment: nothing of the real user's (no keys, no config)."""
    env = {
        "HOME": str(home),
        "USER": os.environ.get("USER", "root"),
        "LOGNAME": os.environ.get("LOGNAME", "root"),
        "SHELL": "/bin/sh",
        "LANG": "C.UTF-8",
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TMPDIR": str(home / "tmp"),
        **QUIET_ENV,
    }
    return env


# ---------------------------------------------------------------------------- servers


@dataclass(frozen=True, slots=True)
class ServerEntry:
    """One stdio server as a client's config names it."""

    name: str
    kind: str
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    tool: str
    tool_args: Mapping[str, str]

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]


def server_entry(
    kind: str, *, name: str, marker: str, home: Path, log: Path | None = None
) -> ServerEntry:
    """The server ``kind`` as an entry named ``name``, marked with ``marker``."""
    env = {MARKER_ENV: marker, SERVER_ENV: name}
    args: tuple[str, ...]
    if kind == "everything":
        command, args = str(_node_bin(_BIN["everything"])), ()
    elif kind == "everything-npx":
        # `npx -y PKG` as configs write it; --prefix and PATH make npx find the pinned
        # package under .clients (no network: npm_config_offline). Its tree is
        # `npm exec PKG` (node) -> `sh -c mcp-server-everything` -> node.
        command = shutil.which("npx") or "npx"
        args = ("--prefix", str(CLIENTS_DIR), "-y", _NPM_PACKAGE)
        env |= {
            "PATH": f"{_node_bin('')}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(home),
            "npm_config_cache": str(home / ".npm"),
            **{k: v for k, v in QUIET_ENV.items() if k.startswith("npm_config_")},
        }
    elif kind == "time":
        command, args = str(_time_server()), ("--local-timezone", "UTC")
    elif kind == "stubborn":
        command = sys.executable
        args = (str(STUBBORN_SERVER), "--child", *(("--log", str(log)) if log else ()))
    elif kind == "observer":
        command = sys.executable
        args = (str(STUBBORN_SERVER), "--polite", *(("--log", str(log)) if log else ()))
    elif kind == "detaching":
        # Polite, with a child in a session of its own (a browser, as Playwright's).
        command = sys.executable
        args = (str(STUBBORN_SERVER), "--polite", "--detached-child")
    else:
        raise ValueError(f"unknown server kind {kind!r}")
    tool, tool_args = _TOOLS[kind]
    return ServerEntry(name, kind, command, tuple(args), env, tool, tool_args)


@cache
def wrapper_takes_client() -> bool:
    """Whether this ``exec`` has ``--client``/``--name`` (the in-place wrapper) or not yet."""
    completed = subprocess.run(
        [str(_fleet_supervisor()), "exec", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return "--client" in completed.stdout + completed.stderr


def wrap_command(
    entry: ServerEntry, *, config: Path, client: str, labelled: bool = True
) -> ServerEntry:
    """The entry with its command run by ``fleet-supervisor --config CONFIG exec``.

    ``labelled=False``: the wrapper is told nothing of its client (no ``--client``, no
    ``GITEA_MCP_CLIENT``), as in a hand-written ``exec`` entry; it must find the family.
    """
    named = ["--client", CLIENT_TYPES[client], "--name", entry.name]
    label = {"GITEA_MCP_CLIENT": CLIENT_TYPES[client]} if labelled else {}
    return ServerEntry(
        entry.name,
        entry.kind,
        str(_fleet_supervisor()),
        (
            "--config",
            str(config),
            "exec",
            *(named if labelled and wrapper_takes_client() else ()),
            "--",
            *entry.argv,
        ),
        {**entry.env, **label},
        entry.tool,
        entry.tool_args,
    )


# ---------------------------------------------------------------------------- homes


@dataclass(frozen=True, slots=True)
class ClientHome:
    """A temporary HOME with a project directory the client runs in."""

    home: Path
    project: Path

    def write_claude(self, entries: Sequence[ServerEntry]) -> None:
        """User scope: ``~/.claude.json`` ``mcpServers`` (no project trust needed to list)."""
        servers = {
            e.name: {"type": "stdio", "command": e.command, "args": list(e.args), "env": e.env}
            for e in entries
        }
        document = {"mcpServers": servers, "hasCompletedOnboarding": True}
        (self.home / ".claude.json").write_text(json.dumps(document, indent=2))

    def write_gemini(self, entries: Sequence[ServerEntry]) -> None:
        """``~/.gemini/settings.json``, and the project trusted (else servers are disabled)."""
        gemini = self.home / ".gemini"
        gemini.mkdir(exist_ok=True)
        settings = {
            "mcpServers": {
                e.name: {"command": e.command, "args": list(e.args), "env": dict(e.env)}
                for e in entries
            },
            "telemetry": {"enabled": False},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }
        (gemini / "settings.json").write_text(json.dumps(settings, indent=2))
        trusted = {str(self.project): "TRUST_FOLDER"}
        (gemini / "trustedFolders.json").write_text(json.dumps(trusted, indent=2))

    def launcher(self, entry: ServerEntry) -> Path:
        """A script that execs the entry with its environment (no extra process).

        inspector-cli re-parses the server's arguments as its own options (``--config``
        among them) and passes its own environment on, so it gets one path with no
        arguments and the marker never reaches the inspector's processes.
        """
        script = self.home / f"server-{entry.name}.sh"
        assignments = [f"{k}={v}" for k, v in entry.env.items()]
        script.write_text("#!/bin/sh\nexec env " + shlex.join([*assignments, *entry.argv]) + "\n")
        script.chmod(0o755)
        return script


@contextmanager
def temp_home() -> Iterator[ClientHome]:
    """A fresh HOME under /tmp (short paths), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="fsv-rc-", dir="/tmp") as tmp:
        home = Path(tmp)
        project = home / "project"
        for directory in (project, home / "tmp", home / ".config", home / ".cache"):
            directory.mkdir(parents=True, exist_ok=True)
        # inspector-cli 1.0.3 picks its own package.json by testing "../package.json"
        # against the working directory, not its module: without one there it imports
        # node_modules/@modelcontextprotocol/package.json and fails.
        (home / "package.json").write_text('{"name": "fleet-test-home", "private": true}\n')
        yield ClientHome(home=home, project=project)


def client_argv(
    client: str, home: ClientHome, entries: Sequence[ServerEntry], method: str
) -> list[str]:
    """The command line of a client that exits by itself once it has talked to the servers.

    ``method`` is ``list`` (claude/gemini ``mcp list``, inspector ``tools/list``) or
    ``call`` (inspector ``tools/call`` of the entry's tool). Only offline: a real client
    must reach nothing but loopback.
    """
    require_offline(client)
    if client == "claude":
        home.write_claude(entries)
        return [str(_node_bin(_BIN["claude"])), "mcp", "list"]
    if client == "gemini":
        home.write_gemini(entries)
        return [str(_node_bin(_BIN["gemini"])), "mcp", "list"]
    if client == "inspector":
        (entry,) = entries
        argv = [str(_node_bin(_BIN["inspector"])), "--cli", str(home.launcher(entry))]
        if method == "call":
            pairs = [f"{k}={v}" for k, v in entry.tool_args.items()]
            call = ["--method", "tools/call", "--tool-name", entry.tool, "--tool-arg", *pairs]
            return [*argv, *call]
        return [*argv, "--method", "tools/list"]
    raise ValueError(f"{client} does not exit by itself")


def sdk_argv(mode: str, entry: ServerEntry, *, call: bool = False) -> list[str]:
    """``sdk_client.py MODE`` running ``entry`` (``hold``, ``close-stdin``, ``reconnect``,
    ``restart``); ``call``: the entry's tool call on the new copy (``reconnect``)."""
    pairs = [arg for k, v in entry.env.items() for arg in ("--env", f"{k}={v}")]
    if call:
        pairs += ["--call", f"{entry.tool}={json.dumps(dict(entry.tool_args))}"]
    return [sys.executable, str(SDK_CLIENT), *pairs, mode, "--", *entry.argv]


# ---------------------------------------------------------------------------- clients


@dataclass(frozen=True, slots=True)
class ClientRun:
    returncode: int | None
    output: str
    timed_out: bool
    seconds: float


def run_client(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout: float = 60.0
) -> ClientRun:
    """Run a client to its end; past ``timeout`` its process group is SIGKILLed.

    The group is the client's own (its id is the client's pid, still unreaped when the
    kill is sent, so the id cannot name anyone else's group): a client's helpers, such as
    gemini's relaunched node or inspector-cli's inner node, go with it.
    """
    started = time.monotonic()
    # A process group of its own, as a shell's job control gives it: a client that
    # signals its own group never reaches the test runner.
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        process_group=0,
    )
    timed_out = False
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            kill_pid(process.pid)
            process.wait(timeout=30)
    text = out.decode(errors="replace") if out else ""
    return ClientRun(process.returncode, text, timed_out, time.monotonic() - started)


def kill_pid(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------------------- processes


@dataclass(frozen=True, slots=True)
class Proc:
    """A live process carrying a marker."""

    pid: int
    ppid: int
    pgid: int
    cmdline: tuple[str, ...]
    server: str = ""
    start_time: int = field(default=0, compare=False)

    @property
    def kind(self) -> str:
        return process_kind(self.cmdline)

    def describe(self) -> str:
        return f"pid {self.pid} ppid {self.ppid} pgid {self.pgid}: {shlex.join(self.cmdline)}"


def process_kind(cmdline: Sequence[str]) -> str:
    """A short name for what a process is: ``npm exec``, ``sh``, ``node server-everything``."""
    if cmdline and os.path.basename(cmdline[0]) == "env":
        # `#!/usr/bin/env node` scripts (npx) show as env for a moment before the exec.
        rest = list(cmdline[1:])
        while rest and ("=" in rest[0] or rest[0].startswith("-")):
            rest.pop(0)
        return process_kind(rest)
    if not cmdline:
        return "?"
    first = cmdline[0]
    base = os.path.basename(first.split()[0]) if first else "?"
    if first.startswith("npm exec"):
        return "npx (npm exec)"
    words = [os.path.basename(c) for c in cmdline[1:]]
    if base in {"sh", "dash"}:
        return "sh"
    if base == "node" and any(w in ("npx", "npx-cli.js") for w in words[:1]):
        return "npx (npm exec)"
    if base == "npm" and words[:1] == ["exec"]:  # its process title, split into words
        return "npx (npm exec)"
    if base.startswith("node") or base == "node":
        script = next((w for w in words if not w.startswith("-")), "")
        return f"node {script}".strip()
    if base.startswith("python"):
        script = next((w for w in words if not w.startswith("-")), "")
        if "fleet-supervisor" in script or "supervisor.cli" in words:
            return "fleet-supervisor exec"
        if script == "stubborn_server.py" and "--sleeper" in cmdline:
            return "python stubborn_server.py (child)"
        return f"python {script}".strip()
    return base


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """State, ppid, pgid and start time from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode(errors="replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def _environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _cmdline(pid: int) -> tuple[str, ...]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return ()
    return tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def _marked(marker: str) -> Iterator[tuple[int, bytes]]:
    needle = f"{MARKER_ENV}={marker}".encode()
    own = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == own:
            continue
        environ = _environ(int(name))
        if needle in environ.split(b"\0"):
            yield int(name), environ


def leftovers(marker: str) -> list[Proc]:
    """Every live process (zombies left out: they never run again) carrying ``marker``."""
    found = []
    for pid, environ in _marked(marker):
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X", "x"):
            continue
        server = next(
            (
                item.split(b"=", 1)[1].decode(errors="replace")
                for item in environ.split(b"\0")
                if item.startswith(f"{SERVER_ENV}=".encode())
            ),
            "",
        )
        found.append(Proc(pid, stat[1], stat[2], _cmdline(pid), server, stat[3]))
    return sorted(found, key=lambda p: p.pid)


def kill_all(marker: str, *, deadline_seconds: float = 10.0) -> list[Proc]:
    """SIGKILL every process carrying ``marker``, by pid, until none is left; what was killed.

    A pidfd is opened first and the marker checked after, so a pid reused in between is
    never signalled. Bounded in time; processes still there at the end are returned in
    the AssertionError's message.
    """
    killed: list[Proc] = []
    deadline = time.monotonic() + deadline_seconds
    while procs := leftovers(marker):
        if time.monotonic() > deadline:
            raise AssertionError(
                "processes survived SIGKILL: " + "; ".join(p.describe() for p in procs)
            )
        for proc in procs:
            try:
                fd = os.pidfd_open(proc.pid)
            except OSError:
                continue
            try:
                if any(p.pid == proc.pid for p in leftovers_of([proc.pid], marker)):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    killed.append(proc)
            except OSError:
                pass
            finally:
                os.close(fd)
        time.sleep(0.02)
    return killed


def leftovers_of(pids: Sequence[int], marker: str) -> list[Proc]:
    """``leftovers`` restricted to ``pids`` (no full /proc scan)."""
    needle = f"{MARKER_ENV}={marker}".encode()
    found = []
    for pid in pids:
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X", "x"):
            continue
        if needle in _environ(pid).split(b"\0"):
            found.append(Proc(pid, stat[1], stat[2], _cmdline(pid), "", stat[3]))
    return found


def new_marker() -> str:
    return uuid.uuid4().hex
