"""The PostgreSQL test fixture's own rules: where binaries are found, and CI never skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import pg_server
from tests.pg_server import find_pg_bindir, missing_binaries_verdict


@pytest.mark.parametrize("value", ["true", "1", "TRUE", "yes"])
def test_without_binaries_ci_fails_instead_of_skipping(value: str) -> None:
    verdict, reason = missing_binaries_verdict({"CI": value})
    assert verdict == "fail"
    assert "CI needs PostgreSQL" in reason


@pytest.mark.parametrize("env", [{}, {"CI": ""}, {"CI": "false"}])
def test_without_binaries_a_local_run_skips_and_says_why(env: dict[str, str]) -> None:
    verdict, reason = missing_binaries_verdict(env)
    assert verdict == "skip"
    assert "initdb" in reason


def test_binaries_are_found_under_the_debian_layout_when_not_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for version in ("13", "15"):
        bindir = tmp_path / version / "bin"
        bindir.mkdir(parents=True)
        for tool in ("initdb", "pg_ctl"):
            (bindir / tool).write_text("")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(pg_server, "_DEBIAN_ROOT", tmp_path)
    assert find_pg_bindir() == tmp_path / "15" / "bin"
    monkeypatch.setattr(pg_server, "_DEBIAN_ROOT", tmp_path / "nothing")
    assert find_pg_bindir() is None
