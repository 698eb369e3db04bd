"""The built wheel on its own: installed in a fresh venv, no checkout on the path."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from supervisor.settings.profiles import hash_token, load_profiles
from tests.installed_package import ROOT, build_wheel, fresh_venv, run

pytestmark = [pytest.mark.integration]


def test_the_installed_wheel_creates_a_token_from_its_shipped_profiles(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"supervisor/defaults/profiles.toml", "supervisor/defaults/supervisor.toml"} <= names
    venv = fresh_venv(tmp_path, wheel).root
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config-home")
    env.pop("FLEET_SUPERVISOR_TOKEN", None)

    where = run(
        venv / "bin" / "python", "-c", "import supervisor; print(supervisor.__file__)",
        cwd=cwd, env=env,
    )  # fmt: skip
    assert Path(where.strip()).is_relative_to(venv), "the checkout leaked onto the path"

    token = run(
        venv / "bin" / "fleet-supervisor", "token", "create", "prgs-reconciler", cwd=cwd, env=env
    ).strip()

    profiles = tmp_path / "config-home" / "fleet-supervisor" / "profiles.toml"
    assert load_profiles(profiles)["prgs-reconciler"].token_sha256 == {hash_token(token)}
    # The operator's new file is the shipped example plus exactly one hash.
    shipped = (ROOT / "config" / "profiles.toml").read_text(encoding="utf-8")
    text = profiles.read_text(encoding="utf-8")
    assert text.replace(f'["{hash_token(token)}"]', "[]", 1) == shipped
