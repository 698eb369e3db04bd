"""Loads config/supervisor.toml (and dotted-key overrides) into frozen, validated settings."""

from __future__ import annotations

import ipaddress
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

from actors.apply_tx import ApplySettings
from actors.control_writes import ControlSettings
from actors.heartbeat import HeartbeatSettings
from actors.lease_watch import LeaseWatchSettings
from actors.liveness import LivenessSettings
from actors.registry_writer import WriterSettings
from supervisor.errors import ConfigError

__all__ = [
    "LOG_LEVELS",
    "AuthConfig",
    "DatabaseSettings",
    "HeartbeatConfig",
    "LeaseConfig",
    "LivenessConfig",
    "McpConfig",
    "RestartConfig",
    "RetirementConfig",
    "Settings",
    "SocketConfig",
    "SupervisorSettings",
    "default_config_path",
    "default_database_path",
    "default_profiles_path",
    "default_socket_path",
    "load_settings",
]

_APP_DIR = "fleet-supervisor"
LOG_LEVELS = ("debug", "info", "warning", "error")


def _xdg_dir(variable: str, fallback: Path) -> Path:
    value = os.environ.get(variable, "")
    # The XDG base-directory spec says a relative value is invalid and must be ignored.
    return Path(value) if value and os.path.isabs(value) else fallback


def default_database_path() -> Path:
    """``$XDG_STATE_HOME/fleet-supervisor/registry.sqlite3`` (``~/.local/state`` fallback)."""
    state = _xdg_dir("XDG_STATE_HOME", Path.home() / ".local" / "state")
    return state / _APP_DIR / "registry.sqlite3"


def default_socket_path() -> Path:
    """``$XDG_RUNTIME_DIR/fleet-supervisor.sock``, else a per-uid name in /tmp."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / "fleet-supervisor.sock"
    return Path(f"/tmp/fleet-supervisor-{os.getuid()}.sock")


def default_profiles_path() -> Path:
    """``$XDG_CONFIG_HOME/fleet-supervisor/profiles.toml`` (``~/.config`` fallback)."""
    return _xdg_dir("XDG_CONFIG_HOME", Path.home() / ".config") / _APP_DIR / "profiles.toml"


def default_config_path() -> Path:
    """Conventional place of an operator's supervisor.toml; whether to read it is the CLI's call."""
    return _xdg_dir("XDG_CONFIG_HOME", Path.home() / ".config") / _APP_DIR / "supervisor.toml"


class _Invalid(Exception):
    """A value does not have the expected form; the loader adds the key and origin."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


#: value, directory that relative paths resolve against → the converted value.
_Check = Callable[[Any, Path], Any]
_CHECK = "check"


def _number(expected: str, ok: Callable[[float], bool]) -> _Check:
    def check(value: Any, _base: Path) -> float:
        # bool is an int subclass in Python, but `true` for a timeout is a mistake, not 1.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Invalid(expected)
        try:
            number = float(value)
        except OverflowError:
            raise _Invalid(expected) from None
        # TOML allows inf and nan; neither is a usable interval, share or timeout.
        if not math.isfinite(number) or not ok(number):
            raise _Invalid(expected)
        return number

    return check


def _integer(low: int, high: int | None = None) -> _Check:
    expected = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"

    def check(value: Any, _base: Path) -> int:
        # A float is refused even when whole: counts and sizes are written as integers.
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Invalid(expected)
        if value < low or (high is not None and value > high):
            raise _Invalid(expected)
        return value

    return check


def _boolean(value: Any, _base: Path) -> bool:
    if not isinstance(value, bool):
        raise _Invalid("true or false")
    return value


def _optional_text(value: Any, _base: Path) -> str | None:
    if not isinstance(value, str):
        raise _Invalid('a string ("" for none)')
    # TOML has no null, so an empty string is how a file says "not set".
    return value.strip() or None


def _text(value: Any, _base: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("a non-empty string")
    return value.strip()


def _log_level(value: Any, _base: Path) -> str:
    level = value.strip().lower() if isinstance(value, str) else None
    if level not in LOG_LEVELS:
        raise _Invalid(f"one of {', '.join(LOG_LEVELS)}")
    return level


def _path(default: Callable[[], Path]) -> _Check:
    def check(value: Any, base: Path) -> Path:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str) or "\0" in value:
            raise _Invalid('a path string ("" for the default location)')
        if not value:
            return default()
        path = Path(value).expanduser()
        # A relative path in a file means "next to this file", not "wherever the daemon started".
        return path if path.is_absolute() else base / path

    return check


_OCTAL = re.compile(r"[0-7]{1,4}")


