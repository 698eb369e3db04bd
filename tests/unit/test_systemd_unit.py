"""The shipped systemd unit asks for what the daemon implements: notify readiness, a watchdog."""

from __future__ import annotations

import configparser
from pathlib import Path

UNIT = Path(__file__).resolve().parents[2] / "config" / "fleet-supervisor.service"


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return parser


def test_unit_is_type_notify_with_a_watchdog_fed_by_the_main_process_only() -> None:
    service = _unit()["Service"]
    assert service["Type"] == "notify"
    assert service["NotifyAccess"] == "main"
    assert int(service["WatchdogSec"]) > 0
    assert service["ExecStart"].split()[-1] == "run"
    assert service["KillSignal"] == "SIGTERM"
    assert service["Restart"] == "on-failure"


def test_unit_installs_into_the_user_session() -> None:
    assert _unit()["Install"]["WantedBy"] == "default.target"
