"""Tests for supervisor.errors: codes, wire form, and the shared base class."""

from __future__ import annotations

import pickle

import pytest

from supervisor.errors import (
    ActorStopped,
    ConfigError,
    PermissionDenied,
    ProtocolError,
    StoreError,
    SupervisorError,
    Unavailable,
)

EXPECTED_CODES: list[tuple[type[SupervisorError], str]] = [
    (ConfigError, "config_invalid"),
    (StoreError, "store_error"),
    (ActorStopped, "actor_stopped"),
    (ProtocolError, "bad_request"),
    (PermissionDenied, "permission_denied"),
    (Unavailable, "supervisor_unavailable"),
]


@pytest.mark.parametrize(("error_type", "code"), EXPECTED_CODES)
def test_each_error_has_its_code_and_wire_form(
    error_type: type[SupervisorError], code: str
) -> None:
    error = error_type("something specific went wrong")
    assert error.code == code
    assert error.detail == "something specific went wrong"
    assert str(error) == "something specific went wrong"
    assert error.to_dict() == {"error": code, "detail": "something specific went wrong"}


@pytest.mark.parametrize(("error_type", "code"), EXPECTED_CODES)
def test_every_error_is_caught_by_the_base(error_type: type[SupervisorError], code: str) -> None:
    with pytest.raises(SupervisorError) as caught:
        raise error_type("boom")
    assert caught.value.to_dict()["error"] == code


def test_codes_are_unique() -> None:
    codes = [code for _, code in EXPECTED_CODES] + [SupervisorError.code]
    assert len(set(codes)) == len(codes)


def test_base_error_has_a_generic_code() -> None:
    assert SupervisorError("unexpected").to_dict() == {
        "error": "internal_error",
        "detail": "unexpected",
    }


def test_errors_survive_pickling() -> None:
    # Errors may cross a process boundary (to_process, a test harness).
    restored = pickle.loads(pickle.dumps(StoreError("disk full")))
    assert isinstance(restored, StoreError)
    assert restored.to_dict() == {"error": "store_error", "detail": "disk full"}
