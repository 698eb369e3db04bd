"""Wrap or unwrap the server entries of one config file's text, checked by reading it back."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from supervisor.client_configs.documents import DocumentError, EntryView, read_entries
from supervisor.client_configs.entries import (
    ABSENT_MARK,
    WRAPPER_SCRIPT,
    Edit,
    Wrapper,
    apply_edits,
    as_written,
    dash_index,
    is_wrapped,
    transport_of,
    unwrap_edits,
    unwrapped_command,
    wrap_edits,
    wrapper_words,
)
from supervisor.client_configs.locations import FAMILY, ConfigFile
from supervisor.client_configs.paths import plan_paths

__all__ = ["EntryResult", "Selection", "entry_results", "rewrite_text"]


@dataclass(frozen=True, slots=True)
class Selection:
    """Which entries a wrap or unwrap touches (None: all)."""

    server: str | None = None
    scope: str | None = None  # user | project


@dataclass(frozen=True, slots=True)
class EntryResult:
    """One entry as listed, or what a wrap/unwrap did to it."""

    scope: str
    name: str
    transport: str
    wrapped: bool
    wrappable: bool
    action: str = ""  # wrapped | unwrapped | unchanged | skipped (with note)
    note: str = ""
    command: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "name": self.name,
            "transport": self.transport,
            "wrapped": self.wrapped,
            "wrappable": self.wrappable,
            "action": self.action,
            "note": self.note,
            "command": list(self.command),
        }


def _scope(file: ConfigFile, view: EntryView) -> str:
    return file.scope if view.scope == "user" else view.scope


def _describe(file: ConfigFile, view: EntryView) -> EntryResult:
    fields = view.fields
    transport = transport_of(fields, file.client)
    command, args = fields.get("command"), fields.get("args")
    wrapped = transport == "stdio" and is_wrapped(command, args)
    words = [command, *(args if isinstance(args, list) else [])]
    argv = tuple(str(w) for w in words if isinstance(w, str))
    note = view.problem
    if transport != "stdio":
        note = f"{transport} (url) entries are not wrappable"
    wrappable = transport == "stdio" and view.spans is not None
    return EntryResult(_scope(file, view), view.name, transport, wrapped, wrappable, "", note, argv)


def entry_results(file: ConfigFile, text: str) -> list[EntryResult]:
    """Every entry of the file, as ``clients list`` shows it (DocumentError if malformed)."""
    return [
        _describe(file, view) for view in read_entries(text, file.fmt, file.key, claude=file.claude)
    ]


def _selected(result: EntryResult, selection: Selection) -> bool:
    if selection.server is not None and result.name != selection.server:
        return False
    if selection.scope is None:
        return True
    return result.scope.partition(":")[0] == selection.scope


def _expected_wrap(
    view: EntryView, wrapper: Wrapper, family: str, absolute: Mapping[int, str]
) -> tuple[str, list[str]]:
    fields = view.fields
    argv = [str(fields["command"]), *fields.get("args", [])]
    words = wrapper_words(
        wrapper,
        has_args="args" in fields,
        client=family,
        name=view.name,
        written={index: argv[index] for index in absolute},
    )
    return wrapper.prefix[0], [*words, *(absolute.get(i, w) for i, w in enumerate(argv))]


def _expected_unwrap(view: EntryView) -> tuple[str, list[str] | None]:
    args = list(view.fields.get("args") or [])
    inner = unwrapped_command(args) or []
    for index, text in (as_written(args) or {}).items():
        inner[index] = text
    dash = dash_index(args) or 0
    script = [i for i, a in enumerate(args[:dash]) if str(a).endswith(WRAPPER_SCRIPT)]
    added = bool(script) and script[0] + 1 < dash and args[script[0] + 1] == ABSENT_MARK
    return inner[0], (None if added and len(inner) == 1 else inner[1:])


def _strict(file: ConfigFile, text: str) -> bool:
    """Whether the standard parser (not ours: the check must not share our bugs) reads it."""
    try:
        if file.fmt == "toml":
            tomllib.loads(text)
        else:
            json.loads(text)
    except ValueError:
        return False
    return True


def _read_back(file: ConfigFile, text: str) -> dict[tuple[str, str], Mapping[str, Any]]:
    views = read_entries(text, file.fmt, file.key, claude=file.claude)
    return {(v.scope, v.name): v.fields for v in views}


def rewrite_text(
    file: ConfigFile,
    text: str,
    mode: str,
    selection: Selection,
    wrapper: Wrapper | None = None,
) -> tuple[str, list[EntryResult]]:
    """The file's new text and what happened to each selected entry (``mode``: wrap|unwrap)."""
    views = read_entries(text, file.fmt, file.key, claude=file.claude)
    edits: list[Edit] = []
    results: list[EntryResult] = []
    expected: dict[tuple[str, str], tuple[str, list[str] | None]] = {}
    family = FAMILY[file.client]
    for view in views:
        listed = _describe(file, view)
        if not _selected(listed, selection):
            continue
        spans = view.spans
        action, note = "unchanged", ""
        if listed.transport != "stdio" or spans is None:
            action, note = "skipped", listed.note
        elif mode == "wrap" and not listed.wrapped:
            assert wrapper is not None
            paths = plan_paths(file, view.scope, view.fields, text, spans)
            absolute = paths.absolute
            edits += wrap_edits(
                text, spans, wrapper, client=family, name=view.name, absolute=absolute
            )
            expected[(view.scope, view.name)] = _expected_wrap(view, wrapper, family, absolute)
            action, note = "wrapped", paths.note
        elif mode == "unwrap" and listed.wrapped:
            undo = unwrap_edits(text, spans)
            if undo is None:
                action, note = "skipped", "wrapped, but no command after '--' to restore"
                if as_written(view.fields.get("args") or []) is None:
                    note = "wrapped, but an --as-written record does not fit its command"
            else:
                edits += undo
                expected[(view.scope, view.name)] = _expected_unwrap(view)
                action = "unwrapped"
        results.append(
            EntryResult(
                listed.scope,
                view.name,
                listed.transport,
                listed.wrapped,
                listed.wrappable,
                action,
                note,
                listed.command,
            )
        )
    new_text = apply_edits(text, edits)
    if edits:
        _check(file, text, new_text, expected)
    return new_text, results


def _check(
    file: ConfigFile,
    old: str,
    new: str,
    expected: Mapping[tuple[str, str], tuple[str, list[str] | None]],
) -> None:
    """Every edited entry reads back as intended and every other entry as before."""
    try:
        if _strict(file, old) and not _strict(file, new):
            raise ValueError("the standard parser refuses it")
        before, after = _read_back(file, old), _read_back(file, new)
    except (DocumentError, ValueError) as exc:
        raise DocumentError(f"the edit would not parse ({exc}); nothing was written") from None
    if before.keys() != after.keys():
        raise DocumentError("the edit changed which entries exist; nothing was written")
    for key, fields in after.items():
        if key not in expected:
            if fields != before[key]:
                raise DocumentError(f"the edit changed entry {key[1]!r}; nothing was written")
            continue
        command, args = expected[key]
        rest = {k: v for k, v in fields.items() if k not in ("command", "args")}
        old_rest = {k: v for k, v in before[key].items() if k not in ("command", "args")}
        if fields.get("command") != command or fields.get("args") != args or rest != old_rest:
            raise DocumentError(f"entry {key[1]!r} would not read back as intended")