def _mode(value: Any, _base: Path) -> int:
    # A string, not a TOML integer: `mode = 600` would silently be decimal 600 = 0o1130.
    expected = 'an octal permission string like "0600" (at most "0777")'
    if not isinstance(value, str) or not _OCTAL.fullmatch(value):
        raise _Invalid(expected)
    mode = int(value, 8)
    if mode > 0o777:
        raise _Invalid(expected)
    return mode


def _loopback(value: Any, _base: Path) -> str:
    # Only IP literals: a name such as "localhost" can be re-pointed in /etc/hosts, and the
    # HTTP surface must never be reachable from another machine.
    expected = 'a loopback IP address such as "127.0.0.1" or "::1"'
    if not isinstance(value, str):
        raise _Invalid(expected)
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        raise _Invalid(expected) from None
    if not address.is_loopback:
        raise _Invalid(expected)
    return str(address)


_POSITIVE = _number("a finite number > 0", lambda x: x > 0)


def _setting(default: Any, check: _Check) -> Any:
    """A dataclass field that also carries how a file or override value for it is checked."""
    return field(default=default, metadata={_CHECK: check})


@dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseSettings:
    path: Path = field(
        default_factory=default_database_path, metadata={_CHECK: _path(default_database_path)}
    )
    busy_timeout_ms: int = _setting(5000, _integer(0))


