"""The exec marker: exact round trips, safe labels, and None for everything malformed."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.policy.identity.exec_marker import (
    MARKER_VERSION,
    ExecMarker,
    format_marker,
    parse_marker,
    safe_label,
)

ALLOWED = frozenset(string.ascii_letters + string.digits + "._-")
LABEL = st.text(alphabet="".join(sorted(ALLOWED)), max_size=64)
PIDS = st.integers(min_value=1, max_value=2**31 - 1)
TICKS = st.text(alphabet=string.digits, min_size=1, max_size=20)


@st.composite
def markers(draw: st.DrawFn) -> ExecMarker:
    return ExecMarker(
        leader_pid=draw(PIDS),
        leader_start=draw(TICKS),
        client_pid=draw(PIDS),
        client_start=draw(TICKS),
        boot_id=draw(LABEL.filter(bool)),
        client=draw(LABEL),
        name=draw(LABEL),
        namespace=draw(LABEL),
        daemon=draw(LABEL),
    )


GOOD = ExecMarker(
    leader_pid=4242,
    leader_start="987654",
    client_pid=4200,
    client_start="987000",
    boot_id="51830653-4c84-4df4-a9c5-a54cc7513577",
    client="claude_code",
    name="gitea-author",
    namespace="author",
    daemon="0123456789abcdef",
)
GOOD_TEXT = (
    "v1;leader=4242:987654;client=4200:987000;boot=51830653-4c84-4df4-a9c5-a54cc7513577;"
    "client_name=claude_code;name=gitea-author;namespace=author;daemon=0123456789abcdef"
)


def _with(field: str, value: str) -> str:
    """GOOD_TEXT with one ``field=...`` part replaced by ``field=value``."""
    parts = [
        f"{field}={value}" if part.partition("=")[0] == field else part
        for part in GOOD_TEXT.split(";")
    ]
    return ";".join(parts)


def _without(field: str) -> str:
    return ";".join(p for p in GOOD_TEXT.split(";") if p.partition("=")[0] != field)


def test_a_marker_has_the_documented_text() -> None:
    assert format_marker(GOOD) == GOOD_TEXT
    assert GOOD_TEXT.startswith(MARKER_VERSION + ";")
    assert parse_marker(GOOD_TEXT) == GOOD


@given(markers())
def test_every_valid_marker_survives_a_round_trip(marker: ExecMarker) -> None:
    text = format_marker(marker)
    assert parse_marker(text) == marker
    assert format_marker(parse_marker(text) or GOOD) == text


@given(markers(), markers())
def test_markers_are_equal_exactly_when_their_texts_are(a: ExecMarker, b: ExecMarker) -> None:
    assert (a == b) == (format_marker(a) == format_marker(b))
    if a == b:
        assert hash(a) == hash(b)


@given(st.text(max_size=200))
def test_safe_label_keeps_only_allowed_characters_and_is_idempotent(raw: str) -> None:
    label = safe_label(raw)
    assert set(label) <= ALLOWED
    assert len(label) <= 64
    assert safe_label(label) == label
    # One output character per input character, so distinct positions stay apart.
    assert len(label) == min(len(raw), 64)


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        ("gitea-author", "gitea-author"),
        ("a b/c;d=e", "a_b_c_d_e"),
        ("", ""),
        ("x" * 100, "x" * 64),
        ("é", "_"),
        (None, ""),
        (42, ""),
        (b"bytes", ""),
    ],
)
def test_safe_label_table(raw: object, label: str) -> None:
    assert safe_label(raw) == label


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(GOOD_TEXT.replace("v1;", "v2;", 1), id="wrong-version"),
        pytest.param(GOOD_TEXT.replace("v1;", "V1;", 1), id="version-case"),
        pytest.param(GOOD_TEXT[len("v1;") :], id="no-version"),
        pytest.param("v1", id="version-only"),
        pytest.param("", id="empty"),
        pytest.param(_without("leader"), id="missing-leader"),
        pytest.param(_without("client"), id="missing-client"),
        pytest.param(_without("boot"), id="missing-boot"),
        pytest.param(_with("boot", ""), id="empty-boot"),
        pytest.param(GOOD_TEXT + ";name=again", id="duplicate-name"),
        pytest.param(GOOD_TEXT + ";leader=1:2", id="duplicate-leader"),
        pytest.param(GOOD_TEXT + ";stray", id="part-without-equals"),
        pytest.param(GOOD_TEXT + ";", id="trailing-separator"),
        pytest.param(_with("leader", "4242"), id="leader-without-start"),
        pytest.param(_with("leader", ":987654"), id="leader-without-pid"),
        pytest.param(_with("leader", "4242:"), id="leader-empty-start"),
        pytest.param(_with("leader", "-1:5"), id="negative-pid"),
        pytest.param(_with("leader", "+1:5"), id="signed-pid"),
        pytest.param(_with("leader", "0x10:5"), id="hex-pid"),
        pytest.param(_with("leader", "12a:5"), id="non-digit-pid"),
        pytest.param(_with("leader", " 12:5"), id="space-in-pid"),
        pytest.param(_with("client", "0:5"), id="client-pid-zero"),
        pytest.param(_with("leader", "0:5"), id="leader-pid-zero"),
        pytest.param(_with("leader", f"{2**31}:5"), id="pid-2**31"),
        pytest.param(_with("leader", "99999999999:5"), id="pid-eleven-digits"),
        pytest.param(_with("leader", "9" * 400 + ":5"), id="huge-pid"),
        pytest.param(_with("leader", "4242:9x"), id="non-digit-start"),
        pytest.param(_with("leader", "4242:-5"), id="negative-start"),
        pytest.param(_with("leader", "\u00b2:5"), id="superscript-pid"),
        pytest.param(_with("leader", "\u0661\u0662:5"), id="arabic-indic-pid"),
        pytest.param(_with("client", "12:\u0665"), id="arabic-indic-start"),
        pytest.param(_with("name", "bad name"), id="space-in-label"),
        pytest.param(_with("name", "a/b"), id="slash-in-label"),
        pytest.param(_with("client_name", "caf\u00e9"), id="non-ascii-label"),
        pytest.param(_with("namespace", "x" * 65), id="label-over-64"),
        pytest.param(_with("boot", "b=c"), id="equals-in-boot"),
        pytest.param(_with("leader", "4242:" + "1" * 1024), id="over-1024-chars"),
    ],
)
def test_malformed_markers_are_none(text: str) -> None:
    assert parse_marker(text) is None


@pytest.mark.parametrize("value", [None, 7, 1.5, b"v1;leader=1:2", ["v1"], {"v": 1}])
def test_non_strings_are_none(value: object) -> None:
    assert parse_marker(value) is None


def test_length_limit_is_on_the_whole_text() -> None:
    # Start ticks have no length limit of their own: exactly 1024 characters still parse.
    short = len(_with("leader", "4242:"))
    exact = _with("leader", "4242:" + "1" * (1024 - short))
    assert len(exact) == 1024
    parsed = parse_marker(exact)
    assert parsed is not None
    assert parsed.leader_start == "1" * (1024 - short)
    assert parse_marker(_with("leader", "4242:" + "1" * (1025 - short))) is None


@given(st.text(max_size=300))
def test_parsing_any_text_never_raises(text: str) -> None:
    parsed = parse_marker(text)
    if parsed is not None:
        assert parse_marker(format_marker(parsed)) == parsed


@given(markers(), st.sampled_from(["leader", "client"]), st.text(max_size=12))
def test_parsing_a_marker_with_a_mangled_pid_never_raises(
    marker: ExecMarker, field: str, junk: str
) -> None:
    text = format_marker(marker)
    mangled = ";".join(
        f"{field}={junk}" if part.partition("=")[0] == field else part for part in text.split(";")
    )
    parsed = parse_marker(mangled)
    if parsed is not None:
        pid, _, start = junk.partition(":")
        assert (pid + start).isascii()
        assert pid.isdigit()
        assert start.isdigit()
