"""The unit ``service install`` writes: notify readiness, the watchdog, quoted paths."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from supervisor.cli.systemd_unit import (
    WRITTEN_BY,
    created_directories,
    daemon_command,
    exec_start,
    render_unit,
    unit_target,
)
from supervisor.settings.config import Settings, load_settings


def _sections(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


@pytest.mark.parametrize(("scope", "wanted_by"), [("user", "default.target"),
                                                  ("system", "multi-user.target")])  # fmt: skip
def test_the_unit_is_type_notify_with_a_watchdog_fed_by_the_main_process_only(
    scope: str, wanted_by: str
) -> None:
    unit = _sections(render_unit(scope, ["/opt/fs/bin/fleet-supervisor", "run"]))
    service = unit["Service"]
    assert service["Type"] == "notify"
    assert service["NotifyAccess"] == "main"
    assert int(service["WatchdogSec"]) > 0
    assert service["ExecStart"] == "/opt/fs/bin/fleet-supervisor run"
    assert service["KillSignal"] == "SIGTERM"
    assert service["Restart"] == "on-failure"
    assert unit["Install"]["WantedBy"] == wanted_by


def test_the_daemon_command_names_this_users_paths(tmp_path: Path) -> None:
    settings = load_settings(
        None,
        overrides={
            "socket.path": str(tmp_path / "s.sock"),
            "database.path": str(tmp_path / "db.sqlite3"),
            "auth.profiles_path": str(tmp_path / "profiles.toml"),
        },
    )
    config = tmp_path / "supervisor.toml"
    command = daemon_command(settings, config)
    assert command[command.index("--config") + 1] == str(config)
    assert command[command.index("--socket") + 1] == str(tmp_path / "s.sock")
    after = command[command.index("run") :]
    assert after == ["run", "--db", str(tmp_path / "db.sqlite3"),
                     "--profiles", str(tmp_path / "profiles.toml")]  # fmt: skip
    assert "--config" not in daemon_command(Settings(), None)


@pytest.mark.parametrize(
    ("word", "spelled"),
    [
        ("/usr/bin/fleet-supervisor", "/usr/bin/fleet-supervisor"),
        ("/home/a b/x", '"/home/a b/x"'),
        ("/tmp/50%/x", "/tmp/50%%/x"),
        ("/tmp/$HOME", "/tmp/$$HOME"),
        ('/tmp/a"b', '"/tmp/a\\"b"'),
        ("/tmp/a\\b", '"/tmp/a\\\\b"'),
        (";", '";"'),
        ("", '""'),
    ],
)
def test_exec_start_quotes_what_systemd_would_split_or_expand(word: str, spelled: str) -> None:
    assert exec_start(["/bin/x", word]) == f"/bin/x {spelled}"


def test_the_unit_remembers_the_directories_install_created() -> None:
    made = [Path("/h/.config/systemd/user"), Path("/h/.config/systemd with space")]
    text = render_unit("user", ["/bin/x", "run"], made)
    assert text.startswith(WRITTEN_BY)
    assert created_directories(text) == made
    assert created_directories(render_unit("user", ["/bin/x", "run"])) == []
    assert created_directories(WRITTEN_BY + "\n# Directories created for it: [oops\n") == []


def test_the_user_unit_goes_under_xdg_config_home(tmp_path: Path) -> None:
    target = unit_target("user", {"XDG_CONFIG_HOME": str(tmp_path)})
    assert target.path == tmp_path / "systemd" / "user" / "fleet-supervisor.service"
    assert target.systemctl == ("systemctl", "--user")
    relative = unit_target("user", {"XDG_CONFIG_HOME": "rel"})
    assert relative.directory == Path.home() / ".config" / "systemd" / "user"
    assert unit_target("system", {}).directory == Path("/etc/systemd/system")
    with pytest.raises(ValueError, match="scope"):
        unit_target("session", {})
