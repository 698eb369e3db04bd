"""SIGHUP's reload: a good file applies what a running daemon can change; a bad one nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from supervisor.daemon.reload import RELOADABLE, reload_settings, settings_changed
from supervisor.handle import SupervisorHandle
from supervisor.observe.logs import configure_logging
from supervisor.settings.config import Settings, load_settings

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _logging_back_to_info() -> Iterator[None]:
    yield
    configure_logging("info")  # a reload may change the level: not for the tests after it


class _Handle:
    def __init__(self) -> None:
        self.guards: list[tuple[float, int]] = []

    async def set_mass_guard(self, *, share: float, floor: int) -> None:
        self.guards.append((share, floor))


def _config(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(["[socket]", 'path = "/tmp/fsv-reload.sock"', *lines, ""]))
    return path


async def test_a_changed_guard_and_log_level_are_applied(tmp_path: Path) -> None:
    file = _config(tmp_path / "supervisor.toml")
    current = load_settings(file)
    _config(file, "[retirement]", "mass_guard_floor = 40", "[supervisor]", 'log_level = "debug"')
    handle = _Handle()

    in_effect = await reload_settings(
        current, lambda: load_settings(file), cast(SupervisorHandle, handle)
    )

    assert handle.guards == [(current.retirement.mass_guard_share, 40)]
    assert in_effect.retirement.mass_guard_floor == 40
    assert in_effect.supervisor.log_level == "debug"
    assert set(settings_changed(current, in_effect)) == {
        "supervisor.log_level",
        "retirement.mass_guard_floor",
    }


async def test_what_needs_a_restart_is_kept_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = _config(tmp_path / "supervisor.toml")
    current = load_settings(file)
    file.write_text('[socket]\npath = "/tmp/fsv-elsewhere.sock"\n')
    handle = _Handle()

    in_effect = await reload_settings(
        current, lambda: load_settings(file), cast(SupervisorHandle, handle)
    )

    assert in_effect == current
    assert handle.guards == []
    event = _event(capsys.readouterr().err, "config_reloaded")
    assert event["applied"] == []
    assert event["needs_restart"] == ["socket.path"]


async def test_a_bad_file_is_logged_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = _config(tmp_path / "supervisor.toml")
    current = load_settings(file)
    _config(file, "[retirement]", "mass_guard_floor = -3")
    handle = _Handle()

    in_effect = await reload_settings(
        current, lambda: load_settings(file), cast(SupervisorHandle, handle)
    )

    assert in_effect is current
    assert handle.guards == []
    event = _event(capsys.readouterr().err, "config_reload_failed")
    assert "retirement.mass_guard_floor" in event["error"]


def test_every_reloadable_key_is_a_setting() -> None:
    names = {
        f"{table}.{key}" for table, body in vars_of(Settings()).items() for key in vars_of(body)
    }
    assert names >= RELOADABLE


def vars_of(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__dataclass_fields__}


def _event(stderr: str, name: str) -> dict[str, Any]:
    for line in stderr.splitlines():
        if line.startswith("{") and json.loads(line).get("event") == name:
            return dict(json.loads(line))
    raise AssertionError(f"no {name} event in {stderr!r}")
