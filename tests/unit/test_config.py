"""Tests for supervisor.settings.config: shipped defaults, partial files, overrides, refusals."""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from actors.heartbeat.actor import HeartbeatSettings
from actors.lease_watch import LeaseWatchSettings
from actors.liveness.actor import LivenessSettings
from actors.retirement.apply_tx import ApplySettings
from actors.writer.actor import WriterSettings
from supervisor.errors import ConfigError
from supervisor.settings.config import (
    Settings,
    default_database_path,
    default_profiles_path,
    default_socket_path,
    load_settings,
)

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "supervisor.toml"


@pytest.fixture(autouse=True)
def _xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Pin the default locations so the tests never depend on the machine's environment.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "conf"))


def write(tmp_path: Path, text: str, name: str = "supervisor.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- shipped file and defaults -----------------------------------------------------------------


def test_shipped_file_equals_built_in_defaults() -> None:
    assert load_settings(SHIPPED) == load_settings() == Settings()


def test_shipped_file_sets_every_key_of_every_table() -> None:
    document = tomllib.loads(SHIPPED.read_text(encoding="utf-8"))
    defaults = Settings()
    expected = {
        table.name: {f.name for f in dataclasses.fields(getattr(defaults, table.name))}
        for table in dataclasses.fields(Settings)
    }
    assert {table: set(body) for table, body in document.items()} == expected


def test_every_key_in_shipped_file_is_documented() -> None:
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        if re.match(r"\s*\w+\s*=", line):
            assert lines[number - 1].lstrip().startswith("#"), f"undocumented: {line}"


def test_default_paths_follow_xdg(tmp_path: Path) -> None:
    settings = load_settings()
    assert settings.database.path == tmp_path / "state/fleet-supervisor/registry.sqlite3"
    assert settings.socket.path == tmp_path / "run/fleet-supervisor.sock"
    assert settings.auth.profiles_path == tmp_path / "conf/fleet-supervisor/profiles.toml"


def test_default_paths_fall_back_without_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("XDG_STATE_HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(variable)
    home = Path.home()
    assert default_database_path() == home / ".local/state/fleet-supervisor/registry.sqlite3"
    assert default_socket_path() == Path(f"/tmp/fleet-supervisor-{os.getuid()}.sock")
    assert default_profiles_path() == home / ".config/fleet-supervisor/profiles.toml"


def test_relative_xdg_value_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "relative/dir")
    assert default_database_path() == Path.home() / ".local/state/fleet-supervisor/registry.sqlite3"


def test_converted_values_of_the_defaults() -> None:
    settings = Settings()
    assert settings.socket.mode == 0o600
    assert settings.supervisor.host_id is None
    assert settings.supervisor.canonical_repository is None
    assert settings.socket.group is None


# --- partial files and conversions -------------------------------------------------------------


def test_partial_file_changes_only_its_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[heartbeat]\nttl_seconds = 10\n[socket]\nmode = "0660"\ngroup = "fleet"\n'
        '[supervisor]\nhost_id = "box-1"\nlog_level = "DEBUG"\n',
    )
    settings = load_settings(path)
    defaults = Settings()
    assert settings.heartbeat.ttl_seconds == 10.0
    assert isinstance(settings.heartbeat.ttl_seconds, float)
    assert settings.socket.mode == 0o660
    assert settings.socket.group == "fleet"
    assert settings.supervisor.host_id == "box-1"
    assert settings.supervisor.log_level == "debug"
    assert settings.heartbeat.max_batch == defaults.heartbeat.max_batch
    assert settings.liveness == defaults.liveness
    assert settings.database == defaults.database


def test_empty_file_is_the_defaults(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, "")) == Settings()


def test_relative_paths_resolve_against_the_file_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "etc"
    conf.mkdir()
    path = write(conf, '[database]\npath = "data/reg.sqlite3"\n[auth]\nprofiles_path = "p.toml"\n')
    monkeypatch.chdir(tmp_path)
    settings = load_settings(Path("etc/supervisor.toml"))
    assert settings.database.path == conf / "data/reg.sqlite3"
    assert settings.auth.profiles_path == conf / "p.toml"
    assert path.exists()


def test_tilde_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    settings = load_settings(write(tmp_path, '[socket]\npath = "~/s.sock"\n'))
    assert settings.socket.path == tmp_path / "home/s.sock"


def test_to_actor_conversions(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[heartbeat]\nmax_in_flight = 2\n[liveness]\nuse_pidfd = false\n"
        "[leases]\nexpiry_interval_seconds = 2.5\n"
        "[retirement]\nmass_guard_share = 0.25\nmass_guard_floor = 0\nwriter_max_batch = 64\n",
    )
    settings = load_settings(path)
    assert settings.heartbeat.to_actor() == HeartbeatSettings(max_in_flight=2)
    assert settings.liveness.to_actor() == LivenessSettings(use_pidfd=False)
    assert settings.leases.to_actor() == LeaseWatchSettings(expiry_interval_seconds=2.5)
    assert settings.retirement.to_writer() == WriterSettings(
        max_batch=64, apply=ApplySettings(mass_guard_share=0.25, mass_guard_floor=0)
    )


