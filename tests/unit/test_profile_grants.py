"""`fleet-supervisor profiles grant|revoke`: the retire grant without hand-editing profiles.toml."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest

from supervisor.cli.main import main
from supervisor.errors import ConfigError
from supervisor.operations.registry import decide
from supervisor.policy.control.permissions import OP_RETIRE
from supervisor.settings.profile_edits import change_grant
from supervisor.settings.profiles import ProfileBook, load_profiles

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "profiles.toml"


@pytest.fixture
def book_path(tmp_path: Path) -> Path:
    path = tmp_path / "profiles.toml"
    shutil.copyfile(SHIPPED, path)
    path.chmod(0o600)
    return path


def _changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_grant_adds_only_the_operation_and_apply_is_allowed(book_path: Path) -> None:
    before = book_path.read_text()
    book = ProfileBook(book_path)
    assert not decide(book.get("prgs-reconciler"), "apply").allowed

    assert change_grant(book_path, "prgs-reconciler", OP_RETIRE, grant=True)

    after = book_path.read_text()
    # One line changes: the profile's one-line array gains the operation; every comment
    # and every other profile stay byte for byte.
    assert _changed_lines(before, after) == [
        '-allowed_operations = ["gitea.read"]',
        f'+allowed_operations = ["gitea.read", "{OP_RETIRE}"]',
    ]
    assert decide(book.get("prgs-reconciler"), "apply").allowed
    assert (book_path.stat().st_mode & 0o777) == 0o600


def test_revoke_gives_back_the_original_file(book_path: Path) -> None:
    before = book_path.read_text()
    change_grant(book_path, "prgs-reconciler", OP_RETIRE, grant=True)
    assert change_grant(book_path, "prgs-reconciler", OP_RETIRE, grant=False)
    assert book_path.read_text() == before
    assert not decide(ProfileBook(book_path).get("prgs-reconciler"), "apply").allowed


def test_grant_lifts_a_forbid_which_would_otherwise_win(book_path: Path) -> None:
    assert OP_RETIRE in load_profiles(book_path)["prgs-author"].profile.forbidden_operations
    change_grant(book_path, "prgs-author", OP_RETIRE, grant=True)
    profile = load_profiles(book_path)["prgs-author"].profile
    assert OP_RETIRE in profile.allowed_operations
    assert OP_RETIRE not in profile.forbidden_operations


def test_a_grant_already_held_changes_nothing(book_path: Path) -> None:
    change_grant(book_path, "prgs-reconciler", OP_RETIRE, grant=True)
    before = book_path.read_bytes()
    assert not change_grant(book_path, "prgs-reconciler", OP_RETIRE, grant=True)
    assert not change_grant(book_path, "prgs-controller", OP_RETIRE, grant=False)
    assert book_path.read_bytes() == before


@pytest.mark.parametrize(
    ("profile", "operation", "needle"),
    [("nobody", OP_RETIRE, "unknown profile 'nobody'"), ("prgs-reconciler", "-x y", "operation")],
)
def test_bad_input_is_refused_and_changes_nothing(
    book_path: Path, profile: str, operation: str, needle: str
) -> None:
    before = book_path.read_bytes()
    with pytest.raises(ConfigError, match=needle):
        change_grant(book_path, profile, operation, grant=True)
    assert book_path.read_bytes() == before


def test_the_command_grants_and_revokes(
    book_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--profiles", str(book_path)]
    assert main(["profiles", "grant", "prgs-controller", OP_RETIRE, *flags]) == 0
    assert "granted" in capsys.readouterr().err
    assert decide(ProfileBook(book_path).get("prgs-controller"), "apply").allowed
    assert main(["profiles", "revoke", "prgs-controller", OP_RETIRE, *flags]) == 0
    assert not decide(ProfileBook(book_path).get("prgs-controller"), "apply").allowed
    assert main(["profiles", "grant", "nobody", OP_RETIRE, *flags]) == 2
    assert "unknown profile" in capsys.readouterr().err


def test_a_first_grant_starts_the_profiles_file_from_the_shipped_example(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "fresh-home" / ".config" / "fleet-supervisor" / "profiles.toml"
    assert main(["profiles", "grant", "prgs-reconciler", OP_RETIRE, "--profiles", str(path)]) == 0
    err = capsys.readouterr().err
    assert "created" in err
    assert "granted" in err
    assert path.stat().st_mode & 0o777 == 0o600
    assert _changed_lines(SHIPPED.read_text(), path.read_text()) == [
        '-allowed_operations = ["gitea.read"]',
        f'+allowed_operations = ["gitea.read", "{OP_RETIRE}"]',
    ]
    assert decide(ProfileBook(path).get("prgs-reconciler"), "apply").allowed
