"""Instance identity: minting, trust assessment, client names, and the launcher environment."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.policy.identity.instance import (
    PROTECTED_ENV_KEYS,
    PROVENANCE_LEGACY,
    PROVENANCE_MALFORMED,
    PROVENANCE_MISSING,
    PROVENANCE_TRUSTED,
    UNKNOWN_CLIENT,
    UntrustedInstanceError,
    assess_instance_identity,
    mint_instance_id,
    namespace_worker_env,
    normalize_client_name,
)
from supervisor.policy.identity.worker_env import (
    ENV_CLIENT,
    ENV_FLEET_RUN,
    ENV_INSTANCE,
    ENV_MANAGED,
    ENV_PROFILE,
    ENV_PROVENANCE,
    ENV_SESSION,
)

MOMENT = datetime(2026, 7, 30, 6, 0, 0, tzinfo=UTC)
MINTED = re.compile(r"^inst-[a-z0-9_]+-\d{8}T\d{6}Z-[0-9a-f]{12}$")
GOOD = "inst-codex-20260730T060000Z-0123456789ab"


# --- minting -------------------------------------------------------------------------------


def test_minted_id_has_the_launcher_format_and_is_trusted() -> None:
    minted = mint_instance_id("Claude Code", now=MOMENT, nonce="n-1")
    assert MINTED.match(minted)
    assert minted.startswith("inst-claude_code-20260730T060000Z-")
    assessed = assess_instance_identity(minted)
    assert assessed.trusted
    assert assessed.provenance == PROVENANCE_TRUSTED
    assert assessed.client_instance_id == minted


def test_minting_is_deterministic_per_nonce_and_distinct_across_nonces() -> None:
    first = mint_instance_id("codex", now=MOMENT, nonce="n-1")
    assert mint_instance_id("codex", now=MOMENT, nonce="n-1") == first
    assert mint_instance_id("codex", now=MOMENT, nonce="n-2") != first
    # Two launches in the same second differ only by their nonce, and still differ.
    assert len({mint_instance_id("codex", now=MOMENT, nonce=f"n-{i}") for i in range(50)}) == 50


def test_minting_stamps_utc_whatever_the_input_zone() -> None:
    local = MOMENT.astimezone(timezone(timedelta(hours=-5)))
    assert mint_instance_id("codex", now=local, nonce="n") == mint_instance_id(
        "codex", now=MOMENT, nonce="n"
    )


def test_minting_an_unknown_client_names_it_unknown() -> None:
    assert mint_instance_id("emacs", now=MOMENT, nonce="n").startswith("inst-unknown-")


def test_minting_refuses_naive_time_and_empty_nonce() -> None:
    with pytest.raises(ValueError, match="aware"):
        mint_instance_id("codex", now=datetime(2026, 7, 30, 6, 0, 0), nonce="n")
    with pytest.raises(ValueError, match="nonce"):
        mint_instance_id("codex", now=MOMENT, nonce="")


@settings(max_examples=200, deadline=None)
@given(nonce=st.text(min_size=1, max_size=20), client=st.sampled_from(["codex", "gemini", "x"]))
def test_every_minted_id_is_trusted(nonce: str, client: str) -> None:
    assert assess_instance_identity(mint_instance_id(client, now=MOMENT, nonce=nonce)).trusted


# --- trust assessment ----------------------------------------------------------------------


@pytest.mark.parametrize("raw", [GOOD, f"  {GOOD}  ", "inst-gemini-20260101T000000Z-ffffffffffff"])
def test_trusted_ids(raw: str) -> None:
    assessed = assess_instance_identity(raw)
    assert assessed.trusted
    assert assessed.provenance == PROVENANCE_TRUSTED
    assert assessed.client_instance_id == raw.strip()
    assert assessed.reason == ""


@pytest.mark.parametrize(
    "raw", ["legacy-pid-27833", "pid-4242", "proc-9", "PID-4242", "Legacy-x", "pid-inst-codex"]
)
def test_placeholder_ids_are_legacy(raw: str) -> None:
    assessed = assess_instance_identity(raw)
    assert not assessed.trusted
    assert assessed.provenance == PROVENANCE_LEGACY
    assert assessed.client_instance_id == raw


@pytest.mark.parametrize("raw", [None, "", "   ", 12345, b"inst-codex"])
def test_missing_ids(raw: object) -> None:
    assessed = assess_instance_identity(raw)
    assert not assessed.trusted
    assert assessed.provenance == PROVENANCE_MISSING
    assert assessed.client_instance_id is None
    assert ENV_INSTANCE in assessed.reason


@pytest.mark.parametrize(
    "raw",
    [
        "my-laptop",
        "inst-",
        "inst-codex",
        "inst-codex-20261340T250000Z-0123456789ab",  # month 13, hour 25
        "inst-codex-20260230T060000Z-0123456789ab",  # 30 February
        "inst-codex-2026-07-30T06:00:00Z-0123456789ab",
        "inst-codex-20260730T060000-0123456789ab",  # no Z
        "inst-codex-20260730T060000Z-0123456789a",  # 11 hex
        "inst-codex-20260730T060000Z-0123456789abc",  # 13 hex
        "inst-codex-20260730T060000Z-0123456789AB",  # upper-case digest
        "INST-codex-20260730T060000Z-0123456789ab",
        "inst-Codex-20260730T060000Z-0123456789ab",
        "inst-codex-20260730T060000Z-0123456789zz",
        f"{GOOD}-extra",
    ],
)
def test_malformed_ids(raw: str) -> None:
    assessed = assess_instance_identity(raw)
    assert not assessed.trusted
    assert assessed.provenance == PROVENANCE_MALFORMED
    assert assessed.client_instance_id == raw


# --- client names --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("codex", "codex"),
        ("OpenAI-Codex", "codex"),
        ("Claude Code", "claude_code"),
        ("claude-code", "claude_code"),
        ("claude", "claude_code"),
        ("ClaudeCode", "claude_code"),
        (" Gemini CLI ", "gemini"),
        ("grok", "grok"),
        ("cursor", "cursor"),
        ("vim", UNKNOWN_CLIENT),
        ("", UNKNOWN_CLIENT),
        (None, UNKNOWN_CLIENT),
        (42, UNKNOWN_CLIENT),
    ],
)
def test_normalize_client_name(raw: object, expected: str) -> None:
    assert normalize_client_name(raw) == expected


# --- launcher environment ------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["legacy-pid-1", "pid-1", "", "my-instance", "inst-codex"])
def test_worker_env_refuses_untrusted_ids(raw: str) -> None:
    with pytest.raises(UntrustedInstanceError):
        namespace_worker_env(profile="fleet-author", client_type="codex", client_instance_id=raw)
    assert issubclass(UntrustedInstanceError, ValueError)


def test_worker_env_carries_the_launch_identity() -> None:
    env = namespace_worker_env(
        profile="fleet-author",
        client_type="Claude Code",
        client_instance_id=f" {GOOD} ",
        session_id="launch-1",
        fleet_run_id="run-7",
    )
    assert env == {
        ENV_PROFILE: "fleet-author",
        ENV_MANAGED: "1",
        ENV_CLIENT: "claude_code",
        ENV_INSTANCE: GOOD,
        ENV_PROVENANCE: PROVENANCE_TRUSTED,
        ENV_SESSION: "launch-1",
        ENV_FLEET_RUN: "run-7",
    }


def test_worker_env_omits_absent_session_and_run() -> None:
    env = namespace_worker_env(profile="p", client_type="codex", client_instance_id=GOOD)
    assert ENV_SESSION not in env
    assert ENV_FLEET_RUN not in env


def test_extra_env_cannot_override_protected_keys() -> None:
    hostile = dict.fromkeys(PROTECTED_ENV_KEYS, "forged")
    env = namespace_worker_env(
        profile="p",
        client_type="codex",
        client_instance_id=GOOD,
        extra_env={**hostile, "PATH": "/usr/bin", ENV_PROFILE: "other"},
    )
    assert env[ENV_INSTANCE] == GOOD
    assert env[ENV_PROVENANCE] == PROVENANCE_TRUSTED
    assert env[ENV_CLIENT] == "codex"
    assert env[ENV_MANAGED] == "1"
    assert env["PATH"] == "/usr/bin"
    # The launcher's own profile also wins over a caller's extra value.
    assert env[ENV_PROFILE] == "p"
    assert {ENV_CLIENT, ENV_INSTANCE, ENV_PROVENANCE, ENV_MANAGED} <= PROTECTED_ENV_KEYS


@given(
    fields=st.tuples(
        st.integers(0, 9999),
        st.integers(0, 19),
        st.integers(0, 39),
        st.integers(0, 29),
        st.integers(0, 69),
        st.integers(0, 69),
    ),
    digits=st.sampled_from(["ascii", "arabic-indic"]),
)
def test_the_launcher_stamp_check_accepts_exactly_what_strptime_does(
    fields: tuple[int, int, int, int, int, int], digits: str
) -> None:
    year, month, day, hour, minute, second = fields
    stamp = f"{year:04d}{month:02d}{day:02d}T{hour:02d}{minute:02d}{second:02d}Z"
    if digits == "arabic-indic":
        stamp = stamp.translate({ord(str(d)): chr(0x0660 + d) for d in range(10)})
    try:
        datetime.strptime(stamp, "%Y%m%dT%H%M%SZ")
        expected = True
    except ValueError:
        expected = False
    identity = assess_instance_identity(f"inst-codex-{stamp}-0123456789ab")
    assert identity.trusted is expected
