"""Tests for supervisor.settings.profiles: shipped profiles, tokens, fail-closed reads, rewriter."""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import threading
import tomllib
from pathlib import Path

import pytest

import supervisor.settings.profile_edits as profiles_module
from supervisor.errors import ConfigError
from supervisor.operations.registry import decide
from supervisor.policy.control.permissions import OP_READ, OP_RETIRE
from supervisor.settings.profile_edits import create_token, ensure_profiles_file
from supervisor.settings.profiles import ROLE_KINDS, ProfileBook, hash_token, load_profiles

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "profiles.toml"
ROLES = {
    "prgs-author": "author",
    "prgs-reviewer": "reviewer",
    "prgs-merger": "merger",
    "prgs-controller": "controller",
    "prgs-reconciler": "reconciler",
    "supervisor": "reconciler",
}


@pytest.fixture
def book_path(tmp_path: Path) -> Path:
    path = tmp_path / "profiles.toml"
    shutil.copyfile(SHIPPED, path)
    return path


def grant_retire(path: Path, profile: str) -> None:
    """The operator's edit: add the retire grant to one profile's allowed operations."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"[profiles.{profile}]")
    for number in range(start, len(lines)):
        if lines[number].startswith("allowed_operations = ["):
            lines[number] = lines[number].replace("[", f'["{OP_RETIRE}", ', 1)
            break
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --- shipped file ------------------------------------------------------------------------------


def test_shipped_profiles_load_with_their_roles() -> None:
    records = load_profiles(SHIPPED)
    assert {name: r.profile.role_kind for name, r in records.items()} == ROLES
    for record in records.values():
        assert OP_READ in record.profile.allowed_operations
        assert record.token_sha256 == frozenset()
        assert record.profile.role_kind in ROLE_KINDS


def test_no_shipped_profile_can_retire() -> None:
    for record in load_profiles(SHIPPED).values():
        assert OP_RETIRE not in record.profile.allowed_operations
        assert not decide(record.profile, "apply").allowed


def test_shipped_operator_profiles_can_plan() -> None:
    records = load_profiles(SHIPPED)
    for name in ("prgs-controller", "prgs-reconciler", "supervisor"):
        assert decide(records[name].profile, "plan").allowed
    assert not decide(records["prgs-author"].profile, "plan").allowed


# --- tokens ------------------------------------------------------------------------------------


def test_created_token_authenticates_and_a_wrong_one_does_not(book_path: Path) -> None:
    token = create_token(book_path, "prgs-controller")
    book = ProfileBook(book_path)
    profile = book.authenticate(token)
    assert profile is not None
    assert profile.name == "prgs-controller"
    assert book.authenticate(token + "x") is None
    assert book.authenticate("") is None
    assert hash_token(token) in load_profiles(book_path)["prgs-controller"].token_sha256


def test_created_tokens_never_look_like_a_command_line_flag(book_path: Path) -> None:
    # token_urlsafe alone starts with '-' about once in 64 tokens.
    tokens = [create_token(book_path, "prgs-controller") for _ in range(200)]
    assert not any(t.startswith("-") for t in tokens)
    assert len(set(tokens)) == 200


def test_authenticate_sees_a_token_created_after_the_first_read(book_path: Path) -> None:
    book = ProfileBook(book_path)
    first = create_token(book_path, "prgs-reconciler")
    assert book.authenticate(first) is not None
    second = create_token(book_path, "prgs-author")
    profile = book.authenticate(second)
    assert profile is not None
    assert profile.role_kind == "author"
    assert book.authenticate(first) is not None


def test_create_token_keeps_header_and_other_profiles(book_path: Path) -> None:
    before = load_profiles(book_path)
    header = book_path.read_text(encoding="utf-8").split("\n[profiles.")[0].rstrip()
    assert "NO profile below holds" in header
    token = create_token(book_path, "prgs-merger")
    after = load_profiles(book_path)
    assert book_path.read_text(encoding="utf-8").startswith(header)
    assert {n: r.profile for n, r in after.items()} == {n: r.profile for n, r in before.items()}
    assert after["prgs-merger"].token_sha256 == {hash_token(token)}
    assert list(after) == list(before)


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_create_token_keeps_the_files_permissions(book_path: Path, mode: int) -> None:
    book_path.chmod(mode)
    inode = book_path.stat().st_ino
    create_token(book_path, "prgs-controller")
    assert stat.S_IMODE(book_path.stat().st_mode) == mode
    # Replaced (a new inode by rename), not rewritten in place, and no temp file left behind.
    assert book_path.stat().st_ino != inode
    assert not [p for p in book_path.parent.iterdir() if p.name.endswith(".tmp")]


COMMENTED = """\
# Operator notes at the top.

