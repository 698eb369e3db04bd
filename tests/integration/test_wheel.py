"""The built wheel on its own: installed in a fresh venv, no checkout on the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from supervisor.settings.profiles import hash_token, load_profiles

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
#: What the wheel is built from; tests, bench and the venv stay out of it.
SOURCES = ("pyproject.toml", "README.md", "supervisor", "actors", "config")


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _build_wheel(tmp_path: Path) -> Path:
    # Built from a copy so the checkout gets no build/ or egg-info; without build
    # isolation the backend is the test environment's (no index needed).
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(
                origin, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
        else:
            shutil.copy2(origin, src / name)
    dist = tmp_path / "dist"
    _run(
        sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-index",
        "--no-build-isolation", "-q", "-w", dist, cwd=src,
    )  # fmt: skip
    (wheel,) = dist.glob("*.whl")
    return wheel


def _fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run(python, "-c", where, cwd=tmp_path).strip())
    # Dependencies come from this test environment's site-packages. A path line in a
    # .pth file does not run that directory's own .pth files, so the checkout's
    # editable install is not picked up: the project itself comes only from the wheel.
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_test_dependencies.pth").write_text("\n".join(sorted(deps)) + "\n", encoding="utf-8")
    _run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
        "-q", wheel, cwd=tmp_path,
    )  # fmt: skip
    return venv


def test_the_installed_wheel_creates_a_token_from_its_shipped_profiles(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"supervisor/defaults/profiles.toml", "supervisor/defaults/supervisor.toml"} <= names
    venv = _fresh_venv(tmp_path, wheel)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config-home")
    env.pop("FLEET_SUPERVISOR_TOKEN", None)

    where = _run(
        venv / "bin" / "python", "-c", "import supervisor; print(supervisor.__file__)",
        cwd=cwd, env=env,
    )  # fmt: skip
    assert Path(where.strip()).is_relative_to(venv), "the checkout leaked onto the path"

    token = _run(
        venv / "bin" / "fleet-supervisor", "token", "create", "prgs-reconciler", cwd=cwd, env=env
    ).strip()

    profiles = tmp_path / "config-home" / "fleet-supervisor" / "profiles.toml"
    assert load_profiles(profiles)["prgs-reconciler"].token_sha256 == {hash_token(token)}
    # The operator's new file is the shipped example plus exactly one hash.
    shipped = (ROOT / "config" / "profiles.toml").read_text(encoding="utf-8")
    text = profiles.read_text(encoding="utf-8")
    assert text.replace(f'["{hash_token(token)}"]', "[]", 1) == shipped
