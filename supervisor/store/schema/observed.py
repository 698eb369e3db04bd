"""Observed servers schema (version 11): MCP servers discovery found on a host, one row each."""

from __future__ import annotations

__all__ = ["OBSERVED_COLUMNS", "OBSERVED_KEY", "V11_DESCRIPTION", "V11_STATEMENTS"]

#: One row per server incarnation: the host, its boot, the pid and its start token.
OBSERVED_KEY: tuple[str, ...] = ("host_id", "boot_id", "pid", "process_start_time")

OBSERVED_COLUMNS: tuple[str, ...] = (
    *OBSERVED_KEY,
    "provenance",
    "command",
    "cwd",
    "env_keys",
    "uid",
    "owner_pid",
    "owner_start_time",
    "owner_name",
    "evidence",
    "first_seen",
    "last_seen",
    "owner_gone_at",
    "gone_at",
)

V11_DESCRIPTION = "observed MCP servers: found on the host by discovery, never launcher-trusted"

# Same portability rules as tables.py. command, env_keys and evidence are JSON arrays
# (as text); stamps are the store's fixed-width UTC text. owner_gone_at: when the owner
# client's incarnation was first seen gone (pid and start, never a parent pid of 1);
# gone_at: when the server itself was.
V11_STATEMENTS: tuple[str, ...] = (
    "CREATE TABLE observed_servers (host_id TEXT NOT NULL, boot_id TEXT NOT NULL, "
    "pid INTEGER NOT NULL, process_start_time TEXT NOT NULL, provenance TEXT NOT NULL, "
    "command TEXT NOT NULL, cwd TEXT, env_keys TEXT NOT NULL, uid INTEGER, "
    "owner_pid INTEGER, owner_start_time TEXT, owner_name TEXT, evidence TEXT NOT NULL, "
    "first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, owner_gone_at TEXT, gone_at TEXT, "
    "PRIMARY KEY (host_id, boot_id, pid, process_start_time))",
    "CREATE INDEX idx_observed_servers_gone ON observed_servers (host_id, gone_at)",
)
