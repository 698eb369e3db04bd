"""Loads config/supervisor.toml (and dotted-key overrides) into frozen, validated settings."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_type_hints

from actors.control.context import ControlSettings
from actors.heartbeat.actor import HeartbeatSettings
from actors.host_lease.actor import HostLeaseSettings
from actors.lease_watch import LeaseWatchSettings
from actors.liveness.actor import LivenessSettings
from actors.retirement.apply_tx import ApplySettings
from actors.server_guard.actor import ServerGuardSettings
from actors.writer.actor import WriterSettings
from supervisor.errors import ConfigError
from supervisor.policy.identity.exec_marker import daemon_key
from supervisor.policy.retirement.apply_rules import (
    DEFAULT_MASS_GUARD_FLOOR,
    DEFAULT_MASS_GUARD_SHARE,
)
from supervisor.settings.config_checks import (
    CHECK_KEY,
    LOG_LEVELS,
    NON_NEGATIVE,
    POSITIVE,
    Check,
    Invalid,
    boolean_check,
    carried,
    current_key,
    integer_check,
    log_level_check,
    loopback_check,
    mode_check,
    number_check,
    optional_text_check,
    path_check,
    postgres_url_check,
    setting,
    text_check,
)
from supervisor.settings.discovery import DiscoveryConfig
from supervisor.settings.reap_config import ReapConfig
from supervisor.settings.servers_config import ServersConfig

if TYPE_CHECKING:
    pass

__all__ = [
    "LOG_LEVELS",
    "AuthConfig",
    "DatabaseSettings",
    "ExecConfig",
    "HeartbeatConfig",
    "HostsConfig",
    "LeaseConfig",
    "LivenessConfig",
    "McpConfig",
    "OpsConfig",
    "ReapConfig",
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


@dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseSettings:
    path: Path = field(
        default_factory=default_database_path,
        metadata={CHECK_KEY: path_check(default_database_path)},
    )
    busy_timeout_ms: int = setting(5000, integer_check(0))
    # A shared PostgreSQL registry instead of the SQLite file (None = SQLite at path).
    url: str | None = setting(None, postgres_url_check)


@dataclass(frozen=True, slots=True, kw_only=True)
class SupervisorSettings:
    host_id: str | None = setting(None, optional_text_check)
    log_level: str = setting("info", log_level_check)
    canonical_repository: str | None = setting(None, optional_text_check)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatConfig:
    ttl_seconds: float = setting(30.0, POSITIVE)
    min_ttl_seconds: float = setting(1.0, POSITIVE)
    max_ttl_seconds: float = setting(3600.0, POSITIVE)
    max_batch: int = setting(4096, integer_check(1))
    max_in_flight: int = setting(4, integer_check(1))

    def to_actor(self) -> HeartbeatSettings:
        return carried(self, HeartbeatSettings)


@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessConfig:
    sweep_interval_seconds: float = setting(5.0, POSITIVE)
    sweep_chunk: int = setting(256, integer_check(1))
    use_pidfd: bool = setting(True, boolean_check)

    def to_actor(self) -> LivenessSettings:
        return carried(self, LivenessSettings)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseConfig:
    expiry_interval_seconds: float = setting(5.0, POSITIVE)
    default_ttl_seconds: float = setting(900.0, POSITIVE)
    max_ttl_seconds: float = setting(
        86400.0, number_check("a number > 0 and <= 86400", lambda x: 0 < x <= 86400)
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
class HostsConfig:
    """Host leases of supervisors sharing a PostgreSQL registry (on when database.url is)."""

    lease_seconds: float = setting(30.0, POSITIVE)
    renew_interval_seconds: float = setting(10.0, POSITIVE)
    retire_after_seconds: float = setting(600.0, POSITIVE)

    def to_actor(self, *, shared: bool) -> HostLeaseSettings:
        return carried(self, HostLeaseSettings, enabled=shared)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetirementConfig:
    mass_guard_share: float = setting(
        DEFAULT_MASS_GUARD_SHARE, number_check("a number > 0 and <= 1", lambda x: 0 < x <= 1)
    )
    mass_guard_floor: int = setting(DEFAULT_MASS_GUARD_FLOOR, integer_check(0))
    auto_enabled: bool = setting(False, boolean_check)
    auto_interval_seconds: float = setting(300.0, POSITIVE)
    auto_profile: str = setting("supervisor", text_check)
    writer_max_batch: int = setting(4096, integer_check(1))

    def to_writer(self) -> WriterSettings:
        # The guard is enforced inside the apply transaction, which the writer runs.
        guard = ApplySettings(
            mass_guard_share=self.mass_guard_share, mass_guard_floor=self.mass_guard_floor
        )
        return WriterSettings(max_batch=self.writer_max_batch, apply=guard)


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartConfig:
    max_restarts: int = setting(3, integer_check(0))
    window_seconds: float = setting(60.0, POSITIVE)


@dataclass(frozen=True, slots=True, kw_only=True)
class SocketConfig:
    path: Path = field(
        default_factory=default_socket_path, metadata={CHECK_KEY: path_check(default_socket_path)}
    )
    mode: int = setting(0o600, mode_check)
    group: str | None = setting(None, optional_text_check)
    max_frame_bytes: int = setting(1048576, integer_check(1))
    request_timeout_seconds: float = setting(30.0, POSITIVE)
    max_connections: int = setting(256, integer_check(1))
    #: At max_connections, the connection idle longest is closed to admit a new one if
    #: it has been idle at least this long (its client reconnects on its next request).
    evict_idle_after_seconds: float = setting(1.0, NON_NEGATIVE)


@dataclass(frozen=True, slots=True, kw_only=True)
class McpConfig:
    http_enabled: bool = setting(False, boolean_check)
    http_host: str = setting("127.0.0.1", loopback_check)
    #: 0 lets the OS pick a free port (tests); reporting the bound port is the app's job.
    http_port: int = setting(8765, integer_check(0, 65535))
    #: Largest snapshot or plan answer a tool returns; longer lists are cut, and say so.
    max_result_bytes: int = setting(65536, integer_check(4096, 1 << 30))


@dataclass(frozen=True, slots=True, kw_only=True)
class OpsConfig:
    """The operations HTTP listener (/metrics, /healthz, /readyz)."""

    http_enabled: bool = setting(False, boolean_check)
    http_host: str = setting("127.0.0.1", loopback_check)
    #: 9464 is the customary Prometheus exporter port; 0 lets the OS pick one (tests).
    http_port: int = setting(9464, integer_check(0, 65535))
    page_enabled: bool = setting(True, boolean_check)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecConfig:
    """How the daemon's server guard treats wrapped servers whose client is gone."""

    stop_orphans: bool = setting(True, boolean_check)
    stop_grace_seconds: float = setting(5.0, POSITIVE)
    rescan_seconds: float = setting(30.0, POSITIVE)

    def to_actor(self, *, exec_socket: str | None = None) -> ServerGuardSettings:
        return ServerGuardSettings(
            stop_orphans=self.stop_orphans,
            grace_seconds=self.stop_grace_seconds,
            rescan_seconds=self.rescan_seconds,
            daemon_key=daemon_key(os.path.abspath(exec_socket)) if exec_socket else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthConfig:
    profiles_path: Path = field(
        default_factory=default_profiles_path,
        metadata={CHECK_KEY: path_check(default_profiles_path)},
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
    hosts: HostsConfig = field(default_factory=HostsConfig)
    socket: SocketConfig = field(default_factory=SocketConfig)
    mcp: McpConfig = field(default_factory=McpConfig)
    ops: OpsConfig = field(default_factory=OpsConfig)
    exec: ExecConfig = field(default_factory=ExecConfig)
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    reap: ReapConfig = field(default_factory=ReapConfig)
    servers: ServersConfig = field(default_factory=ServersConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)


#: Table name → its dataclass → key → check, read off the dataclasses so they can never disagree.
_TABLE_TYPES: dict[str, type[Any]] = get_type_hints(Settings)
_SCHEMA = {
    table: {f.name: f.metadata[CHECK_KEY] for f in fields(cls)}
    for table, cls in _TABLE_TYPES.items()
}


def _checked(dotted: str, check: Check, value: Any, base: Path, origin: str) -> Any:
    try:
        return check(value, base)
    except Invalid as exc:
        raise ConfigError(f"{dotted} must be {exc.expected}, got {value!r} ({origin})") from None


def _table_checks(table: str, origin: str) -> dict[str, Check]:
    checks = _SCHEMA.get(table)
    if checks is None:
        known = ", ".join(_SCHEMA)
        raise ConfigError(f"unknown table [{table}] ({origin}); known tables: {known}")
    return checks


def _key_check(table: str, key: str, origin: str) -> Check:
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
    hosts = settings.hosts
    if hosts.renew_interval_seconds >= hosts.lease_seconds:
        # A lease renewed no sooner than it expires is expired between every renewal.
        raise ConfigError(
            f"hosts.renew_interval_seconds must be a number < hosts.lease_seconds "
            f"({hosts.lease_seconds}), got {hosts.renew_interval_seconds} ({origin})"
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
                name = current_key(table, key, body, origin)
                check = _key_check(table, name, origin)
                values[table][name] = _checked(f"{table}.{key}", check, value, file.parent, origin)
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
