"""The ``[reap]`` table: how orphaned MCP server trees are reaped, and the periodic round."""

from __future__ import annotations

from dataclasses import dataclass

from actors.reap import ReapSettings
from supervisor.policy.retirement.apply_rules import (
    DEFAULT_MASS_GUARD_FLOOR,
    DEFAULT_MASS_GUARD_SHARE,
)
from supervisor.settings.config_checks import (
    POSITIVE,
    boolean_check,
    carried,
    integer_check,
    number_check,
    setting,
    text_check,
)

__all__ = ["ReapConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapConfig:
    """``reap plan`` / ``reap apply`` and the optional periodic reap (off by default)."""

    reap_grace_seconds: float = setting(5.0, POSITIVE)
    kill_wait_seconds: float = setting(5.0, POSITIVE)
    auto_enabled: bool = setting(False, boolean_check)
    auto_interval_seconds: float = setting(300.0, POSITIVE)
    auto_profile: str = setting("supervisor", text_check)
    mass_guard_share: float = setting(
        DEFAULT_MASS_GUARD_SHARE, number_check("a number > 0 and <= 1", lambda x: 0 < x <= 1)
    )
    mass_guard_floor: int = setting(DEFAULT_MASS_GUARD_FLOOR, integer_check(0))

    def to_actor(self) -> ReapSettings:
        return carried(self, ReapSettings, grace_seconds=self.reap_grace_seconds)
