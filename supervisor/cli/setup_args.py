"""The arguments of the set-up commands, ``service`` and ``doctor`` (kept apart from
their code so that building the CLI parser stays cheap)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_doctor_parser", "add_service_parser"]


def add_service_parser(commands: Any, *, parser_class: type[argparse.ArgumentParser]) -> None:
    service = commands.add_parser(
        "service", help="run the daemon from login (or boot) as a systemd unit"
    )
    verbs = service.add_subparsers(dest="service_command", required=True, parser_class=parser_class)
    for verb, text in (
        ("install", "write the unit with this user's paths and enable it where systemd runs"),
        ("status", "whether the unit is written, current, enabled and running"),
        ("uninstall", "stop and disable the unit, and remove what install wrote"),
    ):
        parser = verbs.add_parser(verb, help=text)
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument(
            "--user",
            dest="scope",
            action="store_const",
            const="user",
            help="a unit of the user's own service manager, started at login (the default)",
        )
        scope.add_argument(
            "--system",
            dest="scope",
            action="store_const",
            const="system",
            help="a system unit in /etc/systemd/system, started at boot (needs root)",
        )
        parser.add_argument(
            "--unit-dir",
            type=Path,
            help="the directory of the unit file instead of systemd's for the scope",
        )
        if verb == "install":
            parser.add_argument(
                "--dry-run", action="store_true", help="print the unit and where it goes only"
            )
        parser.add_argument("--json", action="store_true", help="machine-readable output")


def add_doctor_parser(commands: Any) -> None:
    doctor = commands.add_parser(
        "doctor",
        help="check the daemon, permissions, kernel features, client configs and leaks",
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