def test_default_to_actor_matches_actor_defaults() -> None:
    settings = Settings()
    assert settings.heartbeat.to_actor() == HeartbeatSettings()
    assert settings.liveness.to_actor() == LivenessSettings()
    assert settings.leases.to_actor() == LeaseWatchSettings()
    assert settings.retirement.to_writer() == WriterSettings()


# --- overrides ---------------------------------------------------------------------------------


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[database]\npath = "/from/file.sqlite3"\n[mcp]\nhttp_port = 9000\n')
    settings = load_settings(
        path, overrides={"database.path": "/tmp/x.sqlite3", "mcp.http_enabled": True}
    )
    assert settings.database.path == Path("/tmp/x.sqlite3")
    assert settings.mcp.http_enabled is True
    assert settings.mcp.http_port == 9000


def test_override_relative_path_resolves_against_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(overrides={"database.path": "db.sqlite3", "socket.path": tmp_path})
    assert settings.database.path == tmp_path / "db.sqlite3"
    assert settings.socket.path == tmp_path


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"database.nope": 1}, "database.nope"),
        ({"nope.path": "x"}, "[nope]"),
        ({"database": "x"}, "database."),
        ({"heartbeat.ttl_seconds": "30"}, "heartbeat.ttl_seconds must be a finite number > 0"),
        ({"socket.mode": 0o600}, "socket.mode must be an octal permission string"),
    ],
)
def test_bad_overrides_name_the_key(overrides: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(overrides=overrides)
    assert needle in caught.value.detail
    assert "overrides" in caught.value.detail


# --- refusals ----------------------------------------------------------------------------------


BAD_VALUES = [
    # unknown table / key
    ("[nope]\nx = 1\n", "[nope]", "known tables"),
    ("[heartbeat]\nttl = 1\n", "heartbeat.ttl", "keys of [heartbeat]"),
    ("database = 5\n", "database", "a table"),
    # wrong type
    ('[heartbeat]\nttl_seconds = "30"\n', "heartbeat.ttl_seconds", "a finite number > 0"),
    ("[heartbeat]\nmax_batch = 10.0\n", "heartbeat.max_batch", "an integer >= 1"),
    ('[liveness]\nuse_pidfd = "yes"\n', "liveness.use_pidfd", "true or false"),
    ("[database]\npath = 5\n", "database.path", "a path string"),
    ("[supervisor]\nhost_id = 5\n", "supervisor.host_id", "a string"),
    ('[retirement]\nauto_profile = ""\n', "retirement.auto_profile", "a non-empty string"),
    # bool is not a number
    ("[heartbeat]\nttl_seconds = true\n", "heartbeat.ttl_seconds", "a finite number > 0"),
    ("[restart]\nmax_restarts = false\n", "restart.max_restarts", "an integer >= 0"),
    # out of range
    ("[heartbeat]\nttl_seconds = 0\n", "heartbeat.ttl_seconds", "a finite number > 0"),
    ("[heartbeat]\nttl_seconds = inf\n", "heartbeat.ttl_seconds", "a finite number > 0"),
    ("[liveness]\nsweep_interval_seconds = nan\n", "liveness.sweep_interval_seconds", "> 0"),
    ("[retirement]\nmass_guard_share = 0\n", "retirement.mass_guard_share", "> 0 and <= 1"),
    ("[retirement]\nmass_guard_share = 1.5\n", "retirement.mass_guard_share", "> 0 and <= 1"),
    ("[retirement]\nmass_guard_floor = -1\n", "retirement.mass_guard_floor", "an integer >= 0"),
    ("[database]\nbusy_timeout_ms = -5\n", "database.busy_timeout_ms", "an integer >= 0"),
    ("[mcp]\nhttp_port = 70000\n", "mcp.http_port", "an integer from 0 to 65535"),
    ('[supervisor]\nlog_level = "loud"\n', "supervisor.log_level", "one of debug, info"),
    ("[heartbeat]\nttl_seconds = 0.5\n", "heartbeat.ttl_seconds", "heartbeat.min_ttl_seconds"),
    (
        "[heartbeat]\nmin_ttl_seconds = 10\nmax_ttl_seconds = 5\nttl_seconds = 7\n",
        "heartbeat.max_ttl_seconds",
        ">= heartbeat.min_ttl_seconds",
    ),
    # non-loopback HTTP host
    ('[mcp]\nhttp_host = "0.0.0.0"\n', "mcp.http_host", "a loopback IP address"),
    ('[mcp]\nhttp_host = "192.168.1.5"\n', "mcp.http_host", "a loopback IP address"),
    ('[mcp]\nhttp_host = "localhost"\n', "mcp.http_host", "a loopback IP address"),
    # bad socket mode
    ('[socket]\nmode = "0999"\n', "socket.mode", "octal permission string"),
    ('[socket]\nmode = "1777"\n', "socket.mode", 'at most "0777"'),
    ("[socket]\nmode = 600\n", "socket.mode", "octal permission string"),
    (
        "[socket]\nevict_idle_after_seconds = -1\n",
        "socket.evict_idle_after_seconds",
        "a finite number >= 0",
    ),
    (
        '[socket]\nevict_idle_after_seconds = "1"\n',
        "socket.evict_idle_after_seconds",
        "a finite number >= 0",
    ),
    # the shared registry is PostgreSQL only; SQLite is the path
    ('[database]\nurl = "sqlite:/x.db"\n', "database.url", "postgresql://"),
    ('[database]\nurl = "postgresql://"\n', "database.url", "postgresql://"),
    ('[database]\nurl = "postgresql://a b@h/db"\n', "database.url", "postgresql://"),
    ("[database]\nurl = 5\n", "database.url", "postgresql://"),
    ('[socket]\nmode = "rw"\n', "socket.mode", "octal permission string"),
]


@pytest.mark.parametrize(("text", "key", "expected"), BAD_VALUES)
def test_bad_input_names_the_key_and_the_expected_form(
    tmp_path: Path, text: str, key: str, expected: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert key in caught.value.detail
    assert expected in caught.value.detail
    assert caught.value.code == "config_invalid"


def test_a_postgresql_url_selects_the_shared_registry(tmp_path: Path) -> None:
    url = "postgresql://fleet@db.example.org:5432/fleet"
    settings = load_settings(write(tmp_path, f'[database]\nurl = " {url} "\n'))
    assert settings.database.url == url
    assert Settings().database.url is None
    assert load_settings(write(tmp_path, '[database]\nurl = ""\n')).database.url is None


def test_loopback_hosts_are_accepted(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, '[mcp]\nhttp_host = "::1"\n')).mcp.http_host == "::1"
    path = write(tmp_path, '[mcp]\nhttp_host = "127.0.0.2"\n')
    assert load_settings(path).mcp.http_host == "127.0.0.2"


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[heartbeat\nttl_seconds = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML") as caught:
        load_settings(path)
    assert str(path) in caught.value.detail


def test_non_utf8_file_is_malformed(tmp_path: Path) -> None:
    path = tmp_path / "supervisor.toml"
    path.write_bytes(b'[supervisor]\nhost_id = "\xff"\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(path)


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "absent.toml")


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.heartbeat.ttl_seconds = 1.0  # type: ignore[misc]


# --- renamed keys --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [True, False])
def test_the_old_name_of_exec_stop_orphans_still_loads_with_the_same_meaning(
    tmp_path: Path, value: bool
) -> None:
    flag = str(value).lower()
    old = load_settings(write(tmp_path, f"[exec]\nreap_orphans = {flag}\n", "old.toml"))
    new = load_settings(write(tmp_path, f"[exec]\nstop_orphans = {flag}\n", "new.toml"))
    assert old == new
    assert old.exec.stop_orphans is value
    assert old.exec.to_actor().stop_orphans is value


def test_a_bad_value_under_the_old_name_names_the_key_as_written(tmp_path: Path) -> None:
    path = write(tmp_path, '[exec]\nreap_orphans = "no"\n')
    with pytest.raises(ConfigError, match=r"exec\.reap_orphans must be"):
        load_settings(path)


def test_a_file_giving_both_the_old_and_the_new_name_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "[exec]\nstop_orphans = true\nreap_orphans = false\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    detail = caught.value.detail
    assert "exec.reap_orphans is the old name of exec.stop_orphans" in detail
    assert "give only exec.stop_orphans" in detail
    assert str(path) in detail


def test_the_guards_grace_keeps_its_old_name_as_an_alias(tmp_path: Path) -> None:
    old = load_settings(write(tmp_path, "[exec]\nreap_grace_seconds = 1.5\n", "old.toml"))
    new = load_settings(write(tmp_path, "[exec]\nstop_grace_seconds = 1.5\n", "new.toml"))
    assert old == new
    assert old.exec.to_actor().grace_seconds == 1.5
    both = write(tmp_path, "[exec]\nstop_grace_seconds = 1\nreap_grace_seconds = 2\n", "both.toml")
    with pytest.raises(ConfigError, match="reap_grace_seconds is the old name"):
        load_settings(both)
    # The reap actor's own grace keeps its name: [reap] reap_grace_seconds is no alias.
    reap = load_settings(write(tmp_path, "[reap]\nreap_grace_seconds = 2.5\n", "reap.toml"))
    assert reap.reap.reap_grace_seconds == 2.5
