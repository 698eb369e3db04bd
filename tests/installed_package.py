"""The project as a user installs it: a wheel built from the checkout, installed (not
editable) into a fresh venv or by pipx, with nothing of the checkout on the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "ROOT",
    "WHEELHOUSE",
    "Installed",
    "build_wheel",
    "fresh_venv",
    "main",
    "pipx_install",
    "run",
]

ROOT = Path(__file__).resolve().parents[1]
#: What the wheel is built from; tests, bench and the venv stay out of it.
SOURCES = ("pyproject.toml", "README.md", "supervisor", "actors", "config")
#: The package's dependencies as wheels, and the pip that pipx installs beside them:
#: downloaded by ``tests/run.sh`` while the index is reachable, before the suite goes
#: offline (tests/offline.py), so ``pipx install`` resolves as a user's would, from files.
WHEELHOUSE = ROOT / ".wheelhouse"
#: pipx's shared libraries insist on pip >= 23.1.
_PIP = "pip>=23.1,<27"


def run(
    *args: str | Path, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 300
) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def build_wheel(tmp_path: Path) -> Path:
    """The wheel, built from a copy so the checkout gets no build/ or egg-info; without
    build isolation the backend is the test environment's (no index needed)."""
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
    run(
        sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-index",
        "--no-build-isolation", "-q", "-w", dist, cwd=src,
    )  # fmt: skip
    (wheel,) = dist.glob("*.whl")
    return wheel


class Installed:
    """One installation: its root (what it may name), its python and its command."""

    def __init__(self, root: Path, python: Path, command: Path) -> None:
        self.root = root
        self.python = python
        self.command = command


def fresh_venv(tmp_path: Path, wheel: Path) -> Installed:
    """A new venv with the wheel installed; the dependencies come from this test
    environment's site-packages (a .pth line), so no index is needed."""
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(run(python, "-c", where, cwd=tmp_path).strip())
    # A path line in a .pth file does not run that directory's own .pth files, so the
    # checkout's editable install is not picked up: the project itself comes only from
    # the wheel.
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_test_dependencies.pth").write_text("\n".join(sorted(deps)) + "\n", encoding="utf-8")
    run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
        "-q", wheel, cwd=tmp_path,
    )  # fmt: skip
    return Installed(venv, python, venv / "bin" / "fleet-supervisor")


def pipx_install(tmp_path: Path, wheel: Path) -> Installed:
    """``pipx install`` of the wheel, as the README shows it, into a pipx home of its own.

    pipx resolves the dependencies as it would for a user, from ``WHEELHOUSE`` in place
    of the index: the suite runs with no network.
    """
    assert any(WHEELHOUSE.glob("*.whl")), f"{WHEELHOUSE} is empty: run bash tests/run.sh"
    home = tmp_path / "pipx"
    env = {
        **os.environ,
        "PIPX_HOME": str(home),
        "PIPX_BIN_DIR": str(home / "bin"),
        "PIPX_MAN_DIR": str(home / "man"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
    }
    env.pop("PYTHONPATH", None)
    run(sys.executable, "-m", "pipx", "install", wheel, cwd=tmp_path, env=env, timeout=600)
    venv = home / "venvs" / "mcp-fleet-supervisor"
    return Installed(venv, venv / "bin" / "python", home / "bin" / "fleet-supervisor")


def main() -> None:
    """Fill ``WHEELHOUSE`` from the index; nothing to do (and no index asked) when it was
    filled for these very requirements."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        requirements = [_PIP, *tomllib.load(handle)["project"]["dependencies"]]
    done = WHEELHOUSE / "requirements.txt"
    wanted = "\n".join(requirements) + "\n"
    if done.exists() and done.read_text(encoding="utf-8") == wanted:
        return
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
         "--only-binary", ":all:", "--dest", str(WHEELHOUSE), *requirements],
        check=True,
    )  # fmt: skip
    done.write_text(wanted, encoding="utf-8")


if __name__ == "__main__":
    main()
