"""``fleet-supervisor reap plan|apply``: the declared reap commands and how their answers print."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from supervisor.cli.common import EXIT_OK, EXIT_REFUSED, emit
from supervisor.cli.operations import ask_declared
from supervisor.settings.config import Settings

__all__ = ["format_reap", "run_reap"]


def run_reap(args: argparse.Namespace, settings: Settings) -> int:
    """``fleet-supervisor reap plan|apply``: one request, its summary, its exit status."""
    result = ask_declared("reap", args.reap_command, args, settings.socket.path)
    emit(result, args.json, format_reap)
    return EXIT_OK if result.get("success") is True else EXIT_REFUSED


def _mib(value: object) -> str:
    return f"{value / 2**20:.1f} MiB" if isinstance(value, int) else "? MiB"


def _server(entry: Mapping[str, Any]) -> str:
    members = ",".join(str(m["pid"]) for m in entry["members"])
    command = " ".join(entry["command"])[:80]
    return f"pid {entry['pid']}  {_mib(entry['rss_bytes'])}  [{members}]  {command}"


def _plan_lines(result: Mapping[str, Any]) -> list[str]:
    lines = [
        f"reap plan: {result['target_count']} target(s) of {result['server_count']} MCP "
        f"server(s), {_mib(result['target_rss_bytes'])}; {result['kept_count']} kept; "
        f"{result['duplicate_count']} duplicate group(s) of live clients (never reaped)"
    ]
    lines += [f"  reap  {e['reason_code']}  {_server(e)}" for e in result["targets"]]
    lines += [f"  keep  {e['reason_code']}  {_server(e)}" for e in result["kept"]]
    for group in result["duplicates"]:
        pids = ",".join(str(p["pid"]) for p in group["servers"])
        command = " ".join(group["command"])[:80]
        lines.append(
            f"  duplicate  x{len(group['servers'])} [{pids}] repeats "
            f"{_mib(group['repeated_bytes'])}  {command}"
        )
    lines.append(f"plan_token {result['plan_token']}")
    return lines


def _apply_lines(result: Mapping[str, Any]) -> list[str]:
    lines = [
        f"reap apply: {result['outcome']}, {result['target_count']} target(s), "
        f"{result['reaped_count']} gone, {_mib(result['rss_bytes_freed'])} freed"
    ]
    for target in result["targets"]:
        sent = " ".join(f"{pid}:{'+'.join(names)}" for pid, names in target["signals"].items())
        lines.append(f"  {target['outcome']}  {_server(target)}  signals {sent or 'none'}")
    return lines


def format_reap(result: Mapping[str, Any]) -> str:
    if result.get("success") is False and "targets" not in result:
        reasons = "; ".join(result.get("reasons") or [])
        return f"refused: {result.get('code')}: {reasons}"
    lines = _plan_lines(result) if "kept" in result else _apply_lines(result)
    if result.get("code"):
        lines += [f"{result['code']}: {reason}" for reason in result.get("reasons") or []]
    return "\n".join(lines)
