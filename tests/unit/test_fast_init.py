"""fast_init: the replacement __init__ takes exactly what the dataclass's own takes."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any

import pytest

from actors.heartbeat.inbox import Heartbeat
from actors.replies import HeartbeatResult
from actors.writer.inbox import HeartbeatWrite, TouchHeartbeats
from supervisor.operations.requests import REQUESTS
from supervisor.policy.fast_init import fast_init
from supervisor.policy.retirement.plan import PlanEntry
from supervisor.surfaces.socket.frame import Frame

#: The heartbeat's (and release's) request: the registration a beat names, in full.
FencedArgs: Any = REQUESTS["heartbeat"]

_DECORATED = (
    Heartbeat,
    HeartbeatResult,
    HeartbeatWrite,
    TouchHeartbeats,
    FencedArgs,
    Frame,
    PlanEntry,
)


def _shape(init: object) -> list[tuple[str, object, object]]:
    """Names, kinds and defaults (annotations left out: the fast one carries none)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(init).parameters.values()]  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", _DECORATED, ids=lambda c: c.__name__)
def test_the_signature_is_the_dataclass_one(cls: type) -> None:
    assert _shape(cls.__init__) == _shape(cls.__init__.original)  # type: ignore[misc]


@fast_init
@dataclass(frozen=True, slots=True)
class _Mixed:
    first: int
    second: str = "two"
    third: tuple[int, ...] = field(default=(), kw_only=True)


@dataclass(frozen=True, slots=True)
class _Twin:
    first: int
    second: str = "two"
    third: tuple[int, ...] = field(default=(), kw_only=True)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, "b"), {}), ((1,), {"third": (3,)}), ((), {"first": 1, "second": "s"})],
)
def test_instances_equal_those_of_the_generated_init(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    built = _Mixed(*args, **kwargs)  # type: ignore[arg-type]
    twin = _Twin(*args, **kwargs)  # type: ignore[arg-type]
    assert dataclasses.astuple(built) == dataclasses.astuple(twin)
    assert repr(built).removeprefix("_Mixed") == repr(twin).removeprefix("_Twin")
    assert built == _Mixed(*args, **kwargs)  # type: ignore[arg-type]
    assert hash(built) == hash(_Mixed(*args, **kwargs))  # type: ignore[arg-type]


def test_the_instance_stays_frozen() -> None:
    built = _Mixed(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.first = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((), {}), ((1, "b", (3,)), {}), ((1,), {"fourth": 4}), ((1,), {"first": 1})],
)
def test_wrong_arguments_are_refused_like_the_generated_init(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    with pytest.raises(TypeError):
        _Twin(*args, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _Mixed(*args, **kwargs)  # type: ignore[arg-type]


def test_what_it_cannot_reproduce_is_refused_when_decorating() -> None:
    @dataclass(slots=True)
    class Mutable:
        value: int

    @dataclass(frozen=True)
    class NoSlots:
        value: int

    @dataclass(frozen=True, slots=True)
    class PostInit:
        value: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class Factory:
        value: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class Hidden:
        value: int = field(default=0, init=False)

    for cls in (Mutable, NoSlots, PostInit, Factory, Hidden):
        with pytest.raises(TypeError):
            fast_init(cls)
