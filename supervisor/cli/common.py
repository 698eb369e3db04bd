"""What every CLI command shares: exit statuses, the token, settings and how answers print."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from supervisor.settings.config import Settings, default_config_path, load_settings
from supervisor.wire import TOKEN_ENV

__all__ = [
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "TOKEN_HELP",
    "emit",
    "settings_of",
    "strip_dashdash",
    "token_of",
]

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

TOKEN_HELP = f"profile token (default: ${TOKEN_ENV})"


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings the global flags and the per-command overrides name."""
    overrides: dict[str, Any] = {}
    if args.socket:
        overrides["socket.path"] = str(args.socket)
    if getattr(args, "db", None):
        overrides["database.path"] = str(args.db)
    if getattr(args, "profiles", None):
        overrides["auth.profiles_path"] = str(args.profiles)
    config = args.config
    if config is None and default_config_path().is_file():
        config = default_config_path()
    return load_settings(config, overrides=overrides)


def strip_dashdash(argv: Sequence[str]) -> list[str]:
    items = list(argv)
    return items[1:] if items and items[0] == "--" else items


def emit(
    result: Mapping[str, Any], as_json: bool, human: Callable[[Mapping[str, Any]], str]
) -> None:
    sys.stdout.write(
        (json.dumps(result, indent=2, default=str) if as_json else human(result)) + "\n"
    )


def token_of(args: argparse.Namespace) -> str | None:
    return args.token or os.environ.get(TOKEN_ENV) or None