@dataclass(frozen=True, slots=True, kw_only=True)
class SupervisorSettings:
    host_id: str | None = _setting(None, _optional_text)
    log_level: str = _setting("info", _log_level)
    canonical_repository: str | None = _setting(None, _optional_text)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatConfig:
    ttl_seconds: float = _setting(30.0, _POSITIVE)
    min_ttl_seconds: float = _setting(1.0, _POSITIVE)
    max_ttl_seconds: float = _setting(3600.0, _POSITIVE)
    max_batch: int = _setting(4096, _integer(1))
    max_in_flight: int = _setting(4, _integer(1))

    def to_actor(self) -> HeartbeatSettings:
        return HeartbeatSettings(
            ttl_seconds=self.ttl_seconds,
            min_ttl_seconds=self.min_ttl_seconds,
            max_ttl_seconds=self.max_ttl_seconds,
            max_batch=self.max_batch,
            max_in_flight=self.max_in_flight,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessConfig:
    sweep_interval_seconds: float = _setting(5.0, _POSITIVE)
    sweep_chunk: int = _setting(256, _integer(1))
    use_pidfd: bool = _setting(True, _boolean)

    def to_actor(self) -> LivenessSettings:
        return LivenessSettings(
            sweep_interval_seconds=self.sweep_interval_seconds,
            sweep_chunk=self.sweep_chunk,
            use_pidfd=self.use_pidfd,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseConfig:
    expiry_interval_seconds: float = _setting(5.0, _POSITIVE)
    default_ttl_seconds: float = _setting(900.0, _POSITIVE)
    max_ttl_seconds: float = _setting(
        86400.0, _number("a number > 0 and <= 86400", lambda x: 0 < x <= 86400)
    )

    def to_actor(self) -> LeaseWatchSettings:
        return LeaseWatchSettings(expiry_interval_seconds=self.expiry_interval_seconds)

    def to_control(self) -> ControlSettings:
        # Grants, heartbeats and expiry of work leases all run in the writer.
        return ControlSettings(
            default_lease_ttl_seconds=self.default_ttl_seconds,
            max_lease_ttl_seconds=self.max_ttl_seconds,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RetirementConfig:
    mass_guard_share: float = _setting(0.5, _number("a number > 0 and <= 1", lambda x: 0 < x <= 1))
    mass_guard_floor: int = _setting(5, _integer(0))
    auto_enabled: bool = _setting(False, _boolean)
    auto_interval_seconds: float = _setting(300.0, _POSITIVE)
    auto_profile: str = _setting("supervisor", _text)
    writer_max_batch: int = _setting(4096, _integer(1))

    def to_writer(self) -> WriterSettings:
        # The guard is enforced inside the apply transaction, which the writer runs.
        guard = ApplySettings(
            mass_guard_share=self.mass_guard_share, mass_guard_floor=self.mass_guard_floor
        )
        return WriterSettings(max_batch=self.writer_max_batch, apply=guard)


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartConfig:
    max_restarts: int = _setting(3, _integer(0))
    window_seconds: float = _setting(60.0, _POSITIVE)


@dataclass(frozen=True, slots=True, kw_only=True)
class SocketConfig:
    path: Path = field(
        default_factory=default_socket_path, metadata={_CHECK: _path(default_socket_path)}
    )
    mode: int = _setting(0o600, _mode)
    group: str | None = _setting(None, _optional_text)
    max_frame_bytes: int = _setting(1048576, _integer(1))
    request_timeout_seconds: float = _setting(30.0, _POSITIVE)
    max_connections: int = _setting(256, _integer(1))


@dataclass(frozen=True, slots=True, kw_only=True)
class McpConfig:
    http_enabled: bool = _setting(False, _boolean)
    http_host: str = _setting("127.0.0.1", _loopback)
    #: 0 lets the OS pick a free port (tests); reporting the bound port is the app's job.
    http_port: int = _setting(8765, _integer(0, 65535))


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthConfig:
    profiles_path: Path = field(
        default_factory=default_profiles_path, metadata={_CHECK: _path(default_profiles_path)}
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Every setting of one supervisor; ``Settings()`` is exactly the built-in defaults.

    Field names are the TOML table names.
    """

    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    supervisor: SupervisorSettings = field(default_factory=SupervisorSettings)
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)
    liveness: LivenessConfig = field(default_factory=LivenessConfig)
    leases: LeaseConfig = field(default_factory=LeaseConfig)
    retirement: RetirementConfig = field(default_factory=RetirementConfig)
    restart: RestartConfig = field(default_factory=RestartConfig)
    socket: SocketConfig = field(default_factory=SocketConfig)
    mcp: McpConfig = field(default_factory=McpConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)


#: Table name → its dataclass → key → check, read off the dataclasses so they can never disagree.
_TABLE_TYPES: dict[str, type[Any]] = get_type_hints(Settings)
_SCHEMA = {
    table: {f.name: f.metadata[_CHECK] for f in fields(cls)} for table, cls in _TABLE_TYPES.items()
}


def _checked(dotted: str, check: _Check, value: Any, base: Path, origin: str) -> Any:
    try:
        return check(value, base)
    except _Invalid as exc:
        raise ConfigError(f"{dotted} must be {exc.expected}, got {value!r} ({origin})") from None


def _table_checks(table: str, origin: str) -> dict[str, _Check]:
    checks = _SCHEMA.get(table)
    if checks is None:
        known = ", ".join(_SCHEMA)
        raise ConfigError(f"unknown table [{table}] ({origin}); known tables: {known}")
    return checks


def _key_check(table: str, key: str, origin: str) -> _Check:
    checks = _table_checks(table, origin)
    if key not in checks:
        known = ", ".join(checks)
        raise ConfigError(f"unknown key {table}.{key} ({origin}); keys of [{table}]: {known}")
    return checks[key]


def _read_document(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None


def _cross_check(settings: Settings, origin: str) -> None:
    beat = settings.heartbeat
    if beat.max_ttl_seconds < beat.min_ttl_seconds:
        raise ConfigError(
            f"heartbeat.max_ttl_seconds must be a number >= heartbeat.min_ttl_seconds "
            f"({beat.min_ttl_seconds}), got {beat.max_ttl_seconds} ({origin})"
        )
    if not beat.min_ttl_seconds <= beat.ttl_seconds <= beat.max_ttl_seconds:
        raise ConfigError(
            f"heartbeat.ttl_seconds must be a number from heartbeat.min_ttl_seconds "
            f"({beat.min_ttl_seconds}) to heartbeat.max_ttl_seconds ({beat.max_ttl_seconds}), "
            f"got {beat.ttl_seconds} ({origin})"
        )
    leases = settings.leases
    if leases.default_ttl_seconds > leases.max_ttl_seconds:
        raise ConfigError(
            f"leases.default_ttl_seconds must be a number <= leases.max_ttl_seconds "
            f"({leases.max_ttl_seconds}), got {leases.default_ttl_seconds} ({origin})"
        )


def load_settings(
    path: str | Path | None = None, *, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Built-in defaults, then the file at `path` (any subset of keys), then `overrides`.

    `overrides` maps dotted keys (``"database.path"``) to values in the same
    form a file would use; relative paths in them resolve against the current
    directory, relative paths in the file against the file's directory. Every
    problem raises ConfigError naming the dotted key and the expected form.
    """
    values: dict[str, dict[str, Any]] = {table: {} for table in _SCHEMA}
    origins: list[str] = []
    if path is not None:
        file = Path(path).expanduser().absolute()
        origin = f"in {file}"
        origins.append(origin)
        for table, body in _read_document(file).items():
            _table_checks(table, origin)
            if not isinstance(body, dict):
                raise ConfigError(f"{table} must be a table like [{table}] ({origin})")
            for key, value in body.items():
                check = _key_check(table, key, origin)
                values[table][key] = _checked(f"{table}.{key}", check, value, file.parent, origin)
    if overrides:
        origin = "in overrides"
        origins.append(origin)
        cwd = Path.cwd()
        for dotted, value in overrides.items():
            table, _, key = str(dotted).partition(".")
            check = _key_check(table, key, origin)
            values[table][key] = _checked(dotted, check, value, cwd, origin)
    settings = Settings(**{table: _TABLE_TYPES[table](**body) for table, body in values.items()})
    _cross_check(settings, " and ".join(origins) or "built-in defaults")
    return settings
