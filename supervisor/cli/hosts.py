"""``fleet-supervisor hosts ...``: the declared host lease commands and how they print."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from supervisor.cli.common import EXIT_OK, EXIT_REFUSED, emit
from supervisor.cli.operations import ask_declared
from supervisor.settings.config import Settings

__all__ = ["format_hosts", "run_hosts"]


def run_hosts(args: argparse.Namespace, settings: Settings) -> int:
    result = ask_declared("hosts", args.hosts_command, args, settings.socket.path)
    emit(result, args.json, format_hosts)
    return EXIT_OK if result.get("success") is True else EXIT_REFUSED


def format_hosts(result: Mapping[str, Any]) -> str:
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
