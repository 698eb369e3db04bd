"""Work-lease settings: defaults, bounds, and how they reach the writer's control plane."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.control.context import ControlSettings
from supervisor.daemon.service import app_settings
from supervisor.errors import ConfigError
from supervisor.policy.control.plane import DEFAULT_LEASE_TTL_SECONDS, MAX_LEASE_TTL_SECONDS
from supervisor.settings.config import load_settings


def test_defaults_match_the_policy_and_reach_the_writer() -> None:
    settings = load_settings()
    assert settings.leases.default_ttl_seconds == DEFAULT_LEASE_TTL_SECONDS
    assert settings.leases.max_ttl_seconds == MAX_LEASE_TTL_SECONDS
    writer = app_settings(settings).writer
    assert writer.control == ControlSettings()
    # The retirement table's writer settings are kept alongside.
    assert writer.max_batch == settings.retirement.writer_max_batch


def test_configured_values_reach_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "supervisor.toml"
    path.write_text("[leases]\ndefault_ttl_seconds = 60\nmax_ttl_seconds = 600\n", "utf-8")
    control = app_settings(load_settings(path)).writer.control
    assert control == ControlSettings(default_lease_ttl_seconds=60.0, max_lease_ttl_seconds=600.0)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("default_ttl_seconds = 0", "leases.default_ttl_seconds"),
        ("max_ttl_seconds = 86401", "leases.max_ttl_seconds"),
        ("default_ttl_seconds = 700\nmax_ttl_seconds = 600", "<= leases.max_ttl_seconds"),
    ],
)
def test_bad_lease_settings_are_refused(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "supervisor.toml"
    path.write_text(f"[leases]\n{text}\n", "utf-8")
    with pytest.raises(ConfigError, match=fragment):
        load_settings(path)
