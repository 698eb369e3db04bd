"""``fleet-supervisor clients list|wrap|unwrap``: every MCP client's servers, run under ``exec``."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from supervisor.client_configs.documents import DocumentError
from supervisor.client_configs.entries import Wrapper
from supervisor.client_configs.files import (
    BACKUP_INFIX,
    ChangedSinceRead,
    Snapshot,
    read_snapshot,
    replace_file,
)
from supervisor.client_configs.launcher import absolute_path, exec_command
from supervisor.client_configs.locations import ConfigFile, config_files, parse_file_override
from supervisor.client_configs.rewrite import EntryResult, Selection, entry_results, rewrite_text

__all__ = ["FileReport", "plan_files", "run_clients_command", "write_plans"]

_OK, _REFUSED, _USAGE = 0, 1, 2
_BACKUP_NAME = re.compile(re.escape(BACKUP_INFIX) + r"\d{8}T\d{12}Z(?:-\d+)?\.bak$")


@dataclass(frozen=True, slots=True)
class FileReport:
    """One config file: what was read, the entries, and the new bytes when they differ."""

    file: ConfigFile
    error: str = ""
    entries: tuple[EntryResult, ...] = ()
    snapshot: Snapshot | None = None
    new: bytes | None = None
    backup: str = ""
    written: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "client": self.file.client,
            "scope": self.file.scope,
            "path": str(self.file.path),
            "format": self.file.fmt,
            "error": self.error or None,
            "changed": self.new is not None,
            "written": self.written,
            "backup": self.backup or None,
            "entries": [e.as_dict() for e in self.entries],
        }


def _files(args: argparse.Namespace) -> list[ConfigFile]:
    overrides = [parse_file_override(text) for text in args.file]
    home = (args.home or Path.home()).expanduser().absolute()
    project = (args.project or Path.cwd()).expanduser().absolute()
    found = config_files(home, project, overrides)
    chosen = getattr(args, "client", None)
    return [f for f in found if chosen is None or f.client == chosen]


def _read(file: ConfigFile) -> tuple[Snapshot | None, str, str]:
    """The snapshot and its text, or the error that says why the file cannot be used."""
    try:
        snapshot = read_snapshot(file.path)
    except OSError as exc:
        return None, "", f"cannot read: {exc.strerror or exc}"
    try:
        return snapshot, snapshot.data.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return snapshot, "", f"not UTF-8: {exc}"


def plan_files(
    files: Sequence[ConfigFile], mode: str, selection: Selection, wrapper: Wrapper | None
) -> list[FileReport]:
    """Read every file and work out its new bytes (``mode``: list, wrap or unwrap)."""
    return [_plan_file(file, mode, selection, wrapper) for file in files]


def _plan_file(
    file: ConfigFile, mode: str, selection: Selection, wrapper: Wrapper | None
) -> FileReport:
    snapshot, text, error = _read(file)
    if error:
        return FileReport(file, error, snapshot=snapshot)
    try:
        if mode == "list":
            return FileReport(file, "", tuple(entry_results(file, text)), snapshot)
        new, entries = rewrite_text(file, text, mode, selection, wrapper)
    except DocumentError as exc:
        return FileReport(file, f"malformed: {exc}", snapshot=snapshot)
    changed = new.encode("utf-8") if new != text else None
    return FileReport(file, "", tuple(entries), snapshot, changed)


def write_plans(
    reports: Sequence[FileReport], *, before_rename: Callable[[Path], None] | None = None
) -> tuple[list[FileReport], list[str]]:
    """Write every changed file: the reports as written, and the refusals."""
    done: list[FileReport] = []
    refused: list[str] = []
    for report in reports:
        if report.new is None or report.snapshot is None:
            done.append(report)
            continue
        try:
            saved = replace_file(report.snapshot, report.new, before_rename=before_rename)
        except ChangedSinceRead as exc:
            refused.append(str(exc))
            done.append(replace(report, error=str(exc)))
            continue
        except OSError as exc:
            refused.append(f"{report.file.path}: cannot write: {exc}")
            done.append(replace(report, error=f"cannot write: {exc}"))
            continue
        done.append(replace(report, written=True, backup=str(saved) if saved else ""))
    return done, refused


def _human(reports: Sequence[FileReport], mode: str) -> str:
    lines = []
    for report in reports:
        file = report.file
        lines.append(f"{file.client} ({file.scope}) {file.path}")
        if report.error:
            lines.append(f"  error: {report.error}")
        for entry in report.entries:
            state = "wrapped" if entry.wrapped else ("bare" if entry.wrappable else "not wrappable")
            done = f" -> {entry.action}" if entry.action and mode != "list" else ""
            where = f" [{entry.scope}]" if entry.scope.startswith("project:") else ""
            note = f" ({entry.note})" if entry.note else ""
            lines.append(f"  {entry.name}{where}: {entry.transport}, {state}{done}{note}")
        if report.written:
            lines.append(f"  written; backup {report.backup}")
    return "\n".join(lines) if lines else "no MCP client configuration found"


def _diff(report: FileReport) -> str:
    assert report.snapshot is not None
    assert report.new is not None
    old = report.snapshot.data.decode("utf-8").splitlines(keepends=True)
    new = report.new.decode("utf-8").splitlines(keepends=True)
    path = str(report.file.path)
    lines = difflib.unified_diff(old, new, fromfile=path, tofile=f"{path} (new)")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _wrapper(config: Path | None, socket_path: Path) -> Wrapper:
    carried = absolute_path(str(config.expanduser())) if config else None
    return Wrapper(tuple(exec_command()), os.path.abspath(socket_path), carried)


def _restore(args: argparse.Namespace) -> int:
    backup: Path = args.from_backup.expanduser().absolute()
    match = _BACKUP_NAME.search(backup.name)
    if match is None:
        sys.stderr.write(f"clients unwrap: {backup} is not a fleet-supervisor backup name\n")
        return _USAGE
    target = backup.with_name(backup.name[: match.start()])
    try:
        data = backup.read_bytes()
        snapshot = read_snapshot(target)
    except OSError as exc:
        sys.stderr.write(f"clients unwrap: cannot read {exc.filename}: {exc.strerror}\n")
        return _USAGE
    if args.dry_run:
        file = ConfigFile("backup", "user", target, "json")
        sys.stdout.write(_diff(FileReport(file, snapshot=snapshot, new=data)))
        return _OK
    try:
        saved = replace_file(snapshot, data)
    except ChangedSinceRead as exc:
        sys.stderr.write(f"clients unwrap: {exc}\n")
        return _REFUSED
    sys.stdout.write(f"restored {target} from {backup}; previous bytes kept in {saved}\n")
    return _OK


def run_clients_command(args: argparse.Namespace, config: Path | None, socket_path: Path) -> int:
    """list: exit 2 when a file is malformed; wrap/unwrap: any malformed file writes nothing."""
    mode = args.clients_command
    if mode == "unwrap" and args.from_backup is not None:
        return _restore(args)
    try:
        files = _files(args)
    except ValueError as exc:
        sys.stderr.write(f"clients {mode}: {exc}\n")
        return _USAGE
    selection = Selection() if mode == "list" else Selection(args.server, args.scope)
    wrapper = _wrapper(config, socket_path) if mode == "wrap" else None
    reports = plan_files(files, mode, selection, wrapper)
    malformed = [r for r in reports if r.error]
    if mode == "list" or malformed or args.dry_run:
        if mode != "list" and args.dry_run and not malformed and not args.json:
            sys.stdout.write("".join(_diff(r) for r in reports if r.new is not None))
        else:
            _emit(reports, args.json, mode)
        for report in malformed:
            sys.stderr.write(f"clients {mode}: {report.file.path}: {report.error}\n")
        if malformed and mode != "list":
            sys.stderr.write(f"clients {mode}: nothing was written\n")
        return _USAGE if malformed else _OK
    written, refused = write_plans(reports)
    _emit(written, args.json, mode)
    for line in refused:
        sys.stderr.write(f"clients {mode}: {line}\n")
    return _REFUSED if refused else _OK


def _emit(reports: Sequence[FileReport], as_json: bool, mode: str) -> None:
    if as_json:
        sys.stdout.write(json.dumps([r.as_dict() for r in reports], indent=2) + "\n")
    else:
        sys.stdout.write(_human(reports, mode) + "\n")
