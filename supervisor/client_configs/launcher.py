"""Builds the mcpServers map for one application launch: one trusted instance id, five workers."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from supervisor.errors import ConfigError
from supervisor.exec import exec_in_place
from supervisor.policy.identity.exec_marker import safe_label
from supervisor.policy.identity.instance import (
    UntrustedInstanceError,
    assess_instance_identity,
    mint_instance_id,
    namespace_worker_env,
    normalize_client_name,
)
from supervisor.policy.identity.worker_env import (
    ENV_INSTANCE,
    ENV_PROVENANCE,
    ENV_SESSION,
    NAMESPACES,
)

__all__ = [
    "absolute_path",
    "absolute_path_args",
    "build_launch_config",
    "build_server_entry",
    "exec_command",
    "resolve_server_command",
    "self_command",
]


_SCRIPT = "fleet-supervisor"

#: Launcher variables an exec-wrapped entry does not carry: the daemon derives them.
_RUN_TIME_KEYS = (ENV_INSTANCE, ENV_SESSION, ENV_PROVENANCE)

#: The word after ``-m`` is a Python module name. A package directory of the same
#: name beside the launch (``python -m my_server`` typed in the project root) is
#: the usual case, and turning it into a path would stop ``-m`` finding the module.
_MODULE_OPTION = "-m"


def resolve_server_command(
    command: str, *, cwd: str | None = None, search_path: str | None = None
) -> str:
    """``command`` as an MCP client will find it from whatever directory it starts in.

    A path (anything with a separator, e.g. ``.venv/bin/python``) becomes absolute
    against ``cwd``. A bare name found on PATH stays a bare name, so the client
    resolves it through its own PATH as a shell would; if the PATH entry that holds
    it is itself relative, the name is replaced by the absolute file. A bare name
    not on PATH is refused: the client could not start it either.
    """
    base = cwd if cwd is not None else os.getcwd()
    separators = (os.sep, os.altsep) if os.altsep else (os.sep,)
    if any(sep in command for sep in separators):
        return os.path.abspath(os.path.join(base, command))
    entries = (os.environ.get("PATH", os.defpath) if search_path is None else search_path).split(
        os.pathsep
    )
    for entry in entries:
        # An empty entry is the current directory, as in a shell.
        directory = os.path.join(base, entry or os.curdir)
        found = shutil.which(command, path=directory)
        if found is not None:
            return command if os.path.isabs(entry) else os.path.abspath(found)
    raise ConfigError(
        f"{command!r} is not on PATH; give the server command as a path (e.g. ./{command})"
    )


def absolute_path(path: str, *, cwd: str | None = None) -> str:
    """``path`` joined to ``cwd`` (default: the current directory), naming the same file.

    Symlinks are never resolved: a venv's ``bin/python`` must stay the venv's
    symlink, not become the base interpreter it points at. ``.`` parts and
    repeated separators are tidied away; ``..`` parts are kept, because dropping
    ``link/..`` as text names another directory when ``link`` is a symlink.
    """
    joined = os.path.join(cwd if cwd is not None else os.getcwd(), path)
    separators = f"{os.sep}{os.altsep or ''}"
    if os.pardir in re.split(f"[{re.escape(separators)}]", path):
        return joined
    normal = os.path.normpath(joined)
    # A trailing separator can mean "the directory" to the server (rsync-style); keep it.
    if path.endswith(tuple(separators)) and not normal.endswith(tuple(separators)):
        normal += os.sep
    return normal


def absolute_path_args(args: Sequence[str], *, cwd: str | None = None) -> list[str]:
    """The server's arguments as an MCP client started in another directory needs them.

    An argument that names an existing relative path (file or directory, against
    ``cwd``) becomes absolute (see :func:`absolute_path`), and so does the value of
    ``--name=value`` when the value does. Everything else is kept exactly: flags
    (a word starting with ``-`` is never taken for a path), the module after
    ``-m``, URLs, ports, words that name nothing on disk. Whether a word is a
    path is decided by what exists now, so a word that only happens to match a
    file here (``python srv.py stdio`` beside a file named ``stdio``) is converted.
    """
    base = cwd if cwd is not None else os.getcwd()
    converted: list[str] = []
    previous: str | None = None
    for arg in args:
        converted.append(arg if previous == _MODULE_OPTION else _absolute_arg(arg, base))
        previous = arg
    return converted


def _absolute_arg(arg: str, base: str) -> str:
    name, equals, value = arg.partition("=")
    if name.startswith("--") and len(name) > 2 and equals:
        path = _existing_relative(value, base)
        return arg if path is None else f"{name}={path}"
    path = _existing_relative(arg, base)
    return arg if path is None else path


def _existing_relative(value: str, base: str) -> str | None:
    """``value`` made absolute when it is an existing relative path; else None."""
    if not value or value.startswith("-") or os.path.isabs(value):
        return None
    # exists() is False (never raises) for NUL bytes, unencodable or over-long names.
    if not os.path.exists(os.path.join(base, value)):
        return None
    return absolute_path(value, cwd=base)


def self_command() -> list[str]:
    """An absolute argv prefix that runs this same ``fleet-supervisor`` installation.

    ``sys.argv[0]`` is the script exactly as the shell found it, which is relative
    when the user typed ``.venv/bin/fleet-supervisor``; a client started elsewhere
    could not run that, so every form here is absolute.
    """
    invoked = sys.argv[0] if sys.argv else ""
    if os.path.basename(invoked) == _SCRIPT and os.path.isfile(invoked):
        return [os.path.abspath(invoked)]
    interpreter = os.path.abspath(sys.executable)
    # Not os.path.realpath: a venv's python is a symlink whose target is outside the venv.
    beside = os.path.join(os.path.dirname(interpreter), _SCRIPT)
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return [beside]
    return [interpreter, "-m", "supervisor.cli"]


def exec_command() -> list[str]:
    """The fastest absolute argv prefix that runs this installation's ``exec`` wrapper.

    ``python -I -S <package>/exec/exec_in_place.py``: no site processing and no CLI
    import, about half the start-up of the console script, paid by every server a
    client starts. ``-I`` also keeps the client's PYTHONPATH and user site away from
    the wrapper (the server still gets the whole environment).
    """
    return [os.path.abspath(sys.executable), "-I", "-S", os.path.abspath(exec_in_place.__file__)]


def build_launch_config(
    *,
    client_type: str,
    command: str,
    args: Sequence[str] = (),
    instance_id: str | None = None,
    session_id: str | None = None,
    fleet_run_id: str | None = None,
    profile_prefix: str = "prgs-",
    exec_wrapper: Sequence[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Mint (or reuse a trusted) instance id and give all five namespaces the same one.

    ``exec_wrapper`` is the argv prefix of the ``exec`` wrapper (which registers a server
    and then becomes it); with it, unmodified servers join the fleet, and each entry
    carries no instance or session id: the daemon derives them at run time.
    """
    if instance_id is None:
        minted = mint_instance_id(
            client_type, now=now or datetime.now(UTC), nonce=secrets.token_hex(16)
        )
    else:
        assessed = assess_instance_identity(instance_id)
        if not assessed.trusted or assessed.client_instance_id is None:
            raise UntrustedInstanceError(assessed.reason)
        minted = assessed.client_instance_id
    session = session_id or f"launch-{secrets.token_hex(12)}"
    servers: dict[str, Any] = {}
    for namespace in NAMESPACES:
        env = namespace_worker_env(
            profile=f"{profile_prefix}{namespace}",
            client_type=client_type,
            client_instance_id=minted,
            # Ownership is per worker: a session shared by five processes would
            # tie a dead worker to its live siblings and make it unretirable
            # (and reads as a session collision). The launch stays visible as
            # the common prefix.
            session_id=f"{session}.{namespace}",
            fleet_run_id=fleet_run_id,
            extra_env=extra_env,
        )
        name = f"gitea-{namespace}"
        if exec_wrapper:
            # The wrapper derives instance and session ids from the client process that
            # starts it: ids baked into a static file would be shared by every launch.
            for key in _RUN_TIME_KEYS:
                env.pop(key, None)
            labels = ["--client", normalize_client_name(client_type), "--name", name]
            labels += ["--namespace", namespace]
            entry_command = exec_wrapper[0]
            entry_args = [*exec_wrapper[1:], *labels, "--", command, *args]
        else:
            entry_command, entry_args = command, list(args)
        servers[name] = {"command": entry_command, "args": entry_args, "env": env}
    if exec_wrapper:
        return {
            "mcpServers": servers,
            "client_instance_id": None,
            "client_type": normalize_client_name(client_type),
            "session_id": None,
            "identity": "minted at run time from the launching client process",
            "namespaces": list(NAMESPACES),
        }
    return {
        "mcpServers": servers,
        "client_instance_id": minted,
        "client_type": normalize_client_name(client_type),
        "session_id": session,
        "namespaces": list(NAMESPACES),
    }


def build_server_entry(
    name: str,
    *,
    client_type: str,
    command: str,
    args: Sequence[str] = (),
    exec_wrapper: Sequence[str] | None = None,
) -> dict[str, Any]:
    """``{name: {command, args}}``: one generic server entry, run under ``exec`` if given.

    Unlike :func:`build_launch_config` nothing is minted: a wrapped entry's identity is
    derived at run time from the client that starts it, and a bare one has none.
    """
    if not exec_wrapper:
        return {name: {"command": command, "args": list(args)}}
    label = safe_label(name) or "server"
    labels = ["--client", normalize_client_name(client_type), "--name", label]
    wrapped = [*exec_wrapper[1:], *labels, "--", command, *args]
    return {name: {"command": exec_wrapper[0], "args": wrapped}}
