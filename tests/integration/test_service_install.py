"""``service install`` then ``uninstall`` as a user would run them: a unit systemd accepts,
with this user's paths, and afterwards the user's files exactly as they were."""

from __future__ import annotations

import configparser
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from supervisor.cli.systemd import systemd_running
from tests.unavailable import unavailable

pytestmark = pytest.mark.integration


def _tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its kind and, for files, a digest of its bytes."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_dir():
            found[key] = "dir"
        else:
            found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _env(home: Path, stub_bin: Path) -> dict[str, str]:
    # A stub systemctl goes first on PATH: on a machine where systemd runs, install and
    # uninstall call it, and the test must not enable a unit of the real user's manager.
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_RUNTIME_DIR": str(home / "run"),
        "PATH": f"{stub_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }


def _cli(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor.cli", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _stub_systemctl(directory: Path) -> Path:
    directory.mkdir()
    log = directory / "calls.log"
    script = directory / "systemctl"
    script.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\n')
    script.chmod(0o755)
    return log


def _verify(unit: Path, *, user: bool, runtime: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        unavailable(
            "systemd-analyze is missing (Debian: apt-get install systemd; tests/run.sh does)"
        )
    runtime.mkdir(exist_ok=True)
    argv = [analyze, *(["--user"] if user else []), "verify", str(unit)]
    done = subprocess.run(
        argv,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # verify exits 0 on some complaints (an unknown Type=, say): nothing printed is the pass.
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), argv


def _service(unit: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(unit.read_text())
    return parser["Service"]


def test_a_user_unit_installs_verifies_and_uninstalls_to_the_files_as_they_were(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    (home / ".config" / "fleet-supervisor").mkdir(parents=True)
    (home / "run").mkdir()
    config = home / ".config" / "fleet-supervisor" / "supervisor.toml"
    config.write_text('[socket]\npath = "~/my.sock"\n')
    (home / ".bashrc").write_text("# the user's own\n")
    calls = _stub_systemctl(tmp_path / "stub")
    env = _env(home, tmp_path / "stub")
    before = _tree(home)

    installed = _cli(env, "service", "install")
    assert installed.returncode == 0, installed.stderr
    unit = home / ".config" / "systemd" / "user" / "fleet-supervisor.service"
    assert unit.is_file()
    assert unit.stat().st_mode & 0o777 == 0o644
    command = shlex.split(_service(unit)["ExecStart"])
    # The config file found at the default place, and the socket it names: where this
    # user's CLI and wrapped servers look for the daemon.
    assert command[command.index("--config") + 1] == str(config)
    assert command[command.index("--socket") + 1] == str(home / "my.sock")
    assert command[command.index("--db") + 1] == str(
        home / ".local" / "state" / "fleet-supervisor" / "registry.sqlite3"
    )
    assert Path(command[0]).is_file()
    _verify(unit, user=True, runtime=tmp_path / "verify-run")

    if systemd_running():
        assert "enable --now fleet-supervisor.service" in calls.read_text()
    else:
        assert "systemd is not running here" in installed.stdout
        assert "systemctl --user daemon-reload && systemctl --user enable --now" in (
            installed.stdout
        )
        assert not calls.exists()

    status = _cli(env, "service", "status", "--json")
    assert '"installed": true' in status.stdout
    assert '"current": true' in status.stdout

    again = _cli(env, "service", "install")  # idempotent: the same unit, the same record
    assert again.returncode == 0, again.stderr

    removed = _cli(env, "service", "uninstall")
    assert removed.returncode == 0, removed.stderr
    assert _tree(home) == before
    assert _cli(env, "service", "status").returncode == 1


def test_a_system_unit_verifies_and_names_the_boot_target(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _stub_systemctl(tmp_path / "stub")
    env = _env(home, tmp_path / "stub")
    units = tmp_path / "units"
    done = _cli(env, "service", "install", "--system", "--unit-dir", str(units))
    assert done.returncode == 0, done.stderr
    unit = units / "fleet-supervisor.service"
    assert "WantedBy=multi-user.target" in unit.read_text()
    _verify(unit, user=False, runtime=tmp_path / "verify-run")
    assert _cli(env, "service", "uninstall", "--system", "--unit-dir", str(units)).returncode == 0
    assert not units.exists()


def test_a_unit_install_did_not_write_is_never_replaced_or_removed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    units = home / ".config" / "systemd" / "user"
    units.mkdir(parents=True)
    theirs = units / "fleet-supervisor.service"
    theirs.write_text("[Service]\nExecStart=/usr/local/bin/their-own run\n")
    _stub_systemctl(tmp_path / "stub")
    env = _env(home, tmp_path / "stub")
    before = _tree(home)
    install = _cli(env, "service", "install")
    assert install.returncode == 1
    assert "was not written by service install" in install.stderr
    uninstall = _cli(env, "service", "uninstall")
    assert uninstall.returncode == 1
    assert _tree(home) == before


def test_dry_run_prints_the_unit_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _stub_systemctl(tmp_path / "stub")
    env = _env(home, tmp_path / "stub")
    done = _cli(env, "service", "install", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "Type=notify" in done.stdout
    assert "WatchdogSec=30" in done.stdout
    assert _tree(home) == {}
