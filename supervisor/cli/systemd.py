"""``fleet-supervisor service install|status|uninstall``: the daemon as a systemd unit."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from supervisor.cli.common import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from supervisor.cli.systemd_unit import (
    UNIT_NAME,
    WRITTEN_BY,
    UnitTarget,
    created_directories,
    daemon_command,
    render_unit,
    unit_target,
)
from supervisor.settings.config import Settings, default_config_path
from supervisor.system.atomic_file import replace_atomically

__all__ = ["run_service_command", "systemd_running"]


def systemd_running() -> bool:
    """Whether systemd is this machine's init (sd_booted: /run/systemd/system exists)."""
    return Path("/run/systemd/system").is_dir()


def _systemctl(target: UnitTarget, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [*target.systemctl, *args], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess([*target.systemctl, *args], 1, "", str(exc))


def _enable_line(target: UnitTarget) -> str:
    systemctl = " ".join(target.systemctl)
    return f"{systemctl} daemon-reload && {systemctl} enable --now {UNIT_NAME}"


def _config_in_use(args: argparse.Namespace) -> Path | None:
    if args.config is not None:
        return Path(args.config)
    return default_config_path() if default_config_path().is_file() else None


def _report(args: argparse.Namespace, result: dict[str, Any], lines: Sequence[str]) -> None:
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write("".join(f"{line}\n" for line in lines))


def _ours(text: str) -> bool:
    return text.startswith(WRITTEN_BY)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _missing_parents(directory: Path) -> list[Path]:
    """The directories ``mkdir -p directory`` would create, deepest first."""
    missing = []
    for path in (directory, *directory.parents):
        if path.exists():
            break
        missing.append(path)
    return missing


def _install(args: argparse.Namespace, settings: Settings, target: UnitTarget) -> int:
    command = daemon_command(settings, _config_in_use(args))
    existing = _read(target.path)
    if existing is not None and not _ours(existing):
        sys.stderr.write(
            f"service install: {target.path} exists and was not written by service install;"
            " move it away first (nothing was changed)\n"
        )
        return EXIT_REFUSED
    # A reinstall keeps the record of what the first install created.
    created = created_directories(existing) if existing else _missing_parents(target.directory)
    text = render_unit(target.scope, command, created)
    result: dict[str, Any] = {
        "scope": target.scope,
        "unit": str(target.path),
        "exec_start": command,
        "systemd": systemd_running(),
        "written": False,
        "enabled": False,
    }
    if args.dry_run:
        result["text"] = text
        _report(args, result, [f"# {target.path}", text.rstrip("\n")])
        return EXIT_OK
    target.directory.mkdir(parents=True, exist_ok=True)
    replace_atomically(target.path, text.encode("utf-8"), mode=0o644)
    result["written"] = True
    lines = [f"wrote {target.path}", f"  ExecStart: {' '.join(command)}"]
    if not result["systemd"]:
        lines.append("systemd is not running here, so the unit is written but not enabled;")
        lines.append(f"where systemd runs, enable it with: {_enable_line(target)}")
        result["enable_command"] = _enable_line(target)
        _report(args, result, lines)
        return EXIT_OK
    for step in (("daemon-reload",), ("enable", "--now", UNIT_NAME)):
        done = _systemctl(target, *step)
        if done.returncode != 0:
            result["error"] = f"{' '.join(done.args)}: {done.stderr.strip()}"
            lines.append(f"{' '.join(done.args)} failed: {done.stderr.strip()}")
            lines.append(f"the unit is written; enable it by hand with: {_enable_line(target)}")
            _report(args, result, lines)
            return EXIT_REFUSED
    result["enabled"] = True
    lines.append(f"enabled and started: {' '.join(target.systemctl)} status {UNIT_NAME}")
    _report(args, result, lines)
    return EXIT_OK


def _status(args: argparse.Namespace, settings: Settings, target: UnitTarget) -> int:
    existing = _read(target.path)
    result: dict[str, Any] = {
        "scope": target.scope,
        "unit": str(target.path),
        "installed": existing is not None and _ours(existing),
        "systemd": systemd_running(),
    }
    if existing is None:
        state = "not installed (fleet-supervisor service install writes it)"
    elif not _ours(existing):
        state = "a unit of that name exists but service install did not write it"
    else:
        wanted = daemon_command(settings, _config_in_use(args))
        result["current"] = (
            render_unit(target.scope, wanted, created_directories(existing)) == existing
        )
        state = "installed" + (
            "" if result["current"] else " (paths differ from this user's: install again)"
        )
    lines = [f"{target.path}: {state}"]
    running = False
    if result["systemd"] and result["installed"]:
        for query in ("is-enabled", "is-active"):
            answer = _systemctl(target, query, UNIT_NAME)
            result[query.replace("-", "_")] = answer.stdout.strip() or answer.stderr.strip()
            lines.append(f"  {query}: {result[query.replace('-', '_')]}")
        running = result["is_active"] == "active"
    elif result["installed"]:
        lines.append("  systemd is not running here: the unit is written, not started")
    _report(args, result, lines)
    return EXIT_OK if result["installed"] and (running or not result["systemd"]) else EXIT_REFUSED


def _uninstall(args: argparse.Namespace, target: UnitTarget) -> int:
    existing = _read(target.path)
    result: dict[str, Any] = {"scope": target.scope, "unit": str(target.path), "removed": False}
    if existing is None:
        _report(args, result, [f"{target.path}: not installed, nothing to remove"])
        return EXIT_OK
    if not _ours(existing):
        sys.stderr.write(
            f"service uninstall: {target.path} was not written by service install;"
            " nothing was changed\n"
        )
        return EXIT_REFUSED
    lines = []
    if systemd_running():
        done = _systemctl(target, "disable", "--now", UNIT_NAME)
        if done.returncode != 0:
            lines.append(f"{' '.join(done.args)}: {done.stderr.strip()}")
    target.path.unlink()
    result["removed"] = True
    lines.append(f"removed {target.path}")
    for directory in created_directories(existing):
        try:
            directory.rmdir()  # only when empty: anything else in it is not ours
        except OSError:
            break
        lines.append(f"removed {directory}")
    if systemd_running():
        _systemctl(target, "daemon-reload")
    _report(args, result, lines)
    return EXIT_OK


def run_service_command(args: argparse.Namespace, settings: Settings) -> int:
    scope = args.scope or "user"
    if scope == "system" and os.geteuid() != 0 and args.unit_dir is None:
        sys.stderr.write("service: --system writes /etc/systemd/system and needs root\n")
        return EXIT_USAGE
    target = unit_target(scope, os.environ, args.unit_dir)
    if args.service_command == "install":
        return _install(args, settings, target)
    if args.service_command == "status":
        return _status(args, settings, target)
    return _uninstall(args, target)
