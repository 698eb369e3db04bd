"""The ``fleet-supervisor`` command: its parser, its commands and how their answers print."""

from __future__ import annotations

from supervisor.cli.common import EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE
from supervisor.cli.main import main
from supervisor.cli.parser import build_parser

__all__ = ["EXIT_OK", "EXIT_REFUSED", "EXIT_UNREACHABLE", "EXIT_USAGE", "build_parser", "main"]
