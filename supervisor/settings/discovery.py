"""The ``[discovery]`` table: how the census finds MCP servers this supervisor did not launch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.census.actor import CensusSettings
from supervisor.policy.servers.rules import parse_extra_clients, with_extras
from supervisor.settings.config_checks import (
    NON_NEGATIVE,
    POSITIVE,
    Invalid,
    boolean_check,
    carried,
    integer_check,
    setting,
)

__all__ = ["DiscoveryConfig", "words_check"]


def words_check(value: Any, _base: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise Invalid("a list of non-empty strings")
    return tuple(v.strip() for v in value)


def _clients_check(value: Any, base: Path) -> tuple[str, ...]:
    words = words_check(value, base)
    try:
        parse_extra_clients(words)
    except ValueError:
        raise Invalid('a list of "NAME=PROGRAM" strings') from None
    return words


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscoveryConfig:
    enabled: bool = setting(True, boolean_check)
    sweep_interval_seconds: float = setting(10.0, POSITIVE)
    first_sight_interval_seconds: float = setting(0.5, NON_NEGATIVE)
    process_events: bool = setting(True, boolean_check)
    sweep_chunk: int = setting(256, integer_check(1))
    first_sight_chunk: int = setting(32, integer_check(1))
    history_length: int = setting(360, integer_check(1, 100000))
    read_client_configs: bool = setting(True, boolean_check)
    extra_clients: tuple[str, ...] = setting((), _clients_check)
    server_words: tuple[str, ...] = setting((), words_check)

    def to_actor(self) -> CensusSettings:
        return carried(
            self, CensusSettings, rules=with_extras(self.extra_clients, self.server_words)
        )
