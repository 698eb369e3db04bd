"""The fleet ops' socket arguments are read as their declarations say, argument by argument."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import pytest

from supervisor.errors import ProtocolError
from supervisor.operations.fleet import FLEET_OPERATIONS
from supervisor.operations.requests import REQUESTS
from supervisor.operations.spec import BOOL, INT, TEXT, Operation
from supervisor.surfaces.socket.protocol import FLEET_PARSERS, decode_request

#: A value every declared argument of that shape accepts.
GOOD: dict[str, Any] = {TEXT: "x", INT: 1, BOOL: True}
BAD: dict[str, Any] = {TEXT: 7, INT: "7", BOOL: "yes"}
OPS = {op.name: op for op in FLEET_OPERATIONS}
WITH_ARGS = sorted(name for name, op in OPS.items() if op.args)


def _good(op: Operation) -> dict[str, Any]:
    values = {arg.name: GOOD[arg.shape] for arg in op.args if arg.shape in GOOD}
    for arg in op.args:
        if arg.choices:
            values[arg.name] = sorted(arg.choices)[0]
        if arg.name == "worker_identities":
            values[arg.name] = ["w-1"]
    return values


def _refusal(op: str, args: dict[str, Any]) -> str:
    frame = json.dumps({"op": op, "token": "t", "args": args}).encode()
    with pytest.raises(ProtocolError) as refused:
        decode_request(frame)
    return refused.value.detail


@pytest.mark.parametrize("name", WITH_ARGS)
def test_every_declared_argument_reaches_the_parsed_arguments(name: str) -> None:
    op = OPS[name]
    parsed = FLEET_PARSERS[name](_good(op))
    assert parsed is not None
    # The op's request: one field per declared argument.
    assert type(parsed) is REQUESTS[name]
    assert {f.name for f in fields(parsed)} == {arg.name for arg in op.args}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "arg"),
    [(op.name, arg.name) for op in FLEET_OPERATIONS for arg in op.args if arg.shape in BAD],
)
def test_a_wrong_shape_is_refused_naming_that_argument(name: str, arg: str) -> None:
    op = OPS[name]
    args = {**_good(op), arg: BAD[op.arg(arg).shape]}
    assert _refusal(name, args).startswith(f"args.{arg} must be ")


@pytest.mark.parametrize(
    ("name", "arg"),
    [(op.name, arg.name) for op in FLEET_OPERATIONS for arg in op.args if arg.bounds],
)
def test_integers_are_held_to_their_declared_bounds(name: str, arg: str) -> None:
    op = OPS[name]
    bounds = op.arg(arg).bounds
    assert bounds is not None
    low, high = bounds
    for inside in (low, high):
        assert FLEET_PARSERS[name]({**_good(op), arg: inside}) is not None
    for outside in (low - 1, high + 1):
        detail = _refusal(name, {**_good(op), arg: outside})
        assert detail.startswith(f"args.{arg} must be ")


def test_bounds_are_worded_for_the_reader() -> None:
    assert _refusal("register", {"pid": 0}) == "args.pid must be a positive integer"
    assert _refusal("plan", {"examples": -1}) == "args.examples must be an integer in 0..50"
    heartbeat = _good(OPS["heartbeat"])
    assert (
        _refusal("heartbeat", {**heartbeat, "fencing_epoch": -1})
        == "args.fencing_epoch must be a non-negative integer"
    )


def test_a_string_outside_its_choices_is_refused() -> None:
    detail = _refusal("plan", {"reason": "not-a-reason"})
    assert detail.startswith("args.reason must be one of [")


@pytest.mark.parametrize("name", WITH_ARGS)
def test_several_faults_are_refused_for_the_first_declared(name: str) -> None:
    op = OPS[name]
    faulty = [arg for arg in op.args if arg.shape in BAD]
    args = {arg.name: BAD[arg.shape] for arg in faulty}
    assert _refusal(name, args).startswith(f"args.{faulty[0].name} ")


def test_undeclared_keys_are_ignored_by_fleet_ops() -> None:
    op = OPS["apply"]
    parsed = FLEET_PARSERS["apply"]({**_good(op), "no_such_argument": 1})
    assert parsed is not None
