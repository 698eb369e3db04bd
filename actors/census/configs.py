"""The servers the MCP clients' config files name, read for discovery and kept a while."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

import anyio.to_thread

from supervisor.client_configs.documents import DocumentError, read_entries
from supervisor.client_configs.entries import is_wrapped
from supervisor.client_configs.locations import config_files
from supervisor.policy.servers.discovery import ConfiguredServer

__all__ = ["ClientConfigs", "read_configured"]

#: Project directories whose config files are kept (the most recently used).
_KEEP_PROJECTS = 128


def read_configured(home: Path, project: Path) -> tuple[ConfiguredServer, ...]:
    """Every unwrapped stdio server entry of the client config files for ``home`` and
    ``project`` that can be read; a file that cannot be read or parsed names none."""
    found: list[ConfiguredServer] = []
    for file in config_files(home, project):
        try:
            text = file.path.read_text(encoding="utf-8")
            entries = read_entries(text, file.fmt, file.key, claude=file.claude)
        except (OSError, UnicodeDecodeError, DocumentError):
            continue
        for entry in entries:
            command, args = entry.fields.get("command"), entry.fields.get("args", [])
            if not isinstance(command, str) or not command or not isinstance(args, list):
                continue
            if not all(isinstance(a, str) for a in args) or is_wrapped(command, args):
                continue  # a wrapped server carries the exec marker: discovery needs no match
            found.append(
                ConfiguredServer(
                    client=file.client, name=entry.name, command=command, args=tuple(args)
                )
            )
    return tuple(dict.fromkeys(found))


class ClientConfigs:
    """The configured servers for each working directory a candidate runs in, read in a
    worker thread (a client's file can be megabytes) and kept ``refresh_seconds``."""

    def __init__(self, home: Path, refresh_seconds: float) -> None:
        self._home = home
        self._refresh = refresh_seconds
        self._kept: OrderedDict[str, tuple[float, tuple[ConfiguredServer, ...]]] = OrderedDict()

    async def entries(self, cwds: Iterable[str | None], now: float) -> tuple[ConfiguredServer, ...]:
        """The servers configured for the home directory and for each of ``cwds``."""
        merged: dict[ConfiguredServer, None] = {}
        for cwd in sorted({c or str(self._home) for c in cwds}):
            kept = self._kept.get(cwd)
            if kept is None or now - kept[0] >= self._refresh:
                home, project = self._home, Path(cwd)
                found = await anyio.to_thread.run_sync(read_configured, home, project)
                kept = (now, found)
                self._kept[cwd] = kept
            self._kept.move_to_end(cwd)
            merged.update(dict.fromkeys(kept[1]))
        while len(self._kept) > _KEEP_PROJECTS:
            self._kept.popitem(last=False)
        return tuple(merged)
