"""Incarnation tokens: an inode tells apart two processes of one start; old tokens as before."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.incarnation import (
    inode_of,
    same_incarnation,
    start_of,
    told_apart,
    with_inode,
)

STARTS = st.one_of(
    st.integers(0, 10**12).map(lambda n: f"ticks-{n}"),
    st.floats(0, 2e9, allow_nan=False).map(lambda t: f"ctime-{t!r}"),
)
INODES = st.one_of(st.none(), st.integers(1, 2**63))
TOKENS = st.builds(with_inode, STARTS, INODES)


@pytest.mark.parametrize(
    ("a", "b", "same", "decided"),
    [
        # Tokens recorded before inodes were: compared by their start, exactly as before.
        ("ticks-5", "ticks-5", True, False),
        ("ticks-5", "ticks-6", False, True),
        # One side without an inode (an old row, a stat probe, a kernel without pidfs):
        # the start decides "different"; equal starts cannot be told apart.
        ("ticks-5@ino-9", "ticks-5", True, False),
        ("ticks-5", "ticks-5@ino-9", True, False),
        ("ticks-5@ino-9", "ticks-6", False, True),
        # Both with an inode: two processes of one start (a pid reused within one clock
        # tick) are told apart; one process is recognized.
        ("ticks-5@ino-9", "ticks-5@ino-10", False, True),
        ("ticks-5@ino-9", "ticks-5@ino-9", True, True),
        ("ticks-5@ino-9", "ticks-6@ino-9", False, True),
        ("ctime-1.5@ino-3", "ctime-1.5", True, False),
    ],
)
def test_same_incarnation_table(a: str, b: str, same: bool, decided: bool) -> None:
    assert same_incarnation(a, b) is same
    assert told_apart(a, b) is decided


def test_parts_of_a_token() -> None:
    assert start_of("ticks-5@ino-9") == "ticks-5"
    assert inode_of("ticks-5@ino-9") == 9
    assert start_of("ticks-5") == "ticks-5"
    assert inode_of("ticks-5") is None
    # A mangled inode is no inode: the start alone is compared, never a wrong number.
    assert inode_of("ticks-5@ino-x") is None
    assert with_inode("ticks-5@ino-9", None) == "ticks-5"
    assert with_inode("ticks-5", 12) == "ticks-5@ino-12"
    # Tokens stay plain text, so evidence and rows carry them unchanged.
    assert PidEvidence(alive=True, start_time=with_inode("ticks-5", 12)).start_time == (
        "ticks-5@ino-12"
    )


@given(TOKENS)
def test_a_token_is_its_own_incarnation_and_round_trips(token: str) -> None:
    assert same_incarnation(token, token)
    assert with_inode(start_of(token), inode_of(token)) == token


@given(TOKENS, TOKENS)
def test_comparison_is_symmetric(a: str, b: str) -> None:
    assert same_incarnation(a, b) is same_incarnation(b, a)
    assert told_apart(a, b) is told_apart(b, a)


@given(STARTS, INODES, STARTS)
def test_an_inode_never_changes_a_start_only_comparison(
    start: str, inode: int | None, other: str
) -> None:
    # Old-format tokens stay compatible: adding an inode on one side never makes two
    # starts that differ look alike, nor equal starts look different.
    token = with_inode(start, inode)
    assert same_incarnation(token, other) is (start == other)
    if start == other:
        assert told_apart(token, other) is False


@given(STARTS, st.integers(1, 2**63), st.integers(1, 2**63))
def test_one_start_two_inodes_are_two_processes(start: str, i: int, j: int) -> None:
    a, b = with_inode(start, i), with_inode(start, j)
    assert told_apart(a, b)
    assert same_incarnation(a, b) is (i == j)


@given(TOKENS, TOKENS)
def test_what_is_not_told_apart_is_never_called_different(a: str, b: str) -> None:
    # Fail closed: a caller that must not act on ambiguity sees it as "may be the same".
    if not told_apart(a, b):
        assert same_incarnation(a, b)
