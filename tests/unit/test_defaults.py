"""The shipped default files: package data that stays equal to the documented config/ files."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from supervisor.defaults import DEFAULT_NAMES, PROFILES, SUPERVISOR, read_default
from supervisor.settings.config import Settings, load_settings
from supervisor.settings.profiles import load_profiles

CONFIG = Path(__file__).resolve().parents[2] / "config"


@pytest.mark.parametrize("name", DEFAULT_NAMES)
def test_packaged_copy_equals_the_documented_config_file(name: str) -> None:
    # config/ is the source of truth; edit it and copy it to supervisor/defaults/.
    assert read_default(name) == (CONFIG / name).read_text(encoding="utf-8"), (
        f"supervisor/defaults/{name} differs from config/{name}: copy config/{name} over it"
    )


def test_packaged_supervisor_toml_is_the_built_in_defaults(tmp_path: Path) -> None:
    path = tmp_path / SUPERVISOR
    path.write_text(read_default(SUPERVISOR), encoding="utf-8")
    assert load_settings(path) == Settings()


def test_packaged_profiles_parse(tmp_path: Path) -> None:
    path = tmp_path / PROFILES
    path.write_text(read_default(PROFILES), encoding="utf-8")
    assert "prgs-reconciler" in load_profiles(path)
    assert tomllib.loads(read_default(PROFILES))["profiles"]


def test_unknown_default_is_refused() -> None:
    with pytest.raises(ValueError, match="no shipped default"):
        read_default("../pyproject.toml")
