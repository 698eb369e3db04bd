"""Every key a config table spells alike with its actor's settings reaches that actor."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from supervisor.daemon.service import app_settings
from supervisor.settings.config import Settings, load_settings
from supervisor.settings.config_checks import carried

#: config table → the AppSettings field its actor's settings sit in.
_TABLES = {
    "heartbeat": "heartbeat",
    "liveness": "liveness",
    "hosts": "hosts",
    "discovery": "census",
    "reap": "reap",
    "servers": "reap",
    "retirement": "retirement",
}


@pytest.fixture(autouse=True)
def _xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "conf"))


def _other(value: Any) -> Any:
    """A valid value unlike the default (within every check of these tables)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2 if value > 1 else (value / 4 if value else 1.0)
    assert isinstance(value, str), value
    return value + "-other"


def _shared_keys() -> list[tuple[str, str]]:
    defaults, actors = Settings(), app_settings(Settings())
    keys = []
    for table, actor in _TABLES.items():
        actor_names = {f.name for f in dataclasses.fields(getattr(actors, actor))}
        keys += [
            (table, f.name)
            for f in dataclasses.fields(getattr(defaults, table))
            if f.name in actor_names
        ]
    return keys


def test_the_tables_share_keys_with_their_actors() -> None:
    # Guards the test below against passing by finding nothing to check.
    assert len(_shared_keys()) >= 20


@pytest.mark.parametrize(("table", "key"), _shared_keys())
def test_a_key_spelled_alike_reaches_its_actor(table: str, key: str) -> None:
    # Two values, the table's default and another: whatever the actor's own default is,
    # one of them differs from it, so a key that is not carried fails here.
    default = getattr(getattr(Settings(), table), key)
    for value in (default, _other(default)):
        settings = load_settings(overrides={f"{table}.{key}": value})
        assert getattr(getattr(app_settings(settings), _TABLES[table]), key) == value


@dataclasses.dataclass(frozen=True)
class _Table:
    a: int = 1
    b: str = "b"
    only_here: float = 0.5


@dataclasses.dataclass(frozen=True)
class _Actor:
    a: int = 0
    b: str = ""
    only_there: bool = False


def test_carried_takes_the_keys_spelled_alike_and_given_wins() -> None:
    assert carried(_Table(), _Actor) == _Actor(a=1, b="b")
    assert carried(_Table(), _Actor, b="given", only_there=True) == _Actor(
        a=1, b="given", only_there=True
    )