[profiles.ops]  # the on-call controller
# who: the on-call rotation; ticket OPS-12
role_kind = "controller"
allowed_operations = [
    "gitea.read",   # snapshot and plan
    # "gitea.worker_registry.retire",  (granted during incidents only)
]
token_sha256 = []   # filled in by `token create`

# Reviewers use their own tokens.
[profiles.rev]
role_kind = "reviewer"
allowed_operations = ["gitea.read"]
"""


def test_create_token_keeps_every_comment_and_the_formatting(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(COMMENTED, encoding="utf-8")

    first = create_token(path, "ops")
    second = create_token(path, "rev")

    text = path.read_text(encoding="utf-8")
    one, two = hash_token(first), hash_token(second)
    # Exactly the two token_sha256 values changed; every other byte is the operator's.
    assert text == COMMENTED.replace(
        "token_sha256 = []   #", f'token_sha256 = ["{one}"]   #'
    ).replace(
        'allowed_operations = ["gitea.read"]\n',
        f'allowed_operations = ["gitea.read"]\ntoken_sha256 = ["{two}"]\n',
    )
    records = load_profiles(path)
    assert records["ops"].token_sha256 == {one}
    assert records["rev"].token_sha256 == {two}


def test_more_hashes_are_listed_one_a_line(book_path: Path) -> None:
    tokens = [create_token(book_path, "prgs-reconciler") for _ in range(3)]
    text = book_path.read_text(encoding="utf-8")
    listed = "".join(f'    "{hash_token(t)}",\n' for t in tokens)
    assert f"token_sha256 = [\n{listed}]\n" in text


def test_the_rewrite_runs_under_the_sidecar_lock(
    book_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    real_write = profiles_module._write_atomically

    def probing_write(path: Path, text: str, *, like: os.stat_result | None) -> None:
        # Between the read and the replace another writer must not get the lock.
        fd = os.open(book_path.with_name(book_path.name + ".lock"), os.O_RDWR)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                seen.append(True)
            else:
                seen.append(False)
        finally:
            os.close(fd)
        real_write(path, text, like=like)

    monkeypatch.setattr(profiles_module, "_write_atomically", probing_write)
    create_token(book_path, "prgs-controller")
    assert seen == [True]


def test_concurrent_token_creates_all_land_in_the_file(book_path: Path) -> None:
    names = ["prgs-controller", "prgs-reconciler", "prgs-author", "prgs-merger"]
    made: list[tuple[str, str]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(len(names) * 2)

    def mint(name: str) -> None:
        try:
            start.wait()
            for _ in range(3):
                made.append((name, create_token(book_path, name)))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=mint, args=(n,)) for n in names * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(made) == 24
    records = load_profiles(book_path)
    for name in names:
        assert records[name].token_sha256 == {hash_token(t) for n, t in made if n == name}


def test_ensure_profiles_file_creates_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "new" / "profiles.toml"
    template = SHIPPED.read_text(encoding="utf-8")
    assert ensure_profiles_file(path, template) is True
    assert path.read_text(encoding="utf-8") == template
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = create_token(path, "prgs-controller")
    assert ensure_profiles_file(path, template) is False
    assert hash_token(token) in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("template", ['[profiles.a]\nrole_kind = "admin"\n', "[profiles.a\n"])
def test_ensure_profiles_file_refuses_a_broken_template(tmp_path: Path, template: str) -> None:
    path = tmp_path / "profiles.toml"
    with pytest.raises(ConfigError):
        ensure_profiles_file(path, template)
    assert not path.exists()


def test_create_token_for_unknown_profile_raises(book_path: Path) -> None:
    before = book_path.read_bytes()
    with pytest.raises(ConfigError, match="unknown profile 'nobody'"):
        create_token(book_path, "nobody")
    assert book_path.read_bytes() == before


def test_rewriter_round_trips_awkward_operation_names(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(
        '[profiles.odd]\nrole_kind = "controller"\n'
        'allowed_operations = ["quote\\"back\\\\slash", "tab\\tdel\\u007f", "ünï"]\n',
        encoding="utf-8",
    )
    before = load_profiles(path)["odd"].profile
    create_token(path, "odd")
    assert load_profiles(path)["odd"].profile == before


# --- grants, forbidden, revocation -------------------------------------------------------------


def test_forbidden_wins_is_preserved(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(
        '[profiles.ctl]\nrole_kind = "controller"\n'
        f'allowed_operations = ["{OP_READ}", "{OP_RETIRE}"]\n'
        f'forbidden_operations = ["{OP_RETIRE}"]\n',
        encoding="utf-8",
    )
    profile = ProfileBook(path).get("ctl")
    assert profile is not None
    assert OP_RETIRE in profile.allowed_operations
    assert OP_RETIRE in profile.forbidden_operations
    decision = decide(profile, "apply")
    assert not decision.allowed
    assert "forbidden" in decision.reason


def test_granting_then_revoking_is_seen_by_get_immediately(book_path: Path) -> None:
    book = ProfileBook(book_path)
    original = book_path.read_text(encoding="utf-8")
    assert not decide(book.get("prgs-controller"), "apply").allowed
    grant_retire(book_path, "prgs-controller")
    assert decide(book.get("prgs-controller"), "apply").allowed
    # Same size and, on a coarse filesystem clock, maybe the same mtime: get must still re-read.
    book_path.write_text(original, encoding="utf-8")
    assert not decide(book.get("prgs-controller"), "apply").allowed


def test_removed_profile_is_denied(book_path: Path) -> None:
    book = ProfileBook(book_path)
    assert book.get("prgs-reconciler") is not None
    text = book_path.read_text(encoding="utf-8")
    book_path.write_text(text.replace("[profiles.prgs-reconciler]", "[profiles.gone]"), "utf-8")
    assert book.get("prgs-reconciler") is None


@pytest.mark.parametrize(
    "breakage",
    [
        "[profiles.prgs-controller\n",  # malformed TOML
        '[profiles.x]\nrole_kind = "admin"\n',  # bad role
        None,  # file deleted
    ],
)
def test_broken_or_missing_file_denies_everything(book_path: Path, breakage: str | None) -> None:
    token = create_token(book_path, "prgs-controller")
    book = ProfileBook(book_path)
    assert book.get("prgs-controller") is not None
    assert book.authenticate(token) is not None
    if breakage is None:
        book_path.unlink()
    else:
        book_path.write_text(breakage, encoding="utf-8")
    assert book.get("prgs-controller") is None
    assert book.authenticate(token) is None
    assert book.error is not None
    with pytest.raises(ConfigError):
        book.reload()


def test_repaired_file_is_picked_up_again(book_path: Path) -> None:
    token = create_token(book_path, "prgs-controller")
    good = book_path.read_text(encoding="utf-8")
    book = ProfileBook(book_path)
    book_path.write_text("not toml [", encoding="utf-8")
    assert book.authenticate(token) is None
    book_path.write_text(good, encoding="utf-8")
    assert book.authenticate(token) is not None
    assert book.error is None


# --- validation --------------------------------------------------------------------------------


BAD_FILES = [
    ('[profiles.a]\nrole_kind = "admin"\n', "profiles.a.role_kind"),
    ("[profiles.a]\nallowed_operations = []\n", "profiles.a.role_kind"),
    ('[profiles.a]\nrole_kind = "author"\nallowed_operations = "gitea.read"\n', "allowed_op"),
    ('[profiles.a]\nrole_kind = "author"\nallowed_operations = [""]\n', "profiles.a.allowed"),
    ('[profiles.a]\nrole_kind = "author"\nforbidden_operations = [1]\n', "profiles.a.forbidden"),
    ('[profiles.a]\nrole_kind = "author"\ntoken_sha256 = ["ABC"]\n', "profiles.a.token_sha256"),
    ('[profiles.a]\nrole_kind = "author"\ntoken_sha256 = ["' + "A" * 64 + '"]\n', "token_sha256"),
    ('[profiles.a]\nrole_kind = "author"\ngrants = []\n', "profiles.a.grants"),
    ("[other]\nx = 1\n", "'other'"),
    ('[profiles."a b"]\nrole_kind = "author"\n', "'a b'"),
    ('[profiles.a]\nrole_kind = "author"\n[profiles.a.nested]\n', "profiles.a.nested"),
    (
        '[profiles.a]\nrole_kind = "author"\ntoken_sha256 = ["' + "a" * 64 + '"]\n'
        '[profiles.b]\nrole_kind = "author"\ntoken_sha256 = ["' + "a" * 64 + '"]\n',
        "profiles.b.token_sha256",
    ),
]


@pytest.mark.parametrize(("text", "needle"), BAD_FILES)
def test_bad_profiles_name_the_profile_and_key(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_profiles(path)
    assert needle in caught.value.detail


def test_hash_token_is_hex_sha256() -> None:
    digest = hash_token("secret")
    assert digest == "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
    assert tomllib.loads(f'x = "{digest}"')["x"] == digest


def test_tokens_are_unique_and_not_stored(book_path: Path) -> None:
    tokens = {create_token(book_path, "prgs-controller") for _ in range(3)}
    assert len(tokens) == 3
    text = book_path.read_text(encoding="utf-8")
    assert not any(token in text for token in tokens)
    assert os.access(book_path, os.R_OK)
